package chat

import (
	"bytes"
	"strings"
	"testing"
)

// readAll reads the same bytes whatever length it is told, right or wrong.
func TestReadAllAnySize(t *testing.T) {
	body := strings.Repeat("0123456789", 130) // 1,300 bytes
	for _, size := range []int64{-1, 0, 1, 1299, 1300, 1301, 5000, presizeMost + 1} {
		got, err := readAll(strings.NewReader(body), size)
		if err != nil || !bytes.Equal(got, []byte(body)) {
			t.Errorf("size %d: %d bytes, %v; want the %d bytes sent", size, len(got), err, len(body))
		}
	}
}

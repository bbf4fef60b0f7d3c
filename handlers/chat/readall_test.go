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

// A body of the length it was told is read into one buffer of that size
// and one byte more, where its end is read: no growing, no slack.
func TestReadAllRightSizeOneBuffer(t *testing.T) {
	body := strings.Repeat("0123456789", 130)
	r := strings.NewReader(body)
	var got []byte
	allocs := testing.AllocsPerRun(50, func() {
		r.Reset(body)
		got, _ = readAll(r, int64(len(body)))
	})
	if allocs != 1 || cap(got) != len(body)+1 || string(got) != body {
		t.Errorf("%v allocations, capacity %d for %d bytes; want 1 allocation of %d", allocs, cap(got), len(got), len(body)+1)
	}
}

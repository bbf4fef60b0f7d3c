package idhash

import (
	"fmt"
	"testing"
)

// An id always has the same key, and distinct ids distinct keys.
func TestOf(t *testing.T) {
	seen := map[Key]string{}
	for i := range 100_000 {
		id := fmt.Sprintf("req-%032x", i)
		k := Of(id)
		if k != Of(id) {
			t.Fatalf("%s has two keys", id)
		}
		if other, ok := seen[k]; ok {
			t.Fatalf("%s and %s share a key", id, other)
		}
		seen[k] = id
	}
}

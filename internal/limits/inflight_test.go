package limits

import (
	"sync"
	"testing"
)

func TestInFlight(t *testing.T) {
	f := NewInFlight()
	var releases []func()
	for range 3 {
		r, ok := f.Acquire("a", 3)
		if !ok {
			t.Fatal("refused under the limit")
		}
		releases = append(releases, r)
	}
	if _, ok := f.Acquire("a", 3); ok {
		t.Fatal("a fourth call passed a limit of 3")
	}
	if r, ok := f.Acquire("b", 3); !ok {
		t.Fatal("another account was refused")
	} else {
		r()
	}
	releases[0]()
	releases[0]() // twice counts once
	r, ok := f.Acquire("a", 3)
	if !ok {
		t.Fatal("refused after a release")
	}
	if _, ok := f.Acquire("a", 3); ok {
		t.Fatal("a double release freed two places")
	}
	r()
	releases[1]()
	releases[2]()
	if len(f.n) != 0 {
		t.Fatalf("counters left: %v", f.n)
	}
	// Concurrent callers never pass the limit.
	var wg sync.WaitGroup
	var mu sync.Mutex
	in, most := 0, 0
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r, ok := f.Acquire("c", 5); ok {
				mu.Lock()
				in++
				most = max(most, in)
				mu.Unlock()
				mu.Lock()
				in--
				mu.Unlock()
				r()
			}
		}()
	}
	wg.Wait()
	if most > 5 {
		t.Fatalf("%d calls in flight at once, limit 5", most)
	}
}

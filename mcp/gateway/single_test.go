package gateway

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// Many callers at once: one makes the value, the others wait for it; a
// caller whose ctx ends stops waiting; a failed making is made again by
// the next caller; drop forgets only the value it was asked to.
func TestSingle(t *testing.T) {
	var s single[*int]
	var made atomic.Int32
	release, making := make(chan struct{}), make(chan struct{})
	valid := func(v *int) bool { return v != nil }
	create := func() (*int, error) {
		if made.Add(1) == 1 {
			close(making)
		}
		<-release
		n := int(made.Load())
		return &n, nil
	}
	var wg sync.WaitGroup
	got := make([]*int, 16)
	wg.Go(func() { got[0], _ = s.get(context.Background(), valid, create) })
	<-making
	for i := 1; i < len(got); i++ {
		wg.Go(func() { got[i], _ = s.get(context.Background(), valid, create) })
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.get(ctx, valid, create); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled waiter: %v", err)
	}
	close(release)
	wg.Wait()
	for i, v := range got {
		if v != got[0] {
			t.Fatalf("caller %d got another value", i)
		}
	}
	if made.Load() != 1 {
		t.Fatalf("made %d times", made.Load())
	}
	other := 7
	if _, ok := s.drop(func(v *int) bool { return v == &other }); ok {
		t.Fatal("dropped a value it was not asked to")
	}
	if v, ok := s.drop(func(v *int) bool { return v == got[0] }); !ok || v != got[0] {
		t.Fatal("did not drop the value")
	}
	fail := errors.New("no")
	if _, err := s.get(context.Background(), valid, func() (*int, error) { return nil, fail }); err != fail {
		t.Fatalf("failed making: %v", err)
	}
	if v, err := s.get(context.Background(), valid, func() (*int, error) { return &other, nil }); err != nil || v != &other {
		t.Fatalf("made again: %v %v", v, err)
	}
}

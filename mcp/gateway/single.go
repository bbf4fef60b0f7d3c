package gateway

import (
	"context"
	"sync"
)

// single is a value one caller makes while the others wait for it (each
// no longer than its ctx): an upstream's session, its access token.
// Nothing else waits on the making.
type single[T comparable] struct {
	mu     sync.Mutex
	v      T
	making chan struct{} // closed once the value being made is in (or is not); nil when none is
}

// get returns the value when valid says it is good, else makes it with
// create (or waits for the caller making it, then looks again).
func (s *single[T]) get(ctx context.Context, valid func(T) bool, create func() (T, error)) (T, error) {
	for {
		s.mu.Lock()
		if v := s.v; valid(v) {
			s.mu.Unlock()
			return v, nil
		}
		if making := s.making; making != nil {
			s.mu.Unlock()
			select {
			case <-making:
				continue
			case <-ctx.Done():
				var zero T
				return zero, ctx.Err()
			}
		}
		making := make(chan struct{})
		s.making = making
		s.mu.Unlock()
		v, err := create()
		s.mu.Lock()
		s.making = nil
		if err == nil {
			s.v = v
		}
		s.mu.Unlock()
		close(making)
		return v, err
	}
}

// drop forgets the value when stale says it is the one to forget (not a
// newer one made since), and reports whether it did.
func (s *single[T]) drop(stale func(T) bool) (T, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.v
	if !stale(v) {
		var zero T
		return zero, false
	}
	var zero T
	s.v = zero
	return v, true
}

package cached

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/store"
)

// SharedBackend is a store several nodes write (PostgreSQL).
type SharedBackend interface {
	store.Store
	store.BatchSettler
}

// Batched group-commits the charges of a store several nodes share:
// concurrent Settle calls (of any accounts) go to the backend in one
// transaction, and each waits for its own. Nothing is cached (other nodes
// write too), and a charge is durable when Settle returns, so the money
// gate keeps the account's lock until then.
type Batched struct {
	SharedBackend
	commits

	mu      sync.Mutex
	queue   []*shared
	closed  bool
	wake    chan struct{}
	stopped chan struct{}
}

// shared is one charge waiting for its batch.
type shared struct {
	e       store.Entry
	charged bool
	err     error
	done    chan struct{}
}

// NewBatched wraps b and starts its writer; Close drains it, then closes b.
func NewBatched(b SharedBackend) *Batched {
	s := &Batched{SharedBackend: b, wake: make(chan struct{}, 1), stopped: make(chan struct{})}
	go s.write()
	return s
}

// Settle queues e for the next batch and waits for it.
func (s *Batched) Settle(ctx context.Context, e store.Entry) (bool, error) {
	c := &shared{e: e, done: make(chan struct{})}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false, ErrClosed
	}
	s.queue = append(s.queue, c)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	<-c.done
	return c.charged, c.err
}

// Close drains the writer, then closes the backend.
func (s *Batched) Close() error {
	s.mu.Lock()
	already := s.closed
	s.closed = true
	s.mu.Unlock()
	if !already {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	<-s.stopped
	return s.SharedBackend.Close()
}

func (s *Batched) write() {
	defer close(s.stopped)
	for {
		runtime.Gosched() // let the charges that can be made now join the batch
		s.mu.Lock()
		n := min(len(s.queue), MaxBatch)
		batch := slices.Clone(s.queue[:n])
		s.queue = s.queue[n:]
		closed, more := s.closed, len(s.queue) > 0
		s.mu.Unlock()
		if len(batch) > 0 {
			s.commit(batch)
		}
		switch {
		case more:
		case closed && len(batch) == 0:
			return
		case len(batch) == 0:
			<-s.wake
		}
	}
}

// commit settles a batch (see settleEach) and wakes its callers.
func (s *Batched) commit(batch []*shared) {
	entries := make([]store.Entry, len(batch))
	for i, c := range batch {
		entries[i] = c.e
	}
	start := time.Now()
	charged, errs := settleEach(s.SharedBackend, entries)
	d, ok := time.Since(start), 0
	for i, c := range batch {
		c.charged, c.err = charged[i], errs[i]
		if c.err == nil {
			ok++
		}
		close(c.done)
	}
	s.observe(d, ok)
}

// Unwrap returns the backend (for what it offers beyond a store, such as
// app links).
func (s *Batched) Unwrap() SharedBackend { return s.SharedBackend }

package cached

import (
	"context"
	"errors"
	"fmt"
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
//
// With a spool (NewSpooled), a charge the backend cannot take within
// SpoolAfter (it is down or restarting) is made durable in the node's
// spool instead (in interval mode, see SetSyncInterval: written there,
// and synced within the interval), and Settle succeeds; the spool's applier brings the
// backend up to date once it answers again. Meanwhile the node's own
// account and spend reads count its spooled charges.
type Batched struct {
	SharedBackend
	commits

	// OnError, when set, hears of spooled charges the backend refused
	// for good and of a spool that could not be emptied.
	OnError func(error)

	spool        *spool // nil: no spool
	spoolStop    chan struct{}
	spoolStopped chan struct{}
	// keep and release hear of each charge that enters and leaves the
	// spool (SetSpoolHooks), under hmu.
	hmu           sync.Mutex
	keep, release func(store.Entry)
	// left are the charges that left the spool before there was a
	// release hook (an earlier process's, applied at start).
	left []store.Entry

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

// NewSpooled is NewBatched with a spool in dir (the node's own data
// folder; never one another node uses): whatever an earlier run left there
// is applied to b in the background, as every charge spooled later.
func NewSpooled(b SharedBackend, dir string) (*Batched, error) {
	s := &Batched{SharedBackend: b, wake: make(chan struct{}, 1), stopped: make(chan struct{}),
		spoolStop: make(chan struct{}), spoolStopped: make(chan struct{})}
	sp, err := openSpool(dir, func(err error) { s.report(fmt.Errorf("syncing the charge spool: %w", err)) })
	if err != nil {
		return nil, err
	}
	s.spool = sp
	sp.signal()
	sp.sync.start()
	go s.write()
	go s.applySpool()
	return s, nil
}

// Settle queues e for the next batch and waits for it; e's Cost and
// Shortfall are then what the backend charged (see store.Ledger). A charge
// spooled instead is charged at most e.Held, the only money the node knows
// the account still has (its reservation), and the backend holds it to the
// account's balance and caps again when it takes it.
func (s *Batched) Settle(ctx context.Context, ep *store.Entry) (bool, error) {
	e := *ep
	if e.RequestID == "" {
		return false, errors.New("cached: settle: empty request id")
	}
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	if s.spool != nil && s.spool.has(e.RequestID) {
		return false, nil // settled before, and on its way to the backend
	}
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
	if c.charged {
		*ep = c.e
	}
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
	var err error
	if s.spool != nil {
		if !already {
			close(s.spoolStop)
		}
		<-s.spoolStopped
		// What is left stays in the spool for the next start, synced.
		if err = s.spool.sync.close(); err != nil {
			err = fmt.Errorf("syncing the charge spool: %w", err)
		}
		_ = s.spool.log.close()
	}
	return errors.Join(err, s.SharedBackend.Close())
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

// commit settles a batch (see settleEach) and wakes its callers. With a
// spool, the charges the backend could not take (but for a reason that
// may pass) go to the spool and count as charged once it has them.
func (s *Batched) commit(batch []*shared) {
	entries := make([]store.Entry, len(batch))
	for i, c := range batch {
		entries[i] = c.e
	}
	start := time.Now()
	ctx, cancel := context.Background(), context.CancelFunc(func() {})
	if s.spool != nil {
		ctx, cancel = context.WithTimeout(ctx, SpoolAfter)
	}
	charged, errs := settleEach(ctx, s.SharedBackend, entries)
	cancel()
	if s.spool != nil {
		var late []store.Entry
		var at []int
		for i, err := range errs {
			if err != nil && !refusedForGood(err) {
				late, at = append(late, entries[i]), append(at, i)
			}
		}
		if len(late) > 0 {
			for j, i := range at {
				late[j] = batch[i].e // as asked: a failed try may have floored it
				if h := late[j].Held; h != nil {
					late[j].Floor(*h)
				}
			}
			// Kept before the spool has them: a node that dies at once
			// leaves their money held all the same.
			for _, e := range late {
				s.kept(e)
			}
			if err := s.spool.add(late); err == nil {
				for j, i := range at {
					charged[i], errs[i], entries[i] = true, nil, late[j]
				}
			} else {
				for _, e := range late {
					s.released(e)
				}
			}
		}
	}
	d, ok := time.Since(start), 0
	for _, err := range errs {
		if err == nil {
			ok++
		}
	}
	// The batch is told of before its callers wake, so that what a caller
	// does next sees it counted.
	s.observe(d, ok)
	for i, c := range batch {
		c.charged, c.err = charged[i], errs[i]
		if c.charged {
			c.e = entries[i]
		}
		close(c.done)
	}
}

// SetSpoolHooks has keep hear of every charge that enters the spool
// (before it is durable there), and of every charge an earlier process
// left in it (at once), and release of every charge that leaves it (the
// database has it, or refused it for good), each charge's keep before its
// release. The money gate keeps each spooled charge's holds so
// (money.KeepSpooled, money.DropSpooled): other nodes count it until the
// database has the charge, even when this node dies meanwhile.
func (s *Batched) SetSpoolHooks(keep, release func(store.Entry)) {
	if s.spool == nil {
		return
	}
	s.hmu.Lock()
	defer s.hmu.Unlock()
	s.keep, s.release = keep, release
	for _, e := range s.spool.next(s.spool.len()) {
		keep(e)
	}
	for _, e := range s.left {
		release(e)
	}
	s.left = nil
}

// kept tells the keep hook of e.
func (s *Batched) kept(e store.Entry) {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	if s.keep != nil {
		s.keep(e)
	}
}

// released tells the release hook of e, or keeps e for SetSpoolHooks.
func (s *Batched) released(e store.Entry) {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	if s.release != nil {
		s.release(e)
		return
	}
	s.left = append(s.left, e)
}

// Unwrap returns the backend (for what it offers beyond a store, such as
// app links).
func (s *Batched) Unwrap() SharedBackend { return s.SharedBackend }

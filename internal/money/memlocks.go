package money

import (
	"context"
	"slices"
	"strconv"
	"sync"

	"github.com/caddy-gw/caddy-gw/pricing"
)

// MemoryLocks is the single-node Locks: a mutex and a reservation sum per
// scope, dropped when nobody holds or waits for them. Keep one per
// process (in a caddy.UsagePool) so reloads keep outstanding reservations.
type MemoryLocks struct {
	mu     sync.Mutex
	scopes map[string]*scopeState
	// free are states dropped from scopes, kept (at most maxFreeStates)
	// for the next scope that needs one: a scope's state comes and goes
	// with every call that is alone on it.
	free []*scopeState
	seq  uint64
}

// maxFreeStates bounds how many dropped scope states MemoryLocks keeps
// for reuse.
const maxFreeStates = 64

type scopeState struct {
	name string
	sem  chan struct{} // one slot: the scope's lock
	refs int           // lock holders and waiters
	held pricing.Money
	// holds are the scope's outstanding holds by id.
	holds map[string]pricing.Money
}

var (
	_ Locks     = (*MemoryLocks)(nil)
	_ TryLocker = (*MemoryLocks)(nil)
)

// NewMemoryLocks returns empty locks.
func NewMemoryLocks() *MemoryLocks { return &MemoryLocks{scopes: map[string]*scopeState{}} }

// stateLocked returns the scope's state, made (or reused) the first time.
// Called under m.mu.
func (m *MemoryLocks) stateLocked(scope string) *scopeState {
	s := m.scopes[scope]
	if s != nil {
		return s
	}
	if n := len(m.free); n > 0 {
		s, m.free = m.free[n-1], m.free[:n-1]
	} else {
		s = &scopeState{sem: make(chan struct{}, 1), holds: map[string]pricing.Money{}}
	}
	s.name = scope
	m.scopes[scope] = s
	return s
}

// forgetLocked drops the scope's state once nobody holds, waits for or
// has a hold in it. Called under m.mu.
func (m *MemoryLocks) forgetLocked(s *scopeState) {
	if s.refs != 0 || len(s.holds) != 0 {
		return
	}
	delete(m.scopes, s.name)
	if len(m.free) < maxFreeStates {
		s.name, s.held = "", 0
		m.free = append(m.free, s)
	}
}

// refAll takes a reference to each scope's state (made or reused as
// needed) into states, under one hold of m.mu.
func (m *MemoryLocks) refAll(scopes []string, states []*scopeState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, scope := range scopes {
		s := m.stateLocked(scope)
		s.refs++
		states[i] = s
	}
}

// unrefAll drops a reference to each state, under one hold of m.mu.
func (m *MemoryLocks) unrefAll(states ...*scopeState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range states {
		s.refs--
		m.forgetLocked(s)
	}
}

// Lock takes the scopes' locks in their order, waiting at most until ctx
// ends.
func (m *MemoryLocks) Lock(ctx context.Context, scopes ...string) (func(), error) {
	var buf [2]*scopeState // a call's locks: its organization's and its account's
	states := buf[:]
	if len(scopes) > len(buf) {
		states = make([]*scopeState, len(scopes))
	}
	states = states[:len(scopes)]
	m.refAll(scopes, states)
	for i, s := range states {
		select {
		case s.sem <- struct{}{}: // free: taken without a wait's select
			continue
		default:
		}
		select {
		case s.sem <- struct{}{}:
		case <-ctx.Done():
			m.giveBack(states, i)
			return nil, ctx.Err()
		}
	}
	return m.unlocker(states), nil
}

// TryLock takes the scopes' locks (as many as a call takes) when every one
// is free, or none of them.
func (m *MemoryLocks) TryLock(scopes ...string) (func(), bool) {
	var buf [2]*scopeState
	if len(scopes) == 0 || len(scopes) > len(buf) {
		return nil, false
	}
	states := buf[:len(scopes)]
	m.refAll(scopes, states)
	for i, s := range states {
		select {
		case s.sem <- struct{}{}:
		default:
			m.giveBack(states, i)
			return nil, false
		}
	}
	return m.unlocker(states), true
}

// giveBack releases the first taken of states' locks, the last taken
// first, and drops the references to all of them.
func (m *MemoryLocks) giveBack(states []*scopeState, taken int) {
	for i := taken - 1; i >= 0; i-- {
		<-states[i].sem
	}
	m.unrefAll(states...)
}

// unlocker releases the locks of states (all taken), the last taken
// first.
func (m *MemoryLocks) unlocker(states []*scopeState) func() {
	switch len(states) {
	case 0:
		return func() {}
	case 1:
		s := states[0] // the closure's own copy
		return func() { m.giveBack([]*scopeState{s}, 1) }
	case 2:
		first, second := states[0], states[1]
		return func() {
			<-second.sem
			<-first.sem
			m.unrefAll(first, second)
		}
	}
	kept := slices.Clone(states)
	return func() { m.giveBack(kept, len(kept)) }
}

// Held writes each scope's outstanding reservations to held.
func (m *MemoryLocks) Held(_ context.Context, scopes []string, held []pricing.Money) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, scope := range scopes {
		held[i] = 0
		if s := m.scopes[scope]; s != nil {
			held[i] = s.held
		}
	}
	return nil
}

// Hold records a hold of amount in each scope and returns its id.
func (m *MemoryLocks) Hold(_ context.Context, scopes []string, amount pricing.Money) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	id := strconv.FormatUint(m.seq, 36)
	for _, scope := range scopes {
		s := m.stateLocked(scope)
		s.holds[id] = amount
		s.held += amount
	}
	return id, nil
}

// Drop deletes hold id in each scope; a scope without it changes nothing.
func (m *MemoryLocks) Drop(_ context.Context, scopes []string, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, scope := range scopes {
		s := m.scopes[scope]
		if s == nil {
			continue
		}
		if amount, ok := s.holds[id]; ok {
			delete(s.holds, id)
			s.held -= amount
		}
		m.forgetLocked(s)
	}
	return nil
}

// Destruct lets MemoryLocks live in a caddy.UsagePool.
func (m *MemoryLocks) Destruct() error { return nil }

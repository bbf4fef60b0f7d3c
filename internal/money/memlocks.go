package money

import (
	"context"
	"strconv"
	"sync"

	"github.com/caddy-gw/caddy-gw/pricing"
)

// MemoryLocks is the single-node Locks: a mutex and a reservation sum per
// account, dropped when nobody holds or waits for them. Keep one per
// process (in a caddy.UsagePool) so reloads keep outstanding reservations.
type MemoryLocks struct {
	mu       sync.Mutex
	accounts map[string]*accountState
	seq      uint64
}

type accountState struct {
	sem  chan struct{} // one slot: the account's lock
	refs int           // lock holders and waiters
	held pricing.Money
	// holds are the account's outstanding holds by id.
	holds map[string]pricing.Money
}

// NewMemoryLocks returns empty locks.
func NewMemoryLocks() *MemoryLocks { return &MemoryLocks{accounts: map[string]*accountState{}} }

func (m *MemoryLocks) state(account string, ref int) *accountState {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.accounts[account]
	if s == nil {
		s = &accountState{sem: make(chan struct{}, 1), holds: map[string]pricing.Money{}}
		m.accounts[account] = s
	}
	s.refs += ref
	return s
}

func (m *MemoryLocks) drop(account string, s *accountState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s.refs--
	if s.refs == 0 && len(s.holds) == 0 {
		delete(m.accounts, account)
	}
}

// Lock takes the account's lock, waiting at most until ctx ends.
func (m *MemoryLocks) Lock(ctx context.Context, account string) (func(), error) {
	s := m.state(account, 1)
	select {
	case s.sem <- struct{}{}:
		return func() { <-s.sem; m.drop(account, s) }, nil
	case <-ctx.Done():
		m.drop(account, s)
		return nil, ctx.Err()
	}
}

// Held returns the account's outstanding reservations.
func (m *MemoryLocks) Held(_ context.Context, account string) (pricing.Money, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.accounts[account]; s != nil {
		return s.held, nil
	}
	return 0, nil
}

// Hold records a hold of amount for the account and returns its id.
func (m *MemoryLocks) Hold(_ context.Context, account string, amount pricing.Money) (string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.accounts[account]
	if s == nil {
		s = &accountState{sem: make(chan struct{}, 1), holds: map[string]pricing.Money{}}
		m.accounts[account] = s
	}
	m.seq++
	id := strconv.FormatUint(m.seq, 36)
	s.holds[id] = amount
	s.held += amount
	return id, nil
}

// Drop deletes hold id of the account; an id it does not hold changes
// nothing.
func (m *MemoryLocks) Drop(_ context.Context, account, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.accounts[account]
	if s == nil {
		return nil
	}
	if amount, ok := s.holds[id]; ok {
		delete(s.holds, id)
		s.held -= amount
	}
	if s.refs == 0 && len(s.holds) == 0 {
		delete(m.accounts, account)
	}
	return nil
}

// Destruct lets MemoryLocks live in a caddy.UsagePool.
func (m *MemoryLocks) Destruct() error { return nil }

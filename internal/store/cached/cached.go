// Package cached is the hot path's store: a backend of one node with its
// keys, accounts and running totals held in memory, and its charges made
// durable by a group commit.
//
// Reads of keys, accounts and spend are answered from memory after the
// first; every write the gateway makes goes through this wrapper, which
// keeps memory and disk equal:
//
//   - A revoked key is dropped from memory before DeleteKey returns, so
//     revocation takes effect at once (no time-out).
//   - A settled charge is applied to the account's balance and running
//     totals in memory at once (so a concurrent call's check sees it while
//     it is still on its way to the disk), then queued for the writer. The
//     writer takes every charge queued at that moment into one transaction
//     (one commit, one fsync); each caller waits only for the batch its
//     charge is in, and its answer completes only once the charge is
//     durable. A charge that fails is taken back out of memory.
//   - UpdateAccount applies the change to the backend, then to memory as a
//     difference, so charges still in flight are not lost from the
//     in-memory balance.
//
// It is for a store only this process writes (the embedded SQLite); several
// nodes share a store other nodes write, which memory here cannot follow.
package cached

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// MaxBatch bounds how many charges one commit takes.
const MaxBatch = 512

// Backend is what the wrapper needs of its store.
type Backend interface {
	store.Store
	store.BatchSettler
}

// Store is the caching, group-committing wrapper. Methods it does not
// override go straight to the backend.
type Store struct {
	Backend

	mu       sync.Mutex
	keys     map[string]store.Key // by hash: active keys seen
	keyGen   uint64               // bumped by every key write
	accounts map[string]*account

	// batches and charges count the commits and the charges they held.
	batches, charges atomic.Int64

	qmu     sync.Mutex
	queue   []*charge
	closed  bool
	wake    chan struct{}
	stopped chan struct{}
}

// account is an account's state in memory: the backend's state plus the
// charges in flight.
type account struct {
	mu     sync.Mutex
	loaded bool
	acc    store.Account
	// spLoaded: sp holds the running totals; flight is the cost of the
	// charges in flight.
	spLoaded bool
	flight   pricing.Money
	// day and month are the starts (UTC) of the periods Today and Month
	// count; sp the running totals.
	day, month time.Time
	sp         store.Spend
	// pending counts charges applied in memory and not yet finished by
	// the writer; stale asks for a reload from the backend once none is.
	pending int
	stale   bool
}

// charge is one settlement on its way to the disk.
type charge struct {
	e    store.Entry
	acc  *account
	draw pricing.Money // what it took from the balance in memory
	// counted: whether the charge was added to the day and month totals.
	inDay, inMonth bool
	charged        bool
	err            error
	done           chan struct{}
}

var _ store.Store = (*Store)(nil)

// New wraps b and starts its writer. Close drains the writer, then closes b.
func New(b Backend) *Store {
	s := &Store{Backend: b, keys: map[string]store.Key{}, accounts: map[string]*account{},
		wake: make(chan struct{}, 1), stopped: make(chan struct{})}
	go s.write()
	return s
}

// ErrClosed is the answer of a charge after Close.
var ErrClosed = errors.New("cached: store closed")

// Close lets every queued charge reach the disk, then closes the backend.
func (s *Store) Close() error {
	s.qmu.Lock()
	already := s.closed
	s.closed = true
	s.qmu.Unlock()
	if !already {
		s.signal()
	}
	<-s.stopped
	return s.Backend.Close()
}

func (s *Store) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Batches reports how many commits the writer made and how many charges
// they held in all.
func (s *Store) Batches() (commits, charges int64) { return s.batches.Load(), s.charges.Load() }

// Keys

// KeyByHash answers from memory after the backend's first answer.
func (s *Store) KeyByHash(ctx context.Context, hash string) (store.Key, error) {
	s.mu.Lock()
	k, ok := s.keys[hash]
	gen := s.keyGen
	s.mu.Unlock()
	if ok {
		return copyKey(k), nil
	}
	k, err := s.Backend.KeyByHash(ctx, hash)
	if err != nil {
		return k, err
	}
	s.mu.Lock()
	// A key write since the read may have revoked it: do not keep it.
	if s.keyGen == gen {
		s.keys[hash] = copyKey(k)
	}
	s.mu.Unlock()
	return k, nil
}

// CreateKey stores the key in the backend.
func (s *Store) CreateKey(ctx context.Context, k store.Key) error {
	defer s.keysChanged("")
	return s.Backend.CreateKey(ctx, k)
}

// DeleteKey revokes the key in the backend and forgets it here before
// returning: from then on no request can use it.
func (s *Store) DeleteKey(ctx context.Context, keyID string) error {
	defer s.keysChanged(keyID)
	return s.Backend.DeleteKey(ctx, keyID)
}

// keysChanged bumps the key generation and drops keyID (if set) from
// memory.
func (s *Store) keysChanged(keyID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keyGen++
	if keyID == "" {
		return
	}
	for h, k := range s.keys {
		if k.ID == keyID {
			delete(s.keys, h)
		}
	}
}

func copyKey(k store.Key) store.Key {
	k.Models = slices.Clone(k.Models)
	if k.ExpiresAt != nil {
		t := *k.ExpiresAt
		k.ExpiresAt = &t
	}
	return k
}

// Accounts and spend

func (s *Store) entry(id string) *account {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.accounts[id]
	if a == nil {
		a = &account{}
		s.accounts[id] = a
	}
	return a
}

// load reads the account from the backend when memory has nothing (or a
// stale copy and no charge in flight), and its running totals relative to
// now when spend is set. Called under a.mu.
func (s *Store) load(ctx context.Context, a *account, id string, now time.Time, spend bool) error {
	if a.stale && a.pending == 0 {
		a.loaded, a.spLoaded, a.stale = false, false, false
	}
	if !a.loaded {
		acc, err := s.Backend.Account(ctx, id)
		if err != nil {
			return err
		}
		a.acc, a.loaded = copyAccount(acc), true
	}
	if spend && !a.spLoaded {
		sp, err := s.Backend.Spend(ctx, id, now)
		if err != nil {
			return err
		}
		// Charges in flight are in memory but not yet on disk.
		sp.Total += a.flight
		sp.Today += a.flight
		sp.Month += a.flight
		a.sp, a.spLoaded = sp, true
		a.day, _ = store.DayOf(now)
		a.month, _ = store.MonthOf(now)
	}
	return nil
}

// roll moves a's periods forward to now's day and month (totals of a new
// period start at zero). Called under a.mu.
func (a *account) roll(now time.Time) {
	day, _ := store.DayOf(now)
	month, _ := store.MonthOf(now)
	if day.After(a.day) {
		a.day, a.sp.Today = day, 0
	}
	if month.After(a.month) {
		a.month, a.sp.Month = month, 0
	}
}

// Account answers from memory after the first read.
func (s *Store) Account(ctx context.Context, id string) (store.Account, error) {
	a := s.entry(id)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := s.load(ctx, a, id, time.Time{}, false); err != nil {
		return store.Account{}, err
	}
	return copyAccount(a.acc), nil
}

// Spend answers from the running totals in memory; a time before the
// periods memory counts asks the backend.
func (s *Store) Spend(ctx context.Context, id string, now time.Time) (store.Spend, error) {
	a := s.entry(id)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := s.load(ctx, a, id, now, true); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return s.Backend.Spend(ctx, id, now)
		}
		return store.Spend{}, err
	}
	if day, _ := store.DayOf(now); day.Before(a.day) {
		// A time before the periods memory counts: the disk's totals,
		// with every charge still in flight counted in each, so a check
		// never misses one.
		sp, err := s.Backend.Spend(ctx, id, now)
		sp.Total += a.flight
		sp.Today += a.flight
		sp.Month += a.flight
		return sp, err
	}
	a.roll(now)
	return a.sp, nil
}

// CreateAccount stores a new account in the backend.
func (s *Store) CreateAccount(ctx context.Context, acc store.Account) error {
	if err := s.Backend.CreateAccount(ctx, acc); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.accounts, acc.ID) // nothing cached a missing account, but be sure
	s.mu.Unlock()
	return nil
}

// UpdateAccount changes the account in the backend, then in memory: every
// field as stored, the prepaid balance by the change made, so that charges
// still on their way to the disk stay counted.
func (s *Store) UpdateAccount(ctx context.Context, id string, fn func(*store.Account) error, why ...store.Movement) (store.Account, error) {
	var before, after *pricing.Money
	res, err := s.Backend.UpdateAccount(ctx, id, func(acc *store.Account) error {
		before = store.CopyMoney(acc.Balance)
		if err := fn(acc); err != nil {
			return err
		}
		after = store.CopyMoney(acc.Balance)
		return nil
	}, why...)
	if err != nil {
		return res, err
	}
	a := s.entry(id)
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.loaded {
		return res, nil
	}
	held := a.acc.Balance
	a.acc = copyAccount(res)
	switch {
	case before != nil && after != nil && held != nil:
		a.acc.Balance = store.CopyMoney(held)
		*a.acc.Balance += *after - *before
	case before == nil && after == nil:
	default:
		// Prepaid to billed afterwards or back: charges in flight draw
		// differently on disk; read it all again once they are done.
		a.stale = true
	}
	return res, nil
}

func copyAccount(a store.Account) store.Account {
	a.Balance, a.DailyCap, a.MonthlyCap = store.CopyMoney(a.Balance), store.CopyMoney(a.DailyCap), store.CopyMoney(a.MonthlyCap)
	a.Abilities = slices.Clone(a.Abilities)
	return a
}

// Charges

// Settle records e durably; see SettleLater.
func (s *Store) Settle(ctx context.Context, e store.Entry) (bool, error) {
	return s.SettleLater(ctx, e)()
}

// SettleLater applies e to the account in memory at once (its balance and
// running totals) and queues it for the writer; wait blocks until it is on
// disk and reports as Settle does. A charge the backend refuses or already
// has is taken back out of memory. The caller may drop its own locks
// before waiting: memory already counts the charge.
func (s *Store) SettleLater(ctx context.Context, e store.Entry) (wait func() (bool, error)) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	a := s.entry(e.AccountID)
	a.mu.Lock()
	if err := s.load(ctx, a, e.AccountID, e.Time, true); err != nil {
		a.mu.Unlock()
		return func() (bool, error) { return false, err }
	}
	c := &charge{e: e, acc: a, done: make(chan struct{})}
	day, _ := store.DayOf(e.Time)
	month, _ := store.MonthOf(e.Time)
	a.roll(e.Time)
	c.inDay, c.inMonth = day.Equal(a.day), month.Equal(a.month)
	c.draw = e.Cost
	if e.FreeMonthlyCredit > 0 {
		if c.inMonth {
			c.draw = store.BalanceDraw(e.Cost, e.FreeMonthlyCredit, a.sp.Month)
		} else {
			a.stale = true // an entry of an earlier month: let the disk say
		}
	}
	a.apply(c, 1)
	a.pending++
	a.flight += e.Cost

	s.qmu.Lock()
	closed := s.closed
	if !closed {
		s.queue = append(s.queue, c)
	}
	s.qmu.Unlock()
	if closed {
		a.apply(c, -1)
		a.pending--
		a.flight -= e.Cost
		a.mu.Unlock()
		return func() (bool, error) { return false, ErrClosed }
	}
	a.mu.Unlock()
	s.signal()
	return func() (bool, error) {
		<-c.done
		return c.charged, c.err
	}
}

// apply adds (sign 1) or takes back (sign -1) c's effect. Called under
// a.mu.
func (a *account) apply(c *charge, sign pricing.Money) {
	cost := sign * c.e.Cost
	a.sp.Total += cost
	if c.inDay {
		a.sp.Today += cost
	}
	if c.inMonth {
		a.sp.Month += cost
	}
	if a.acc.Balance != nil {
		*a.acc.Balance -= sign * c.draw
	}
}

// write is the writer: it takes every queued charge (at most MaxBatch) into
// one transaction, until Close has been called and the queue is empty.
func (s *Store) write() {
	defer close(s.stopped)
	for {
		// Let every goroutine that can run first reach its own charge:
		// on a busy node that grows the batch at no cost, on an idle one
		// it returns at once.
		runtime.Gosched()
		s.qmu.Lock()
		n := min(len(s.queue), MaxBatch)
		batch := slices.Clone(s.queue[:n])
		s.queue = s.queue[n:]
		closed, more := s.closed, len(s.queue) > 0
		s.qmu.Unlock()
		if len(batch) > 0 {
			s.commit(batch)
			s.batches.Add(1)
			s.charges.Add(int64(len(batch)))
		}
		if more {
			continue
		}
		if closed && len(batch) == 0 {
			return
		}
		if len(batch) == 0 {
			<-s.wake
		}
	}
}

// commit settles a batch in one transaction; when that fails, each charge
// alone, so one bad entry fails only itself.
func (s *Store) commit(batch []*charge) {
	ctx := context.Background()
	entries := make([]store.Entry, len(batch))
	for i, c := range batch {
		entries[i] = c.e
	}
	charged, err := s.Backend.SettleBatch(ctx, entries)
	if err == nil {
		for i, c := range batch {
			c.charged = charged[i]
		}
	} else if len(batch) == 1 {
		batch[0].err = err
	} else {
		for _, c := range batch {
			ch, err := s.Backend.SettleBatch(ctx, []store.Entry{c.e})
			if err != nil {
				c.err = err
			} else {
				c.charged = ch[0]
			}
		}
	}
	for _, c := range batch {
		a := c.acc
		a.mu.Lock()
		a.pending--
		a.flight -= c.e.Cost
		if c.err != nil || !c.charged {
			a.apply(c, -1)
			// Later charges of the account drew against a month that
			// counted this one: read the disk again once they are done.
			a.stale = true
		}
		a.mu.Unlock()
		close(c.done)
	}
}

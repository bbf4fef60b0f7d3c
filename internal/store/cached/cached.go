// Package cached is the hot path's store: a backend of one node with its
// keys, accounts and running totals held in memory, and its charges made
// durable by a group-committed charge log.
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
//     writer takes every charge queued at that moment, appends them to the
//     charge log in one write and syncs it with one fsync; each caller
//     waits only for the batch its charge is in, so its answer completes
//     only once the charge is durable. In interval mode (SetSyncInterval)
//     the batch is only written, which a killed process cannot undo, and
//     one background syncer syncs the log within the interval, so a power
//     cut loses at most that interval's charges. The applier then brings
//     the backend up to date in large transactions, behind the answers;
//     whatever the log holds is applied again at start (the backend
//     ignores a request id it has, so nothing is charged twice, and each
//     transaction writes a charge's ledger entry, balance and journal
//     together, so they agree on whatever survived). A charge that fails
//     is taken back out of memory.
//   - UpdateAccount and the ledger's reads first wait for the backend to
//     hold every answered charge; UpdateAccount then applies the change to
//     memory as a difference, so charges still in flight stay counted.
//
// Without a log folder each batch is one backend transaction instead. It
// is for a store only this process writes (the embedded SQLite); several
// nodes share a store other nodes write, which memory here cannot follow.
package cached

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/dsync"
	"github.com/caddy-gw/caddy-gw/internal/idhash"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// MaxBatch bounds how many charges one commit takes.
const MaxBatch = 512

// RecentIDs is how many request ids the backend took are remembered, so a
// repeated settlement is reported as not charged without asking the
// backend.
const RecentIDs = 100_000

// MaxApply bounds how many logged charges one backend transaction takes.
const MaxApply = 4096

// ApplyBatch and ApplyDelay: the applier waits up to ApplyDelay for
// ApplyBatch charges to gather before a backend transaction (a read of the
// ledger or a change of an account does not wait). Few transactions
// matter more than fresh ones: each writes pages that the next charge's
// fsync must flush to the device with its own (one transaction every
// 50 ms doubled the fsync of one call in a hundred), a large one writes
// each index page it touches once for many charges (SQLite's cost of a
// charge spread over 32 accounts: 8.2 µs in transactions of 512, 5.2 in
// transactions of 4,096), and the charges are durable in the log
// meanwhile.
const (
	ApplyBatch = MaxApply
	ApplyDelay = time.Second
)

// Backend is what the wrapper needs of its store.
type Backend interface {
	store.Store
	store.BatchSettler
}

// Store is the caching, group-committing wrapper. Methods it does not
// override go straight to the backend.
type Store struct {
	Backend
	commits
	// OnError, when set, hears of charges that were answered (logged) but
	// that the backend then refused; they stay in the charge log, which
	// is applied again at the next start.
	OnError func(error)

	mu       sync.Mutex
	keys     map[string]store.Key // by hash: active keys seen
	keysByID map[string]store.Key // by id: active keys seen
	keyGen   uint64               // bumped by every key write
	accounts map[string]*account
	// keySpend holds, by key id, the caps and running totals of the keys
	// charges were made with.
	keySpend map[string]*keyState
	// orgSpend holds, by organization id, the caps and running totals of
	// the organizations charges were made in.
	orgSpend map[string]*orgState
	// ids are the request ids on their way to the backend (false) and
	// the last RecentIDs it took (true), by key (a collision of two would
	// report a charge as settled already, never charge twice); recent is
	// the ring of the latter, its oldest at recentAt.
	ids      map[idhash.Key]bool
	recent   []idhash.Key
	recentAt int

	// batches and charges count the writer's commits (log appends) and
	// the charges they held.
	batches, charges atomic.Int64

	// wmu is held by whoever writes a batch: the writer or a leader.
	wmu     sync.Mutex
	qmu     sync.Mutex
	queue   []*charge
	closed  bool
	wake    chan struct{}
	stopped chan struct{}

	// The charge log (log nil: each batch is committed to the backend
	// directly): log is the segment written, prev the other (see
	// LogFile), and both sync through ring. prevEnd is how many charges
	// had been logged when the writer left prev: it is emptied once that
	// many are applied. emptying: the applier is emptying prev, which the
	// writer leaves alone meanwhile. Under amu, as the charges logged but
	// not yet in the backend.
	log, prev    *chargeLog
	ring         *dsync.Syncer
	syncer       *syncer // syncs both segments in interval mode
	prevEnd      int64
	emptying     bool
	amu          sync.Mutex
	acond        *sync.Cond
	applyQ       []*charge
	logged       int64 // charges logged since start
	applied      int64 // of which the backend has
	applyFailed  bool  // a logged charge the backend refused: keep the log
	applyClosed  bool
	flushing     int           // readers waiting for the backend to catch up
	kick         chan struct{} // wakes the applier at once
	applyStopped chan struct{}
}

// account is an account's state in memory: the backend's state plus the
// charges in flight.
type account struct {
	mu     sync.Mutex
	loaded bool
	acc    store.Account
	running
	// pending counts charges applied in memory and not yet in the
	// backend; stale asks for a reload from the backend once none is.
	pending int
	stale   bool
}

// running are running totals in memory: the backend's plus the charges
// in flight.
type running struct {
	// spLoaded: sp holds the running totals; flight is the cost of the
	// charges in flight (not yet in the backend).
	spLoaded bool
	flight   pricing.Money
	// day and month are the starts (UTC) of the periods Today and Month
	// count; sp the running totals.
	day, month time.Time
	sp         store.Spend
}

// loadSpend sets the totals to sp, the backend's relative to now, with
// every charge still in flight counted.
func (r *running) loadSpend(sp store.Spend, now time.Time) {
	sp.Add(r.flight)
	r.sp, r.spLoaded = sp, true
	r.day, _ = store.DayOf(now)
	r.month, _ = store.MonthOf(now)
}

// count adds (sign 1) or takes back (sign -1) a charge of cost; inDay and
// inMonth say whether it is counted in the day's and the month's totals.
func (r *running) count(cost pricing.Money, inDay, inMonth bool, sign pricing.Money) {
	cost *= sign
	r.sp.Total += cost
	if inDay {
		r.sp.Today += cost
	}
	if inMonth {
		r.sp.Month += cost
	}
}

// dayLength is a UTC day in Unix time (which has no leap seconds).
const dayLength = 24 * 60 * 60

// inPeriods reports whether t falls in the day the totals count, and so
// in their month: nothing moves.
func (r *running) inPeriods(t time.Time) bool {
	s, d := t.Unix(), r.day.Unix()
	return s >= d && s-d < dayLength
}

// periodsOf moves the periods forward to t and reports whether t falls
// in the day and the month they count.
func (r *running) periodsOf(t time.Time) (inDay, inMonth bool) {
	if r.inPeriods(t) {
		return true, true
	}
	r.roll(t)
	day, _ := store.DayOf(t)
	month, _ := store.MonthOf(t)
	return day.Equal(r.day), month.Equal(r.month)
}

// charge is one settlement on its way to the disk.
type charge struct {
	e    store.Entry
	acc  *account
	draw pricing.Money // what it took from the balance in memory
	// counted: whether the charge was added to the day and month totals.
	inDay, inMonth bool
	// key is the state of the key it was made with (nil: none), and
	// kInDay, kInMonth whether it was added to the key's day and month
	// totals.
	key              *keyState
	kInDay, kInMonth bool
	// org is the state of the organization its account belonged to (nil:
	// none), and oInDay, oInMonth whether it was added to its day and
	// month totals.
	org              *orgState
	oInDay, oInMonth bool
	// charged and err are the caller's answer, set before done closes.
	charged bool
	err     error
	done    chan struct{}
	// inBackend and backendErr are what the backend made of it;
	// refloored, that it charged less than memory did (the account's
	// state on disk differed from memory's: read it again).
	inBackend  bool
	backendErr error
	refloored  bool
}

var _ store.Store = (*Store)(nil)

// New wraps b and starts its writer. With dir set, charges are made
// durable in a charge log there (one append and one fsync a batch) and
// applied to b behind the answers; whatever the log holds from an earlier
// run is applied first. Close drains both, then closes b.
func New(b Backend, dir string) (*Store, error) {
	s, err := newStore(b, dir)
	if err != nil {
		return nil, err
	}
	s.start()
	return s, nil
}

// newStore is New without its goroutines (start starts them).
func newStore(b Backend, dir string) (*Store, error) {
	s := &Store{Backend: b, keys: map[string]store.Key{}, keysByID: map[string]store.Key{}, accounts: map[string]*account{},
		keySpend: map[string]*keyState{}, orgSpend: map[string]*orgState{}, ids: map[idhash.Key]bool{},
		wake: make(chan struct{}, 1), stopped: make(chan struct{}), applyStopped: make(chan struct{}), kick: make(chan struct{}, 1)}
	s.acond = sync.NewCond(&s.amu)
	if dir == "" {
		return s, nil
	}
	s.ring, _ = dsync.New() // nil where there is no io_uring: synced the plain way
	if err := s.openLogs(dir); err != nil {
		s.closeLogs()
		return nil, err
	}
	s.syncer = newSyncer(s.syncFailed)
	s.log.sync, s.prev.sync = s.syncer, s.syncer
	return s, nil
}

// syncFailed hears of a background sync of the charge log that failed:
// the charges it held are answered and in memory, so the applier is woken
// to put them in the backend (durable there) at once rather than after
// ApplyDelay; the syncer tries the log again an interval later.
func (s *Store) syncFailed(err error) {
	if s.OnError != nil {
		s.OnError(fmt.Errorf("syncing the charge log: %w", err))
	}
	s.nudge()
}

// openLogs opens both segments of the charge log, applies what they hold
// to the backend (the older segment first, by the time of its first
// charge) and empties them.
func (s *Store) openLogs(dir string) error {
	var entries [2][]store.Entry
	for i, name := range []string{LogFile, LogFile2} {
		l, es, err := openLog(dir, name, s.ring)
		if err != nil {
			return err
		}
		s.log, s.prev = l, s.log
		entries[i] = es
	}
	s.log, s.prev = s.prev, s.log // written first: LogFile
	if len(entries[1]) > 0 && (len(entries[0]) == 0 || entries[1][0].Time.Before(entries[0][0].Time)) {
		entries[0], entries[1] = entries[1], entries[0]
	}
	for _, es := range entries {
		for len(es) > 0 {
			n := min(len(es), MaxApply)
			if _, err := s.Backend.SettleBatch(context.Background(), es[:n]); err != nil {
				return fmt.Errorf("%w: %w", errReplay, err)
			}
			es = es[n:]
		}
	}
	for _, l := range []*chargeLog{s.log, s.prev} {
		if err := l.truncate(); err != nil {
			return fmt.Errorf("charge log: %w", err)
		}
	}
	return nil
}

// closeLogs closes both segments and the ring.
func (s *Store) closeLogs() error {
	err := errors.Join(s.log.close(), s.prev.close())
	s.ring.Close()
	return err
}

// start starts the writer and, with a charge log, the applier.
func (s *Store) start() {
	if s.log != nil {
		s.syncer.start()
		go s.apply()
	} else {
		close(s.applyStopped)
	}
	go s.write()
}

// ErrClosed is the answer of a charge after Close.
var ErrClosed = errors.New("cached: store closed")

// Close lets every queued charge reach the disk and the backend, then
// closes the backend.
func (s *Store) Close() error {
	s.qmu.Lock()
	already := s.closed
	s.closed = true
	s.qmu.Unlock()
	if !already {
		s.signal()
	}
	<-s.stopped
	s.amu.Lock()
	s.applyClosed = true
	s.acond.Broadcast()
	s.amu.Unlock()
	s.nudge()
	<-s.applyStopped
	var err error
	if s.log != nil && !already {
		// What interval mode left unsynced is synced before the log is
		// emptied or, when the backend refused a charge, kept.
		err = s.syncer.close()
		if !s.applyFailed {
			err = errors.Join(err, s.log.truncate(), s.prev.truncate())
		}
		err = errors.Join(err, s.closeLogs())
	}
	return errors.Join(err, s.Backend.Close())
}

func (s *Store) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// SyncsPlain reports why a charge's sync holds a Go processor while the
// disk works (no charge log, or a log synced without io_uring); nil when
// it waits in the poller instead (see internal/dsync).
func (s *Store) SyncsPlain() error {
	if s.log == nil {
		return errors.New("no charge log: each batch is a backend transaction")
	}
	if _, ok := s.log.f.(osLogFile); ok {
		return s.ring.Plain()
	}
	return nil
}

// OnSyncsPlain has fn hear why, once, if the charge log's sync goes over
// to the plain call from now on (the kernel refusing the ring's operation
// or its submissions; see internal/dsync): SyncsPlain then reports it.
func (s *Store) OnSyncsPlain(fn func(why error)) {
	if s.log == nil {
		return
	}
	s.ring.OnGiveUp(fn)
}

// Batches reports how many batches the writer made durable and how many
// charges they held in all.
func (s *Store) Batches() (commits, charges int64) { return s.batches.Load(), s.charges.Load() }

// flush waits until the backend holds every charge answered so far, so a
// read of the backend sees them.
func (s *Store) flush() {
	s.amu.Lock()
	defer s.amu.Unlock()
	target := s.logged
	if s.applied >= target {
		return
	}
	s.flushing++
	defer func() { s.flushing-- }()
	s.nudge()
	for s.applied < target {
		s.acond.Wait()
	}
}

// nudge wakes the applier from its wait for more charges.
func (s *Store) nudge() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Entries lists the ledger once the backend holds every answered charge.
func (s *Store) Entries(ctx context.Context, accountID string, limit int) ([]store.Entry, error) {
	s.flush()
	return s.Backend.Entries(ctx, accountID, limit)
}

// Deliveries lists a webhook's deliveries once the backend holds every
// answered charge (and so every alert they raised).
func (s *Store) Deliveries(ctx context.Context, webhookID string, limit int) ([]store.Delivery, error) {
	s.flush()
	return s.Backend.Deliveries(ctx, webhookID, limit)
}

// Journal lists balance movements once the backend holds every answered
// charge.
func (s *Store) Journal(ctx context.Context, accountID string, limit int) ([]store.JournalEntry, error) {
	s.flush()
	return s.Backend.Journal(ctx, accountID, limit)
}

// Usage sums the ledger once the backend holds every answered charge.
func (s *Store) Usage(ctx context.Context, q store.UsageQuery) ([]store.UsageRow, error) {
	s.flush()
	return s.Backend.Usage(ctx, q)
}

// ListAccounts lists accounts once the backend holds every answered
// charge, so their balances count every charge answered so far.
func (s *Store) ListAccounts(ctx context.Context, after string, limit int) ([]store.Account, error) {
	s.flush()
	return s.Backend.ListAccounts(ctx, after, limit)
}

// CheckJournal checks the backend once it holds every answered charge.
func (s *Store) CheckJournal(ctx context.Context) ([]store.JournalProblem, error) {
	s.flush()
	return s.Backend.CheckJournal(ctx)
}

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

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
	if err := s.Backend.CreateKey(ctx, k); err != nil {
		return err
	}
	// Charges made with an id no key had counted no caps.
	s.forgetCaps(k.ID)
	return nil
}

// DeleteKey revokes the key in the backend and forgets it here before
// returning: from then on no request can use it. Answered charges reach
// the backend first, so the key's revocation alert follows theirs.
func (s *Store) DeleteKey(ctx context.Context, keyID string) error {
	s.flush()
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
	delete(s.keysByID, keyID)
	for h, k := range s.keys {
		if k.ID == keyID {
			delete(s.keys, h)
		}
	}
}

func copyKey(k store.Key) store.Key {
	k.Models = slices.Clone(k.Models)
	k.MCPTools = slices.Clone(k.MCPTools)
	store.CopyMoneys(&k.DailyCap, &k.MonthlyCap, &k.TotalCap)
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
		a.loadSpend(sp, now)
	}
	return nil
}

// roll moves the periods forward to now's day and month (totals of a new
// period start at zero). Called under the lock of the account or key.
func (r *running) roll(now time.Time) {
	day, _ := store.DayOf(now)
	month, _ := store.MonthOf(now)
	if day.After(r.day) {
		r.day, r.sp.Today = day, 0
	}
	if month.After(r.month) {
		r.month, r.sp.Month = month, 0
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
	if a.inPeriods(now) {
		return a.sp, nil
	}
	if day, _ := store.DayOf(now); day.Before(a.day) {
		// A time before the periods memory counts: the disk's totals,
		// with every charge still in flight counted in each, so a check
		// never misses one.
		sp, err := s.Backend.Spend(ctx, id, now)
		sp.Add(a.flight)
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
	// The change applies to the balance with every answered charge in it.
	s.flush()
	// Memory is held while the backend changes, so no read of the backend
	// in between (a load) can count the change before it is added below.
	a := s.entry(id)
	a.mu.Lock()
	defer a.mu.Unlock()
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
	if a.loaded && a.acc.Org != res.Org {
		// Charges on their way count in the organization memory gave
		// them; the backend may count them in the new one: both read
		// the disk again once they are done.
		s.forgetOrg(a.acc.Org)
		s.forgetOrg(res.Org)
	}
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
	store.CopyMoneys(&a.Balance, &a.DailyCap, &a.MonthlyCap, &a.LowBalance)
	a.Abilities = slices.Clone(a.Abilities)
	return a
}

// Charges

// Settle records e durably; see SettleLater.
func (s *Store) Settle(ctx context.Context, e *store.Entry) (bool, error) {
	return s.SettleLater(ctx, e)()
}

// SettleLater applies e to the account in memory at once (its balance and
// running totals), charging at most what the account can still pay (e's
// Cost and Shortfall say what it charged), and queues it for the writer;
// wait blocks until it is durable (in interval mode: written, see
// SetSyncInterval) and reports as Settle does. A charge the
// disk refuses is taken back out of memory. The caller may drop its own
// locks before waiting: memory already counts the charge.
func (s *Store) SettleLater(ctx context.Context, e *store.Entry) (wait func() (bool, error)) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	if e.RequestID == "" {
		return func() (bool, error) { return false, errors.New("cached: settle: empty request id") }
	}
	s.qmu.Lock()
	closed := s.closed
	s.qmu.Unlock()
	if closed {
		return func() (bool, error) { return false, ErrClosed }
	}
	if s.log != nil {
		// The log takes any line: a request id settled before must be
		// told here, as the backend would.
		if s.claim(e.RequestID) {
			return func() (bool, error) { return false, nil }
		}
	}
	a := s.entry(e.AccountID)
	a.mu.Lock()
	if err := s.load(ctx, a, e.AccountID, e.Time, true); err != nil {
		a.mu.Unlock()
		s.release(e.RequestID, false)
		return func() (bool, error) { return false, err }
	}
	inDay, inMonth := a.periodsOf(e.Time)
	// Memory holds the disk's state and every charge before this one:
	// the backend, taking them in order, floors it alike.
	room := store.NoRoom
	if inDay && inMonth {
		room = store.Room(&a.acc, a.sp, e.FreeMonthlyCredit, e.Limits)
	}
	var ks *keyState
	var kInDay, kInMonth bool
	if e.KeyID != "" {
		// The key's state is held under the account's lock: its charges
		// are the account's.
		ks = s.keyEntry(e.KeyID)
		ks.mu.Lock()
		if err := s.loadKey(ctx, ks, e.KeyID, e.Time, true); err != nil {
			ks.mu.Unlock()
			a.mu.Unlock()
			s.release(e.RequestID, false)
			return func() (bool, error) { return false, err }
		}
		if kInDay, kInMonth = ks.periodsOf(e.Time); kInDay && kInMonth && ks.caps.HasCaps() {
			room = min(room, store.KeyRoom(&ks.caps, ks.sp))
		}
	}
	var os *orgState
	var oInDay, oInMonth bool
	if org := a.acc.Org; org != "" {
		// The organization's lock covers all its accounts: its room is
		// read and the charge counted in it under that lock.
		os = s.orgEntry(org)
		os.mu.Lock()
		if err := s.loadOrg(ctx, os, org, e.Time, true); err != nil {
			os.mu.Unlock()
			if ks != nil {
				ks.mu.Unlock()
			}
			a.mu.Unlock()
			s.release(e.RequestID, false)
			return func() (bool, error) { return false, err }
		}
		if oInDay, oInMonth = os.periodsOf(e.Time); oInDay && oInMonth && os.caps.HasCaps() {
			room = min(room, store.OrgRoom(&os.caps, os.sp))
		}
	}
	e.Floor(room)
	c := &charge{e: *e, acc: a, done: make(chan struct{}), inDay: inDay, inMonth: inMonth, key: ks, kInDay: kInDay, kInMonth: kInMonth,
		org: os, oInDay: oInDay, oInMonth: oInMonth}
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
	if os != nil {
		os.count(e.Cost, oInDay, oInMonth, 1)
		os.pending++
		os.flight += e.Cost
		os.mu.Unlock()
	}
	if ks != nil {
		ks.count(e.Cost, kInDay, kInMonth, 1)
		ks.pending++
		ks.flight += e.Cost
		ks.mu.Unlock()
	}

	s.qmu.Lock()
	closed = s.closed
	if !closed {
		s.queue = append(s.queue, c)
	}
	s.qmu.Unlock()
	a.mu.Unlock()
	if closed {
		c.backendErr = ErrClosed
		s.finish(c)
		return func() (bool, error) { return false, ErrClosed }
	}
	return func() (bool, error) {
		s.lead(c)
		<-c.done
		return c.charged, c.err
	}
}

// claim marks requestID as on its way to the backend; known is true when
// it already is, or is among the RecentIDs the backend took. (A repeat of
// an older id is logged, then found in the ledger by the applier, which
// takes it back out of memory: it is never charged twice, only reported
// as charged.)
func (s *Store) claim(requestID string) (known bool) {
	k := idhash.Of(requestID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, known = s.ids[k]; !known {
		s.ids[k] = false
	}
	return known
}

// release forgets a request id on its way; inBackend remembers it among
// the RecentIDs the backend has.
func (s *Store) release(requestID string, inBackend bool) {
	k := idhash.Of(requestID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !inBackend {
		delete(s.ids, k)
		return
	}
	s.ids[k] = true
	if len(s.recent) < RecentIDs {
		s.recent = append(s.recent, k)
		return
	}
	// The oldest is forgotten (no id in the ring is claimed again until
	// it leaves it).
	delete(s.ids, s.recent[s.recentAt])
	s.recent[s.recentAt] = k
	s.recentAt = (s.recentAt + 1) % RecentIDs
}

// apply adds (sign 1) or takes back (sign -1) c's effect. Called under
// a.mu.
func (a *account) apply(c *charge, sign pricing.Money) {
	a.count(c.e.Cost, c.inDay, c.inMonth, sign)
	if a.acc.Balance != nil {
		*a.acc.Balance -= sign * c.draw
	}
}

// finish closes c's account bookkeeping once the backend has decided on
// it (c.inBackend, c.backendErr): a charge it did not take is taken back
// out of memory.
func (s *Store) finish(c *charge) {
	a := c.acc
	a.mu.Lock()
	a.pending--
	a.flight -= c.e.Cost
	if c.refloored {
		a.stale = true
	}
	if c.backendErr != nil || !c.inBackend {
		a.apply(c, -1)
		// Later charges of the account drew against a month that
		// counted this one: read the disk again once they are done.
		a.stale = true
	}
	if k := c.key; k != nil {
		k.mu.Lock()
		k.pending--
		k.flight -= c.e.Cost
		if c.refloored || c.backendErr != nil || !c.inBackend {
			k.stale = true
		}
		if c.backendErr != nil || !c.inBackend {
			k.count(c.e.Cost, c.kInDay, c.kInMonth, -1)
		}
		k.mu.Unlock()
	}
	if o := c.org; o != nil {
		o.mu.Lock()
		o.pending--
		o.flight -= c.e.Cost
		if c.refloored || c.backendErr != nil || !c.inBackend {
			o.stale = true
		}
		if c.backendErr != nil || !c.inBackend {
			o.count(c.e.Cost, c.oInDay, c.oInMonth, -1)
		}
		o.mu.Unlock()
	}
	a.mu.Unlock()
	if s.log != nil {
		s.release(c.e.RequestID, c.backendErr == nil)
	}
}

// write is the writer: it takes every queued charge (at most MaxBatch) and
// makes them durable at once, until Close has been called and the queue is
// empty. A call waiting for its charge may write a batch itself instead
// (lead); wmu keeps the two from writing at once.
func (s *Store) write() {
	defer close(s.stopped)
	for {
		// Let every goroutine that can run first reach its own charge:
		// on a busy node that grows the batch at no cost, on an idle one
		// it returns at once.
		runtime.Gosched()
		s.wmu.Lock()
		batch, closed, more := s.take()
		s.writeBatch(batch)
		s.wmu.Unlock()
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

// lead is the group commit's leader: a call waiting for charge c writes
// the batch that holds it itself when no batch is being written, so an
// idle node's charge costs no hand-over to the writer and back; else the
// writer is woken (it writes c's batch once the current one is done).
// Like the writer, it first lets every goroutine that can run reach its
// own charge, so a busy node's batches grow.
func (s *Store) lead(c *charge) {
	runtime.Gosched()
	select {
	case <-c.done:
		return
	default:
	}
	if !s.wmu.TryLock() {
		s.signal()
		return
	}
	batch, _, more := s.take()
	s.writeBatch(batch)
	s.wmu.Unlock()
	if more {
		s.signal()
	}
}

// take takes the next batch off the queue; closed says Close has been
// called, more that charges are left.
func (s *Store) take() (batch []*charge, closed, more bool) {
	s.qmu.Lock()
	defer s.qmu.Unlock()
	n := min(len(s.queue), MaxBatch)
	batch = slices.Clone(s.queue[:n])
	s.queue = s.queue[n:]
	return batch, s.closed, len(s.queue) > 0
}

// writeBatch makes a batch durable: in the charge log, else in the
// backend; each of its charges is answered.
func (s *Store) writeBatch(batch []*charge) {
	if len(batch) == 0 {
		return
	}
	if s.log != nil {
		if d, ok := s.logBatch(batch); ok {
			s.observe(d, len(batch))
		}
	} else {
		start := time.Now()
		s.commit(batch)
		d, ok := time.Since(start), 0
		for _, c := range batch {
			c.charged, c.err = c.inBackend, c.backendErr
			if c.err == nil {
				ok++
			}
			s.finish(c)
		}
		s.observe(d, ok)
	}
	// The batch is told of before its callers wake, so that what a caller
	// does next sees it counted.
	for _, c := range batch {
		close(c.done)
	}
	s.batches.Add(1)
	s.charges.Add(int64(len(batch)))
}

// logBatch appends a batch to the charge log and syncs it, and sets each
// charge's outcome (its caller is woken after); the batch goes on to the
// backend. It reports how long the append took and whether it succeeded.
func (s *Store) logBatch(batch []*charge) (time.Duration, bool) {
	entries := make([]store.Entry, len(batch))
	for i, c := range batch {
		entries[i] = c.e
	}
	s.amu.Lock()
	if s.log.size >= LogTruncateSize && !s.emptying && s.prev.size == 0 {
		// The other segment is empty: write there, and empty this one
		// once the backend holds everything logged so far.
		s.log, s.prev, s.prevEnd = s.prev, s.log, s.logged
	}
	start := time.Now()
	err := s.log.append(entries)
	d := time.Since(start)
	if err == nil {
		s.applyQ = append(s.applyQ, batch...)
		s.logged += int64(len(batch))
		s.acond.Broadcast()
		if len(s.applyQ) >= ApplyBatch {
			s.nudge()
		}
	}
	s.amu.Unlock()
	for _, c := range batch {
		if err != nil {
			c.err, c.backendErr = err, err
			s.finish(c)
		} else {
			c.charged = true
		}
	}
	return d, err == nil
}

// apply is the applier: it brings the backend up to date with the charge
// log in large transactions, and empties the segment the writer left once
// the backend holds all of it.
func (s *Store) apply() {
	defer close(s.applyStopped)
	for {
		s.amu.Lock()
		for len(s.applyQ) == 0 && !s.applyClosed {
			s.acond.Wait()
		}
		if len(s.applyQ) == 0 {
			s.amu.Unlock()
			return
		}
		// The charges are durable in the log already: let more gather, so
		// the backend's commits (and their fsyncs) are few and large.
		if len(s.applyQ) < ApplyBatch && !s.applyClosed && s.flushing == 0 {
			s.amu.Unlock()
			t := time.NewTimer(ApplyDelay)
			select {
			case <-t.C:
			case <-s.kick:
				t.Stop()
			}
			s.amu.Lock()
		}
		n := min(len(s.applyQ), MaxApply)
		batch := slices.Clone(s.applyQ[:n])
		s.applyQ = s.applyQ[n:]
		s.amu.Unlock()

		s.commit(batch)
		failed := false
		for _, c := range batch {
			if c.backendErr != nil {
				failed = true
				if s.OnError != nil {
					s.OnError(fmt.Errorf("charge %s of %s is in the charge log but not in the store: %w", c.e.RequestID, c.e.AccountID, c.backendErr))
				}
			}
			s.finish(c)
		}
		s.amu.Lock()
		s.applied += int64(n)
		s.applyFailed = s.applyFailed || failed
		if s.prev.size > 0 && s.applied >= s.prevEnd && !s.applyFailed && !s.emptying {
			// The backend holds all the segment the writer left: empty
			// it, without holding up the writer meanwhile.
			s.emptying = true
			s.amu.Unlock()
			err := s.prev.truncate()
			s.amu.Lock()
			s.emptying = false
			if err != nil && s.OnError != nil {
				s.OnError(fmt.Errorf("emptying the charge log: %w", err))
			}
		}
		// Told after the emptying, so a reader that waited for the
		// backend finds the log as the backend left it.
		s.acond.Broadcast()
		s.amu.Unlock()
	}
}

// commit settles a batch in the backend in one transaction; when that
// fails, each charge alone, so one bad entry fails only itself. It sets
// each charge's inBackend and backendErr.
func (s *Store) commit(batch []*charge) {
	entries := make([]store.Entry, len(batch))
	for i, c := range batch {
		entries[i] = c.e
	}
	charged, errs := settleEach(context.Background(), s.Backend, entries)
	for i, c := range batch {
		c.inBackend, c.backendErr = charged[i], errs[i]
		c.refloored = charged[i] && entries[i].Cost != c.e.Cost
	}
}

// settleEach settles entries in one transaction; when that fails, each
// alone, so one bad entry fails only itself. It reports each entry's
// charged and error, and sets each charged entry's Cost and Shortfall.
func settleEach(ctx context.Context, b store.BatchSettler, entries []store.Entry) ([]bool, []error) {
	errs := make([]error, len(entries))
	charged, err := b.SettleBatch(ctx, entries)
	if err == nil {
		return charged, errs
	}
	charged = make([]bool, len(entries))
	if len(entries) == 1 {
		errs[0] = err
		return charged, errs
	}
	for i := range entries {
		ch, err := b.SettleBatch(ctx, entries[i:i+1])
		if errs[i] = err; err == nil {
			charged[i] = ch[0]
		}
	}
	return charged, errs
}

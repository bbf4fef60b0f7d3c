package cached

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/dsync"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/internal/store/sqlite"
	"github.com/caddy-gw/caddy-gw/internal/store/storetest"
	"github.com/caddy-gw/caddy-gw/pricing"
)

func open(t *testing.T) (*Store, *sqlite.DB, string) {
	t.Helper()
	dir := t.TempDir()
	db, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(db, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, db, dir
}

func usd(s string) pricing.Money {
	m, err := pricing.ParseUSD(s)
	if err != nil {
		panic(err)
	}
	return m
}

func ptr(m pricing.Money) *pricing.Money { return &m }

// The wrapper passes the suite every backend shares.
func TestConformance(t *testing.T) {
	storetest.Conformance(t, func(t *testing.T) store.Store {
		s, _, _ := open(t)
		return s
	})
}

// A revoked key is refused from the moment DeleteKey returns, although it
// was answered from memory before.
func TestRevocationAtOnce(t *testing.T) {
	s, db, _ := open(t)
	ctx := context.Background()
	if err := s.CreateAccount(ctx, store.Account{ID: "a", Plan: store.PlanPaid}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateKey(ctx, store.Key{ID: "k1", AccountID: "a", Hash: "h1", Models: []string{"m"}}); err != nil {
		t.Fatal(err)
	}
	k, err := s.KeyByHash(ctx, "h1")
	if err != nil || k.ID != "k1" {
		t.Fatalf("key %+v %v", k, err)
	}
	// Memory answers now: the caller's copy cannot change it.
	k.Models[0] = "changed"
	if k, _ := s.KeyByHash(ctx, "h1"); k.Models[0] != "m" {
		t.Fatalf("memory shares the caller's slice: %+v", k)
	}
	if err := s.DeleteKey(ctx, "k1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.KeyByHash(ctx, "h1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoked key: %v", err)
	}
	if _, err := db.KeyByHash(ctx, "h1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoked key on disk: %v", err)
	}
}

// Memory and disk agree after many concurrent charges of one account,
// top-ups in between, and a restart: the balance, the running totals and
// the ledger.
func TestChargesMatchDisk(t *testing.T) {
	s, _, dir := open(t)
	ctx := context.Background()
	if err := s.CreateAccount(ctx, store.Account{ID: "a", Plan: store.PlanPaid, Balance: ptr(usd("100"))}); err != nil {
		t.Fatal(err)
	}
	// Load the account into memory first.
	if _, err := s.Account(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	const n = 400
	cost := usd("0.013")
	var wg sync.WaitGroup
	var charged atomic.Int64
	for i := range n {
		wg.Go(func() {
			ok, err := s.Settle(ctx, &store.Entry{RequestID: fmt.Sprintf("r%d", i), AccountID: "a", Cost: cost, Unit: "token",
				FreeMonthlyCredit: usd("1")})
			if err != nil {
				t.Error(err)
			}
			if ok {
				charged.Add(1)
			}
			if i%50 == 0 {
				if _, err := s.UpdateAccount(ctx, "a", func(a *store.Account) error { *a.Balance += usd("1"); return nil },
					store.Movement{Kind: store.JournalTopUp}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	// The same request again charges nothing and changes nothing.
	if ok, err := s.Settle(ctx, &store.Entry{RequestID: "r0", AccountID: "a", Cost: cost}); ok || err != nil {
		t.Fatalf("second settlement of r0: %v %v", ok, err)
	}
	if charged.Load() != n {
		t.Fatalf("%d charged, want %d", charged.Load(), n)
	}
	// 400 × 0.013 = 5.2 spent; the first 1.00 is free credit; 8 top-ups.
	want := usd("100") - (usd("5.2") - usd("1")) + 8*usd("1")
	mem, err := s.Account(ctx, "a")
	if err != nil || *mem.Balance != want {
		t.Fatalf("balance in memory %v (%v), want %s", mem.Balance, err, want)
	}
	sp, _ := s.Spend(ctx, "a", time.Now())
	if sp.Total != usd("5.2") || sp.Month != usd("5.2") || sp.Today != usd("5.2") {
		t.Fatalf("spend in memory %+v", sp)
	}
	if problems, err := s.CheckJournal(ctx); err != nil || len(problems) != 0 {
		t.Fatalf("journal %+v %v", problems, err)
	}
	// After a restart the disk says the same.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	disk, _ := db.Account(ctx, "a")
	dsp, _ := db.Spend(ctx, "a", time.Now())
	if *disk.Balance != want || dsp != sp {
		t.Fatalf("disk: balance %s spend %+v; memory %s %+v", disk.Balance, dsp, want, sp)
	}
}

// Charges made with two keys, one capped, at once: memory holds the
// capped key to its cap exactly, its caps raised on the way take effect at
// once, and after a restart the disk's key totals and ledger say what
// memory said.
func TestKeyChargesMatchDisk(t *testing.T) {
	s, _, dir := open(t)
	ctx := context.Background()
	if err := s.CreateAccount(ctx, store.Account{ID: "a", Plan: store.PlanPaid}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []store.Key{{ID: "capped", AccountID: "a", Hash: "h1", DailyCap: ptr(usd("1"))}, {ID: "free", AccountID: "a", Hash: "h2"}} {
		if err := s.CreateKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	const n = 400
	cost := usd("0.013") // 5.20 asked of each key
	at := time.Now().UTC()
	var wg sync.WaitGroup
	var mu sync.Mutex
	answered := map[string]pricing.Money{}
	for i := range n {
		key := []string{"capped", "free"}[i%2]
		wg.Go(func() {
			e := store.Entry{RequestID: fmt.Sprintf("r%d", i), AccountID: "a", KeyID: key, Cost: 2 * cost, Time: at}
			if ok, err := s.Settle(ctx, &e); !ok || err != nil {
				t.Errorf("settle %d: %v %v", i, ok, err)
			}
			mu.Lock()
			answered[key] += e.Cost
			mu.Unlock()
		})
		if i == n/2 {
			// Half way, the cap is raised to 2.
			if _, err := s.UpdateKey(ctx, "capped", func(k *store.Key) error { k.DailyCap = ptr(usd("2")); return nil }); err != nil {
				t.Fatal(err)
			}
		}
	}
	wg.Wait()
	if answered["capped"] != usd("2") || answered["free"] != usd("5.2") {
		t.Fatalf("answered %v; want 2.00 for the capped key and 5.20 for the other", answered)
	}
	mem := map[string]store.Spend{}
	for key, want := range answered {
		sp, err := s.KeySpend(ctx, key, at)
		if err != nil || sp != (store.Spend{Today: want, Month: want, Total: want}) {
			t.Fatalf("KeySpend(%s) in memory %+v, %v; want %s", key, sp, err, want)
		}
		mem[key] = sp
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	entries, err := db.Entries(ctx, "a", 2*n)
	if err != nil || len(entries) != n {
		t.Fatalf("%d entries, %v", len(entries), err)
	}
	ledger := map[string]pricing.Money{}
	for _, e := range entries {
		ledger[e.KeyID] += e.Cost
	}
	for key, sp := range mem {
		if dsp, err := db.KeySpend(ctx, key, at); err != nil || dsp != sp || ledger[key] != sp.Total {
			t.Fatalf("key %s: disk %+v (%v), ledger %s; memory %+v", key, dsp, err, ledger[key], sp)
		}
	}
}

// failing fails SettleBatch of any batch holding a request id starting
// with "bad".
type failing struct {
	*sqlite.DB
	batches atomic.Int64
}

func (f *failing) SettleBatch(ctx context.Context, entries []store.Entry) ([]bool, error) {
	f.batches.Add(1)
	for _, e := range entries {
		if len(e.RequestID) >= 3 && e.RequestID[:3] == "bad" {
			return nil, errors.New("disk full")
		}
	}
	return f.DB.SettleBatch(ctx, entries)
}

// A charge the disk refuses fails alone and is taken back out of memory;
// the others in its batch are recorded.
func TestFailedChargeTakenBack(t *testing.T) {
	db, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	f := &failing{DB: db}
	// The writer starts only once the three charges are queued, so they
	// make one batch.
	s, err := newStore(f, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.CreateAccount(ctx, store.Account{ID: "a", Plan: store.PlanPaid, Balance: ptr(usd("10"))}); err != nil {
		t.Fatal(err)
	}
	var waits []func() (bool, error)
	for _, id := range []string{"ok1", "bad", "ok2"} {
		waits = append(waits, s.SettleLater(ctx, &store.Entry{RequestID: id, AccountID: "a", Cost: usd("1")}))
	}
	if acc, _ := s.Account(ctx, "a"); *acc.Balance != usd("7") {
		t.Fatalf("balance in memory with three charges in flight %s, want 7", acc.Balance)
	}
	s.start()
	var results []string
	for _, w := range waits {
		ok, err := w()
		results = append(results, fmt.Sprintf("%v/%v", ok, err))
	}
	if fmt.Sprint(results) != "[true/<nil> false/disk full true/<nil>]" {
		t.Fatalf("results %v", results)
	}
	if f.batches.Load() != 4 {
		t.Fatalf("%d batches, want the failed one and one per charge", f.batches.Load())
	}
	acc, _ := s.Account(ctx, "a")
	if *acc.Balance != usd("8") {
		t.Fatalf("balance in memory %s, want 8", acc.Balance)
	}
	disk, _ := db.Account(ctx, "a")
	if *disk.Balance != usd("8") {
		t.Fatalf("balance on disk %s, want 8", disk.Balance)
	}
}

// Close lets every queued charge reach the disk; a charge after Close is
// refused, not lost silently.
func TestCloseDrains(t *testing.T) {
	s, _, dir := open(t)
	ctx := context.Background()
	if err := s.CreateAccount(ctx, store.Account{ID: "a", Plan: store.PlanPaid}); err != nil {
		t.Fatal(err)
	}
	var waits []func() (bool, error)
	for i := range 100 {
		waits = append(waits, s.SettleLater(ctx, &store.Entry{RequestID: fmt.Sprintf("r%d", i), AccountID: "a", Cost: usd("0.01")}))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for i, w := range waits {
		if ok, err := w(); !ok || err != nil {
			t.Fatalf("charge %d: %v %v", i, ok, err)
		}
	}
	if _, err := s.SettleLater(ctx, &store.Entry{RequestID: "late", AccountID: "a", Cost: 1})(); !errors.Is(err, ErrClosed) {
		t.Fatalf("charge after close: %v", err)
	}
	db, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sp, _ := db.Spend(ctx, "a", time.Now())
	if sp.Total != usd("1") {
		t.Fatalf("on disk %s, want 1.00", sp.Total)
	}
}

// A check for a time before the periods memory counts (a clock set back)
// still counts every charge in flight.
func TestEarlierSpendCountsFlight(t *testing.T) {
	db, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// No writer yet: the charges stay in flight.
	s, err := newStore(db, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.CreateAccount(ctx, store.Account{ID: "a", Plan: store.PlanPaid}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	w := s.SettleLater(ctx, &store.Entry{RequestID: "r1", AccountID: "a", Cost: usd("2"), Time: now})
	sp, err := s.Spend(ctx, "a", now.Add(-72*time.Hour))
	if err != nil || sp.Today != usd("2") || sp.Total != usd("2") {
		t.Fatalf("earlier spend %+v %v, want the 2.00 in flight counted", sp, err)
	}
	s.start()
	if ok, err := w(); !ok || err != nil {
		t.Fatal(ok, err)
	}
	s.Close()
}

// A charge answered from the log but refused by the backend stays in the
// log and reaches the store at the next start; a torn last line (a write
// a crash cut short, never answered) is dropped.
func TestLogReplayedAtStart(t *testing.T) {
	dir := t.TempDir()
	db, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	f := &failing{DB: db}
	s, err := New(f, dir)
	if err != nil {
		t.Fatal(err)
	}
	var reported []error
	var mu sync.Mutex
	s.OnError = func(err error) { mu.Lock(); reported = append(reported, err); mu.Unlock() }
	ctx := context.Background()
	if err := s.CreateAccount(ctx, store.Account{ID: "a", Plan: store.PlanPaid, Balance: ptr(usd("10"))}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"ok1", "bad1"} {
		if ok, err := s.Settle(ctx, &store.Entry{RequestID: id, AccountID: "a", Cost: usd("1")}); !ok || err != nil {
			t.Fatalf("%s: %v %v (answered once logged)", id, ok, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if len(reported) != 1 || !strings.Contains(reported[0].Error(), "bad1") {
		t.Fatalf("reported %v", reported)
	}
	// A torn line after the kept log.
	logged, err := os.ReadFile(filepath.Join(dir, LogFile))
	if err != nil {
		t.Fatal(err)
	}
	lf, err := os.OpenFile(filepath.Join(dir, LogFile), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	lf.WriteAt([]byte(`{"id":"torn","a":"a","c":1000`), int64(bytes.IndexByte(logged, 0)))
	lf.Close()

	db, err = sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	s, err = New(db, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	entries, _ := s.Entries(ctx, "a", 10)
	var ids []string
	for _, e := range entries {
		ids = append(ids, e.RequestID)
	}
	slices.Sort(ids)
	if fmt.Sprint(ids) != "[bad1 ok1]" {
		t.Fatalf("ledger after the restart %v", ids)
	}
	if acc, _ := s.Account(ctx, "a"); *acc.Balance != usd("8") {
		t.Fatalf("balance %s, want 8", acc.Balance)
	}
	if b, err := os.ReadFile(filepath.Join(dir, LogFile)); err != nil || len(bytes.Trim(b, "\x00")) != 0 {
		t.Fatalf("log after replay: %q %v", bytes.Trim(b, "\x00"), err)
	}
}

// The charge log reports whether its syncs go through io_uring (then no
// processor is held while the disk works) or the plain way, and why.
func TestSyncsPlain(t *testing.T) {
	s, _, _ := open(t)
	if dsync.Available() {
		if err := s.SyncsPlain(); err != nil {
			t.Fatalf("io_uring is here, yet the log syncs plain: %v", err)
		}
	} else if s.SyncsPlain() == nil {
		t.Fatal("no io_uring here, yet the log reports its syncs in the poller")
	}
	db, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	nolog, err := New(db, "")
	if err != nil {
		t.Fatal(err)
	}
	defer nolog.Close()
	if nolog.SyncsPlain() == nil {
		t.Fatal("a store without a charge log reports its syncs in the poller")
	}
}

// commitLog records what ObserveCommits hears.
type commitLog struct {
	mu      sync.Mutex
	batches []int
}

func (l *commitLog) observe(d time.Duration, n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d <= 0 {
		n = -n // a batch without its time shows as a negative count
	}
	l.batches = append(l.batches, n)
}

func (l *commitLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return fmt.Sprint(l.batches)
}

// The observer hears of each batch made durable, with its time and the
// charges in it: in the charge log, in the backend without a log, and in
// a shared store's batches; a refused charge is not counted, and nil
// stops it.
func TestObserveCommits(t *testing.T) {
	ctx := context.Background()
	settle := func(s interface {
		Settle(context.Context, *store.Entry) (bool, error)
	}, id string) {
		t.Helper()
		if _, err := s.Settle(ctx, &store.Entry{RequestID: id, AccountID: "a", Cost: usd("1")}); err != nil && !strings.HasPrefix(id, "bad") {
			t.Fatalf("charge %s: %v", id, err)
		}
	}
	queued := func(s *Store, ids ...string) {
		t.Helper()
		var waits []func() (bool, error)
		for _, id := range ids {
			waits = append(waits, s.SettleLater(ctx, &store.Entry{RequestID: id, AccountID: "a", Cost: usd("1")}))
		}
		s.start()
		for _, w := range waits {
			w()
		}
	}
	newDB := func(t *testing.T) (*sqlite.DB, string) {
		dir := t.TempDir()
		db, err := sqlite.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := db.CreateAccount(ctx, store.Account{ID: "a", Plan: store.PlanPaid}); err != nil {
			t.Fatal(err)
		}
		return db, dir
	}

	t.Run("charge log", func(t *testing.T) {
		db, dir := newDB(t)
		s, err := newStore(db, dir)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var l commitLog
		s.ObserveCommits(l.observe)
		queued(s, "r1", "r2", "r3") // one batch: the writer starts once all are queued
		settle(s, "r1")             // known: no batch
		settle(s, "r4")
		s.ObserveCommits(nil)
		settle(s, "r5")
		if got := l.String(); got != "[3 1]" {
			t.Fatalf("batches heard %s, want [3 1]", got)
		}
	})
	t.Run("no log", func(t *testing.T) {
		db, _ := newDB(t)
		s, err := newStore(&failing{DB: db}, "")
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var l commitLog
		s.ObserveCommits(l.observe)
		queued(s, "ok1", "bad", "ok2")
		settle(s, "bad2")
		if got := l.String(); got != "[2]" {
			t.Fatalf("batches heard %s, want [2]", got)
		}
	})
	t.Run("shared", func(t *testing.T) {
		db, _ := newDB(t)
		s := NewBatched(&failing{DB: db})
		defer s.Close()
		var l commitLog
		s.ObserveCommits(l.observe)
		settle(s, "ok1")
		settle(s, "bad")
		settle(s, "ok2")
		if got := l.String(); got != "[1 1]" {
			t.Fatalf("batches heard %s, want [1 1]", got)
		}
	})
}

// A request id is known while on its way to the backend, and among the
// last RecentIDs the backend took; one the backend did not take, or an
// older one, is not.
func TestClaimRecentIDs(t *testing.T) {
	s, err := newStore(nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if s.claim("a") || !s.claim("a") {
		t.Fatal("a new id is not claimed once, or a claimed one is not known")
	}
	s.release("a", false) // refused: it may come again
	if s.claim("a") {
		t.Fatal("an id the backend refused is still known")
	}
	s.release("a", true)
	if !s.claim("a") {
		t.Fatal("an id the backend took is not known")
	}
	for i := range RecentIDs - 1 {
		id := fmt.Sprintf("r%d", i)
		if s.claim(id) {
			t.Fatalf("%s known before its claim", id)
		}
		s.release(id, true)
	}
	if !s.claim("a") || !s.claim("r0") {
		t.Fatal("an id among the last RecentIDs is not known")
	}
	s.claim("last")
	s.release("last", true) // the ring is full: "a" leaves it
	if s.claim("a") {
		t.Fatal("an id older than the last RecentIDs is still known")
	}
	if !s.claim("r0") || len(s.ids) != RecentIDs+1 {
		t.Fatalf("r0 not known, or %d ids kept (want the ring and the new claim of a)", len(s.ids))
	}
}

// The running totals' periods need not move while a time falls in the
// day they count (its first and last instants included); a time past it
// moves them, a time before it does not.
func TestRunningPeriods(t *testing.T) {
	day := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	var r running
	r.loadSpend(store.Spend{Today: 3, Month: 5, Total: 8}, day.Add(13*time.Hour))
	for _, tc := range []struct {
		at             time.Time
		in             bool
		inDay, inMonth bool
	}{
		{day, true, true, true},
		{day.Add(24*time.Hour - time.Nanosecond), true, true, true},
		{day.Add(-time.Nanosecond), false, false, true},
		{day.Add(-24 * time.Hour), false, false, true},
	} {
		if got := r.inPeriods(tc.at); got != tc.in {
			t.Errorf("inPeriods(%s) = %v, want %v", tc.at, got, tc.in)
		}
		if d, m := r.periodsOf(tc.at); d != tc.inDay || m != tc.inMonth {
			t.Errorf("periodsOf(%s) = %v %v, want %v %v", tc.at, d, m, tc.inDay, tc.inMonth)
		}
	}
	if r.sp != (store.Spend{Today: 3, Month: 5, Total: 8}) {
		t.Fatalf("totals moved by earlier times: %+v", r.sp)
	}
	// The next day, in the next month: both periods start again.
	next := day.Add(24 * time.Hour)
	if r.inPeriods(next) {
		t.Fatal("the next day counted as the same")
	}
	if d, m := r.periodsOf(next); !d || !m || r.sp != (store.Spend{Total: 8}) {
		t.Fatalf("periodsOf(the next day) = %v %v with totals %+v, want true true and only the total left", d, m, r.sp)
	}
}

// KeyBounds and OrgBounds answer what Key, KeySpend, Org and OrgSpend
// do, the spend only for a record with caps; a cap changed, a key revoked
// or an organization deleted shows at once.
func TestBounds(t *testing.T) {
	s, _, _ := open(t)
	ctx := context.Background()
	now := time.Now().UTC()
	for _, o := range []store.Org{{ID: "capped", DailyCap: ptr(usd("5"))}, {ID: "open"}} {
		if err := s.CreateOrg(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CreateAccount(ctx, store.Account{ID: "a", Plan: store.PlanPaid, Org: "capped"}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []store.Key{{ID: "kc", AccountID: "a", Hash: "h1", TotalCap: ptr(usd("3"))}, {ID: "kf", AccountID: "a", Hash: "h2"}} {
		if err := s.CreateKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	for i, key := range []string{"kc", "kf", "kc"} {
		e := store.Entry{RequestID: fmt.Sprintf("r%d", i), AccountID: "a", KeyID: key, Cost: usd("0.25"), Time: now}
		if ok, err := s.Settle(ctx, &e); !ok || err != nil {
			t.Fatalf("settle %d: %v %v", i, ok, err)
		}
	}

	k, sp, err := s.KeyBounds(ctx, "kc", now)
	if err != nil || k.ID != "kc" || k.TotalCap == nil || *k.TotalCap != usd("3") || sp.Total != usd("0.5") || sp.Today != usd("0.5") {
		t.Fatalf("KeyBounds(kc) = %+v, %+v, %v; want its total cap of 3 and 0.50 spent", k, sp, err)
	}
	if want, _ := s.KeySpend(ctx, "kc", now); sp != want {
		t.Fatalf("KeyBounds(kc) spend %+v, KeySpend %+v", sp, want)
	}
	if k, sp, err := s.KeyBounds(ctx, "kf", now); err != nil || k.ID != "kf" || k.HasCaps() || sp != (store.Spend{}) {
		t.Fatalf("KeyBounds(kf) = %+v, %+v, %v; want the key without caps and no spend read", k, sp, err)
	}
	o, osp, err := s.OrgBounds(ctx, "capped", now)
	if err != nil || o.DailyCap == nil || *o.DailyCap != usd("5") || osp.Today != usd("0.75") {
		t.Fatalf("OrgBounds(capped) = %+v, %+v, %v; want its daily cap of 5 and 0.75 spent", o, osp, err)
	}
	if want, _ := s.OrgSpend(ctx, "capped", now); osp != want {
		t.Fatalf("OrgBounds(capped) spend %+v, OrgSpend %+v", osp, want)
	}
	if o, osp, err := s.OrgBounds(ctx, "open", now); err != nil || o.ID != "open" || o.HasCaps() || osp != (store.Spend{}) {
		t.Fatalf("OrgBounds(open) = %+v, %+v, %v; want the organization without caps and no spend read", o, osp, err)
	}

	if _, err := s.UpdateKey(ctx, "kc", func(k *store.Key) error { k.TotalCap = ptr(usd("4")); return nil }); err != nil {
		t.Fatal(err)
	}
	if k, _, err := s.KeyBounds(ctx, "kc", now); err != nil || *k.TotalCap != usd("4") {
		t.Fatalf("KeyBounds(kc) after the cap's change = %+v, %v; want the cap of 4", k, err)
	}
	if _, err := s.UpdateOrg(ctx, "capped", func(o *store.Org) error { o.DailyCap = ptr(usd("6")); return nil }); err != nil {
		t.Fatal(err)
	}
	if o, _, err := s.OrgBounds(ctx, "capped", now); err != nil || *o.DailyCap != usd("6") {
		t.Fatalf("OrgBounds(capped) after the cap's change = %+v, %v; want the cap of 6", o, err)
	}
	if err := s.DeleteKey(ctx, "kf"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.KeyBounds(ctx, "kf", now); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("KeyBounds of a revoked key: %v, want ErrNotFound", err)
	}
	if err := s.DeleteOrg(ctx, "open"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.OrgBounds(ctx, "open", now); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("OrgBounds of a deleted organization: %v, want ErrNotFound", err)
	}
}

package money

import (
	"context"
	"errors"
	"fmt"
	"github.com/redis/go-redis/v9"
	"math"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/internal/store/cached"
	"github.com/caddy-gw/caddy-gw/internal/store/sqlite"
	"github.com/caddy-gw/caddy-gw/internal/store/storetest"
	"github.com/caddy-gw/caddy-gw/internal/testsvc"
	"github.com/caddy-gw/caddy-gw/pricing"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

type fixture struct {
	gate  *Gate
	store *storetest.Faulty
	now   time.Time
}

func newFixture(t *testing.T, p Policy) *fixture {
	t.Helper()
	db, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f := &fixture{store: &storetest.Faulty{Store: db}, now: t0}
	f.gate = &Gate{Store: f.store, Locks: NewMemoryLocks(), Policy: p, Now: func() time.Time { return f.now }}
	return f
}

// newCachedFixture is newFixture on the hot path's store: accounts and
// totals in memory, charges group-committed and waited for after the
// account's lock is released (store.LaterSettler).
func newCachedFixture(t *testing.T, p Policy) *fixture {
	t.Helper()
	db, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c, err := cached.New(db, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	f := &fixture{store: &storetest.Faulty{Store: c}, now: t0}
	f.gate = &Gate{Store: c, Locks: NewMemoryLocks(), Policy: p, Now: func() time.Time { return f.now }}
	return f
}

func usd(s string) pricing.Money {
	m, err := pricing.ParseUSD(s)
	if err != nil {
		panic(err)
	}
	return m
}

func ptr(m pricing.Money) *pricing.Money { return &m }

func (f *fixture) account(t *testing.T, a store.Account) {
	t.Helper()
	if a.CreatedAt.IsZero() {
		a.CreatedAt = t0
	}
	if err := f.store.CreateAccount(context.Background(), a); err != nil {
		t.Fatal(err)
	}
}

var seq atomic.Int64

// spend reserves est and settles cost, failing the test on refusal.
func (f *fixture) spend(t *testing.T, id string, kind Kind, est, cost pricing.Money) {
	t.Helper()
	h, err := f.gate.Reserve(context.Background(), id, kind, est)
	if err != nil {
		t.Fatalf("reserve %s: %v", est, err)
	}
	if _, err := h.Settle(context.Background(), &store.Entry{RequestID: fmt.Sprintf("r%d", seq.Add(1)), Cost: cost, Unit: "token"}); err != nil {
		t.Fatalf("settle: %v", err)
	}
}

// code returns the money code of a refusal ("" when err is nil).
func code(t *testing.T, err error) string {
	t.Helper()
	if err == nil {
		return ""
	}
	var e *gwerr.Error
	if !errors.As(err, &e) || e.Kind != gwerr.Payment {
		t.Fatalf("refusal %v is not a 402 money error", err)
	}
	return e.Code
}

func TestRefusals(t *testing.T) {
	paid := func(a store.Account) store.Account { a.Plan, a.Cleared = store.PlanPaid, true; return a }
	for _, tc := range []struct {
		name   string
		policy Policy
		acc    store.Account
		kind   Kind
		before []string // costs settled first
		est    string
		want   string
	}{
		{"prepaid covers", Policy{}, paid(store.Account{Balance: ptr(usd("1"))}), Ability, nil, "1", ""},
		{"prepaid short", Policy{}, paid(store.Account{Balance: ptr(usd("1"))}), Ability, nil, "1.000000001", gwerr.CodeCreditExhausted},
		{"prepaid empty, estimate 0", Policy{}, paid(store.Account{Balance: ptr(0)}), Ability, nil, "0", gwerr.CodeCreditExhausted},
		{"prepaid drawn to zero", Policy{}, paid(store.Account{Balance: ptr(usd("1"))}), Ability, []string{"1"}, "0", gwerr.CodeCreditExhausted},
		{"free credit first", Policy{FreeMonthlyCredit: usd("2")}, paid(store.Account{Balance: ptr(0)}), Ability, []string{"1.5"}, "0.5", ""},
		{"free credit spent", Policy{FreeMonthlyCredit: usd("2")}, paid(store.Account{Balance: ptr(0)}), Ability, []string{"2"}, "0", gwerr.CodeCreditExhausted},
		{"postpaid no balance check", Policy{}, paid(store.Account{}), Ability, []string{"50"}, "40", ""},
		{"free tier chat under stop", Policy{}, store.Account{Plan: store.PlanFree}, Chat, []string{"0.99"}, "0.01", ""},
		{"free tier chat would pass stop", Policy{}, store.Account{Plan: store.PlanFree}, Chat, []string{"0.99"}, "0.010000001", gwerr.CodeCreditExhausted},
		{"free tier chat at stop", Policy{}, store.Account{Plan: store.PlanFree}, Chat, []string{"1"}, "0", gwerr.CodeCreditExhausted},
		{"free stop is chat only", Policy{}, store.Account{Plan: store.PlanFree}, Ability, []string{"1"}, "0", ""},
		{"paid chat has no free stop", Policy{}, paid(store.Account{}), Chat, []string{"1"}, "5", ""},
		{"daily cap reached", Policy{}, paid(store.Account{DailyCap: ptr(usd("1"))}), Chat, []string{"1"}, "0", gwerr.CodeDailyCap},
		{"daily cap would pass", Policy{}, paid(store.Account{DailyCap: ptr(usd("1"))}), Chat, []string{"0.5"}, "0.6", gwerr.CodeDailyCap},
		{"monthly cap", Policy{}, paid(store.Account{MonthlyCap: ptr(usd("3"))}), Ability, []string{"2"}, "1.5", gwerr.CodeMonthlyCap},
		{"monthly cap fits", Policy{}, paid(store.Account{MonthlyCap: ptr(usd("3"))}), Ability, []string{"2"}, "1", ""},
		{"balance before daily cap", Policy{}, paid(store.Account{Balance: ptr(0), DailyCap: ptr(0)}), Ability, nil, "0", gwerr.CodeCreditExhausted},
		{"ceiling", Policy{Ceiling: Ceiling{Base: usd("10")}}, paid(store.Account{}), Ability, []string{"9"}, "2", gwerr.CodeMonthlyCap},
		{"ceiling off for free plan", Policy{Ceiling: Ceiling{Base: usd("10")}}, store.Account{Plan: store.PlanFree}, Ability, []string{"9"}, "2", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.policy)
			tc.acc.ID = "acc"
			f.account(t, tc.acc)
			for _, c := range tc.before {
				f.spend(t, "acc", tc.kind, 0, usd(c))
			}
			h, err := f.gate.Reserve(context.Background(), "acc", tc.kind, usd(tc.est))
			if got := code(t, err); got != tc.want {
				t.Fatalf("code %q, want %q (err %v)", got, tc.want, err)
			}
			if err == nil && h.Amount() != usd(tc.est) {
				t.Fatalf("held %s, want %s", h.Amount(), tc.est)
			}
		})
	}
}

func TestHeldCountsAgainstLimits(t *testing.T) {
	f := newFixture(t, Policy{})
	f.account(t, store.Account{ID: "a", Plan: store.PlanPaid, Cleared: true, Balance: ptr(usd("1"))})
	ctx := context.Background()
	h1, err := f.gate.Reserve(ctx, "a", Ability, usd("0.6"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.gate.Reserve(ctx, "a", Ability, usd("0.6")); code(t, err) != gwerr.CodeCreditExhausted {
		t.Fatalf("second hold passed the balance: %v", err)
	}
	// Settling below the estimate frees the difference.
	if charged, err := h1.Settle(ctx, &store.Entry{RequestID: "r1", Cost: usd("0.5")}); err != nil || !charged {
		t.Fatalf("settle: %v %v", charged, err)
	}
	if _, err := f.gate.Reserve(ctx, "a", Ability, usd("0.5")); err != nil {
		t.Fatalf("after settle: %v", err)
	}
}

// Sums cannot overflow: an estimate as large as Money holds,
// on top of another call's hold, is refused by every limit instead of
// wrapping around below it.
func TestHugeEstimateCannotWrap(t *testing.T) {
	f := newFixture(t, Policy{})
	f.account(t, store.Account{ID: "prepaid", Plan: store.PlanPaid, Cleared: true, Balance: ptr(usd("1"))})
	f.account(t, store.Account{ID: "capped", Plan: store.PlanPaid, Cleared: true, DailyCap: ptr(usd("1"))})
	f.account(t, store.Account{ID: "free", Plan: store.PlanFree})
	f.account(t, store.Account{ID: "rich", Plan: store.PlanPaid, Cleared: true, Balance: ptr(pricing.Money(math.MaxInt64 - 5))})
	ctx := context.Background()
	for _, tc := range []struct {
		id, code string
		kind     Kind
	}{
		{"prepaid", gwerr.CodeCreditExhausted, Ability},
		{"capped", gwerr.CodeDailyCap, Ability},
		{"free", gwerr.CodeCreditExhausted, Chat},
	} {
		h, err := f.gate.Reserve(ctx, tc.id, tc.kind, usd("0.10"))
		if err != nil {
			t.Fatalf("%s: first hold: %v", tc.id, err)
		}
		for _, est := range []pricing.Money{math.MaxInt64, math.MaxInt64 - usd("0.05")} {
			if _, err := f.gate.Reserve(ctx, tc.id, tc.kind, est); code(t, err) != tc.code {
				t.Errorf("%s: estimate %d on top of a hold: %v, want %s", tc.id, est, err, tc.code)
			}
		}
		h.Release(ctx)
	}
	// A balance near the top of Money plus a free monthly credit does not
	// wrap into "nothing left".
	f.gate.Policy.FreeMonthlyCredit = usd("5")
	if _, err := f.gate.Reserve(ctx, "rich", Ability, usd("1")); err != nil {
		t.Fatalf("a huge balance refused: %v", err)
	}
}

func TestReleaseChargesNothing(t *testing.T) {
	f := newFixture(t, Policy{})
	f.account(t, store.Account{ID: "a", Plan: store.PlanPaid, Cleared: true, Balance: ptr(usd("1"))})
	ctx := context.Background()
	h, err := f.gate.Reserve(ctx, "a", Ability, usd("1"))
	if err != nil {
		t.Fatal(err)
	}
	h.Release(ctx)
	h.Release(ctx) // twice is harmless
	if _, err := h.Settle(ctx, &store.Entry{RequestID: "late", Cost: 1}); err == nil {
		t.Fatal("settle after release succeeded")
	}
	acc, _ := f.store.Account(ctx, "a")
	sp, _ := f.store.Spend(ctx, "a", t0)
	if *acc.Balance != usd("1") || sp.Total != 0 {
		t.Fatalf("balance %s spend %s after release", acc.Balance, sp.Total)
	}
	if held, _ := heldIn(ctx, f.gate.Locks, "a"); held != 0 {
		t.Fatalf("held %s after release", held)
	}
}

func TestSettleSameRequestOnce(t *testing.T) {
	f := newFixture(t, Policy{})
	f.account(t, store.Account{ID: "a", Plan: store.PlanPaid, Cleared: true, Balance: ptr(usd("5"))})
	ctx := context.Background()
	for i, want := range []bool{true, false, false} {
		h, err := f.gate.Reserve(ctx, "a", Ability, usd("1"))
		if err != nil {
			t.Fatal(err)
		}
		charged, err := h.Settle(ctx, &store.Entry{RequestID: "same", Cost: usd("1")})
		if err != nil || charged != want {
			t.Fatalf("settle %d: charged %v err %v, want %v", i, charged, err, want)
		}
	}
	acc, _ := f.store.Account(ctx, "a")
	if *acc.Balance != usd("4") {
		t.Fatalf("balance %s, want 4.00", acc.Balance)
	}
}

func TestFreeCreditSpentBeforeBalance(t *testing.T) {
	f := newFixture(t, Policy{FreeMonthlyCredit: usd("1")})
	f.account(t, store.Account{ID: "a", Plan: store.PlanPaid, Cleared: true, Balance: ptr(usd("2"))})
	ctx := context.Background()
	f.spend(t, "a", Ability, usd("0.6"), usd("0.6")) // all credit
	f.spend(t, "a", Ability, usd("0.6"), usd("0.6")) // 0.4 credit + 0.2 balance
	acc, _ := f.store.Account(ctx, "a")
	if *acc.Balance != usd("1.8") {
		t.Fatalf("balance %s, want 1.80", acc.Balance)
	}
	// The next month brings fresh credit.
	f.now = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	f.spend(t, "a", Ability, usd("1"), usd("1"))
	acc, _ = f.store.Account(ctx, "a")
	if *acc.Balance != usd("1.8") {
		t.Fatalf("balance %s after next month's credit, want 1.80", acc.Balance)
	}
}

func TestStoreFaultIsCreditUnresolved(t *testing.T) {
	f := newFixture(t, Policy{})
	f.account(t, store.Account{ID: "a", Plan: store.PlanPaid, Cleared: true, Balance: ptr(usd("5"))})
	ctx := context.Background()

	f.store.Down.Store(true)
	if _, err := f.gate.Reserve(ctx, "a", Ability, usd("1")); code(t, err) != gwerr.CodeCreditUnresolved {
		t.Fatalf("reserve with the store down: %v", err)
	}
	if err := f.gate.Check(ctx, Payer{Account: "a"}, Chat); code(t, err) != gwerr.CodeCreditUnresolved {
		t.Fatalf("check with the store down: %v", err)
	}

	// Down between reserve and settle: nothing charged, nothing held.
	f.store.Down.Store(false)
	h, err := f.gate.Reserve(ctx, "a", Ability, usd("1"))
	if err != nil {
		t.Fatal(err)
	}
	f.store.Down.Store(true)
	if _, err := h.Settle(ctx, &store.Entry{RequestID: "mid", Cost: usd("1")}); code(t, err) != gwerr.CodeCreditUnresolved {
		t.Fatalf("settle with the store down: %v", err)
	}
	f.store.Down.Store(false)
	acc, _ := f.store.Account(ctx, "a")
	entries, _ := f.store.Entries(ctx, "a", 10)
	if *acc.Balance != usd("5") || len(entries) != 0 {
		t.Fatalf("after a failed settle: balance %s, %d entries", acc.Balance, len(entries))
	}
	if held, _ := heldIn(ctx, f.gate.Locks, "a"); held != 0 {
		t.Fatalf("held %s after a failed settle", held)
	}
	// Recovered.
	f.spend(t, "a", Ability, usd("1"), usd("1"))
}

// TestConcurrentCallsNeverOverdraw: N parallel calls against a balance that
// covers k of them: exactly k succeed, the balance ends at zero, and the
// ledger's sum equals what the calls were charged.
func TestConcurrentCallsNeverOverdraw(t *testing.T) {
	const n, k = 40, 13
	cost := usd("0.37")
	for _, tc := range []struct {
		name    string
		acc     store.Account
		fixture func(*testing.T, Policy) *fixture
	}{
		{"prepaid balance", store.Account{Balance: ptr(cost * k)}, newFixture},
		{"daily cap", store.Account{DailyCap: ptr(cost * k)}, newFixture},
		{"monthly cap", store.Account{MonthlyCap: ptr(cost * k)}, newFixture},
		{"prepaid balance, cached", store.Account{Balance: ptr(cost * k)}, newCachedFixture},
		{"daily cap, cached", store.Account{DailyCap: ptr(cost * k)}, newCachedFixture},
		{"monthly cap, cached", store.Account{MonthlyCap: ptr(cost * k)}, newCachedFixture},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.fixture(t, Policy{})
			tc.acc.ID, tc.acc.Plan, tc.acc.Cleared = "a", store.PlanPaid, true
			f.account(t, tc.acc)
			ctx := context.Background()
			var ok, refused atomic.Int64
			var charged sync.Map
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					h, err := f.gate.Reserve(ctx, "a", Ability, cost)
					if err != nil {
						if c := code(t, err); c == gwerr.CodeCreditUnresolved || c == "" {
							t.Errorf("refusal %v", err)
						}
						refused.Add(1)
						return
					}
					id := fmt.Sprintf("c%d", i)
					if c, err := h.Settle(ctx, &store.Entry{RequestID: id, Cost: cost}); err != nil || !c {
						t.Errorf("settle %s: %v %v", id, c, err)
						return
					}
					charged.Store(id, cost)
					ok.Add(1)
				}()
			}
			close(start)
			wg.Wait()
			if ok.Load() != k || refused.Load() != n-k {
				t.Fatalf("%d succeeded, %d refused; want %d and %d", ok.Load(), refused.Load(), k, n-k)
			}
			var receipts pricing.Money
			charged.Range(func(_, v any) bool { receipts += v.(pricing.Money); return true })
			entries, err := f.store.Entries(ctx, "a", 1000)
			if err != nil {
				t.Fatal(err)
			}
			var ledger pricing.Money
			for _, e := range entries {
				ledger += e.Cost
			}
			if ledger != receipts || ledger != cost*k {
				t.Fatalf("ledger %s, receipts %s, want %s", ledger, receipts, cost*k)
			}
			acc, _ := f.store.Account(ctx, "a")
			if acc.Balance != nil && *acc.Balance != 0 {
				t.Fatalf("balance %s, want 0.00", acc.Balance)
			}
		})
	}
}

func TestCeilingLimit(t *testing.T) {
	c := Ceiling{Base: usd("100"), PerMonth: usd("50"), SpendPercent: 50, Max: usd("400")}
	created := time.Date(2026, 1, 31, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		now   time.Time
		spend string
		want  string
	}{
		{created, "0", "100"},
		{time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC), "0", "150"},   // one whole month (Jan 31 → Mar 2 is not yet two)
		{time.Date(2026, 3, 31, 10, 0, 0, 0, time.UTC), "0", "200"}, // two
		{time.Date(2026, 3, 31, 10, 0, 0, 0, time.UTC), "100", "250"},
		{time.Date(2027, 3, 31, 10, 0, 0, 0, time.UTC), "0", "400"}, // capped
		{created.Add(-time.Hour), "0", "100"},
	} {
		got, ok := c.Limit(created, usd(tc.spend), tc.now)
		if !ok || got != usd(tc.want) {
			t.Errorf("Limit(%s, %s) = %s, want %s", tc.now, tc.spend, got, tc.want)
		}
	}
	if _, ok := (Ceiling{}).Limit(created, 0, created); ok {
		t.Error("a zero base must switch the ceiling off")
	}
}

func TestLockHonoursContext(t *testing.T) {
	m := NewMemoryLocks()
	unlock, err := m.Lock(context.Background(), "a")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Lock(ctx, "a"); !errors.Is(err, context.Canceled) {
		t.Fatalf("lock with a cancelled context: %v", err)
	}
	// Several scopes: one taken already, the others taken before it are
	// let go when the context ends.
	if _, err := m.Lock(ctx, "org:o", "a"); !errors.Is(err, context.Canceled) {
		t.Fatalf("locks with a cancelled context: %v", err)
	}
	if u, err := m.Lock(context.Background(), "org:o"); err != nil {
		t.Fatalf("the organization's lock after a failed lock of it and its account: %v", err)
	} else {
		u()
	}
	unlock()
	// More scopes than a call takes: all of them, then none.
	three, err := m.Lock(context.Background(), "x", "y", "z")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.TryLock("z"); ok {
		t.Fatal("TryLock of the third of three locked scopes succeeded")
	}
	three()
	if len(m.scopes) != 0 {
		t.Fatalf("%d scope states left after unlock", len(m.scopes))
	}
}

// TryLock takes a call's free locks at once, and none of them when one is
// taken; a settlement then waits for the lock as before.
func TestTryLock(t *testing.T) {
	m := NewMemoryLocks()
	unlock, ok := m.TryLock("org:o", "a")
	if !ok {
		t.Fatal("TryLock of free scopes failed")
	}
	if _, ok := m.TryLock("org:o"); ok {
		t.Fatal("TryLock of a taken scope succeeded")
	}
	held, err := m.Lock(context.Background(), "b")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m.TryLock("b2", "b"); ok {
		t.Fatal("TryLock with its second scope taken succeeded")
	}
	if u, ok := m.TryLock("b2"); !ok {
		t.Fatal("a failed TryLock kept the scope it had taken")
	} else {
		u()
	}
	held()
	unlock()
	if len(m.scopes) != 0 {
		t.Fatalf("%d scope states left after unlock", len(m.scopes))
	}

	// A settlement whose account's lock is taken waits for it, then
	// charges.
	f := newFixture(t, Policy{})
	f.account(t, store.Account{ID: "s", Plan: store.PlanPaid, Cleared: true})
	ctx := context.Background()
	h, err := f.gate.Reserve(ctx, "s", Ability, usd("0.10"))
	if err != nil {
		t.Fatal(err)
	}
	locks := f.gate.Locks.(*MemoryLocks)
	taken, err := locks.Lock(ctx, "s")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := h.Settle(ctx, &store.Entry{RequestID: "waited", Cost: usd("0.05")})
		done <- err
	}()
	// Wait until the settlement waits for the lock (its holder and it).
	for deadline := time.Now().Add(time.Minute); ; {
		if time.Now().After(deadline) {
			t.Fatal("the settlement never waited for the lock")
		}
		locks.mu.Lock()
		refs := locks.scopes["s"].refs
		locks.mu.Unlock()
		if refs == 2 {
			break
		}
		runtime.Gosched()
	}
	if entries, _ := f.store.Entries(ctx, "s", 10); len(entries) != 0 {
		t.Fatalf("charged under another's lock: %+v", entries)
	}
	taken()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if entries, _ := f.store.Entries(ctx, "s", 10); len(entries) != 1 || entries[0].Cost != usd("0.05") {
		t.Fatalf("entries %+v, want the one charge", entries)
	}
}

// A provider that bills past the hold never takes the balance below zero,
// on the plain store and on the hot path's: the account pays what it has,
// the rest is the entry's shortfall, told to OnOverrun and OnShortfall,
// and the next call is refused.
func TestOverrunStopsAtZero(t *testing.T) {
	for name, newF := range map[string]func(*testing.T, Policy) *fixture{"sqlite": newFixture, "cached": newCachedFixture} {
		t.Run(name, func(t *testing.T) {
			f := newF(t, Policy{})
			var overrun, short []pricing.Money
			f.gate.OnOverrun = func(account, id string, held, cost pricing.Money) { overrun = append(overrun, held, cost) }
			f.gate.OnShortfall = func(account, id string, charged, shortfall pricing.Money) { short = append(short, charged, shortfall) }
			f.account(t, store.Account{ID: "a", Plan: store.PlanPaid, Cleared: true, Balance: ptr(usd("0.10"))})
			ctx := context.Background()
			h, err := f.gate.Reserve(ctx, "a", Ability, usd("0.08"))
			if err != nil {
				t.Fatal(err)
			}
			e := store.Entry{RequestID: "over", Cost: usd("0.15")}
			if _, err := h.Settle(ctx, &e); err != nil {
				t.Fatal(err)
			}
			if e.Cost != usd("0.10") || e.Shortfall != usd("0.05") {
				t.Fatalf("charged %s short %s, want 0.10 and 0.05", e.Cost, e.Shortfall)
			}
			if fmt.Sprint(overrun) != "[0.08 0.15]" || fmt.Sprint(short) != "[0.10 0.05]" {
				t.Fatalf("overrun %v, shortfall %v", overrun, short)
			}
			acc, _ := f.store.Account(ctx, "a")
			if *acc.Balance != 0 {
				t.Fatalf("balance %v, want 0", *acc.Balance)
			}
			if _, err := f.gate.Reserve(ctx, "a", Ability, 0); gwerr.As(err).Code != gwerr.CodeCreditExhausted {
				t.Fatalf("next call: %v, want credit_exhausted", err)
			}
			// A settlement within its hold reports nothing.
			f.account(t, store.Account{ID: "b", Plan: store.PlanPaid, Cleared: true})
			h, _ = f.gate.Reserve(ctx, "b", Ability, usd("1"))
			if _, err := h.Settle(ctx, &store.Entry{RequestID: "within", Cost: usd("1")}); err != nil || len(overrun) != 2 || len(short) != 2 {
				t.Fatalf("within the hold: %v, overrun %v, shortfall %v", err, overrun, short)
			}
		})
	}
}

// The policy's limits reach the store with the charge: the free tier's
// chat stop and the ceiling bound a settlement as the balance does.
func TestSettleHeldToPolicyLimits(t *testing.T) {
	f := newCachedFixture(t, Policy{Ceiling: Ceiling{Base: usd("1"), Max: usd("1")}})
	ctx := context.Background()
	f.account(t, store.Account{ID: "free", Plan: store.PlanFree, CreatedAt: t0})
	f.account(t, store.Account{ID: "paid", Plan: store.PlanPaid, CreatedAt: t0})
	for _, c := range []struct {
		account string
		kind    Kind
		before  string // charged first, within its hold
		cost    string
		charged string
	}{
		{"free", Chat, "0.90", "0.50", "0.10"},    // the 1 USD chat stop
		{"paid", Ability, "0.70", "0.50", "0.30"}, // the 1 USD ceiling
	} {
		for i, cost := range []string{c.before, c.cost} {
			h, err := f.gate.Reserve(ctx, c.account, c.kind, usd("0.01"))
			if err != nil {
				t.Fatalf("%s: reserve %d: %v", c.account, i, err)
			}
			e := store.Entry{RequestID: fmt.Sprint(c.account, i), Cost: usd(cost)}
			if _, err := h.Settle(ctx, &e); err != nil {
				t.Fatal(err)
			}
			if i == 1 && (e.Cost != usd(c.charged) || e.Cost+e.Shortfall != usd(c.cost)) {
				t.Fatalf("%s: charged %s short %s, want %s of %s", c.account, e.Cost, e.Shortfall, c.charged, c.cost)
			}
		}
		if sp, _ := f.store.Spend(ctx, c.account, t0); sp.Total != usd("1") {
			t.Fatalf("%s: spend %s, want 1.00", c.account, sp.Total)
		}
	}
}

// Two nodes (two gates, each with its own RedisLocks) on one Redis and one
// store: parallel calls split between them never pass a balance together,
// and a node that dies stops holding.
func TestRedisLocksAcrossNodes(t *testing.T) {
	url := testsvc.Redis(t)
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(opt)
	t.Cleanup(func() { client.Close() })
	ctx := context.Background()
	f := newFixture(t, Policy{})
	var gates []*Gate
	for range 2 {
		l, err := NewRedisLocks(ctx, client)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Destruct() })
		gates = append(gates, &Gate{Store: f.store, Locks: l, Now: func() time.Time { return f.now }})
	}
	const n, k = 40, 13
	cost := usd("0.37")
	f.account(t, store.Account{ID: "shared", Plan: store.PlanPaid, Cleared: true, Balance: ptr(cost * k)})
	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			h, err := gates[i%2].Reserve(ctx, "shared", Ability, cost)
			if err != nil {
				if code(t, err) != gwerr.CodeCreditExhausted {
					t.Errorf("refusal %v", err)
				}
				refused.Add(1)
				return
			}
			if c, err := h.Settle(ctx, &store.Entry{RequestID: fmt.Sprintf("n%d", i), Cost: cost}); err != nil || !c {
				t.Errorf("settle: %v %v", c, err)
			}
			ok.Add(1)
		})
	}
	wg.Wait()
	if ok.Load() != k || refused.Load() != n-k {
		t.Fatalf("%d succeeded, %d refused; want %d and %d", ok.Load(), refused.Load(), k, n-k)
	}
	if acc, _ := f.store.Account(ctx, "shared"); *acc.Balance != 0 {
		t.Fatalf("balance %s", acc.Balance)
	}

	// A node holding money dies: once its hold's lease ends (nobody
	// renews it) it no longer counts, and the other node's checks see the
	// money again.
	f.account(t, store.Account{ID: "orphan", Plan: store.PlanPaid, Cleared: true, Balance: ptr(usd("1"))})
	dying := newRedisLocks(client, 300*time.Millisecond, time.Hour, RestoreWait)
	g := &Gate{Store: f.store, Locks: dying, Now: func() time.Time { return f.now }}
	if _, err := g.Reserve(ctx, "orphan", Ability, usd("1")); err != nil {
		t.Fatal(err)
	}
	if _, err := gates[0].Reserve(ctx, "orphan", Ability, usd("0.5")); code(t, err) != gwerr.CodeCreditExhausted {
		t.Fatalf("while the other node holds it all: %v", err)
	}
	waitHeld(t, gates[0].Locks, "orphan", 0)
	if _, err := gates[0].Reserve(ctx, "orphan", Ability, usd("0.5")); err != nil {
		t.Fatalf("after the node died: %v", err)
	}
}

// A node that dies with a charge in its spool (the shared store was down)
// leaves that charge's money held on every node: its kept hold outlives
// the lease that ends its other holds, and a clean stop, until the next
// process on its data folder drops it once the store has the charge.
func TestKeptHoldOutlivesItsNode(t *testing.T) {
	_, client := redisClient(t)
	ctx := context.Background()
	f := newFixture(t, Policy{})
	f.account(t, store.Account{ID: "spooler", Plan: store.PlanPaid, Cleared: true, Balance: ptr(usd("1"))})
	other, err := NewRedisLocks(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Destruct() })
	dying := newRedisLocks(client, 300*time.Millisecond, time.Hour, RestoreWait)
	g := &Gate{Store: f.store, Locks: dying, Now: func() time.Time { return f.now }}
	spooled, err := g.Reserve(ctx, "spooler", Ability, usd("0.40"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.Reserve(ctx, "spooler", Ability, usd("0.10")); err != nil { // a hold that dies with the node
		t.Fatal(err)
	}
	// The charge went to the spool at 0.30 (its hold's id travels with it).
	e := store.Entry{RequestID: "spooled", AccountID: "spooler", Cost: usd("0.30"), HoldID: spooled.id}
	if err := KeepSpooled(ctx, dying, e); err != nil {
		t.Fatal(err)
	}
	waitHeld(t, other, "spooler", usd("0.40")) // 0.30 kept, 0.10 until its lease ends
	// The node dies (nobody renews its holds): once the plain hold's
	// lease has ended, the kept one still counts, and stays through a
	// clean stop of the node's locks.
	waitHeld(t, other, "spooler", usd("0.30"))
	dying.Destruct()
	if held, err := heldIn(ctx, other, "spooler"); err != nil || held != usd("0.30") {
		t.Fatalf("held %s (%v) after the node stopped, want the kept 0.30", held, err)
	}
	og := &Gate{Store: f.store, Locks: other, Now: func() time.Time { return f.now }}
	if _, err := og.Reserve(ctx, "spooler", Ability, usd("0.75")); code(t, err) != gwerr.CodeCreditExhausted {
		t.Fatalf("a reservation counting the dead node's spooled charge: %v, want credit_exhausted", err)
	}
	// The next process applies the spool and drops the hold by its id.
	if err := DropSpooled(ctx, other, e); err != nil {
		t.Fatal(err)
	}
	if held, err := heldIn(ctx, other, "spooler"); err != nil || held != 0 {
		t.Fatalf("held %s (%v) after the spool was applied, want 0", held, err)
	}
}

// reserveRestored reserves est for account on g, tried again (at most
// 10 s) while the holds are being restored: that refusal is
// credit_unresolved, never a grant.
func reserveRestored(t *testing.T, g *Gate, account, est string) (*Hold, error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		h, err := g.Reserve(context.Background(), account, Ability, usd(est))
		if err == nil || code(t, err) != gwerr.CodeCreditUnresolved || time.Now().After(deadline) {
			return h, err
		}
		time.Sleep(20 * time.Millisecond) // polling an observable state
	}
}

// waitHeld waits (at most 10 s) until the account's holds sum to want.
// heldIn is what l holds in scope.
func heldIn(ctx context.Context, l Locks, scope string) (pricing.Money, error) {
	var held [1]pricing.Money
	err := l.Held(ctx, []string{scope}, held[:])
	return held[0], err
}

func waitHeld(t *testing.T, l Locks, account string, want pricing.Money) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		held, err := heldIn(context.Background(), l, account)
		if err == nil && held == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("held %s (%v), want %s", held, err, want)
		}
		time.Sleep(20 * time.Millisecond) // polling an observable state
	}
}

// Redis that loses a node's holds (FLUSHALL, a restart) never lets the
// node's later releases take the account's holds below zero: every hold
// is its own record, deleted on release. Until the nodes have written
// their holds back, reservations are refused (credit_unresolved); then a
// reservation gets exactly the room the balance leaves, no more.
func TestRedisHoldsLostNeverNegative(t *testing.T) {
	rs, client := redisClient(t)
	ctx := context.Background()
	f := newFixture(t, Policy{})
	f.account(t, store.Account{ID: "a", Plan: store.PlanPaid, Cleared: true, Balance: ptr(usd("1.00"))})
	// Shortened timings: renewals every 100 ms, a 400 ms wait after a loss.
	const renew, restore = 100 * time.Millisecond, 400 * time.Millisecond
	var nodes []*Gate
	for range 2 {
		l := newRedisLocks(client, HoldLease, renew, restore)
		if err := l.first(ctx); err != nil {
			t.Fatal(err)
		}
		go l.loop()
		t.Cleanup(func() { l.Destruct() })
		nodes = append(nodes, &Gate{Store: f.store, Locks: l, Now: func() time.Time { return f.now }})
	}
	reserve := func(g *Gate, est string) (*Hold, error) { return reserveRestored(t, g, "a", est) }
	mustHold := func(g *Gate, est string) *Hold {
		t.Helper()
		h, err := reserve(g, est)
		if err != nil {
			t.Fatalf("reserve %s: %v", est, err)
		}
		return h
	}
	mustRefuse := func(g *Gate, est string) {
		t.Helper()
		if h, err := reserve(g, est); code(t, err) != gwerr.CodeCreditExhausted {
			h.Release(ctx)
			t.Fatalf("reserve %s: %v, want credit_exhausted", est, err)
		}
	}

	for _, loss := range []struct {
		name string
		lose func()
	}{
		{"flush", func() {
			if err := client.FlushAll(ctx).Err(); err != nil {
				t.Fatal(err)
			}
		}},
		{"restart", func() { rs.Stop(); rs.Start() }},
	} {
		// Holds on both nodes, then Redis loses them, then some are
		// released before the nodes write theirs back.
		h1, h2, h3 := mustHold(nodes[0], "0.30"), mustHold(nodes[1], "0.20"), mustHold(nodes[0], "0.10")
		loss.lose()
		if _, err := nodes[1].Reserve(ctx, "a", Ability, usd("0.01")); code(t, err) != gwerr.CodeCreditUnresolved {
			t.Fatalf("%s: reserve right after the loss: %v, want credit_unresolved", loss.name, err)
		}
		h1.Release(ctx)
		waitHeld(t, nodes[1].Locks, "a", usd("0.30"))
		// Exactly the room left: 1.00 - 0.30 held.
		mustRefuse(nodes[1], "0.71")
		h4 := mustHold(nodes[1], "0.70")
		mustRefuse(nodes[0], "0.01")
		for _, h := range []*Hold{h2, h3, h4} {
			h.Release(ctx)
			h.Release(ctx) // a second release changes nothing
		}
		waitHeld(t, nodes[0].Locks, "a", 0)
		mustRefuse(nodes[0], "1.01")
		h5 := mustHold(nodes[0], "1.00")
		mustRefuse(nodes[1], "0.01")
		h5.Release(ctx)
		waitHeld(t, nodes[1].Locks, "a", 0)
		if n, err := client.HLen(ctx, holdsKey("a")).Result(); err != nil || n != 0 {
			t.Fatalf("%s: %d hold records left (%v)", loss.name, n, err)
		}
	}

	// Releases whose records Redis no longer has (lost, and the node's
	// renewal not yet run) never count below zero either.
	lone := newRedisLocks(client, HoldLease, time.Hour, restore)
	if err := lone.first(ctx); err != nil {
		t.Fatal(err)
	}
	g := &Gate{Store: f.store, Locks: lone, Now: func() time.Time { return f.now }}
	h := mustHold(g, "0.40")
	if err := client.Del(ctx, holdsKey("a")).Err(); err != nil {
		t.Fatal(err)
	}
	h.Release(ctx)
	if held, err := heldIn(ctx, lone, "a"); err != nil || held != 0 {
		t.Fatalf("held %s (%v) after releasing a lost hold", held, err)
	}
	mustRefuse(g, "1.01")
	mustHold(g, "1.00").Release(ctx)
}

// A Redis that comes back from a snapshot (SAVE, then a restart that
// loads it) or a replica promoted in a failover still has the mark of
// since when the holds are whole, yet lacks the holds written after the
// snapshot: the nodes tell that server from the one they wrote to by its
// run id and wait as for any loss, so no call is admitted against money
// those holds cover; after the wait a call gets exactly the room left.
func TestRedisHoldsLostToSnapshotOrFailover(t *testing.T) {
	for _, name := range []string{"snapshot", "failover"} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			var rs *testsvc.RedisSrv
			if name == "failover" {
				rs = testsvc.RedisPrimary(t)
			} else {
				rs = testsvc.RedisServer(t)
			}
			var socket atomic.Pointer[string]
			client := switchingClient(t, rs.URL(), &socket)
			// keep copies what Redis holds now (a snapshot, a replica that
			// then stops following); lose puts that copy in Redis's place.
			var keep, lose func()
			switch name {
			case "snapshot":
				keep = func() {
					if err := client.Save(ctx).Err(); err != nil {
						t.Fatal(err)
					}
				}
				lose = func() { rs.Stop(); rs.Start() }
			case "failover":
				var replica *testsvc.RedisSrv
				keep = func() {
					replica = rs.Replica()
					rc := redisClientAt(t, replica.URL())
					if err := rc.SlaveOf(ctx, "NO", "ONE").Err(); err != nil {
						t.Fatal(err)
					}
				}
				lose = func() {
					rs.Stop()
					to := socketOf(t, replica.URL())
					socket.Store(&to)
				}
			}

			f := newFixture(t, Policy{})
			f.account(t, store.Account{ID: "a", Plan: store.PlanPaid, Cleared: true, Balance: ptr(usd("1.00"))})
			// Two nodes whose renewals the test runs itself (as their
			// ticks would), with a 400 ms wait after a loss.
			const restore = 400 * time.Millisecond
			var locks []*RedisLocks
			var nodes []*Gate
			for range 2 {
				l := newRedisLocks(client, HoldLease, time.Hour, restore)
				if err := l.first(ctx); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { l.Destruct() })
				locks = append(locks, l)
				nodes = append(nodes, &Gate{Store: f.store, Locks: l, Now: func() time.Time { return f.now }})
			}
			reserve := func(g *Gate, est string) (*Hold, error) { return reserveRestored(t, g, "a", est) }

			h1, err := reserve(nodes[0], "0.30")
			if err != nil {
				t.Fatal(err)
			}
			keep()
			h2, err := reserve(nodes[0], "0.60")
			if err != nil {
				t.Fatal(err)
			}
			mark := client.Get(ctx, sinceKey).Val()
			lose()
			if err := client.Ping(ctx).Err(); err != nil {
				t.Fatalf("Redis after the %s: %v", name, err)
			}
			// The mark came along; the hold taken after the copy did not.
			if got := client.Get(ctx, sinceKey).Val(); got != mark || mark == "" {
				t.Fatalf("mark %q after the %s, want %q", got, name, mark)
			}
			if n := client.HLen(ctx, holdsKey("a")).Val(); n != 1 {
				t.Fatalf("%d hold records after the %s, want 1", n, name)
			}
			// 0.70 looks free to a check that trusts the mark: refused
			// with credit_unresolved instead, until the holds are back.
			if h, err := nodes[1].Reserve(ctx, "a", Ability, usd("0.50")); code(t, err) != gwerr.CodeCreditUnresolved {
				h.Release(ctx)
				t.Fatalf("reserve right after the %s: %v, want credit_unresolved", name, err)
			}
			if err := locks[0].renewAll(ctx); err != nil {
				t.Fatal(err)
			}
			// Exactly the room left: 1.00 - 0.30 - 0.60.
			if h, err := reserve(nodes[1], "0.11"); code(t, err) != gwerr.CodeCreditExhausted {
				h.Release(ctx)
				t.Fatalf("reserve 0.11 after the wait: %v, want credit_exhausted", err)
			}
			h3, err := reserve(nodes[1], "0.10")
			if err != nil {
				t.Fatalf("reserve 0.10 after the wait: %v", err)
			}
			for _, h := range []*Hold{h1, h2, h3} {
				h.Release(ctx)
			}
			waitHeld(t, nodes[1].Locks, "a", 0)
		})
	}
}

// switchingClient connects to the Redis at url, and from then on to the
// socket in *socket when set: the client's view of a failover.
func switchingClient(t *testing.T, url string, socket *atomic.Pointer[string]) *redis.Client {
	t.Helper()
	first := socketOf(t, url)
	socket.Store(&first)
	client := redis.NewClient(&redis.Options{Network: "unix", Addr: *socket.Load(),
		Dialer: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", *socket.Load())
		}})
	t.Cleanup(func() { client.Close() })
	return client
}

// socketOf is the socket of a unix:// Redis URL.
func socketOf(t *testing.T, url string) string {
	t.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil || opt.Network != "unix" {
		t.Fatalf("not a socket: %s (%v)", url, err)
	}
	return opt.Addr
}

// redisClientAt connects to the Redis at url.
func redisClientAt(t testing.TB, url string) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(opt)
	t.Cleanup(func() { client.Close() })
	return client
}

// A call whose work is done is charged even when the shared lock store is
// down as it settles: the lock only orders admission checks.
func TestSettleWithoutTheLock(t *testing.T) {
	rs, client := redisClient(t)
	ctx := context.Background()
	l, err := NewRedisLocks(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Destruct() })
	f := newFixture(t, Policy{})
	f.gate.Locks = l
	f.account(t, store.Account{ID: "a", Plan: store.PlanPaid, Cleared: true, Balance: ptr(usd("1.00"))})
	h, err := f.gate.Reserve(ctx, "a", Ability, usd("0.40"))
	if err != nil {
		t.Fatal(err)
	}
	rs.Stop()
	charged, err := h.Settle(ctx, &store.Entry{RequestID: "delivered", Cost: usd("0.25")})
	if err != nil || !charged {
		t.Fatalf("settle with Redis down: %v %v", charged, err)
	}
	entries, _ := f.store.Entries(ctx, "a", 10)
	if acc, _ := f.store.Account(ctx, "a"); len(entries) != 1 || entries[0].Cost != usd("0.25") || *acc.Balance != usd("0.75") {
		t.Fatalf("entries %+v, balance %s", entries, acc.Balance)
	}
	rs.Start()
	// The hold Redis lost is not counted once Redis is back.
	waitHeld(t, l, "a", 0)
}

// Concurrent calls on two nodes while Redis loses the holds of calls
// still running (a FLUSHALL, then a restart): the calls admitted after
// the loss get only the room the running calls leave, so together they
// never take the balance below zero, and each charge is in the ledger once.
func TestRedisHoldsLostUnderLoad(t *testing.T) {
	rs, client := redisClient(t)
	ctx := context.Background()
	f := newFixture(t, Policy{})
	cost := usd("0.01")
	f.account(t, store.Account{ID: "busy", Plan: store.PlanPaid, Cleared: true, Balance: ptr(20 * cost)})
	var nodes []*Gate
	for range 2 {
		l := newRedisLocks(client, HoldLease, 100*time.Millisecond, 500*time.Millisecond)
		if err := l.first(ctx); err != nil {
			t.Fatal(err)
		}
		go l.loop()
		t.Cleanup(func() { l.Destruct() })
		nodes = append(nodes, &Gate{Store: f.store, Locks: l, Now: func() time.Time { return f.now }})
	}
	var mu sync.Mutex
	var holds []*Hold
	// reserveAll reserves one call's cost n times at once on both nodes,
	// each retried while refused with credit_unresolved (Redis down, or
	// its holds being restored); it returns how many were refused for
	// want of money.
	reserveAll := func(n int) (refused int) {
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				deadline := time.Now().Add(20 * time.Second)
				for {
					h, err := nodes[i%2].Reserve(ctx, "busy", Ability, cost)
					mu.Lock()
					switch {
					case err == nil:
						holds = append(holds, h)
					case code(t, err) == gwerr.CodeCreditExhausted:
						refused++
					case code(t, err) != gwerr.CodeCreditUnresolved || time.Now().After(deadline):
						t.Errorf("reserve: %v", err)
					default:
						mu.Unlock()
						time.Sleep(10 * time.Millisecond) // polling the gate's answer
						continue
					}
					mu.Unlock()
					return
				}
			})
		}
		wg.Wait()
		return refused
	}
	seq := 0
	round := func(name string, lose func(), wantAdmitted int) {
		t.Helper()
		seq++
		refused := reserveAll(4)
		lose()
		refused += reserveAll(8)
		if admitted := len(holds); admitted != wantAdmitted || admitted+refused != 12 {
			t.Fatalf("%s: %d admitted, %d refused; want %d admitted", name, admitted, refused, wantAdmitted)
		}
		for i, h := range holds {
			if _, err := h.Settle(ctx, &store.Entry{RequestID: fmt.Sprintf("r%d-%d", seq, i), Cost: cost}); err != nil {
				t.Fatalf("%s: settle: %v", name, err)
			}
		}
		holds = nil
	}
	round("no loss", func() {}, 12) // 8 left
	round("flush", func() {
		if err := client.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
	}, 8) // 4 held when Redis lost them, so 4 more: 0 left
	if _, err := f.store.UpdateAccount(ctx, "busy", func(a *store.Account) error { *a.Balance += 8 * cost; return nil }); err != nil {
		t.Fatal(err)
	}
	round("restart", func() { rs.Stop(); rs.Start() }, 8) // likewise
	acc, _ := f.store.Account(ctx, "busy")
	entries, _ := f.store.Entries(ctx, "busy", 1000)
	if *acc.Balance != 0 || len(entries) != 28 {
		t.Fatalf("balance %s, %d entries; want 0 and 28", acc.Balance, len(entries))
	}
}

// spooling is a store that keeps every charge on the node until applied
// is closed (as a node's spool while the shared database is down).
type spooling struct {
	store.Store
	applied chan struct{}
}

func (s spooling) Applied(string) <-chan struct{} { return s.applied }

// A charge the store keeps on the node for now keeps its hold until the
// shared store has it: the other nodes' checks count the money meanwhile.
func TestSpooledChargeKeepsItsHold(t *testing.T) {
	f := newFixture(t, Policy{})
	f.account(t, store.Account{ID: "a", Plan: store.PlanPaid, Cleared: true, Balance: ptr(usd("1.00"))})
	sp := spooling{Store: f.store, applied: make(chan struct{})}
	f.gate.Store = sp
	ctx := context.Background()
	h, err := f.gate.Reserve(ctx, "a", Ability, usd("0.30"))
	if err != nil {
		t.Fatal(err)
	}
	if charged, err := h.Settle(ctx, &store.Entry{RequestID: "kept", Cost: usd("0.20")}); err != nil || !charged {
		t.Fatalf("settle: %v %v", charged, err)
	}
	if held, err := heldIn(ctx, f.gate.Locks, "a"); err != nil || held != usd("0.30") {
		t.Fatalf("held %s (%v) while the charge is kept on the node, want 0.30", held, err)
	}
	close(sp.applied)
	waitHeld(t, f.gate.Locks, "a", 0)
}

// redisClient starts a redis-server for the test and connects to it.
func redisClient(t *testing.T) (*testsvc.RedisSrv, *redis.Client) {
	t.Helper()
	rs := testsvc.RedisServer(t)
	return rs, redisClientAt(t, rs.URL())
}

// A refusal for credit or a cap may pass with a smaller estimate; one that
// says the money could not be checked or recorded, or any other error,
// stands.
func TestTightenable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{refuse(gwerr.CodeCreditExhausted, "no credit"), true},
		{refuse(gwerr.CodeDailyCap, "daily cap"), true},
		{refuse(gwerr.CodeMonthlyCap, "monthly cap"), true},
		{fmt.Errorf("reserving: %w", refuse(gwerr.CodeMonthlyCap, "ceiling")), true},
		{Unresolved(), false},
		{unsettled(), false},
		{errors.New("boom"), false},
	} {
		if got := Tightenable(tc.err); got != tc.want {
			t.Errorf("Tightenable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// Conformance runs the behaviour every store.Store backend must share
// against the backend open returns (a fresh, empty store each call). The
// embedded SQLite store and the PostgreSQL store both run it.
func Conformance(t *testing.T, open func(t *testing.T) store.Store) {
	t.Run("Accounts", func(t *testing.T) { testAccounts(t, open(t)) })
	t.Run("Keys", func(t *testing.T) { testKeys(t, open(t)) })
	t.Run("KeyCaps", func(t *testing.T) { testKeyCaps(t, open(t)) })
	t.Run("KeyMCPTools", func(t *testing.T) { testKeyMCPTools(t, open(t)) })
	t.Run("KeySpend", func(t *testing.T) { testKeySpend(t, open(t)) })
	t.Run("KeyFloor", func(t *testing.T) { testKeyFloor(t, open(t)) })
	t.Run("KeyFloorConcurrent", func(t *testing.T) { testKeyFloorConcurrent(t, open(t)) })
	t.Run("Orgs", func(t *testing.T) { testOrgs(t, open(t)) })
	t.Run("Webhooks", func(t *testing.T) { testWebhooks(t, open(t)) })
	t.Run("Alerts", func(t *testing.T) { testAlerts(t, open(t)) })
	t.Run("Deliveries", func(t *testing.T) { testDeliveries(t, open(t)) })
	t.Run("OrgSpend", func(t *testing.T) { testOrgSpend(t, open(t)) })
	t.Run("OrgFloor", func(t *testing.T) { testOrgFloor(t, open(t)) })
	t.Run("OrgFloorConcurrent", func(t *testing.T) { testOrgFloorConcurrent(t, open(t)) })
	t.Run("SettleOnce", func(t *testing.T) { testSettleOnce(t, open(t)) })
	t.Run("Floor", func(t *testing.T) { testFloor(t, open(t)) })
	t.Run("FloorConcurrent", func(t *testing.T) { testFloorConcurrent(t, open(t)) })
	t.Run("FloorCapConcurrent", func(t *testing.T) { testFloorCapConcurrent(t, open(t)) })
	t.Run("FreeCredit", func(t *testing.T) { testFreeCredit(t, open(t)) })
	t.Run("SpendAndEntries", func(t *testing.T) { testSpendAndEntries(t, open(t)) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, open(t)) })
	t.Run("Journal", func(t *testing.T) { testJournal(t, open(t)) })
	t.Run("JournalConcurrent", func(t *testing.T) { testJournalConcurrent(t, open(t)) })
	t.Run("Usage", func(t *testing.T) { testUsage(t, open(t)) })
	t.Run("ListAccounts", func(t *testing.T) { testListAccounts(t, open(t)) })
}

// sumJournal adds an account's journal up and checks each entry's balance
// after it.
func sumJournal(t *testing.T, st store.Store, id string) (pricing.Money, []store.JournalEntry) {
	t.Helper()
	entries, err := st.Journal(context.Background(), id, 10000)
	if err != nil {
		t.Fatal(err)
	}
	var sum pricing.Money
	for i := len(entries) - 1; i >= 0; i-- { // oldest first
		sum += entries[i].Amount
		if entries[i].Balance != sum {
			t.Fatalf("entry %d (%+v): balance after %v, running sum %v", i, entries[i], entries[i].Balance, sum)
		}
	}
	return sum, entries
}

// Every movement of a prepaid balance is journaled with the balance after
// it, and the amounts add up to the balance.
func testJournal(t *testing.T, st store.Store) {
	ctx := context.Background()
	mustAccount(t, st, store.Account{ID: "pre", Plan: store.PlanPaid, Balance: ptr(usd("10"))})
	mustAccount(t, st, store.Account{ID: "post", Plan: store.PlanPaid})
	up := func(why store.Movement, f func(*store.Account)) {
		t.Helper()
		if _, err := st.UpdateAccount(ctx, "pre", func(a *store.Account) error { f(a); return nil }, why); err != nil {
			t.Fatal(err)
		}
	}
	up(store.Movement{Kind: store.JournalTopUp}, func(a *store.Account) { *a.Balance += usd("5") })
	up(store.Movement{Kind: store.JournalAdjustment, Reason: "duplicate top-up"}, func(a *store.Account) { *a.Balance -= usd("2") })
	up(store.Movement{}, func(a *store.Account) { a.Plan = store.PlanFree }) // no balance move: no entry
	at := time.Date(2026, 5, 10, 0, 0, 0, 0, time.UTC)
	// 3 USD of free credit this month: the first call draws 1 from the
	// balance, the second all of its 2.
	if _, err := st.Settle(ctx, &store.Entry{RequestID: "c1", AccountID: "pre", Cost: usd("4"), Time: at, FreeMonthlyCredit: usd("3")}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Settle(ctx, &store.Entry{RequestID: "c2", AccountID: "pre", Cost: usd("2"), Time: at, FreeMonthlyCredit: usd("3")}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Settle(ctx, &store.Entry{RequestID: "c2", AccountID: "pre", Cost: usd("2"), Time: at}); err != nil { // settled before: nothing
		t.Fatal(err)
	}
	up(store.Movement{Kind: store.JournalSet}, func(a *store.Account) { *a.Balance = usd("20") })
	sum, entries := sumJournal(t, st, "pre")
	acc, _ := st.Account(ctx, "pre")
	if sum != *acc.Balance || sum != usd("20") {
		t.Fatalf("journal adds up to %v, balance %v", sum, *acc.Balance)
	}
	var kinds []string
	for _, e := range entries {
		kinds = append(kinds, fmt.Sprintf("%s %v %s%s", e.Kind, e.Amount, e.RequestID, e.Reason))
	}
	want := []string{"set 10.00 ", "charge -2.00 c2", "charge -1.00 c1", "adjustment -2.00 duplicate top-up", "top_up 5.00 ", "set 10.00 "}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Fatalf("journal %q\nwant %q", kinds, want)
	}
	// A postpaid account has no balance and no journal; moving it to
	// prepaid starts one.
	if _, err := st.Settle(ctx, &store.Entry{RequestID: "p1", AccountID: "post", Cost: usd("1")}); err != nil {
		t.Fatal(err)
	}
	if _, e := sumJournal(t, st, "post"); len(e) != 0 {
		t.Fatalf("postpaid journal %+v", e)
	}
	if _, err := st.UpdateAccount(ctx, "post", func(a *store.Account) error { a.Balance = ptr(usd("3")); return nil }); err != nil {
		t.Fatal(err)
	}
	if sum, e := sumJournal(t, st, "post"); len(e) != 1 || e[0].Kind != store.JournalSet || sum != usd("3") {
		t.Fatalf("journal after going prepaid %+v", e)
	}
	problems, err := st.CheckJournal(ctx)
	if err != nil || len(problems) != 0 {
		t.Fatalf("check: %+v, %v", problems, err)
	}
}

// Many calls and top-ups on one account at once: the journal still adds
// up, and every charge appears once with its ledger entry.
func testJournalConcurrent(t *testing.T, st store.Store) {
	ctx := context.Background()
	mustAccount(t, st, store.Account{ID: "a", Plan: store.PlanPaid, Balance: ptr(usd("50"))})
	const n = 30
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(3)
		go func() {
			defer wg.Done()
			if _, err := st.Settle(ctx, &store.Entry{RequestID: fmt.Sprint("r", i), AccountID: "a", Cost: usd("0.75")}); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			if _, err := st.Settle(ctx, &store.Entry{RequestID: fmt.Sprint("r", i), AccountID: "a", Cost: usd("0.75")}); err != nil { // a retry
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			if _, err := st.UpdateAccount(ctx, "a", func(a *store.Account) error { *a.Balance += usd("0.5"); return nil },
				store.Movement{Kind: store.JournalTopUp}); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	sum, entries := sumJournal(t, st, "a")
	acc, _ := st.Account(ctx, "a")
	if want := usd("50") + n*usd("0.5") - n*usd("0.75"); sum != *acc.Balance || sum != want {
		t.Fatalf("journal %v, balance %v, want %v", sum, *acc.Balance, want)
	}
	charges := map[string]int{}
	for _, e := range entries {
		if e.Kind == store.JournalCharge {
			charges[e.RequestID]++
		}
	}
	for i := range n {
		if c := charges[fmt.Sprint("r", i)]; c != 1 {
			t.Fatalf("charge r%d appears %d times", i, c)
		}
	}
	if problems, err := st.CheckJournal(ctx); err != nil || len(problems) != 0 {
		t.Fatalf("check: %+v, %v", problems, err)
	}
}

func usd(s string) pricing.Money {
	m, err := pricing.ParseUSD(s)
	if err != nil {
		panic(err)
	}
	return m
}

func ptr(m pricing.Money) *pricing.Money { return &m }

func mustAccount(t *testing.T, st store.Store, a store.Account) {
	t.Helper()
	if err := st.CreateAccount(context.Background(), a); err != nil {
		t.Fatal(err)
	}
}

func testAccounts(t *testing.T, st store.Store) {
	ctx := context.Background()
	created := time.Date(2026, 3, 4, 5, 6, 7, 8, time.UTC)
	a := store.Account{ID: "acme", Plan: store.PlanPaid, Cleared: true, PAYG: true, LaneBilling: true, Balance: ptr(usd("12.50")),
		DailyCap: ptr(usd("1")), Abilities: []string{store.AbilitySearch}, CreatedAt: created}
	mustAccount(t, st, a)
	if err := st.CreateAccount(ctx, a); !errors.Is(err, store.ErrExists) {
		t.Fatalf("second create: %v, want ErrExists", err)
	}
	got, err := st.Account(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if got.Plan != store.PlanPaid || !got.Cleared || !got.PAYG || !got.LaneBilling || *got.Balance != usd("12.50") ||
		*got.DailyCap != usd("1") || got.MonthlyCap != nil || fmt.Sprint(got.Abilities) != "[search]" || !got.CreatedAt.Equal(created) {
		t.Fatalf("account = %+v", got)
	}
	if _, err := st.Account(ctx, "nobody"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown account: %v", err)
	}
	up, err := st.UpdateAccount(ctx, "acme", func(a *store.Account) error {
		a.ID, a.Balance, a.Abilities, a.MonthlyCap = "renamed", nil, nil, ptr(usd("9"))
		return nil
	})
	if err != nil || up.ID != "acme" || up.Balance != nil || up.Abilities != nil || *up.MonthlyCap != usd("9") {
		t.Fatalf("update = %+v, %v", up, err)
	}
	boom := errors.New("boom")
	if _, err := st.UpdateAccount(ctx, "acme", func(a *store.Account) error { a.Plan = store.PlanFree; return boom }); !errors.Is(err, boom) {
		t.Fatalf("aborted update: %v", err)
	}
	if got, _ := st.Account(ctx, "acme"); got.Plan != store.PlanPaid || got.Balance != nil {
		t.Fatalf("after the aborted update: %+v", got)
	}
	if _, err := st.UpdateAccount(ctx, "nobody", func(*store.Account) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update unknown: %v", err)
	}
	empty := store.Account{ID: "none", Plan: store.PlanFree, Abilities: []string{}}
	mustAccount(t, st, empty)
	if got, _ := st.Account(ctx, "none"); got.Abilities == nil || len(got.Abilities) != 0 {
		t.Fatalf("an empty ability list must stay empty (not all): %#v", got.Abilities)
	}
}

func testKeys(t *testing.T, st store.Store) {
	ctx := context.Background()
	mustAccount(t, st, store.Account{ID: "acme", Plan: store.PlanPaid})
	exp := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	k1 := store.Key{ID: "k1", AccountID: "acme", Name: "laptop", Hash: "h1", Models: []string{"gw-fast"}, ExpiresAt: &exp, CreatedAt: t0}
	k2 := store.Key{ID: "k2", AccountID: "acme", Name: "ci", Hash: "h2", CreatedAt: t0}
	for _, k := range []store.Key{k1, k2} {
		if err := st.CreateKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.CreateKey(ctx, store.Key{ID: "k3", AccountID: "acme", Hash: "h1"}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("duplicate hash: %v", err)
	}
	if err := st.CreateKey(ctx, store.Key{ID: "k4", AccountID: "nobody", Hash: "h4"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("key of an unknown account: %v", err)
	}
	keys, err := st.Keys(ctx, "acme")
	if err != nil || len(keys) != 2 || keys[0].ID != "k1" || keys[1].ID != "k2" {
		t.Fatalf("keys = %+v, %v", keys, err)
	}
	k, err := st.KeyByHash(ctx, "h1")
	if err != nil || k.ID != "k1" || k.Name != "laptop" || fmt.Sprint(k.Models) != "[gw-fast]" || !k.ExpiresAt.Equal(exp) || k.AccountID != "acme" {
		t.Fatalf("key by hash = %+v, %v", k, err)
	}
	if k, _ := st.KeyByHash(ctx, "h2"); k.Models != nil || k.ExpiresAt != nil {
		t.Fatalf("k2 = %+v", k)
	}
	if err := st.DeleteKey(ctx, "k1"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.KeyByHash(ctx, "h1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted key: %v", err)
	}
	if err := st.DeleteKey(ctx, "k1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	// A revoked secret is remembered and never issued again.
	if issued, err := st.KeyIssued(ctx, "h1"); !issued || err != nil {
		t.Fatalf("KeyIssued(revoked) = %v, %v", issued, err)
	}
	if issued, err := st.KeyIssued(ctx, "never"); issued || err != nil {
		t.Fatalf("KeyIssued(never) = %v, %v", issued, err)
	}
	if err := st.CreateKey(ctx, store.Key{ID: "k5", AccountID: "acme", Hash: "h1"}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("reissuing a revoked secret: %v", err)
	}
	if keys, _ := st.Keys(ctx, "acme"); len(keys) != 1 || keys[0].ID != "k2" {
		t.Fatalf("keys after the revocation = %+v", keys)
	}
	if keys, err := st.Keys(ctx, "nobody"); err != nil || keys == nil || len(keys) != 0 {
		t.Fatalf("keys of nobody = %#v, %v", keys, err)
	}
}

func testSettleOnce(t *testing.T, st store.Store) {
	ctx := context.Background()
	mustAccount(t, st, store.Account{ID: "pre", Plan: store.PlanPaid, Balance: ptr(usd("1.00"))})
	mustAccount(t, st, store.Account{ID: "post", Plan: store.PlanPaid})
	e := store.Entry{RequestID: "req-1", AccountID: "pre", Endpoint: "chat", Model: "m", Units: 10, Unit: "token", Cost: usd("0.25")}
	if ok, err := st.Settle(ctx, &e); !ok || err != nil {
		t.Fatalf("settle = %v, %v", ok, err)
	}
	if ok, err := st.Settle(ctx, &e); ok || err != nil {
		t.Fatalf("second settle = %v, %v; want false, nil", ok, err)
	}
	if a, _ := st.Account(ctx, "pre"); *a.Balance != usd("0.75") {
		t.Fatalf("balance %v, want 0.75", *a.Balance)
	}
	if ok, err := st.Settle(ctx, &store.Entry{RequestID: "req-2", AccountID: "post", Cost: usd("3")}); !ok || err != nil {
		t.Fatalf("postpaid settle = %v, %v", ok, err)
	}
	if a, _ := st.Account(ctx, "post"); a.Balance != nil {
		t.Fatalf("a postpaid account got a balance: %v", *a.Balance)
	}
	if _, err := st.Settle(ctx, &store.Entry{RequestID: "req-3", AccountID: "nobody", Cost: 1}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("settle for nobody: %v", err)
	}
}

// The month's free credit is spent before the balance.
func testFreeCredit(t *testing.T, st store.Store) {
	ctx := context.Background()
	mustAccount(t, st, store.Account{ID: "pre", Plan: store.PlanPaid, Balance: ptr(usd("10"))})
	at := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	for i, c := range []string{"3", "3", "3"} {
		if _, err := st.Settle(ctx, &store.Entry{RequestID: fmt.Sprint("r", i), AccountID: "pre", Cost: usd(c), Time: at, FreeMonthlyCredit: usd("5")}); err != nil {
			t.Fatal(err)
		}
	}
	// 9 spent, 5 of it free: the balance paid 4.
	if a, _ := st.Account(ctx, "pre"); *a.Balance != usd("6") {
		t.Fatalf("balance %v, want 6", *a.Balance)
	}
	// A new month brings new credit.
	next := at.AddDate(0, 1, 0)
	if _, err := st.Settle(ctx, &store.Entry{RequestID: "r-next", AccountID: "pre", Cost: usd("2"), Time: next, FreeMonthlyCredit: usd("5")}); err != nil {
		t.Fatal(err)
	}
	if a, _ := st.Account(ctx, "pre"); *a.Balance != usd("6") {
		t.Fatalf("balance %v after a free call in a new month, want 6", *a.Balance)
	}
}

func testSpendAndEntries(t *testing.T, st store.Store) {
	ctx := context.Background()
	mustAccount(t, st, store.Account{ID: "a", Plan: store.PlanPaid})
	now := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	for _, e := range []struct {
		id   string
		at   time.Time
		cost string
	}{
		{"old", now.AddDate(0, -1, 0), "1"},
		{"earlier-this-month", now.AddDate(0, 0, -3), "2"},
		{"today-1", now.Add(-time.Hour), "0.5"},
		{"today-2", now, "0.25"},
	} {
		if _, err := st.Settle(ctx, &store.Entry{RequestID: e.id, AccountID: "a", Cost: usd(e.cost), Time: e.at}); err != nil {
			t.Fatal(err)
		}
	}
	sp, err := st.Spend(ctx, "a", now)
	if err != nil || sp.Today != usd("0.75") || sp.Month != usd("2.75") || sp.Total != usd("3.75") {
		t.Fatalf("spend = %+v, %v", sp, err)
	}
	if sp, _ := st.Spend(ctx, "nobody", now); sp != (store.Spend{}) {
		t.Fatalf("spend of nobody = %+v", sp)
	}
	entries, err := st.Entries(ctx, "a", 3)
	if err != nil || len(entries) != 3 || entries[0].RequestID != "today-2" || entries[1].RequestID != "today-1" ||
		entries[2].RequestID != "earlier-this-month" || entries[0].Cost != usd("0.25") || !entries[0].Time.Equal(now) {
		t.Fatalf("entries = %+v, %v", entries, err)
	}
	if entries, _ := st.Entries(ctx, "nobody", 10); entries == nil || len(entries) != 0 {
		t.Fatalf("entries of nobody = %#v", entries)
	}
}

// Many settlements at once on one prepaid account: each charged exactly
// once, the balance exact; the same request id from many goroutines is
// charged once.
func testConcurrent(t *testing.T, st store.Store) {
	ctx := context.Background()
	mustAccount(t, st, store.Account{ID: "a", Plan: store.PlanPaid, Balance: ptr(usd("100"))})
	const n = 40
	var wg sync.WaitGroup
	var mu sync.Mutex
	charged := 0
	for i := range n {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if _, err := st.Settle(ctx, &store.Entry{RequestID: fmt.Sprint("r", i), AccountID: "a", Cost: usd("0.5")}); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			ok, err := st.Settle(ctx, &store.Entry{RequestID: "same", AccountID: "a", Cost: usd("1")})
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				charged++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if charged != 1 {
		t.Fatalf("the same request id was charged %d times", charged)
	}
	a, _ := st.Account(ctx, "a")
	if want := usd("100") - n*usd("0.5") - usd("1"); *a.Balance != want {
		t.Fatalf("balance %v, want %v", *a.Balance, want)
	}
	entries, _ := st.Entries(ctx, "a", 1000)
	if len(entries) != n+1 {
		t.Fatalf("%d entries, want %d", len(entries), n+1)
	}
}

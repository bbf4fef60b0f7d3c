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

// showCaps prints a key's caps ("-" for none).
func showCaps(k store.Key) string {
	show := func(m *pricing.Money) string {
		if m == nil {
			return "-"
		}
		return m.String()
	}
	return show(k.DailyCap) + "/" + show(k.MonthlyCap) + "/" + show(k.TotalCap)
}

// A key's caps are stored with it and shown wherever the key is read;
// UpdateKey changes them (and the name, models and expiry) in one step,
// never the key's id, account, hash or creation time; a revoked key is
// neither found nor changed.
func testKeyCaps(t *testing.T, st store.Store) {
	ctx := context.Background()
	mustAccount(t, st, store.Account{ID: "acme", Plan: store.PlanPaid})
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	capped := store.Key{ID: "kc", AccountID: "acme", Name: "capped", Hash: "hc", CreatedAt: t0,
		DailyCap: ptr(usd("1")), MonthlyCap: ptr(usd("20")), TotalCap: ptr(usd("0.000000001"))}
	plain := store.Key{ID: "kp", AccountID: "acme", Name: "plain", Hash: "hp", CreatedAt: t0}
	for _, k := range []store.Key{capped, plain} {
		if err := st.CreateKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	k, err := st.Key(ctx, "kc")
	if err != nil || k.ID != "kc" || k.AccountID != "acme" || k.Name != "capped" || k.Hash != "hc" || !k.CreatedAt.Equal(t0) ||
		showCaps(k) != "1.00/20.00/0.000000001" {
		t.Fatalf("Key(kc) = %+v (%s), %v", k, showCaps(k), err)
	}
	if k, err := st.KeyByHash(ctx, "hc"); err != nil || showCaps(k) != "1.00/20.00/0.000000001" {
		t.Fatalf("KeyByHash(hc) = %s, %v", showCaps(k), err)
	}
	if k, err := st.Key(ctx, "kp"); err != nil || showCaps(k) != "-/-/-" || k.Models != nil || k.ExpiresAt != nil {
		t.Fatalf("Key(kp) = %+v, %v", k, err)
	}
	if keys, err := st.Keys(ctx, "acme"); err != nil || len(keys) != 2 || showCaps(keys[0]) != "1.00/20.00/0.000000001" || showCaps(keys[1]) != "-/-/-" {
		t.Fatalf("Keys = %+v, %v", keys, err)
	}
	if _, err := st.Key(ctx, "nobody"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Key(nobody): %v", err)
	}

	// A change of every field UpdateKey writes, and of those it keeps.
	exp := time.Date(2027, 6, 1, 0, 0, 0, 0, time.UTC)
	up, err := st.UpdateKey(ctx, "kc", func(k *store.Key) error {
		k.ID, k.AccountID, k.Hash, k.CreatedAt = "other", "other", "other", t0.Add(time.Hour)
		k.Name, k.Models, k.ExpiresAt = "renamed", []string{"gw-fast"}, &exp
		k.DailyCap, k.MonthlyCap, k.TotalCap = nil, ptr(usd("5")), ptr(usd("7.5"))
		return nil
	})
	if err != nil || up.ID != "kc" || up.AccountID != "acme" || up.Hash != "hc" || !up.CreatedAt.Equal(t0) || up.Name != "renamed" ||
		fmt.Sprint(up.Models) != "[gw-fast]" || !up.ExpiresAt.Equal(exp) || showCaps(up) != "-/5.00/7.50" {
		t.Fatalf("UpdateKey = %+v (%s), %v", up, showCaps(up), err)
	}
	for _, read := range []func() (store.Key, error){
		func() (store.Key, error) { return st.Key(ctx, "kc") },
		func() (store.Key, error) { return st.KeyByHash(ctx, "hc") },
		func() (store.Key, error) { keys, err := st.Keys(ctx, "acme"); return keys[0], err },
	} {
		k, err := read()
		if err != nil || k.ID != "kc" || k.Name != "renamed" || fmt.Sprint(k.Models) != "[gw-fast]" || !k.ExpiresAt.Equal(exp) || showCaps(k) != "-/5.00/7.50" {
			t.Fatalf("after the update: %+v (%s), %v", k, showCaps(k), err)
		}
	}
	// fn's error aborts: nothing changes.
	boom := errors.New("boom")
	if _, err := st.UpdateKey(ctx, "kc", func(k *store.Key) error { k.TotalCap, k.Name = nil, "lost"; return boom }); !errors.Is(err, boom) {
		t.Fatalf("aborted update: %v", err)
	}
	if k, _ := st.Key(ctx, "kc"); k.Name != "renamed" || showCaps(k) != "-/5.00/7.50" {
		t.Fatalf("after the aborted update: %+v (%s)", k, showCaps(k))
	}
	if _, err := st.UpdateKey(ctx, "nobody", func(*store.Key) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update of an unknown key: %v", err)
	}
	// Caps removed.
	if k, err := st.UpdateKey(ctx, "kc", func(k *store.Key) error { k.MonthlyCap, k.TotalCap = nil, nil; return nil }); err != nil || showCaps(k) != "-/-/-" {
		t.Fatalf("caps removed: %s, %v", showCaps(k), err)
	}
	if k, _ := st.Key(ctx, "kc"); showCaps(k) != "-/-/-" {
		t.Fatalf("caps removed, then read: %s", showCaps(k))
	}
	// A revoked key: not found, not changed.
	if err := st.DeleteKey(ctx, "kp"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Key(ctx, "kp"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Key of a revoked key: %v", err)
	}
	called := false
	if _, err := st.UpdateKey(ctx, "kp", func(*store.Key) error { called = true; return nil }); !errors.Is(err, store.ErrNotFound) || called {
		t.Fatalf("update of a revoked key: %v (fn called: %v)", err, called)
	}
}

// KeySpend sums the entries made with a key over the day, the month and
// all time, apart from the account's other keys; a revoked key's spend
// stays, an unknown key has spent nothing.
func testKeySpend(t *testing.T, st store.Store) {
	ctx := context.Background()
	mustAccount(t, st, store.Account{ID: "a", Plan: store.PlanPaid})
	for _, k := range []store.Key{{ID: "k1", AccountID: "a", Hash: "h1"}, {ID: "k2", AccountID: "a", Hash: "h2"}} {
		if err := st.CreateKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	for i, e := range []struct {
		key  string
		at   time.Time
		cost string
	}{
		{"k1", now.AddDate(0, -1, 0), "1"},
		{"k1", now.AddDate(0, 0, -3), "2"},
		{"k1", now.Add(-time.Hour), "0.5"},
		{"k1", now, "0.25"},
		{"k2", now.AddDate(-1, 0, 0), "8"},
		{"k2", now.Add(-2 * time.Hour), "0.125"},
		{"", now, "16"}, // no key: the account's alone
	} {
		if _, err := st.Settle(ctx, &store.Entry{RequestID: fmt.Sprint("r", i), AccountID: "a", KeyID: e.key, Cost: usd(e.cost), Time: e.at}); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]store.Spend{
		"k1":     {Today: usd("0.75"), Month: usd("2.75"), Total: usd("3.75")},
		"k2":     {Today: usd("0.125"), Month: usd("0.125"), Total: usd("8.125")},
		"nobody": {},
	}
	check := func(when string) {
		t.Helper()
		for id, w := range want {
			if sp, err := st.KeySpend(ctx, id, now); err != nil || sp != w {
				t.Errorf("%s: KeySpend(%s) = %+v, %v; want %+v", when, id, sp, err, w)
			}
		}
	}
	check("")
	if sp, _ := st.Spend(ctx, "a", now); sp.Total != usd("27.875") || sp.Today != usd("16.875") {
		t.Errorf("account spend %+v", sp)
	}
	if err := st.DeleteKey(ctx, "k2"); err != nil {
		t.Fatal(err)
	}
	check("after k2's revocation")
	// The next month counts only what falls in it.
	if sp, _ := st.KeySpend(ctx, "k1", now.AddDate(0, 1, 0)); sp != (store.Spend{Total: usd("3.75")}) {
		t.Errorf("KeySpend(k1) a month later = %+v", sp)
	}
}

// keyFloorCase is one key whose charges pass its caps.
type keyFloorCase struct {
	name string
	// acc is the account's bounds, key the key's caps.
	acc store.Account
	key store.Key
	// costs are charged in order a second apart; charged and short are
	// what each must record.
	costs, charged, short []string
}

var keyFloorCases = []keyFloorCase{
	{name: "daily cap", acc: store.Account{Plan: store.PlanPaid}, key: store.Key{DailyCap: ptr(usd("1"))},
		costs: []string{"0.90", "0.30", "0.05"}, charged: []string{"0.90", "0.10", "0"}, short: []string{"0", "0.20", "0.05"}},
	{name: "monthly cap", acc: store.Account{Plan: store.PlanPaid}, key: store.Key{MonthlyCap: ptr(usd("2"))},
		costs: []string{"1.50", "1.00"}, charged: []string{"1.50", "0.50"}, short: []string{"0", "0.50"}},
	{name: "total cap", acc: store.Account{Plan: store.PlanPaid}, key: store.Key{TotalCap: ptr(usd("0.000000003"))},
		costs: []string{"0.000000002", "0.000000002", "0.000000001"}, charged: []string{"0.000000002", "0.000000001", "0"}, short: []string{"0", "0.000000001", "0.000000001"}},
	{name: "the least of the caps", acc: store.Account{Plan: store.PlanPaid}, key: store.Key{DailyCap: ptr(usd("5")), MonthlyCap: ptr(usd("3")), TotalCap: ptr(usd("4"))},
		costs: []string{"2", "2"}, charged: []string{"2", "1"}, short: []string{"0", "1"}},
	{name: "the key's cap under the balance", acc: store.Account{Plan: store.PlanPaid, Balance: ptr(usd("10"))}, key: store.Key{DailyCap: ptr(usd("0.30"))},
		costs: []string{"0.25", "0.25"}, charged: []string{"0.25", "0.05"}, short: []string{"0", "0.20"}},
	{name: "the balance under the key's cap", acc: store.Account{Plan: store.PlanPaid, Balance: ptr(usd("0.30"))}, key: store.Key{DailyCap: ptr(usd("10"))},
		costs: []string{"0.25", "0.25"}, charged: []string{"0.25", "0.05"}, short: []string{"0", "0.20"}},
	{name: "the account's cap under the key's", acc: store.Account{Plan: store.PlanPaid, MonthlyCap: ptr(usd("1"))}, key: store.Key{TotalCap: ptr(usd("3"))},
		costs: []string{"0.75", "0.75"}, charged: []string{"0.75", "0.25"}, short: []string{"0", "0.50"}},
	{name: "a cap of zero", acc: store.Account{Plan: store.PlanPaid}, key: store.Key{DailyCap: ptr(0)},
		costs: []string{"0.01"}, charged: []string{"0"}, short: []string{"0.01"}},
	{name: "no cap", acc: store.Account{Plan: store.PlanPaid}, key: store.Key{},
		costs: []string{"100", "200"}, charged: []string{"100", "200"}, short: []string{"0", "0"}},
}

// No settlement takes a key's spend past its caps: the charge is what is
// left of the least of them (and of the account's bounds), the rest the
// entry's shortfall; the key's spend counts what was charged, and the
// account's other key is not bounded by them.
func testKeyFloor(t *testing.T, st store.Store) {
	ctx := context.Background()
	at := time.Date(2026, 5, 14, 12, 0, 0, 0, time.UTC)
	for n, c := range keyFloorCases {
		id := fmt.Sprint("kfloor", n)
		c.acc.ID = id
		mustAccount(t, st, c.acc)
		c.key.ID, c.key.AccountID, c.key.Hash, c.key.Name = id+"-key", id, id+"-hash", c.name
		if err := st.CreateKey(ctx, c.key); err != nil {
			t.Fatal(err)
		}
		var charged pricing.Money
		for i, cost := range c.costs {
			e := store.Entry{RequestID: fmt.Sprint(id, "-", i), AccountID: id, KeyID: c.key.ID, Cost: usd(cost), Time: at.Add(time.Duration(i) * time.Second)}
			if ok, err := st.Settle(ctx, &e); !ok || err != nil {
				t.Fatalf("%s: charge %d: %v %v", c.name, i, ok, err)
			}
			if e.Cost != usd(c.charged[i]) || e.Shortfall != usd(c.short[i]) {
				t.Errorf("%s: charge %d of %s: charged %s, short %s; want %s and %s", c.name, i, cost, e.Cost, e.Shortfall, c.charged[i], c.short[i])
			}
			charged += e.Cost
		}
		entries, err := st.Entries(ctx, id, 100)
		if err != nil || len(entries) != len(c.costs) {
			t.Fatalf("%s: entries %v %v", c.name, entries, err)
		}
		for i, e := range entries {
			k := len(c.costs) - 1 - i // newest first
			if e.Cost != usd(c.charged[k]) || e.Shortfall != usd(c.short[k]) || e.KeyID != c.key.ID {
				t.Errorf("%s: ledger %s: cost %s shortfall %s key %q, want %s and %s", c.name, e.RequestID, e.Cost, e.Shortfall, e.KeyID, c.charged[k], c.short[k])
			}
		}
		if sp, err := st.KeySpend(ctx, c.key.ID, at.Add(time.Minute)); err != nil || sp != (store.Spend{Today: charged, Month: charged, Total: charged}) {
			t.Errorf("%s: key spend %+v (%v), want %s in each", c.name, sp, err, charged)
		}
	}
	// Two keys of one account: the capped one's caps bound it alone.
	mustAccount(t, st, store.Account{ID: "two", Plan: store.PlanPaid})
	for _, k := range []store.Key{{ID: "two-capped", AccountID: "two", Hash: "two-h1", TotalCap: ptr(usd("1"))}, {ID: "two-free", AccountID: "two", Hash: "two-h2"}} {
		if err := st.CreateKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	settle := func(req, key, cost string) store.Entry {
		t.Helper()
		e := store.Entry{RequestID: req, AccountID: "two", KeyID: key, Cost: usd(cost), Time: at}
		if ok, err := st.Settle(ctx, &e); !ok || err != nil {
			t.Fatalf("%s: %v %v", req, ok, err)
		}
		return e
	}
	if e := settle("t1", "two-free", "5"); e.Cost != usd("5") || e.Shortfall != 0 {
		t.Errorf("the uncapped key: charged %s short %s", e.Cost, e.Shortfall)
	}
	if e := settle("t2", "two-capped", "1.5"); e.Cost != usd("1") || e.Shortfall != usd("0.5") {
		t.Errorf("the capped key: charged %s short %s", e.Cost, e.Shortfall)
	}
	if e := settle("t3", "two-free", "5"); e.Cost != usd("5") || e.Shortfall != 0 {
		t.Errorf("the uncapped key after the other's cap: charged %s short %s", e.Cost, e.Shortfall)
	}
	// A raised cap lets the key spend again, up to it.
	if _, err := st.UpdateKey(ctx, "two-capped", func(k *store.Key) error { k.TotalCap = ptr(usd("1.25")); return nil }); err != nil {
		t.Fatal(err)
	}
	if e := settle("t4", "two-capped", "1"); e.Cost != usd("0.25") || e.Shortfall != usd("0.75") {
		t.Errorf("after the raise: charged %s short %s", e.Cost, e.Shortfall)
	}
	// A revoked key's caps still hold what is settled with it.
	if err := st.DeleteKey(ctx, "two-capped"); err != nil {
		t.Fatal(err)
	}
	if e := settle("t5", "two-capped", "1"); e.Cost != 0 || e.Shortfall != usd("1") {
		t.Errorf("after the revocation: charged %s short %s", e.Cost, e.Shortfall)
	}
	// So do the caps of a key revoked before any call settled with it.
	if err := st.CreateKey(ctx, store.Key{ID: "two-late", AccountID: "two", Hash: "two-h3", TotalCap: ptr(usd("0.5"))}); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteKey(ctx, "two-late"); err != nil {
		t.Fatal(err)
	}
	if e := settle("t6", "two-late", "1"); e.Cost != usd("0.5") || e.Shortfall != usd("0.5") {
		t.Errorf("a key revoked before its first charge: charged %s short %s", e.Cost, e.Shortfall)
	}
	if entries, err := st.Entries(ctx, "two", 1); err != nil || len(entries) != 1 || entries[0].RequestID != "t6" ||
		entries[0].Cost != usd("0.5") || entries[0].Shortfall != usd("0.5") {
		t.Errorf("the ledger of t6: %+v, %v", entries, err)
	}
	if sp, _ := st.KeySpend(ctx, "two-capped", at); sp.Total != usd("1.25") {
		t.Errorf("capped key spend %+v", sp)
	}
	if sp, _ := st.Spend(ctx, "two", at); sp.Total != usd("11.75") {
		t.Errorf("account spend %+v", sp)
	}
	if problems, err := st.CheckJournal(ctx); err != nil || len(problems) > 0 {
		t.Fatalf("journal check: %+v %v", problems, err)
	}
}

// Concurrent charges made with one capped key stop at its cap exactly,
// while the account's other key is not bounded by it: what each charged
// and fell short adds up to what each cost, and the ledger, the answers
// and KeySpend agree.
func testKeyFloorConcurrent(t *testing.T, st store.Store) {
	ctx := context.Background()
	mustAccount(t, st, store.Account{ID: "many", Plan: store.PlanPaid})
	for _, k := range []store.Key{{ID: "capped", AccountID: "many", Hash: "hc", DailyCap: ptr(usd("1.00"))}, {ID: "free", AccountID: "many", Hash: "hf"}} {
		if err := st.CreateKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	const n = 40
	at := time.Date(2026, 5, 14, 12, 0, 0, 0, time.UTC)
	cost := usd("0.07") // 2.80 asked of 1.00
	var mu sync.Mutex
	var charged, short pricing.Money
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			e := store.Entry{RequestID: fmt.Sprint("capped-", i), AccountID: "many", KeyID: "capped", Cost: cost, Time: at}
			ok, err := st.Settle(ctx, &e)
			if !ok || err != nil {
				t.Errorf("settle %d: %v %v", i, ok, err)
				return
			}
			if e.Cost+e.Shortfall != cost || e.Cost < 0 || e.Shortfall < 0 {
				t.Errorf("settle %d: charged %s short %s of %s", i, e.Cost, e.Shortfall, cost)
			}
			mu.Lock()
			charged += e.Cost
			short += e.Shortfall
			mu.Unlock()
		})
		wg.Go(func() {
			e := store.Entry{RequestID: fmt.Sprint("free-", i), AccountID: "many", KeyID: "free", Cost: cost, Time: at}
			if ok, err := st.Settle(ctx, &e); !ok || err != nil || e.Cost != cost || e.Shortfall != 0 {
				t.Errorf("settle free %d: %v %v, charged %s short %s", i, ok, err, e.Cost, e.Shortfall)
			}
		})
	}
	wg.Wait()
	if charged != usd("1.00") || short != usd("1.80") {
		t.Fatalf("charged %s, short %s; want 1.00 and 1.80", charged, short)
	}
	entries, _ := st.Entries(ctx, "many", 1000)
	ledger := map[string]pricing.Money{}
	var ledgerShort pricing.Money
	for _, e := range entries {
		ledger[e.KeyID] += e.Cost
		ledgerShort += e.Shortfall
	}
	if ledger["capped"] != charged || ledgerShort != short || ledger["free"] != n*cost {
		t.Fatalf("ledger %v short %s, answers %s and %s", ledger, ledgerShort, charged, short)
	}
	for key, want := range ledger {
		if sp, err := st.KeySpend(ctx, key, at); err != nil || sp != (store.Spend{Today: want, Month: want, Total: want}) {
			t.Fatalf("KeySpend(%s) = %+v, %v; the ledger says %s", key, sp, err, want)
		}
	}
}

package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// floorCase is one account whose charges pass what it can pay.
type floorCase struct {
	name string
	acc  store.Account
	// free is the month's free credit; limits the policy's.
	free   pricing.Money
	limits store.Limits
	// costs are charged in order; charged and short are what each must
	// record.
	costs, charged, short []string
	// balance is the balance at the end ("" when billed afterwards).
	balance string
}

var floorCases = []floorCase{
	{name: "balance", acc: store.Account{Plan: store.PlanPaid, Balance: ptr(usd("0.10"))},
		costs: []string{"0.04", "0.15", "0.01"}, charged: []string{"0.04", "0.06", "0"}, short: []string{"0", "0.09", "0.01"}, balance: "0"},
	{name: "free credit then balance", acc: store.Account{Plan: store.PlanPaid, Balance: ptr(usd("0.10"))}, free: usd("0.50"),
		costs: []string{"0.30", "1.00"}, charged: []string{"0.30", "0.30"}, short: []string{"0", "0.70"}, balance: "0"},
	{name: "daily cap", acc: store.Account{Plan: store.PlanPaid, DailyCap: ptr(usd("1"))},
		costs: []string{"0.90", "0.30", "0.05"}, charged: []string{"0.90", "0.10", "0"}, short: []string{"0", "0.20", "0.05"}},
	{name: "monthly cap under the balance", acc: store.Account{Plan: store.PlanPaid, Balance: ptr(usd("5")), MonthlyCap: ptr(usd("2"))},
		costs: []string{"1.50", "1.00"}, charged: []string{"1.50", "0.50"}, short: []string{"0", "0.50"}, balance: "3"},
	{name: "free chat stop", acc: store.Account{Plan: store.PlanFree}, limits: store.Limits{Total: usd("1")},
		costs: []string{"0.95", "0.20"}, charged: []string{"0.95", "0.05"}, short: []string{"0", "0.15"}},
	{name: "ceiling", acc: store.Account{Plan: store.PlanPaid}, limits: store.Limits{Month: usd("1")},
		costs: []string{"0.60", "0.60"}, charged: []string{"0.60", "0.40"}, short: []string{"0", "0.20"}},
	{name: "within every bound", acc: store.Account{Plan: store.PlanPaid, Balance: ptr(usd("1")), DailyCap: ptr(usd("1"))},
		costs: []string{"0.25", "0.75"}, charged: []string{"0.25", "0.75"}, short: []string{"0", "0"}, balance: "0"},
}

// No settlement takes a balance below zero, the free credit past its end
// or spend past a cap or a limit: the charge is what is left, the rest the
// entry's shortfall, in the ledger as in the answer, and the journal adds
// up.
func testFloor(t *testing.T, st store.Store) {
	ctx := context.Background()
	at := time.Date(2026, 5, 14, 12, 0, 0, 0, time.UTC)
	for n, c := range floorCases {
		id := fmt.Sprint("floor", n)
		c.acc.ID = id
		mustAccount(t, st, c.acc)
		for i, cost := range c.costs {
			e := store.Entry{RequestID: fmt.Sprint(id, "-", i), AccountID: id, Cost: usd(cost), Time: at.Add(time.Duration(i) * time.Second),
				FreeMonthlyCredit: c.free, Limits: c.limits}
			if ok, err := st.Settle(ctx, &e); !ok || err != nil {
				t.Fatalf("%s: charge %d: %v %v", c.name, i, ok, err)
			}
			if e.Cost != usd(c.charged[i]) || e.Shortfall != usd(c.short[i]) {
				t.Errorf("%s: charge %d of %s: charged %s, short %s; want %s and %s", c.name, i, cost, e.Cost, e.Shortfall, c.charged[i], c.short[i])
			}
		}
		entries, err := st.Entries(ctx, id, 100)
		if err != nil || len(entries) != len(c.costs) {
			t.Fatalf("%s: entries %v %v", c.name, entries, err)
		}
		var charged pricing.Money
		for i, e := range entries {
			k := len(c.costs) - 1 - i // newest first
			if e.Cost != usd(c.charged[k]) || e.Shortfall != usd(c.short[k]) {
				t.Errorf("%s: ledger %s: cost %s shortfall %s, want %s and %s", c.name, e.RequestID, e.Cost, e.Shortfall, c.charged[k], c.short[k])
			}
			charged += e.Cost
		}
		if sp, _ := st.Spend(ctx, id, at.Add(time.Minute)); sp.Total != charged || sp.Today != charged || sp.Month != charged {
			t.Errorf("%s: spend %+v, want %s in each", c.name, sp, charged)
		}
		a, err := st.Account(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case c.balance == "" && a.Balance != nil:
			t.Errorf("%s: a balance %s appeared", c.name, a.Balance)
		case c.balance != "" && (a.Balance == nil || *a.Balance != usd(c.balance)):
			t.Errorf("%s: balance %v, want %s", c.name, a.Balance, c.balance)
		}
	}
	if problems, err := st.CheckJournal(ctx); err != nil || len(problems) > 0 {
		t.Fatalf("journal check: %+v %v", problems, err)
	}
}

// Concurrent charges that together pass the balance stop it at zero
// exactly: what each charged and fell short adds up to what each cost.
func testFloorConcurrent(t *testing.T, st store.Store) {
	ctx := context.Background()
	mustAccount(t, st, store.Account{ID: "many", Plan: store.PlanPaid, Balance: ptr(usd("1.00"))})
	floorConcurrent(t, st, "many")
	a, _ := st.Account(ctx, "many")
	if *a.Balance != 0 {
		t.Fatalf("balance %s, want 0", a.Balance)
	}
	if problems, err := st.CheckJournal(ctx); err != nil || len(problems) > 0 {
		t.Fatalf("journal check: %+v %v", problems, err)
	}
}

// Concurrent charges that together pass the daily cap of an account billed
// afterwards (nothing in its own row moves) stop at the cap exactly.
func testFloorCapConcurrent(t *testing.T, st store.Store) {
	mustAccount(t, st, store.Account{ID: "capped", Plan: store.PlanPaid, DailyCap: ptr(usd("1.00"))})
	floorConcurrent(t, st, "capped")
	if sp, err := st.Spend(context.Background(), "capped", concurrentAt); err != nil || sp.Today != usd("1.00") {
		t.Fatalf("spend %+v, %v; want 1.00 today", sp, err)
	}
}

// concurrentAt is when floorConcurrent's charges are made.
var concurrentAt = time.Date(2026, 5, 14, 12, 0, 0, 0, time.UTC)

// floorConcurrent settles 40 charges of 0.07 on account at once, which can
// pay 1.00 of them: the answers and the ledger must say that 1.00 was
// charged and 1.80 fell short.
func floorConcurrent(t *testing.T, st store.Store, account string) {
	t.Helper()
	ctx := context.Background()
	const n = 40
	cost := usd("0.07") // 2.80 asked of 1.00
	var mu sync.Mutex
	var charged, short pricing.Money
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			e := store.Entry{RequestID: fmt.Sprint(account, "-", i), AccountID: account, Cost: cost, Time: concurrentAt}
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
	}
	wg.Wait()
	if charged != usd("1.00") || short != usd("1.80") {
		t.Fatalf("charged %s, short %s; want 1.00 and 1.80", charged, short)
	}
	entries, _ := st.Entries(ctx, account, 1000)
	var ledger, ledgerShort pricing.Money
	for _, e := range entries {
		ledger += e.Cost
		ledgerShort += e.Shortfall
	}
	if ledger != charged || ledgerShort != short {
		t.Fatalf("ledger %s short %s, answers %s and %s", ledger, ledgerShort, charged, short)
	}
}

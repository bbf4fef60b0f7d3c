package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// BatchStore is a backend that settles batches in one transaction.
type BatchStore interface {
	store.Store
	store.BatchSettler
}

// BatchConformance checks SettleBatch against the backend open returns (a
// fresh, empty store each call): each entry is charged once, whatever
// else its batch holds, with the totals, balance, ledger and journal of
// the charged ones exactly. The batches are longer than any chunk a
// backend may insert at once, and shorter, with repeats of the ledger and
// of the batch itself in them, and without.
func BatchConformance(t *testing.T, open func(t *testing.T) BatchStore) {
	ctx := context.Background()
	st := open(t)
	mustAccount(t, st, store.Account{ID: "pre", Plan: store.PlanPaid, Balance: ptr(usd("100"))})
	mustAccount(t, st, store.Account{ID: "post", Plan: store.PlanPaid})
	if ok, err := st.Settle(ctx, &store.Entry{RequestID: "old", AccountID: "post", Cost: usd("1")}); !ok || err != nil {
		t.Fatalf("settle: %v %v", ok, err)
	}
	want := map[string]pricing.Money{"post": usd("1")}
	rows := map[string]int{"post": 1}
	batch := func(prefix string, n int, repeats map[int]string) {
		t.Helper()
		entries := make([]store.Entry, n)
		for i := range entries {
			id := fmt.Sprintf("%s%02d", prefix, i)
			if r, ok := repeats[i]; ok {
				id = r
			}
			acc := []string{"pre", "post"}[i%2]
			entries[i] = store.Entry{RequestID: id, AccountID: acc, Endpoint: "chat", Model: []string{"m", "n"}[i%5/4], Units: int64(3 * i), Unit: "token",
				KeyID: fmt.Sprint("k", i%3), InputTokens: int64(2 * i), OutputTokens: int64(i), Cost: pricing.Money(i+1) * usd("0.01")}
		}
		charged, err := st.SettleBatch(ctx, entries)
		if err != nil || len(charged) != n {
			t.Fatalf("SettleBatch: %d answers, %v", len(charged), err)
		}
		for i, e := range entries {
			_, repeat := repeats[i]
			if charged[i] == repeat {
				t.Errorf("entry %d (%s): charged %v, want %v", i, e.RequestID, charged[i], !repeat)
			}
			if charged[i] {
				want[e.AccountID] += e.Cost
				rows[e.AccountID]++
			}
		}
	}
	// Repeats (each of its own account's id: the two accounts take turns)
	// of the ledger, of the entry before last in the batch, and of an
	// earlier part of the batch, spread over its first, second and last
	// part.
	batch("a", 70, map[int]string{5: "old", 41: "a39", 66: "a10"})
	batch("b", 64, nil) // no repeat
	batch("c", 3, map[int]string{1: "b07"})
	// Short batches: none repeated, a repeat at the end, one inside.
	batch("d", 7, nil)
	batch("e", 5, map[int]string{4: "d06"})
	batch("f", 15, map[int]string{9: "f03"})

	for _, acc := range []string{"pre", "post"} {
		entries, err := st.Entries(ctx, acc, 1000)
		if err != nil || len(entries) != rows[acc] {
			t.Fatalf("%s: %d ledger rows, %v; want %d", acc, len(entries), err, rows[acc])
		}
		var sum pricing.Money
		for _, e := range entries {
			sum += e.Cost
		}
		sp, err := st.Spend(ctx, acc, entries[0].Time)
		if err != nil || sp.Total != want[acc] || sum != want[acc] {
			t.Fatalf("%s: spend %v, ledger %v (%v); want %v", acc, sp.Total, sum, err, want[acc])
		}
		// The daily usage sums what the ledger holds, per key and model.
		day, _ := store.DayOf(entries[0].Time)
		q := store.UsageQuery{AccountID: acc, From: day.AddDate(0, 0, -1), To: day.AddDate(0, 0, 2), GroupBy: store.GroupKey | store.GroupModel | store.GroupDay}
		usage, err := st.Usage(ctx, q)
		sortUsage(usage)
		if exp := expectUsage(entries, q); err != nil || fmt.Sprint(usage) != fmt.Sprint(exp) {
			t.Fatalf("%s: usage %+v (%v), want %+v", acc, usage, err, exp)
		}
	}
	a, err := st.Account(ctx, "pre")
	if err != nil || *a.Balance != usd("100")-want["pre"] {
		t.Fatalf("pre: balance %v (%v), want %v", a.Balance, err, usd("100")-want["pre"])
	}
	if sum, entries := sumJournal(t, st, "pre"); sum != *a.Balance || len(entries) != rows["pre"]+1 {
		t.Fatalf("pre: journal sums to %v in %d entries; want %v in %d (the set and each charge)", sum, len(entries), *a.Balance, rows["pre"]+1)
	}
	batchKeyCaps(t, open(t))
	batchOrgCaps(t, open(t))
}

// batchKeyCaps: one batch holding charges made with a capped key, over two
// days, among another key's, charges each at most what the key's caps
// leave after the batch's charges before it.
func batchKeyCaps(t *testing.T, st BatchStore) {
	ctx := context.Background()
	mustAccount(t, st, store.Account{ID: "acc", Plan: store.PlanPaid})
	for _, k := range []store.Key{{ID: "capped", AccountID: "acc", Hash: "h1", DailyCap: ptr(usd("0.08")), TotalCap: ptr(usd("0.10"))},
		{ID: "free", AccountID: "acc", Hash: "h2"}} {
		if err := st.CreateKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	d1 := time.Date(2026, 5, 14, 12, 0, 0, 0, time.UTC)
	d2 := d1.AddDate(0, 0, 1)
	type charge struct {
		key  string
		at   time.Time
		cost string
		// charged and short are what it must record.
		charged, short string
	}
	charges := []charge{
		{"capped", d1, "0.05", "0.05", "0"},
		{"free", d1, "0.05", "0.05", "0"},
		{"capped", d1, "0.05", "0.03", "0.02"}, // the daily cap
		{"capped", d1, "0.01", "0", "0.01"},
		{"capped", d2, "0.05", "0.02", "0.03"}, // a new day: the total cap
		{"free", d2, "1", "1", "0"},
		{"capped", d2, "0.01", "0", "0.01"},
	}
	entries := make([]store.Entry, len(charges))
	for i, c := range charges {
		entries[i] = store.Entry{RequestID: fmt.Sprint("kc", i), AccountID: "acc", KeyID: c.key, Cost: usd(c.cost), Time: c.at.Add(time.Duration(i) * time.Second)}
	}
	charged, err := st.SettleBatch(ctx, entries)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range charges {
		if !charged[i] || entries[i].Cost != usd(c.charged) || entries[i].Shortfall != usd(c.short) {
			t.Errorf("charge %d (%s %s): %v, charged %s short %s; want %s and %s", i, c.key, c.cost, charged[i], entries[i].Cost, entries[i].Shortfall, c.charged, c.short)
		}
	}
	for _, w := range []struct {
		key string
		at  time.Time
		sp  store.Spend
	}{
		{"capped", d1, store.Spend{Today: usd("0.08"), Month: usd("0.10"), Total: usd("0.10")}},
		{"capped", d2, store.Spend{Today: usd("0.02"), Month: usd("0.10"), Total: usd("0.10")}},
		{"free", d2, store.Spend{Today: usd("1"), Month: usd("1.05"), Total: usd("1.05")}},
	} {
		if sp, err := st.KeySpend(ctx, w.key, w.at); err != nil || sp != w.sp {
			t.Errorf("KeySpend(%s) at %s = %+v, %v; want %+v", w.key, w.at, sp, err, w.sp)
		}
	}
}

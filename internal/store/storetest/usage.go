package storetest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/store"
)

// usageEntries are charges over three UTC days, two accounts, three keys
// and two models; some share every grouped column, one sits on the last
// nanosecond of a day.
func usageEntries() []store.Entry {
	d1 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	d2, d3 := d1.AddDate(0, 0, 1), d1.AddDate(0, 0, 2)
	e := func(id, acc, key, model string, at time.Time, in, out int64, cost string) store.Entry {
		return store.Entry{RequestID: id, AccountID: acc, KeyID: key, Model: model, Endpoint: "chat", Unit: "token",
			Units: in + out, InputTokens: in, OutputTokens: out, Cost: usd(cost), Time: at}
	}
	return []store.Entry{
		e("u1", "a", "k1", "m1", d1.Add(time.Hour), 100, 10, "0.000123456"),
		e("u2", "a", "k1", "m1", d1.Add(2*time.Hour), 200, 20, "0.25"),
		e("u3", "a", "k2", "m1", d1.Add(3*time.Hour), 300, 30, "1.5"),
		e("u4", "a", "k1", "m2", d2.Add(-time.Nanosecond), 400, 40, "0.000000001"),
		e("u5", "a", "k1", "m1", d2, 500, 50, "2"),
		e("u6", "b", "k3", "m1", d1.Add(time.Hour), 600, 60, "3.333333333"),
		e("u7", "b", "k3", "m2", d3.Add(time.Hour), 700, 0, "0.1"),
		{RequestID: "u8", AccountID: "b", KeyID: "k3", Model: "fetch", Endpoint: "fetch", Unit: "page", Units: 1, Cost: usd("0.002"), Time: d2.Add(time.Minute)},
	}
}

// expectUsage sums entries as q asks, the way a reader of the ledger
// would.
func expectUsage(entries []store.Entry, q store.UsageQuery) []store.UsageRow {
	sums := map[store.UsageRow]*store.UsageRow{}
	var out []store.UsageRow
	for _, e := range entries {
		if (q.AccountID != "" && e.AccountID != q.AccountID) || e.Time.Before(q.From) || !e.Time.Before(q.To) {
			continue
		}
		var k store.UsageRow
		if q.GroupBy&store.GroupDay != 0 {
			k.Day, _ = store.DayOf(e.Time)
		}
		if q.GroupBy&store.GroupModel != 0 {
			k.Model = e.Model
		}
		if q.GroupBy&store.GroupAccount != 0 {
			k.AccountID = e.AccountID
		}
		if q.GroupBy&store.GroupKey != 0 {
			k.KeyID = e.KeyID
		}
		r := sums[k]
		if r == nil {
			r = &store.UsageRow{Day: k.Day, Model: k.Model, AccountID: k.AccountID, KeyID: k.KeyID}
			sums[k] = r
		}
		r.Requests++
		r.InputTokens += e.InputTokens
		r.OutputTokens += e.OutputTokens
		r.Cost += e.Cost
	}
	for _, r := range sums {
		out = append(out, *r)
	}
	sortUsage(out)
	return out
}

func sortUsage(rows []store.UsageRow) {
	slices.SortFunc(rows, func(a, b store.UsageRow) int {
		return cmp.Or(a.Day.Compare(b.Day), cmp.Compare(a.Model, b.Model), cmp.Compare(a.AccountID, b.AccountID), cmp.Compare(a.KeyID, b.KeyID), cmp.Compare(a.Org, b.Org))
	})
}

// testUsage: the usage sums equal the ledger's charges for every grouping,
// account and range, and a repeated settlement adds nothing
// (BatchConformance checks batches).
func testUsage(t *testing.T, st store.Store) {
	ctx := context.Background()
	mustAccount(t, st, store.Account{ID: "a", Plan: store.PlanPaid, Balance: ptr(usd("100"))})
	mustAccount(t, st, store.Account{ID: "b", Plan: store.PlanPaid})
	entries := usageEntries()
	for _, e := range entries {
		if ok, err := st.Settle(ctx, &e); !ok || err != nil {
			t.Fatalf("settle %s: %v %v", e.RequestID, ok, err)
		}
	}
	if ok, err := st.Settle(ctx, &entries[0]); ok || err != nil {
		t.Fatalf("settle %s again: %v %v; want false, nil", entries[0].RequestID, ok, err)
	}
	got, err := st.Entries(ctx, "a", 1)
	if err != nil || len(got) != 1 || got[0].KeyID != "k1" || got[0].InputTokens != 500 || got[0].OutputTokens != 50 {
		t.Fatalf("newest entry of a: %+v, %v; want key k1 with 500 and 50 tokens", got, err)
	}
	d1 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	ranges := [][2]time.Time{{d1, d1.AddDate(0, 0, 3)}, {d1, d1.AddDate(0, 0, 1)}, {d1.AddDate(0, 0, 1), d1.AddDate(0, 0, 2)},
		{d1.AddDate(0, 0, 3), d1.AddDate(0, 0, 30)}}
	for g := range store.UsageGroup(16) {
		for _, acc := range []string{"", "a", "b", "nobody"} {
			for _, r := range ranges {
				q := store.UsageQuery{AccountID: acc, From: r[0], To: r[1], GroupBy: g}
				rows, err := st.Usage(ctx, q)
				if err != nil {
					t.Fatalf("usage %+v: %v", q, err)
				}
				if rows == nil {
					t.Fatalf("usage %+v: nil rows, want a list", q)
				}
				sortUsage(rows)
				want := expectUsage(entries, q)
				if fmt.Sprint(rows) != fmt.Sprint(want) {
					t.Fatalf("usage %+v:\n got %+v\nwant %+v", q, rows, want)
				}
			}
		}
	}
}

// testListAccounts: accounts come in the byte order of their ids, a page
// at a time after a given id.
func testListAccounts(t *testing.T, st store.Store) {
	ctx := context.Background()
	for _, id := range []string{"b", "a", "B", "a-1", "a.2", "a_3"} {
		mustAccount(t, st, store.Account{ID: id, Plan: store.PlanFree})
	}
	var ids []string
	after := ""
	for {
		page, err := st.ListAccounts(ctx, after, 4)
		if err != nil {
			t.Fatal(err)
		}
		if page == nil {
			t.Fatal("nil page, want a list")
		}
		for _, a := range page {
			ids = append(ids, a.ID)
			if a.Plan != store.PlanFree {
				t.Fatalf("account %+v: plan lost", a)
			}
		}
		if len(page) < 4 {
			break
		}
		after = page[len(page)-1].ID
	}
	if want := []string{"B", "a", "a-1", "a.2", "a_3", "b"}; !slices.Equal(ids, want) {
		t.Fatalf("accounts %v, want %v", ids, want)
	}
}

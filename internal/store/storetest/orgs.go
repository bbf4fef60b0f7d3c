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

// showOrg prints an organization's id, name and caps ("-" for none).
func showOrg(o store.Org) string {
	show := func(m *pricing.Money) string {
		if m == nil {
			return "-"
		}
		return m.String()
	}
	return o.ID + ":" + o.Name + ":" + show(o.DailyCap) + "/" + show(o.MonthlyCap)
}

// Organizations are created, read, listed by id, changed and deleted; an
// account joins one and leaves it; an account naming none that exists is
// refused, and an organization that accounts belong to is not deleted.
func testOrgs(t *testing.T, st store.Store) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, o := range []store.Org{
		{ID: "zeta", Name: "Zeta", CreatedAt: t0},
		{ID: "acme", Name: "Acme", DailyCap: ptr(usd("5")), MonthlyCap: ptr(usd("100")), CreatedAt: t0},
		{ID: "Bee", CreatedAt: t0},
	} {
		if err := st.CreateOrg(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.CreateOrg(ctx, store.Org{ID: "acme"}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("a second acme: %v", err)
	}
	o, err := st.Org(ctx, "acme")
	if err != nil || showOrg(o) != "acme:Acme:5.00/100.00" || !o.CreatedAt.Equal(t0) {
		t.Fatalf("Org(acme) = %s %v, %v", showOrg(o), o.CreatedAt, err)
	}
	if _, err := st.Org(ctx, "nobody"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Org(nobody): %v", err)
	}
	list, err := st.ListOrgs(ctx)
	if err != nil || len(list) != 3 || showOrg(list[0]) != "Bee::-/-" || showOrg(list[1]) != "acme:Acme:5.00/100.00" || showOrg(list[2]) != "zeta:Zeta:-/-" {
		t.Fatalf("ListOrgs = %v, %v", list, err)
	}
	up, err := st.UpdateOrg(ctx, "acme", func(o *store.Org) error {
		o.ID, o.CreatedAt = "other", t0.Add(time.Hour)
		o.Name, o.DailyCap, o.MonthlyCap = "Acme Inc", nil, ptr(usd("50"))
		return nil
	})
	if err != nil || showOrg(up) != "acme:Acme Inc:-/50.00" || !up.CreatedAt.Equal(t0) {
		t.Fatalf("UpdateOrg = %s, %v", showOrg(up), err)
	}
	if o, _ := st.Org(ctx, "acme"); showOrg(o) != "acme:Acme Inc:-/50.00" {
		t.Fatalf("after the update: %s", showOrg(o))
	}
	boom := errors.New("boom")
	if _, err := st.UpdateOrg(ctx, "acme", func(o *store.Org) error { o.Name = "lost"; return boom }); !errors.Is(err, boom) {
		t.Fatalf("aborted update: %v", err)
	}
	if _, err := st.UpdateOrg(ctx, "nobody", func(*store.Org) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update of an unknown org: %v", err)
	}

	// Accounts join, move and leave.
	mustAccount(t, st, store.Account{ID: "a1", Plan: store.PlanPaid, Org: "acme"})
	mustAccount(t, st, store.Account{ID: "a2", Plan: store.PlanPaid})
	if a, err := st.Account(ctx, "a1"); err != nil || a.Org != "acme" {
		t.Fatalf("Account(a1) = %+v, %v", a, err)
	}
	if err := st.CreateAccount(ctx, store.Account{ID: "a3", Plan: store.PlanPaid, Org: "nobody"}); !errors.Is(err, store.ErrNotFound) || !errors.Is(err, store.ErrNoOrg) {
		t.Fatalf("an account of an unknown org: %v", err)
	}
	if _, err := st.Account(ctx, "a3"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused account was stored: %v", err)
	}
	if a, err := st.UpdateAccount(ctx, "a2", func(a *store.Account) error { a.Org = "zeta"; return nil }); err != nil || a.Org != "zeta" {
		t.Fatalf("a2 joins zeta: %+v, %v", a, err)
	}
	if _, err := st.UpdateAccount(ctx, "a2", func(a *store.Account) error { a.Org = "nobody"; return nil }); !errors.Is(err, store.ErrNoOrg) {
		t.Fatalf("a2 joins an unknown org: %v", err)
	}
	if a, _ := st.Account(ctx, "a2"); a.Org != "zeta" {
		t.Fatalf("after the refused move: %+v", a)
	}
	if list, err := st.ListAccounts(ctx, "", 10); err != nil || len(list) != 2 || list[0].Org != "acme" || list[1].Org != "zeta" {
		t.Fatalf("ListAccounts = %+v, %v", list, err)
	}
	if err := st.DeleteOrg(ctx, "zeta"); !errors.Is(err, store.ErrInUse) {
		t.Fatalf("deleting an org in use: %v", err)
	}
	if a, err := st.UpdateAccount(ctx, "a2", func(a *store.Account) error { a.Org = ""; return nil }); err != nil || a.Org != "" {
		t.Fatalf("a2 leaves zeta: %+v, %v", a, err)
	}
	if err := st.DeleteOrg(ctx, "zeta"); err != nil {
		t.Fatalf("deleting an org no longer in use: %v", err)
	}
	if _, err := st.Org(ctx, "zeta"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Org(zeta) after its deletion: %v", err)
	}
	if err := st.DeleteOrg(ctx, "zeta"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleting it again: %v", err)
	}
	if a, _ := st.Account(ctx, "a2"); a.Org != "" {
		t.Fatalf("a2 after leaving: %+v", a)
	}
}

// OrgSpend sums the entries of an organization's accounts over the day,
// the month and all time, each counted in the organization its account
// belonged to when it settled; an unknown organization has spent nothing.
func testOrgSpend(t *testing.T, st store.Store) {
	ctx := context.Background()
	for _, id := range []string{"o1", "o2"} {
		if err := st.CreateOrg(ctx, store.Org{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	mustAccount(t, st, store.Account{ID: "a", Plan: store.PlanPaid, Org: "o1"})
	mustAccount(t, st, store.Account{ID: "b", Plan: store.PlanPaid, Org: "o1"})
	mustAccount(t, st, store.Account{ID: "c", Plan: store.PlanPaid})
	may1 := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	may9 := time.Date(2026, 5, 9, 10, 0, 0, 0, time.UTC)
	apr30 := time.Date(2026, 4, 30, 23, 0, 0, 0, time.UTC)
	settle := func(req, account, cost string, at time.Time) {
		t.Helper()
		if ok, err := st.Settle(ctx, &store.Entry{RequestID: req, AccountID: account, Cost: usd(cost), Time: at}); !ok || err != nil {
			t.Fatalf("%s: %v %v", req, ok, err)
		}
	}
	settle("r1", "a", "1", apr30)
	settle("r2", "b", "2", may1)
	settle("r3", "a", "4", may9)
	settle("r4", "b", "8", may9)
	settle("r5", "c", "16", may9) // no org
	if _, err := st.UpdateAccount(ctx, "b", func(a *store.Account) error { a.Org = "o2"; return nil }); err != nil {
		t.Fatal(err)
	}
	settle("r6", "b", "32", may9) // o2's now
	if _, err := st.UpdateAccount(ctx, "c", func(a *store.Account) error { a.Org = "o1"; return nil }); err != nil {
		t.Fatal(err)
	}
	settle("r7", "c", "64", may9) // o1's from now on
	for _, c := range []struct {
		org  string
		at   time.Time
		want store.Spend
	}{
		{"o1", may9, store.Spend{Today: usd("76"), Month: usd("78"), Total: usd("79")}},
		{"o1", may9.Add(24 * time.Hour), store.Spend{Month: usd("78"), Total: usd("79")}},
		{"o2", may9, store.Spend{Today: usd("32"), Month: usd("32"), Total: usd("32")}},
		{"nobody", may9, store.Spend{}},
	} {
		if sp, err := st.OrgSpend(ctx, c.org, c.at); err != nil || sp != c.want {
			t.Errorf("OrgSpend(%s, %s) = %+v, %v; want %+v", c.org, c.at.Format(time.DateOnly), sp, err, c.want)
		}
	}
	// Usage figures name the organization alike, as a filter and a
	// grouping.
	from, to := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		q    store.UsageQuery
		want string
	}{
		{store.UsageQuery{OrgID: "o1", GroupBy: store.GroupAccount}, "[a/:2:5.00 b/:2:10.00 c/:1:64.00]"},
		{store.UsageQuery{GroupBy: store.GroupOrg}, "[/:1:16.00 /o1:5:79.00 /o2:1:32.00]"},
		{store.UsageQuery{AccountID: "b", GroupBy: store.GroupOrg}, "[/o1:2:10.00 /o2:1:32.00]"},
		{store.UsageQuery{AccountID: "b", OrgID: "o2"}, "[/:1:32.00]"},
		{store.UsageQuery{OrgID: "nobody"}, "[]"},
	} {
		c.q.From, c.q.To = from, to
		rows, err := st.Usage(ctx, c.q)
		sortUsage(rows)
		got := []string{}
		for _, r := range rows {
			got = append(got, fmt.Sprintf("%s/%s:%d:%s", r.AccountID, r.Org, r.Requests, r.Cost))
		}
		if err != nil || fmt.Sprint(got) != c.want {
			t.Errorf("Usage(%+v) = %v, %v; want %s", c.q, got, err, c.want)
		}
	}
}

// No settlement takes an organization's summed spend past its caps: a
// charge of any of its accounts is what is left of the least of them (and
// of the account's own bounds), the rest its shortfall; an account outside
// it is not bounded by them.
func testOrgFloor(t *testing.T, st store.Store) {
	ctx := context.Background()
	if err := st.CreateOrg(ctx, store.Org{ID: "org", DailyCap: ptr(usd("3")), MonthlyCap: ptr(usd("5"))}); err != nil {
		t.Fatal(err)
	}
	mustAccount(t, st, store.Account{ID: "a", Plan: store.PlanPaid, Org: "org"})
	mustAccount(t, st, store.Account{ID: "b", Plan: store.PlanPaid, Org: "org", DailyCap: ptr(usd("0.5"))})
	mustAccount(t, st, store.Account{ID: "out", Plan: store.PlanPaid})
	day1 := time.Date(2026, 5, 14, 12, 0, 0, 0, time.UTC)
	day2 := day1.Add(24 * time.Hour)
	for _, c := range []struct {
		req, account, cost string
		at                 time.Time
		charged, short     string
	}{
		{"r1", "a", "2", day1, "2", "0"},
		{"r2", "b", "2", day1, "0.50", "1.50"}, // b's own daily cap
		{"r3", "a", "1", day1, "0.50", "0.50"}, // the org's daily cap: 3
		{"r4", "out", "10", day1, "10", "0"},   // not in the org
		{"r5", "b", "0.25", day1, "0", "0.25"}, // the org's day is spent
		{"r6", "a", "4", day2, "2", "2"},       // the org's monthly cap: 5
		{"r7", "b", "0.1", day2, "0", "0.10"},  // the month is spent
		{"r8", "out", "1", day2, "1", "0"},     // still not bounded
	} {
		e := store.Entry{RequestID: c.req, AccountID: c.account, Cost: usd(c.cost), Time: c.at}
		if ok, err := st.Settle(ctx, &e); !ok || err != nil {
			t.Fatalf("%s: %v %v", c.req, ok, err)
		}
		if e.Cost != usd(c.charged) || e.Shortfall != usd(c.short) {
			t.Errorf("%s: charged %s short %s, want %s and %s", c.req, e.Cost, e.Shortfall, c.charged, c.short)
		}
	}
	if sp, err := st.OrgSpend(ctx, "org", day2); err != nil || sp != (store.Spend{Today: usd("2"), Month: usd("5"), Total: usd("5")}) {
		t.Errorf("OrgSpend = %+v, %v", sp, err)
	}
	// A raised cap lets the accounts spend again, up to it.
	if _, err := st.UpdateOrg(ctx, "org", func(o *store.Org) error { o.MonthlyCap = ptr(usd("5.75")); return nil }); err != nil {
		t.Fatal(err)
	}
	e := store.Entry{RequestID: "r9", AccountID: "b", Cost: usd("1"), Time: day2}
	if ok, err := st.Settle(ctx, &e); !ok || err != nil || e.Cost != usd("0.50") || e.Shortfall != usd("0.50") {
		t.Errorf("after the raise: %v %v, charged %s short %s; want 0.50 and 0.50 (b's own daily cap)", ok, err, e.Cost, e.Shortfall)
	}
	if problems, err := st.CheckJournal(ctx); err != nil || len(problems) > 0 {
		t.Fatalf("journal check: %+v %v", problems, err)
	}
}

// Concurrent charges of two accounts of one capped organization stop at
// its cap exactly: what each charged and fell short adds up to what each
// cost, and the ledger, the answers and OrgSpend agree.
func testOrgFloorConcurrent(t *testing.T, st store.Store) {
	ctx := context.Background()
	if err := st.CreateOrg(ctx, store.Org{ID: "org", DailyCap: ptr(usd("1.00"))}); err != nil {
		t.Fatal(err)
	}
	accounts := []string{"a", "b"}
	for _, id := range accounts {
		mustAccount(t, st, store.Account{ID: id, Plan: store.PlanPaid, Org: "org"})
	}
	const n = 40
	at := time.Date(2026, 5, 14, 12, 0, 0, 0, time.UTC)
	cost := usd("0.03") // 2.40 asked of 1.00
	var mu sync.Mutex
	var charged, short pricing.Money
	var wg sync.WaitGroup
	for i := range n {
		for _, id := range accounts {
			wg.Go(func() {
				e := store.Entry{RequestID: fmt.Sprint(id, "-", i), AccountID: id, Cost: cost, Time: at}
				ok, err := st.Settle(ctx, &e)
				if !ok || err != nil {
					t.Errorf("settle %s %d: %v %v", id, i, ok, err)
					return
				}
				if e.Cost+e.Shortfall != cost || e.Cost < 0 || e.Shortfall < 0 {
					t.Errorf("settle %s %d: charged %s short %s of %s", id, i, e.Cost, e.Shortfall, cost)
				}
				mu.Lock()
				charged += e.Cost
				short += e.Shortfall
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	if charged != usd("1.00") || short != usd("1.40") {
		t.Fatalf("charged %s, short %s; want 1.00 and 1.40", charged, short)
	}
	var ledger, ledgerShort pricing.Money
	for _, id := range accounts {
		entries, err := st.Entries(ctx, id, 1000)
		if err != nil || len(entries) != n {
			t.Fatalf("entries of %s: %d, %v", id, len(entries), err)
		}
		for _, e := range entries {
			ledger += e.Cost
			ledgerShort += e.Shortfall
		}
	}
	if ledger != charged || ledgerShort != short {
		t.Fatalf("ledger %s short %s, answers %s and %s", ledger, ledgerShort, charged, short)
	}
	if sp, err := st.OrgSpend(ctx, "org", at); err != nil || sp != (store.Spend{Today: ledger, Month: ledger, Total: ledger}) {
		t.Fatalf("OrgSpend = %+v, %v; the ledger says %s", sp, err, ledger)
	}
}

// batchOrgCaps: one batch of charges of two accounts of a capped
// organization (a third account outside it among them), over two days,
// never takes the organization past its caps: its accounts' charges add
// up to the monthly cap exactly and never pass the daily one (a batch may
// settle one account's charges before another's), OrgSpend agrees, each
// charge's cost is what it charged and fell short, and the account
// outside is charged in full.
func batchOrgCaps(t *testing.T, st BatchStore) {
	ctx := context.Background()
	if err := st.CreateOrg(ctx, store.Org{ID: "org", DailyCap: ptr(usd("0.08")), MonthlyCap: ptr(usd("0.10"))}); err != nil {
		t.Fatal(err)
	}
	mustAccount(t, st, store.Account{ID: "b", Plan: store.PlanPaid, Org: "org"})
	mustAccount(t, st, store.Account{ID: "a", Plan: store.PlanPaid, Org: "org"})
	mustAccount(t, st, store.Account{ID: "out", Plan: store.PlanPaid})
	d1 := time.Date(2026, 5, 14, 12, 0, 0, 0, time.UTC)
	d2 := d1.AddDate(0, 0, 1)
	charges := []struct {
		account string
		at      time.Time
		cost    string
	}{
		{"b", d1, "0.05"}, {"out", d1, "0.05"}, {"a", d1, "0.05"}, {"b", d1, "0.01"},
		{"a", d2, "0.05"}, {"out", d2, "1"}, {"b", d2, "0.01"},
	}
	entries := make([]store.Entry, len(charges))
	for i, c := range charges {
		entries[i] = store.Entry{RequestID: fmt.Sprint("oc", i), AccountID: c.account, Cost: usd(c.cost), Time: c.at.Add(time.Duration(i) * time.Second)}
	}
	charged, err := st.SettleBatch(ctx, entries)
	if err != nil {
		t.Fatal(err)
	}
	byDay := map[time.Time]pricing.Money{}
	for i, c := range charges {
		e := entries[i]
		if !charged[i] || e.Cost+e.Shortfall != usd(c.cost) || e.Cost < 0 || e.Shortfall < 0 || (c.account == "out" && e.Shortfall != 0) {
			t.Errorf("charge %d (%s %s): %v, charged %s short %s", i, c.account, c.cost, charged[i], e.Cost, e.Shortfall)
		}
		if c.account != "out" {
			byDay[c.at] += e.Cost
		}
	}
	if byDay[d1]+byDay[d2] != usd("0.10") || byDay[d1] > usd("0.08") || byDay[d2] > usd("0.08") {
		t.Errorf("the organization's charges: %s on the first day, %s on the second; want 0.10 in all, at most 0.08 a day", byDay[d1], byDay[d2])
	}
	for _, at := range []time.Time{d1, d2} {
		want := store.Spend{Today: byDay[at], Month: usd("0.10"), Total: usd("0.10")}
		if sp, err := st.OrgSpend(ctx, "org", at); err != nil || sp != want {
			t.Errorf("OrgSpend at %s = %+v, %v; want %+v", at, sp, err, want)
		}
	}
}

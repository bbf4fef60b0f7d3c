package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// sumLedger is Spend computed the slow way, from every entry.
func sumLedger(t *testing.T, db *DB, account string, now time.Time) store.Spend {
	t.Helper()
	day, dayEnd := store.DayOf(now)
	month, monthEnd := store.MonthOf(now)
	var sp store.Spend
	entries, err := db.Entries(context.Background(), account, 100000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		sp.Total += e.Cost
		if !e.Time.Before(day) && e.Time.Before(dayEnd) {
			sp.Today += e.Cost
		}
		if !e.Time.Before(month) && e.Time.Before(monthEnd) {
			sp.Month += e.Cost
		}
	}
	return sp
}

// TestSpendTotalsMatchLedger: the running totals equal sums over the
// ledger, for entries spread over days and months, at several instants.
func TestSpendTotalsMatchLedger(t *testing.T) {
	db, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	for _, id := range []string{"a", "b"} {
		if err := db.CreateAccount(ctx, store.Account{ID: id, Plan: store.PlanPaid}); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2026, 1, 30, 22, 0, 0, 0, time.UTC)
	for i := range 300 {
		acc := []string{"a", "b"}[i%2]
		at := base.Add(time.Duration(rng.Int64N(int64(70 * 24 * time.Hour))))
		if _, err := db.Settle(ctx, &store.Entry{RequestID: fmt.Sprint("r", i), AccountID: acc, Cost: pricing.Money(rng.Int64N(1e9)), Time: at}); err != nil {
			t.Fatal(err)
		}
	}
	for _, now := range []time.Time{base, base.Add(3 * time.Hour), base.AddDate(0, 1, 0), base.AddDate(0, 2, 5), base.AddDate(1, 0, 0)} {
		for _, acc := range []string{"a", "b", "nobody"} {
			got, err := db.Spend(ctx, acc, now)
			if err != nil {
				t.Fatal(err)
			}
			if want := sumLedger(t, db, acc, now); got != want {
				t.Errorf("%s at %s: %+v, ledger says %+v", acc, now, got, want)
			}
		}
	}
}

// TestMigrateVersion1: a database written by schema version 1 (ledger, no
// running totals) gets its totals and daily usage built when opened.
func TestMigrateVersion1(t *testing.T) {
	dir := t.TempDir()
	raw, err := sql.Open("sqlite", dsn(filepath.Join(dir, FileName), false))
	if err != nil {
		t.Fatal(err)
	}
	v1 := `
CREATE TABLE accounts (id TEXT PRIMARY KEY, plan TEXT NOT NULL, cleared INTEGER NOT NULL DEFAULT 0, payg INTEGER NOT NULL DEFAULT 0,
	lane_billing INTEGER NOT NULL DEFAULT 0, balance INTEGER, daily_cap INTEGER, monthly_cap INTEGER, abilities TEXT, created_at INTEGER NOT NULL DEFAULT 0);
CREATE TABLE ledger (request_id TEXT PRIMARY KEY, account_id TEXT NOT NULL REFERENCES accounts(id), endpoint TEXT NOT NULL DEFAULT '',
	model TEXT NOT NULL DEFAULT '', units INTEGER NOT NULL DEFAULT 0, unit TEXT NOT NULL DEFAULT '', cost INTEGER NOT NULL, time INTEGER NOT NULL);
INSERT INTO accounts (id, plan) VALUES ('a', 'paid');
PRAGMA user_version = 1;`
	if _, err := raw.Exec(v1); err != nil {
		t.Fatal(err)
	}
	times := []time.Time{
		time.Date(2026, 10, 31, 23, 59, 59, 0, time.UTC),
		time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 21, 8, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 21, 9, 0, 0, 0, time.UTC),
	}
	for i, at := range times {
		if _, err := raw.Exec(`INSERT INTO ledger (request_id, account_id, cost, time) VALUES (?, 'a', ?, ?)`, fmt.Sprint("r", i), (i+1)*1000, at.UnixNano()); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	got, err := db.Spend(context.Background(), "a", now)
	want := store.Spend{Today: 7000, Month: 9000, Total: 10000}
	if err != nil || got != want {
		t.Fatalf("after migration: %+v %v, want %+v", got, err, want)
	}
	if got := sumLedger(t, db, "a", now); got != want {
		t.Fatalf("ledger: %+v", got)
	}
	// The daily usage is built from the ledger too: no key, no tokens.
	usage, err := db.Usage(context.Background(), store.UsageQuery{From: times[0].AddDate(0, 0, -1), To: now, GroupBy: store.GroupDay})
	d := func(m time.Month, day int) time.Time { return time.Date(2026, m, day, 0, 0, 0, 0, time.UTC) }
	wantUsage := []store.UsageRow{{Day: d(10, 31), Requests: 1, Cost: 1000}, {Day: d(11, 1), Requests: 1, Cost: 2000}, {Day: d(11, 21), Requests: 2, Cost: 7000}}
	slices.SortFunc(usage, func(a, b store.UsageRow) int { return a.Day.Compare(b.Day) })
	if err != nil || fmt.Sprint(usage) != fmt.Sprint(wantUsage) {
		t.Fatalf("usage after migration: %+v %v, want %+v", usage, err, wantUsage)
	}
}

// A version-2 store upgrades in place: its keys keep working and a revoked
// one is remembered (v3), and its balance journal starts (v4).
func TestMigrateVersion2(t *testing.T) {
	dir := t.TempDir()
	raw, err := sql.Open("sqlite", dsn(filepath.Join(dir, FileName), false))
	if err != nil {
		t.Fatal(err)
	}
	v2 := `
CREATE TABLE accounts (id TEXT PRIMARY KEY, plan TEXT NOT NULL, cleared INTEGER NOT NULL DEFAULT 0, payg INTEGER NOT NULL DEFAULT 0,
	lane_billing INTEGER NOT NULL DEFAULT 0, balance INTEGER, daily_cap INTEGER, monthly_cap INTEGER, abilities TEXT, created_at INTEGER NOT NULL DEFAULT 0);
CREATE TABLE keys (id TEXT PRIMARY KEY, account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE, name TEXT NOT NULL DEFAULT '',
	hash TEXT NOT NULL, models TEXT, expires_at INTEGER, created_at INTEGER NOT NULL);
CREATE UNIQUE INDEX keys_hash ON keys(hash);
INSERT INTO accounts (id, plan, balance) VALUES ('a', 'paid', 7000000000);
INSERT INTO accounts (id, plan) VALUES ('b', 'paid');
INSERT INTO keys (id, account_id, hash, created_at) VALUES ('k', 'a', 'h', 1);
PRAGMA user_version = 2;`
	if _, err := raw.Exec(v2); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if k, err := db.KeyByHash(ctx, "h"); err != nil || k.ID != "k" {
		t.Fatalf("key after the upgrade: %+v, %v", k, err)
	}
	// The journal starts with one set entry equal to each prepaid balance.
	if j, err := db.Journal(ctx, "a", 10); err != nil || len(j) != 1 || j[0].Kind != store.JournalSet || j[0].Amount != pricing.USD(7) || j[0].Balance != pricing.USD(7) {
		t.Fatalf("journal after the upgrade: %+v, %v", j, err)
	}
	if j, _ := db.Journal(ctx, "b", 10); len(j) != 0 {
		t.Fatalf("a postpaid account got a journal: %+v", j)
	}
	if p, err := db.CheckJournal(ctx); err != nil || len(p) != 0 {
		t.Fatalf("check after the upgrade: %+v, %v", p, err)
	}
	if err := db.DeleteKey(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	if issued, _ := db.KeyIssued(ctx, "h"); !issued {
		t.Fatal("the revoked key was forgotten")
	}
	var v int
	if err := db.r.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != schemaVersion {
		t.Fatalf("user_version %d, %v", v, err)
	}
}

// CheckJournal reports a balance its journal does not explain and a charge
// without its ledger entry.
func TestCheckJournalFindsDifferences(t *testing.T) {
	db, _ := open(t)
	ctx := context.Background()
	for _, id := range []string{"a", "b", "c"} {
		if err := db.CreateAccount(ctx, store.Account{ID: id, Plan: store.PlanPaid, Balance: ptrMoney(pricing.USD(5))}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.w.Exec(`UPDATE accounts SET balance = balance + 1 WHERE id = 'a'`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.w.Exec(`INSERT INTO journal (account_id, time, kind, amount, balance, request_id) VALUES ('b', 1, 'charge', 0, 5000000000, 'ghost')`); err != nil {
		t.Fatal(err)
	}
	problems, err := db.CheckJournal(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 2 || problems[0].AccountID != "a" || problems[0].Balance != pricing.USD(5)+1 || problems[0].JournalSum != pricing.USD(5) ||
		problems[1].AccountID != "b" || fmt.Sprint(problems[1].UnledgeredCharges) != "[ghost]" {
		t.Fatalf("problems %+v", problems)
	}
}

func ptrMoney(m pricing.Money) *pricing.Money { return &m }

// A version-6 store upgrades in place: its keys have no caps and the
// running totals of each key's charges are built from the ledger, so they
// agree with it; the keys can be capped from then on.
func TestMigrateVersion6(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := db.CreateAccount(ctx, store.Account{ID: "a", Plan: store.PlanPaid}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []store.Key{{ID: "k1", AccountID: "a", Hash: "h1"}, {ID: "k2", AccountID: "a", Hash: "h2"}} {
		if err := db.CreateKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	for i, c := range []struct {
		key  string
		at   time.Time
		cost pricing.Money
	}{
		{"k1", time.Date(2026, 2, 28, 23, 59, 59, 0, time.UTC), 1000},
		{"k1", time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), 2000},
		{"k1", now.Add(-time.Hour), 4000},
		{"k2", now, 8000},
		{"", now, 16000},
	} {
		if _, err := db.Settle(ctx, &store.Entry{RequestID: fmt.Sprint("r", i), AccountID: "a", KeyID: c.key, Cost: c.cost, Time: c.at}); err != nil {
			t.Fatal(err)
		}
	}
	// Back to version 6: no key caps, no key totals.
	if _, err := db.w.Exec(`ALTER TABLE keys DROP COLUMN daily_cap; ALTER TABLE keys DROP COLUMN monthly_cap; ALTER TABLE keys DROP COLUMN total_cap;
		DROP TABLE key_spend; PRAGMA user_version = 6`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for key, want := range map[string]store.Spend{"k1": {Today: 4000, Month: 6000, Total: 7000}, "k2": {Today: 8000, Month: 8000, Total: 8000}, "": {}} {
		if sp, err := db.KeySpend(ctx, key, now); err != nil || sp != want {
			t.Errorf("KeySpend(%q) after the upgrade = %+v, %v; want %+v", key, sp, err, want)
		}
	}
	if k, err := db.Key(ctx, "k1"); err != nil || k.DailyCap != nil || k.MonthlyCap != nil || k.TotalCap != nil {
		t.Fatalf("k1 after the upgrade: %+v, %v", k, err)
	}
	if _, err := db.UpdateKey(ctx, "k1", func(k *store.Key) error { m := pricing.Money(7500); k.TotalCap = &m; return nil }); err != nil {
		t.Fatal(err)
	}
	e := store.Entry{RequestID: "after", AccountID: "a", KeyID: "k1", Cost: 1000, Time: now}
	if ok, err := db.Settle(ctx, &e); !ok || err != nil || e.Cost != 500 || e.Shortfall != 500 {
		t.Fatalf("a charge past the new cap: %v %v, charged %d short %d", ok, err, e.Cost, e.Shortfall)
	}
	var v int
	if err := db.r.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != schemaVersion {
		t.Fatalf("user_version %d, %v", v, err)
	}
}

// A version-8 store upgrades in place: its accounts have no low-balance
// mark, and its first webhook hears the alerts of charges from then on.
func TestMigrateVersion8(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := db.CreateAccount(ctx, store.Account{ID: "a", Plan: store.PlanPaid, Balance: ptrMoney(1000)}); err != nil {
		t.Fatal(err)
	}
	// Back to version 8: no low-balance mark, no webhooks.
	if _, err := db.w.Exec(`DROP TABLE webhook_outbox; DROP TABLE webhooks; ALTER TABLE accounts DROP COLUMN low_balance; PRAGMA user_version = 8`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a, err := db.Account(ctx, "a")
	if err != nil || a.LowBalance != nil || a.Balance == nil || *a.Balance != 1000 {
		t.Fatalf("a after the upgrade: %+v, %v", a, err)
	}
	if err := db.CreateWebhook(ctx, store.Webhook{ID: "wh", URL: "http://127.0.0.1:1/", Secret: "s", Events: store.EventTypes}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.UpdateAccount(ctx, "a", func(a *store.Account) error { a.LowBalance = ptrMoney(500); return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Settle(ctx, &store.Entry{RequestID: "r", AccountID: "a", Cost: 600}); err != nil {
		t.Fatal(err)
	}
	ds, err := db.Deliveries(ctx, "wh", 10)
	if err != nil || len(ds) != 1 || ds[0].Type != store.EventBalanceLow {
		t.Fatalf("deliveries after the upgrade: %+v, %v", ds, err)
	}
	var v int
	if err := db.r.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != schemaVersion {
		t.Fatalf("user_version %d, %v", v, err)
	}
}

// A version-9 store upgrades in place: its keys allow every MCP tool, as
// before, and can name the tools they may call from then on.
func TestMigrateVersion9(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := db.CreateAccount(ctx, store.Account{ID: "a", Plan: store.PlanPaid}); err != nil {
		t.Fatal(err)
	}
	// Back to version 9, with a key as that version wrote it.
	if _, err := db.w.Exec(`ALTER TABLE keys DROP COLUMN mcp_tools; PRAGMA user_version = 9;
		INSERT INTO keys (id, account_id, name, hash, models, created_at) VALUES ('k', 'a', 'old', 'h', '["m"]', 1)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	k, err := db.KeyByHash(ctx, "h")
	if err != nil || k.ID != "k" || k.MCPTools != nil || fmt.Sprint(k.Models) != "[m]" {
		t.Fatalf("k after the upgrade: %+v, %v", k, err)
	}
	if k, err := db.UpdateKey(ctx, "k", func(k *store.Key) error { k.MCPTools = []string{"github__*"}; return nil }); err != nil || fmt.Sprint(k.MCPTools) != "[github__*]" {
		t.Fatalf("UpdateKey after the upgrade: %+v, %v", k, err)
	}
	if k, err := db.Key(ctx, "k"); err != nil || fmt.Sprint(k.MCPTools) != "[github__*]" {
		t.Fatalf("k read after its update: %+v, %v", k, err)
	}
	var v int
	if err := db.r.QueryRow("PRAGMA user_version").Scan(&v); err != nil || v != 10 {
		t.Fatalf("user_version %d, %v", v, err)
	}
}

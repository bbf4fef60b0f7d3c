package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/internal/store/cached"
	"github.com/caddy-gw/caddy-gw/internal/store/postgres"
	"github.com/caddy-gw/caddy-gw/internal/store/storetest"
	"github.com/caddy-gw/caddy-gw/internal/testsvc"
	"github.com/caddy-gw/caddy-gw/pricing"
)

func open(t *testing.T, url string) *postgres.DB {
	t.Helper()
	db, err := postgres.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestConformance(t *testing.T) {
	pg := testsvc.PostgresServer(t)
	storetest.Conformance(t, func(t *testing.T) store.Store { return open(t, pg.NewDatabase(t)) })
}

func TestBatchConformance(t *testing.T) {
	pg := testsvc.PostgresServer(t)
	storetest.BatchConformance(t, func(t *testing.T) storetest.BatchStore { return open(t, pg.NewDatabase(t)) })
}

// Several nodes starting at once on an empty database migrate it once, and
// a node started later finds it up to date.
func TestConcurrentMigrations(t *testing.T) {
	url := testsvc.Postgres(t)
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	for range 5 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			db, err := postgres.Open(context.Background(), url)
			if err != nil {
				errs <- err
				return
			}
			db.Close()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	db := open(t, url)
	if err := db.CreateAccount(context.Background(), store.Account{ID: "a", Plan: store.PlanFree}); err != nil {
		t.Fatal(err)
	}
}

// A bad URL is refused without repeating it (it may hold a password).
func TestOpenBadURL(t *testing.T) {
	_, err := postgres.Open(context.Background(), "postgres://user:s3cret@[::1")
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("Open = %v", err)
	}
}

// App links are kept per account, once each, in the order made, and are
// seen by every node (connection) on the database.
func TestAppLinks(t *testing.T) {
	url := testsvc.Postgres(t)
	a, b := open(t, url), open(t, url)
	ctx := context.Background()
	for _, l := range [][2]string{{"tracker", ""}, {"tracker", "work"}, {"mail", ""}} {
		if ok, err := a.AddLink(ctx, "acct", l[0], l[1], 3); !ok || err != nil {
			t.Fatalf("add %v: %v %v", l, ok, err)
		}
	}
	if ok, err := b.AddLink(ctx, "acct", "tracker", "work", 3); ok || err != nil {
		t.Fatalf("second add: %v %v", ok, err)
	}
	if ok, err := b.AddLink(ctx, "acct", "tracker", "home", 3); ok || !errors.Is(err, store.ErrTooMany) {
		t.Fatalf("a fourth link of three: %v %v", ok, err)
	}
	got, err := b.Links(ctx, "acct")
	if err != nil || len(got) != 3 || got[0] != [2]string{"tracker", ""} || got[1] != [2]string{"tracker", "work"} || got[2] != [2]string{"mail", ""} {
		t.Fatalf("links %v %v", got, err)
	}
	if got, _ := a.Links(ctx, "other"); len(got) != 0 {
		t.Fatalf("another account's links %v", got)
	}
}

// Links added to one account at once on several nodes never pass the
// most it may hold.
func TestAppLinksLimitConcurrent(t *testing.T) {
	url := testsvc.Postgres(t)
	nodes := []*postgres.DB{open(t, url), open(t, url)}
	ctx := context.Background()
	const most, tries = 5, 40
	var wg sync.WaitGroup
	var mu sync.Mutex
	var added, full int
	for i := range tries {
		wg.Go(func() {
			ok, err := nodes[i%2].AddLink(ctx, "acct", "tracker", fmt.Sprintf("a%d", i), most)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case ok && err == nil:
				added++
			case errors.Is(err, store.ErrTooMany):
				full++
			default:
				t.Errorf("add %d: %v %v", i, ok, err)
			}
		})
	}
	wg.Wait()
	if got, err := nodes[0].Links(ctx, "acct"); added != most || full != tries-most || len(got) != most || err != nil {
		t.Fatalf("%d added, %d refused, %d stored (%v): want %d, %d, %d", added, full, len(got), err, most, tries-most, most)
	}
}

// Batched group-commits a PostgreSQL store's charges and passes the suite
// every backend shares.
func TestBatchedConformance(t *testing.T) {
	pg := testsvc.PostgresServer(t)
	storetest.Conformance(t, func(t *testing.T) store.Store {
		b := cached.NewBatched(open(t, pg.NewDatabase(t)))
		return b
	})
}

// Batched with a spool passes the shared suite too.
func TestSpooledConformance(t *testing.T) {
	pg := testsvc.PostgresServer(t)
	storetest.Conformance(t, func(t *testing.T) store.Store {
		b, err := cached.NewSpooled(open(t, pg.NewDatabase(t)), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}

// A charge made while PostgreSQL is down is kept in the node's spool and
// Settle succeeds; the charge reaches the database once it is back, once,
// and so does what a stopped node left in its spool, also when the
// database already had some of it. Meanwhile the node's reads count it.
func TestSpooledChargesOutliveTheDatabase(t *testing.T) {
	pg := testsvc.PostgresServer(t)
	url := pg.NewDatabase(t)
	dir := t.TempDir()
	ctx := context.Background()
	db, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	b, err := cached.NewSpooled(db, dir)
	if err != nil {
		t.Fatal(err)
	}
	balance := pricing.Money(1_000_000)
	if err := b.CreateAccount(ctx, store.Account{ID: "a", Plan: store.PlanPaid, Balance: &balance}); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC()
	entry := func(id string, cost pricing.Money) *store.Entry {
		return &store.Entry{RequestID: id, AccountID: "a", Endpoint: "chat", Cost: cost, Time: at, HoldID: "hold-" + id}
	}
	var hooks spoolHooks
	b.SetSpoolHooks(hooks.keep, hooks.release)
	settle := func(b *cached.Batched, e *store.Entry) {
		t.Helper()
		if charged, err := b.Settle(ctx, e); err != nil || !charged {
			t.Fatalf("settle %s: %v %v", e.RequestID, charged, err)
		}
	}
	settle(b, entry("up", 1000))
	pg.Stop()
	settle(b, entry("down1", 2000))
	// A spooled charge is charged at most its hold: the node cannot see
	// the balance.
	held := pricing.Money(2500)
	down2 := entry("down2", 3000)
	down2.Held = &held
	settle(b, down2)
	if down2.Cost != 2500 || down2.Shortfall != 500 {
		t.Fatalf("spooled past its hold: charged %s short %s, want 2500 and 500 nano-dollars", down2.Cost, down2.Shortfall)
	}
	if n := b.Spooled(); n != 2 {
		t.Fatalf("%d spooled, want 2", n)
	}
	if got := hooks.String(); got != "kept [hold-down1:2000 hold-down2:2500], released []" {
		t.Fatalf("hooks while spooled: %s", got)
	}
	// Told again while spooled: settled before.
	if charged, err := b.Settle(ctx, entry("down1", 2000)); err != nil || charged {
		t.Fatalf("a spooled id settled again: %v %v", charged, err)
	}
	applied := b.Applied("down1")
	if applied == nil || b.Applied("up") != nil {
		t.Fatal("Applied: want a channel for a spooled charge only")
	}
	pg.Start()
	waitSpooled(t, b, 0)
	select {
	case <-applied:
	default:
		t.Fatal("Applied not closed once the database has the charge")
	}
	// Both holds are released; in which order depends on whether the
	// database took the batch whole or, still starting, one charge alone.
	if kept, rel := hooks.String(), hooks.releasedSorted(); !strings.HasPrefix(kept, "kept [hold-down1:2000 hold-down2:2500], ") || rel != "[hold-down1 hold-down2]" {
		t.Fatalf("hooks once applied: %s", kept)
	}
	acc, err := b.Account(ctx, "a")
	if err != nil || *acc.Balance != balance-5500 {
		t.Fatalf("balance %v (%v), want %d", acc.Balance, err, balance-5500)
	}
	sp, err := b.Spend(ctx, "a", at)
	if err != nil || sp.Total != 5500 || sp.Today != 5500 {
		t.Fatalf("spend %+v (%v)", sp, err)
	}

	// The node stops with charges in its spool; the database takes one of
	// them meanwhile (another way in); the next start applies the spool,
	// each charge once.
	pg.Stop()
	settle(b, entry("left1", 4000))
	settle(b, entry("left2", 5000))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	pg.Start()
	db2 := open(t, url)
	if charged, err := db2.Settle(ctx, entry("left1", 4000)); err != nil || !charged {
		t.Fatalf("left1 straight to the database: %v %v", charged, err)
	}
	b2, err := cached.NewSpooled(db2, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b2.Close() })
	// The next process keeps the holds of what it finds in the spool and
	// drops each once the database has its charge (also one applied
	// before it was told how).
	var hooks2 spoolHooks
	b2.SetSpoolHooks(hooks2.keep, hooks2.release)
	waitSpooled(t, b2, 0)
	if rel := hooks2.releasedSorted(); rel != "[hold-left1 hold-left2]" {
		t.Fatalf("released %s, want both left behind", rel)
	}
	entries, err := b2.Entries(ctx, "a", 100)
	if err != nil || len(entries) != 5 {
		t.Fatalf("%d entries (%v), want 5", len(entries), err)
	}
	seen := map[string]int{}
	for _, e := range entries {
		seen[e.RequestID]++
	}
	for _, id := range []string{"up", "down1", "down2", "left1", "left2"} {
		if seen[id] != 1 {
			t.Fatalf("%s in the ledger %d times", id, seen[id])
		}
	}
	if acc, err := b2.Account(ctx, "a"); err != nil || *acc.Balance != balance-14500 {
		t.Fatalf("balance %v (%v), want %d", acc.Balance, err, balance-14500)
	}
	if problems, err := b2.CheckJournal(ctx); err != nil || len(problems) != 0 {
		t.Fatalf("journal %v %v", problems, err)
	}
}

// spoolHooks records what a spool's hooks heard, in order.
type spoolHooks struct {
	mu             sync.Mutex
	kept, released []string
}

func (h *spoolHooks) keep(e store.Entry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.kept = append(h.kept, fmt.Sprintf("%s:%d", e.HoldID, int64(e.Cost)))
}

func (h *spoolHooks) release(e store.Entry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.released = append(h.released, e.HoldID)
}

func (h *spoolHooks) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return fmt.Sprintf("kept %v, released %v", h.kept, h.released)
}

// releasedSorted lists the released hold ids in order of their ids.
func (h *spoolHooks) releasedSorted() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return fmt.Sprint(slices.Sorted(slices.Values(h.released)))
}

// A spooled charge counts in the node's own reads until the database has
// it: the balance it will take is taken, its spend added.
func TestSpooledChargesCountMeanwhile(t *testing.T) {
	pg := testsvc.PostgresServer(t)
	url := pg.NewDatabase(t)
	ctx := context.Background()
	db := open(t, url)
	balance := pricing.Money(1_000_000)
	if err := db.CreateAccount(ctx, store.Account{ID: "a", Plan: store.PlanPaid, Balance: &balance}); err != nil {
		t.Fatal(err)
	}
	// A backend that refuses every charge: the spool keeps them.
	b, err := cached.NewSpooled(refusing{db}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	at := time.Now().UTC()
	if charged, err := b.Settle(ctx, &store.Entry{RequestID: "x", AccountID: "a", KeyID: "k", Cost: 7000, Time: at}); err != nil || !charged {
		t.Fatalf("settle: %v %v", charged, err)
	}
	acc, err := b.Account(ctx, "a")
	if err != nil || *acc.Balance != balance-7000 {
		t.Fatalf("balance %v (%v)", acc.Balance, err)
	}
	if sp, err := b.Spend(ctx, "a", at); err != nil || sp.Total != 7000 || sp.Today != 7000 || sp.Month != 7000 {
		t.Fatalf("spend %+v (%v)", sp, err)
	}
	// The key's spend counts it too; another key's does not.
	if sp, err := b.KeySpend(ctx, "k", at); err != nil || sp != (store.Spend{Today: 7000, Month: 7000, Total: 7000}) {
		t.Fatalf("key spend %+v (%v)", sp, err)
	}
	if sp, err := b.KeySpend(ctx, "other", at); err != nil || sp != (store.Spend{}) {
		t.Fatalf("other key's spend %+v (%v)", sp, err)
	}
}

// refusing is a database that cannot take charges (as one that is down).
type refusing struct{ *postgres.DB }

func (refusing) SettleBatch(context.Context, []store.Entry) ([]bool, error) {
	return nil, errors.New("connection refused")
}

// waitSpooled waits (at most 20 s) until b's spool holds n charges.
func waitSpooled(t *testing.T, b *cached.Batched, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for b.Spooled() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d spooled, want %d", b.Spooled(), n)
		}
		time.Sleep(20 * time.Millisecond) // polling an observable state
	}
}

// A database of migration 4 that holds charges gets their daily usage sums
// from migration 5: their requests and cost, with no key and no tokens.
func TestMigrateToUsage(t *testing.T) {
	pg := testsvc.PostgresServer(t)
	url := pg.NewDatabase(t)
	ctx := context.Background()
	db, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.CreateAccount(ctx, store.Account{ID: "a", Plan: store.PlanPaid}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	d1 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	// Back to migration 4, with charges in its ledger.
	if _, err := conn.Exec(ctx, undoKeyTools+undoAlerts+`ALTER TABLE accounts DROP COLUMN org; DROP TABLE org_spend; DROP TABLE orgs;
		ALTER TABLE ledger DROP COLUMN key_id, DROP COLUMN input_tokens, DROP COLUMN output_tokens, DROP COLUMN shortfall;
		ALTER TABLE keys DROP COLUMN daily_cap, DROP COLUMN monthly_cap, DROP COLUMN total_cap;
		DROP TABLE usage_daily; DROP TABLE key_spend; DELETE FROM schema_migrations WHERE version >= 5`); err != nil {
		t.Fatal(err)
	}
	for i, c := range []struct {
		at   time.Time
		cost int64
	}{{d1.Add(time.Hour), 1000}, {d1.Add(2 * time.Hour), 2000}, {d1.AddDate(0, 0, 1), 4000}} {
		if _, err := conn.Exec(ctx, `INSERT INTO ledger (request_id, account_id, model, cost, time) VALUES ($1, 'a', 'm', $2, $3)`,
			fmt.Sprint("r", i), c.cost, c.at.UnixNano()); err != nil {
			t.Fatal(err)
		}
	}
	db = open(t, url)
	rows, err := db.Usage(ctx, store.UsageQuery{From: d1, To: d1.AddDate(0, 0, 2), GroupBy: store.GroupDay | store.GroupKey | store.GroupModel})
	want := []store.UsageRow{{Day: d1, Model: "m", Requests: 2, Cost: 3000}, {Day: d1.AddDate(0, 0, 1), Model: "m", Requests: 1, Cost: 4000}}
	slices.SortFunc(rows, func(a, b store.UsageRow) int { return a.Day.Compare(b.Day) })
	if err != nil || fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Fatalf("usage after migration 5: %+v, %v; want %+v", rows, err, want)
	}
}

// undoKeyTools takes a database back from migration 10 to 9.
const undoKeyTools = `ALTER TABLE keys DROP COLUMN mcp_tools; `

// undoAlerts takes a database back from migration 9 to 8.
const undoAlerts = `DROP TABLE webhook_outbox; DROP TABLE webhooks; ALTER TABLE accounts DROP COLUMN low_balance; `

// A database of migration 6 gets keys without caps and the running totals
// of each key's charges from migration 7, built from its ledger: they
// agree with the ledger, and the keys can be capped from then on.
func TestMigrateToKeyCaps(t *testing.T) {
	pg := testsvc.PostgresServer(t)
	url := pg.NewDatabase(t)
	ctx := context.Background()
	db, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
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
		cost int64
	}{
		{"k1", time.Date(2026, 2, 28, 23, 59, 59, 0, time.UTC), 1000},
		{"k1", time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC), 2000},
		{"k1", now.Add(-time.Hour), 4000},
		{"k2", now, 8000},
		{"", now, 16000},
	} {
		if _, err := db.Settle(ctx, &store.Entry{RequestID: fmt.Sprint("r", i), AccountID: "a", KeyID: c.key, Cost: pricing.Money(c.cost), Time: c.at}); err != nil {
			t.Fatal(err)
		}
	}
	db.Close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// Back to migration 6.
	if _, err := conn.Exec(ctx, undoKeyTools+undoAlerts+`ALTER TABLE accounts DROP COLUMN org; DROP TABLE org_spend; DROP TABLE orgs;
		ALTER TABLE usage_daily DROP COLUMN org; ALTER TABLE usage_daily ADD PRIMARY KEY (day, account_id, key_id, model);
		ALTER TABLE keys DROP COLUMN daily_cap, DROP COLUMN monthly_cap, DROP COLUMN total_cap;
		DROP TABLE key_spend; DELETE FROM schema_migrations WHERE version >= 7`); err != nil {
		t.Fatal(err)
	}
	db = open(t, url)
	for key, want := range map[string]store.Spend{"k1": {Today: 4000, Month: 6000, Total: 7000}, "k2": {Today: 8000, Month: 8000, Total: 8000}, "": {}} {
		if sp, err := db.KeySpend(ctx, key, now); err != nil || sp != want {
			t.Errorf("KeySpend(%q) after migration 7 = %+v, %v; want %+v", key, sp, err, want)
		}
	}
	if k, err := db.Key(ctx, "k1"); err != nil || k.DailyCap != nil || k.MonthlyCap != nil || k.TotalCap != nil {
		t.Fatalf("k1 after migration 7: %+v, %v", k, err)
	}
	if _, err := db.UpdateKey(ctx, "k1", func(k *store.Key) error { m := pricing.Money(7500); k.TotalCap = &m; return nil }); err != nil {
		t.Fatal(err)
	}
	e := store.Entry{RequestID: "after", AccountID: "a", KeyID: "k1", Cost: 1000, Time: now}
	if ok, err := db.Settle(ctx, &e); !ok || err != nil || e.Cost != 500 || e.Shortfall != 500 {
		t.Fatalf("a charge past the new cap: %v %v, charged %d short %d", ok, err, e.Cost, e.Shortfall)
	}
}

// A database of migration 7 gets organizations from migration 8: its
// accounts belong to none and keep their charges, and from then on they
// join one, whose caps bound them.
func TestMigrateToOrgs(t *testing.T) {
	pg := testsvc.PostgresServer(t)
	url := pg.NewDatabase(t)
	ctx := context.Background()
	db := open(t, url)
	if err := db.CreateAccount(ctx, store.Account{ID: "a", Plan: store.PlanPaid}); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	if _, err := db.Settle(ctx, &store.Entry{RequestID: "r0", AccountID: "a", Cost: 1000, Time: now}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	// Back to migration 7.
	if _, err := conn.Exec(ctx, undoKeyTools+undoAlerts+`ALTER TABLE accounts DROP COLUMN org; DROP TABLE org_spend; DROP TABLE orgs;
		ALTER TABLE usage_daily DROP COLUMN org; ALTER TABLE usage_daily ADD PRIMARY KEY (day, account_id, key_id, model);
		DELETE FROM schema_migrations WHERE version >= 8`); err != nil {
		t.Fatal(err)
	}
	db = open(t, url)
	if a, err := db.Account(ctx, "a"); err != nil || a.Org != "" {
		t.Fatalf("a after migration 8: %+v, %v", a, err)
	}
	m := pricing.Money(1500)
	if err := db.CreateOrg(ctx, store.Org{ID: "o", DailyCap: &m}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.UpdateAccount(ctx, "a", func(a *store.Account) error { a.Org = "o"; return nil }); err != nil {
		t.Fatal(err)
	}
	// The charge before it joined does not count in the organization.
	e := store.Entry{RequestID: "r1", AccountID: "a", Cost: 2000, Time: now}
	if ok, err := db.Settle(ctx, &e); !ok || err != nil || e.Cost != 1500 || e.Shortfall != 500 {
		t.Fatalf("a charge past the organization's cap: %v %v, charged %d short %d", ok, err, e.Cost, e.Shortfall)
	}
	if sp, err := db.OrgSpend(ctx, "o", now); err != nil || sp != (store.Spend{Today: 1500, Month: 1500, Total: 1500}) {
		t.Fatalf("OrgSpend = %+v, %v", sp, err)
	}
	day, _ := store.DayOf(now)
	rows, err := db.Usage(ctx, store.UsageQuery{From: day, To: day.AddDate(0, 0, 1), GroupBy: store.GroupOrg})
	slices.SortFunc(rows, func(a, b store.UsageRow) int { return strings.Compare(a.Org, b.Org) })
	if want := []store.UsageRow{{Requests: 1, Cost: 1000}, {Org: "o", Requests: 1, Cost: 1500}}; err != nil || fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Fatalf("usage by organization: %+v, %v; want %+v", rows, err, want)
	}
}

// A database of migration 8 gets migration 9: its accounts have no
// low-balance mark, and its first webhook hears the alerts of charges
// from then on.
func TestMigrateToAlerts(t *testing.T) {
	pg := testsvc.PostgresServer(t)
	url := pg.NewDatabase(t)
	ctx := context.Background()
	db := open(t, url)
	balance := pricing.Money(1000)
	if err := db.CreateAccount(ctx, store.Account{ID: "a", Plan: store.PlanPaid, Balance: &balance}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, undoKeyTools+undoAlerts+`DELETE FROM schema_migrations WHERE version >= 9`); err != nil {
		t.Fatal(err)
	}
	db = open(t, url)
	if a, err := db.Account(ctx, "a"); err != nil || a.LowBalance != nil || a.Balance == nil || *a.Balance != 1000 {
		t.Fatalf("a after migration 9: %+v, %v", a, err)
	}
	if err := db.CreateWebhook(ctx, store.Webhook{ID: "wh", URL: "http://127.0.0.1:1/", Secret: "s", Events: store.EventTypes}); err != nil {
		t.Fatal(err)
	}
	low := pricing.Money(500)
	if _, err := db.UpdateAccount(ctx, "a", func(a *store.Account) error { a.LowBalance = &low; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Settle(ctx, &store.Entry{RequestID: "r", AccountID: "a", Cost: 600}); err != nil {
		t.Fatal(err)
	}
	if ds, err := db.Deliveries(ctx, "wh", 10); err != nil || len(ds) != 1 || ds[0].Type != store.EventBalanceLow {
		t.Fatalf("deliveries after migration 9: %+v, %v", ds, err)
	}
}

// A database of migration 9 gets migration 10: its keys allow every MCP
// tool, as before, and can name the tools they may call from then on.
func TestMigrateToKeyMCPTools(t *testing.T) {
	pg := testsvc.PostgresServer(t)
	url := pg.NewDatabase(t)
	ctx := context.Background()
	db := open(t, url)
	if err := db.CreateAccount(ctx, store.Account{ID: "a", Plan: store.PlanPaid}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, undoKeyTools+`DELETE FROM schema_migrations WHERE version >= 10`); err != nil {
		t.Fatal(err)
	}
	// A key of migration 9, written as that version wrote it.
	if _, err := conn.Exec(ctx, `INSERT INTO keys (id, account_id, name, hash, models, created_at) VALUES ('k', 'a', 'old', 'h', '["m"]', 1)`); err != nil {
		t.Fatal(err)
	}
	db = open(t, url)
	k, err := db.KeyByHash(ctx, "h")
	if err != nil || k.ID != "k" || k.MCPTools != nil || fmt.Sprint(k.Models) != "[m]" {
		t.Fatalf("k after migration 10: %+v, %v", k, err)
	}
	if k, err := db.UpdateKey(ctx, "k", func(k *store.Key) error { k.MCPTools = []string{"github__*"}; return nil }); err != nil || fmt.Sprint(k.MCPTools) != "[github__*]" {
		t.Fatalf("UpdateKey after migration 10: %+v, %v", k, err)
	}
	if k, err := db.Key(ctx, "k"); err != nil || fmt.Sprint(k.MCPTools) != "[github__*]" {
		t.Fatalf("k read after its update: %+v, %v", k, err)
	}
	var v int
	if err := conn.QueryRow(ctx, `SELECT MAX(version) FROM schema_migrations`).Scan(&v); err != nil || v != 10 {
		t.Fatalf("schema version %d, %v", v, err)
	}
}

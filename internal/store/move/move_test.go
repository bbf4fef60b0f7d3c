package move

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/dirlock"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/internal/store/cached"
	"github.com/caddy-gw/caddy-gw/internal/store/postgres"
	"github.com/caddy-gw/caddy-gw/internal/store/sqlite"
	"github.com/caddy-gw/caddy-gw/internal/testsvc"
	"github.com/caddy-gw/caddy-gw/pricing"
)

func usd(s string) pricing.Money {
	m, err := pricing.ParseUSD(s)
	if err != nil {
		panic(err)
	}
	return m
}

func ptr(m pricing.Money) *pricing.Money { return &m }

// An embedded store with accounts, keys (one revoked), charges (some still
// only in the charge log) and balance movements is copied into an empty
// PostgreSQL database, which then answers exactly as it did; a second
// copy into the same database is refused.
func TestCopy(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := cached.New(db, dir)
	if err != nil {
		t.Fatal(err)
	}
	created := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	org := store.Org{ID: "acme", Name: "Acme", DailyCap: ptr(usd("400")), CreatedAt: created}
	if err := st.CreateOrg(ctx, org); err != nil {
		t.Fatal(err)
	}
	accts := []store.Account{
		{ID: "pre", Plan: store.PlanPaid, Cleared: true, PAYG: true, Balance: ptr(usd("10")), DailyCap: ptr(usd("3")), Abilities: []string{"images"}, Org: "acme",
			LowBalance: ptr(usd("14")), CreatedAt: created},
		{ID: "post", Plan: store.PlanFree, LaneBilling: true, MonthlyCap: ptr(usd("50")), CreatedAt: created},
	}
	for _, a := range accts {
		if err := st.CreateAccount(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	exp := created.Add(48 * time.Hour)
	for _, k := range []store.Key{
		{ID: "k1", AccountID: "pre", Name: "one", Hash: "h1", Models: []string{"gw-image"}, ExpiresAt: &exp, CreatedAt: created,
			DailyCap: ptr(usd("3")), MonthlyCap: ptr(usd("30")), TotalCap: ptr(usd("300")), MCPTools: []string{"github__*", "docs__search"}},
		{ID: "k2", AccountID: "pre", Name: "two", Hash: "h2", CreatedAt: created},
		{ID: "k3", AccountID: "post", Name: "three", Hash: "h3", CreatedAt: created, MCPTools: []string{}},
	} {
		if err := st.CreateKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	hook := store.Webhook{ID: "wh", URL: "https://hooks.test/gw", Secret: "0123456789abcdef", Events: store.EventTypes, CreatedAt: created}
	if err := st.CreateWebhook(ctx, hook); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteKey(ctx, "k2"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdateAccount(ctx, "pre", func(a *store.Account) error { *a.Balance += usd("5"); return nil }, store.Movement{Kind: store.JournalTopUp}); err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		if _, err := st.Settle(ctx, &store.Entry{RequestID: fmt.Sprintf("r%d", i), AccountID: []string{"pre", "post"}[i%2], Endpoint: "chat",
			Model: "m", Units: int64(3 * i), Unit: "token", Cost: usd("0.25"), Time: time.Now(), FreeMonthlyCredit: usd("1"),
			KeyID: fmt.Sprint("k", 1+i%3), InputTokens: int64(2 * i), OutputTokens: int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	// Stop without draining the charge log: the copy applies it.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	url := testsvc.Postgres(t)
	counts, err := Copy(ctx, dir, url)
	if err != nil {
		t.Fatal(err)
	}
	if counts["accounts"] != 2 || counts["keys"] != 3 || counts["ledger"] != 20 || counts["webhooks"] != 1 || counts["webhook_outbox"] < 3 {
		t.Fatalf("counts %v", counts)
	}
	src, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	pg, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	for _, id := range []string{"pre", "post"} {
		a, _ := src.Account(ctx, id)
		b, err := pg.Account(ctx, id)
		if err != nil || fmt.Sprint(a) != fmt.Sprint(b) {
			t.Errorf("account %s: %+v, copied %+v (%v)", id, a, b, err)
		}
		ea, _ := src.Entries(ctx, id, 100)
		eb, _ := pg.Entries(ctx, id, 100)
		if len(ea) != 10 || fmt.Sprint(ea) != fmt.Sprint(eb) {
			t.Errorf("ledger of %s: %d entries, copied %d", id, len(ea), len(eb))
		}
		sa, _ := src.Spend(ctx, id, time.Now())
		sb, _ := pg.Spend(ctx, id, time.Now())
		if sa != sb || sa.Total != usd("2.50") {
			t.Errorf("spend of %s: %+v, copied %+v", id, sa, sb)
		}
		day, _ := store.DayOf(time.Now())
		q := store.UsageQuery{AccountID: id, From: day.AddDate(0, 0, -1), To: day.AddDate(0, 0, 1), GroupBy: store.GroupDay | store.GroupKey | store.GroupModel}
		ua, _ := src.Usage(ctx, q)
		ub, err := pg.Usage(ctx, q)
		sortByKey := func(rows []store.UsageRow) {
			slices.SortFunc(rows, func(a, b store.UsageRow) int { return cmp.Or(a.Day.Compare(b.Day), strings.Compare(a.KeyID, b.KeyID)) })
		}
		sortByKey(ua)
		sortByKey(ub)
		if err != nil || len(ua) == 0 || fmt.Sprint(ua) != fmt.Sprint(ub) {
			t.Errorf("usage of %s: %+v, copied %+v (%v)", id, ua, ub, err)
		}
		ja, _ := src.Journal(ctx, id, 100)
		jb, _ := pg.Journal(ctx, id, 100)
		if fmt.Sprint(ja) != fmt.Sprint(jb) {
			t.Errorf("journal of %s:\n%v\ncopied\n%v", id, ja, jb)
		}
	}
	if k, err := pg.KeyByHash(ctx, "h1"); err != nil || k.ID != "k1" || k.Models[0] != "gw-image" || !k.ExpiresAt.Equal(exp) ||
		*k.DailyCap != usd("3") || *k.MonthlyCap != usd("30") || *k.TotalCap != usd("300") || fmt.Sprintf("%q", k.MCPTools) != `["github__*" "docs__search"]` {
		t.Errorf("key h1 %+v %v", k, err)
	}
	if k, err := pg.Key(ctx, "k3"); err != nil || k.DailyCap != nil || k.MonthlyCap != nil || k.TotalCap != nil || k.MCPTools == nil || len(k.MCPTools) != 0 {
		t.Errorf("key k3 %+v %v", k, err)
	}
	// The organization, with its spend.
	if o, err := pg.Org(ctx, "acme"); err != nil || fmt.Sprint(o) != fmt.Sprint(org) {
		t.Errorf("org: %+v, copied %+v (%v)", org, o, err)
	}
	if sa, _ := src.OrgSpend(ctx, "acme", time.Now()); sa.Total == 0 {
		t.Errorf("the organization spent nothing before the copy")
	} else if sb, err := pg.OrgSpend(ctx, "acme", time.Now()); err != nil || sa != sb {
		t.Errorf("spend of the organization: %+v, copied %+v (%v)", sa, sb, err)
	}
	// Each key's spend, the revoked one's too.
	for _, id := range []string{"k1", "k2", "k3"} {
		sa, _ := src.KeySpend(ctx, id, time.Now())
		sb, err := pg.KeySpend(ctx, id, time.Now())
		if err != nil || sa != sb || sa.Total == 0 {
			t.Errorf("spend of key %s: %+v, copied %+v (%v)", id, sa, sb, err)
		}
	}
	if _, err := pg.KeyByHash(ctx, "h2"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("revoked key after the copy: %v", err)
	}
	if issued, _ := pg.KeyIssued(ctx, "h2"); !issued {
		t.Error("the revoked key's secret could be issued again")
	}
	if p, err := pg.CheckJournal(ctx); err != nil || len(p) != 0 {
		t.Errorf("journal check %v %v", p, err)
	}
	// The webhook, and its outbox in order: the key's revocation, the
	// daily cap's thresholds, the balance below 14.
	if hooks, err := pg.ListWebhooks(ctx); err != nil || len(hooks) != 1 || fmt.Sprint(hooks[0]) != fmt.Sprint(hook) {
		t.Errorf("webhooks: %+v, copied %+v (%v)", hook, hooks, err)
	}
	da, _ := src.Deliveries(ctx, "wh", 100)
	db2, err := pg.Deliveries(ctx, "wh", 100)
	if err != nil || len(da) != counts["webhook_outbox"] || len(da) != len(db2) {
		t.Fatalf("deliveries %d, copied %d (%v)", len(da), len(db2), err)
	}
	for i := range da {
		if da[i].EventID != db2[i].EventID || string(da[i].Body) != string(db2[i].Body) || !da[i].NextAt.Equal(db2[i].NextAt) {
			t.Errorf("delivery %d: %+v, copied %+v", i, da[i], db2[i])
		}
	}
	if last := da[len(da)-1]; last.Type != store.EventKeyRevoked {
		t.Errorf("the oldest delivery is %s, want the revocation", last.Type)
	}
	// The charges continue on PostgreSQL.
	if ok, err := pg.Settle(ctx, &store.Entry{RequestID: "after", AccountID: "pre", Cost: usd("1"), Time: time.Now()}); !ok || err != nil {
		t.Fatalf("settle after the copy: %v %v", ok, err)
	}
	if _, err := Copy(ctx, dir, url); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("second copy: %v", err)
	}
}

// A folder a running gateway holds is refused before anything is opened:
// neither the store nor the database is touched.
func TestCopyRefusesHeldFolder(t *testing.T) {
	dir := t.TempDir()
	lock, err := dirlock.Take(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	_, err = Copy(context.Background(), dir, "postgres://gw@127.0.0.1:1/gw")
	var inUse *dirlock.InUseError
	if !errors.As(err, &inUse) || inUse.Dir != dir {
		t.Fatalf("Copy of a held folder: %v, want an *InUseError for %s", err, dir)
	}
	if _, err := os.Stat(filepath.Join(dir, sqlite.FileName)); !os.IsNotExist(err) {
		t.Fatalf("the store was opened (%v)", err)
	}
}

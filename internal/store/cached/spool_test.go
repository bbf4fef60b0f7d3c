package cached

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/internal/store/sqlite"
)

// heardHolds records the hold ids of the charges a spool's keep hook
// hears of, in order.
type heardHolds struct {
	mu   sync.Mutex
	kept []string
}

func (h *heardHolds) keep(e store.Entry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.kept = append(h.kept, fmt.Sprintf("%s %s/%s %s/%s %s/%s %s", e.RequestID, e.AccountID, e.HoldID,
		e.KeyID, e.KeyHoldID, e.OrgID, e.OrgHoldID, e.Cost))
}

func (h *heardHolds) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return fmt.Sprint(h.kept)
}

// A charge the shared database cannot take counts, while it waits in the
// node's spool, in the node's reads of the spend of its account, of its
// key and of the organization it was admitted under (none of another
// organization), and its holds' ids in its account's, key's and
// organization's scopes reach the keep hook with it, also from the spool
// a later start finds.
func TestSpooledChargeCountsForItsKeyAndOrg(t *testing.T) {
	ctx := context.Background()
	dbDir := t.TempDir()
	db, err := sqlite.Open(dbDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []string{"acme", "other"} {
		if err := db.CreateOrg(ctx, store.Org{ID: o, DailyCap: ptr(usd("5"))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.CreateAccount(ctx, store.Account{ID: "a", Plan: store.PlanPaid, Org: "acme"}); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	// The backend refuses the charges named bad (for a reason that may
	// pass), so they wait in the spool.
	open := func(db *sqlite.DB, dir string, h *heardHolds) *Batched {
		t.Helper()
		b, err := NewSpooled(&failing{DB: db}, dir)
		if err != nil {
			t.Fatal(err)
		}
		b.SetSpoolHooks(h.keep, func(store.Entry) {})
		return b
	}
	dir := t.TempDir()
	var heard heardHolds
	b := open(db, dir, &heard)
	e := &store.Entry{RequestID: "bad-1", AccountID: "a", KeyID: "key_a", Cost: usd("0.30"), Time: now, Unit: "token",
		HoldID: "n-1", KeyHoldID: "n-2", OrgHoldID: "n-3", OrgID: "acme"}
	if charged, err := b.Settle(ctx, e); err != nil || !charged {
		t.Fatalf("settle: %v %v", charged, err)
	}
	const want = "[bad-1 a/n-1 key_a/n-2 acme/n-3 0.30]"
	if got := heard.String(); got != want {
		t.Fatalf("kept %s, want %s", got, want)
	}
	spends := func(b *Batched) string {
		t.Helper()
		var out []string
		for _, read := range []struct {
			name string
			f    func(context.Context, string, time.Time) (store.Spend, error)
			id   string
		}{{"account", b.Spend, "a"}, {"key", b.KeySpend, "key_a"}, {"org", b.OrgSpend, "acme"}, {"other org", b.OrgSpend, "other"}} {
			sp, err := read.f(ctx, read.id, now)
			if err != nil {
				t.Fatalf("%s spend: %v", read.name, err)
			}
			out = append(out, fmt.Sprintf("%s %s/%s/%s", read.name, sp.Today, sp.Month, sp.Total))
		}
		return fmt.Sprint(out)
	}
	const wantSpend = "[account 0.30/0.30/0.30 key 0.30/0.30/0.30 org 0.30/0.30/0.30 other org 0.00/0.00/0.00]"
	if got := spends(b); got != wantSpend {
		t.Fatalf("spend with the charge spooled: %s, want %s", got, wantSpend)
	}
	if err := b.Close(); err != nil { // closes db too
		t.Fatal(err)
	}

	// The next start finds the charge in the spool, with its holds.
	db2, err := sqlite.Open(dbDir)
	if err != nil {
		t.Fatal(err)
	}
	var again heardHolds
	b2 := open(db2, dir, &again)
	t.Cleanup(func() { b2.Close() })
	if got := again.String(); got != want {
		t.Fatalf("kept at the next start %s, want %s", got, want)
	}
	if got := spends(b2); got != wantSpend {
		t.Fatalf("spend at the next start: %s, want %s", got, wantSpend)
	}
}

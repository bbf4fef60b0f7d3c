package money

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// spoolOnly is a store whose shared database takes no charge: each stays
// in the node's spool (recorded here, never in the store) until applied
// is closed.
type spoolOnly struct {
	store.Store
	applied chan struct{}
	mu      sync.Mutex
	spooled []store.Entry
}

func (s *spoolOnly) Settle(_ context.Context, e *store.Entry) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spooled = append(s.spooled, *e)
	return true, nil
}

func (s *spoolOnly) Applied(string) <-chan struct{} { return s.applied }

// only returns the one charge spooled.
func (s *spoolOnly) only(t *testing.T) store.Entry {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.spooled) != 1 {
		t.Fatalf("%d charges spooled, want 1", len(s.spooled))
	}
	return s.spooled[0]
}

// capsFixture has an organization acme with a daily cap of 1.00 over its
// accounts a and b, and a's key k with a daily cap of 0.50.
func capsFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t, Policy{})
	if err := f.store.CreateOrg(context.Background(), store.Org{ID: "acme", DailyCap: ptr(usd("1.00")), CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	f.account(t, store.Account{ID: "a", Plan: store.PlanPaid, Cleared: true, Org: "acme"})
	f.account(t, store.Account{ID: "b", Plan: store.PlanPaid, Cleared: true, Org: "acme"})
	f.key(t, store.Key{ID: "k", AccountID: "a", DailyCap: ptr(usd("0.50"))})
	return f
}

// A spooled charge carries the records of its hold in its account's, its
// key's and its organization's scopes, and the organization it was
// admitted under; on one node's memory the three holds stay until the
// shared store has the charge.
func TestSpooledChargeCarriesItsHolds(t *testing.T) {
	f := capsFixture(t)
	ctx := context.Background()
	sp := &spoolOnly{Store: f.store, applied: make(chan struct{})}
	f.gate.Store = sp
	h, err := f.gate.ReserveFor(ctx, Payer{Account: "a", Key: "k"}, Ability, usd("0.30"))
	if err != nil {
		t.Fatal(err)
	}
	if charged, err := h.Settle(ctx, &store.Entry{RequestID: "kept", KeyID: "k", Cost: usd("0.20")}); err != nil || !charged {
		t.Fatalf("settle: %v %v", charged, err)
	}
	e := sp.only(t)
	if h.id == "" || e.HoldID != h.id || e.KeyHoldID != h.id || e.OrgHoldID != h.id || e.OrgID != "acme" {
		t.Fatalf("spooled hold %q key hold %q org hold %q of %q; want the hold's %q in each scope, of acme",
			e.HoldID, e.KeyHoldID, e.OrgHoldID, e.OrgID, h.id)
	}
	if got := spooledHolds(&e); len(got) != 3 || got[0] != (scopedHold{"a", h.id}) ||
		got[1] != (scopedHold{"key:k", h.id}) || got[2] != (scopedHold{"org:acme", h.id}) {
		t.Fatalf("spooled holds %v", got)
	}
	for _, scope := range []string{"a", "key:k", "org:acme"} {
		if held, err := heldIn(ctx, f.gate.Locks, scope); err != nil || held != usd("0.30") {
			t.Fatalf("%s holds %s (%v) while the charge is spooled, want 0.30", scope, held, err)
		}
	}
	close(sp.applied)
	for _, scope := range []string{"a", "key:k", "org:acme"} {
		waitHeld(t, f.gate.Locks, scope, 0)
	}
}

// A node that dies with a charge in its spool (the shared store down)
// leaves that charge's money held on every node in its key's and its
// organization's scopes too, not only its account's: the other node
// refuses a call that would pass the key's cap or the organization's
// with the charge counted, though the store does not have it yet, until
// the next process on the node's folder drops the kept holds.
func TestKeptKeyAndOrgHoldsOutliveTheirNode(t *testing.T) {
	_, client := redisClient(t)
	ctx := context.Background()
	f := capsFixture(t)
	other, err := NewRedisLocks(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Destruct() })
	dying := newRedisLocks(client, 300*time.Millisecond, time.Hour, RestoreWait)
	sp := &spoolOnly{Store: f.store, applied: make(chan struct{})}
	g := &Gate{Store: sp, Locks: dying, Now: func() time.Time { return f.now }}
	p := Payer{Account: "a", Key: "k"}
	h, err := g.ReserveFor(ctx, p, Ability, usd("0.40"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.ReserveFor(ctx, p, Ability, usd("0.05")); err != nil { // a hold that dies with the node
		t.Fatal(err)
	}
	// The charge goes to the spool at 0.30; the spool's hook keeps its
	// holds.
	if _, err := h.Settle(ctx, &store.Entry{RequestID: "spooled", KeyID: "k", Cost: usd("0.30")}); err != nil {
		t.Fatal(err)
	}
	e := sp.only(t)
	if err := KeepSpooled(ctx, dying, e); err != nil {
		t.Fatal(err)
	}
	// The node dies: once the plain hold's lease has ended, the kept ones
	// still count in every scope, and stay through a clean stop.
	scopes := []string{"a", "key:k", "org:acme"}
	for _, scope := range scopes {
		waitHeld(t, other, scope, usd("0.30"))
	}
	dying.Destruct()
	for _, scope := range scopes {
		if held, err := heldIn(ctx, other, scope); err != nil || held != usd("0.30") {
			t.Fatalf("%s holds %s (%v) after the node stopped, want the kept 0.30", scope, held, err)
		}
	}
	og := &Gate{Store: f.store, Locks: other, Now: func() time.Time { return f.now }}
	if _, err := og.ReserveFor(ctx, p, Ability, usd("0.25")); code(t, err) != gwerr.CodeKeyDailyCap {
		t.Fatalf("a call of the key counting the dead node's spooled charge: %v, want key_daily_cap", err)
	}
	if _, err := og.Reserve(ctx, "b", Ability, usd("0.75")); code(t, err) != gwerr.CodeOrgDailyCap {
		t.Fatalf("a call of another account of the organization: %v, want org_daily_cap", err)
	}
	fits, err := og.ReserveFor(ctx, p, Ability, usd("0.20"))
	if err != nil {
		t.Fatalf("a call that fits beside the spooled charge: %v", err)
	}
	fits.Release(ctx)
	// The next process applies the spool and drops the holds by their ids.
	if err := DropSpooled(ctx, other, e); err != nil {
		t.Fatal(err)
	}
	for _, scope := range scopes {
		if held, err := heldIn(ctx, other, scope); err != nil || held != 0 {
			t.Fatalf("%s holds %s (%v) after the spool was applied, want 0", scope, held, err)
		}
	}
}

// RedisLocks.Lock of several scopes takes them all at once or none: a
// lock that waits for one of them holds none of the others meanwhile,
// and an unlock releases them all.
func TestRedisLockAllOrNone(t *testing.T) {
	_, client := redisClient(t)
	ctx := context.Background()
	l, err := NewRedisLocks(ctx, client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Destruct() })
	tryLock := func(scopes ...string) (func(), error) {
		ctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		return l.Lock(ctx, scopes...)
	}
	unlockB, err := tryLock("b")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tryLock("org:o", "b"); err == nil {
		t.Fatal("took the locks of org:o and b while b was taken")
	}
	unlockO, err := tryLock("org:o")
	if err != nil {
		t.Fatalf("org:o left locked by a lock that could not take b: %v", err)
	}
	unlockO()
	unlockB()
	unlock, err := tryLock("org:o", "b")
	if err != nil {
		t.Fatal(err)
	}
	for _, scope := range []string{"org:o", "b"} {
		if _, err := tryLock(scope); err == nil {
			t.Fatalf("took %s while both were taken", scope)
		}
	}
	unlock()
	if n, err := client.Exists(ctx, lockKey("org:o"), lockKey("b")).Result(); err != nil || n != 0 {
		t.Fatalf("%d locks left after the unlock (%v)", n, err)
	}
}

// Two nodes on one Redis: 30 calls at once over two accounts of one
// organization (half of them with a's capped key) never pass the key's
// cap or the organization's, whichever node admits them, and the holds
// each node sees in the key's and the organization's scopes are those
// admitted.
func TestRedisLocksKeyAndOrgCapsAcrossNodes(t *testing.T) {
	_, client := redisClient(t)
	ctx := context.Background()
	f := capsFixture(t)
	var gates []*Gate
	for range 2 {
		l, err := NewRedisLocks(ctx, client)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Destruct() })
		gates = append(gates, &Gate{Store: f.store, Locks: l, Now: func() time.Time { return f.now }})
	}
	var (
		mu            sync.Mutex
		withKey, held int
		codes         = map[string]int{}
		wg            sync.WaitGroup
	)
	for i := range 30 {
		wg.Go(func() {
			p := Payer{Account: "b"}
			if i%2 == 0 {
				p = Payer{Account: "a", Key: "k"}
			}
			_, err := gates[i/2%2].ReserveFor(ctx, p, Chat, usd("0.08"))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				codes[gwerr.As(err).Code]++
				return
			}
			held++
			if p.Key != "" {
				withKey++
			}
		})
	}
	wg.Wait()
	// The key's cap admits 6 (0.48 of 0.50), the organization's 12 in all
	// (0.96 of 1.00): b's 15 calls fill what a's leave.
	if held != 12 || withKey > 6 || codes[gwerr.CodeKeyDailyCap]+codes[gwerr.CodeOrgDailyCap] != 18 {
		t.Fatalf("%d held (%d with the key), refusals %v; want 12 held, at most 6 with the key, 18 refused for a cap", held, withKey, codes)
	}
	for _, g := range gates {
		if got, err := heldIn(ctx, g.Locks, "org:acme"); err != nil || got != usd("0.96") {
			t.Fatalf("organization holds %s (%v), want 0.96", got, err)
		}
		if got, err := heldIn(ctx, g.Locks, "key:k"); err != nil || got != usd("0.08")*pricing.Money(withKey) {
			t.Fatalf("key holds %s (%v), want %d × 0.08", got, err, withKey)
		}
	}
}

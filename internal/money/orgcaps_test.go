package money

import (
	"context"
	"sync"
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/store"
)

// TestOrgCaps: an organization's caps bound the summed spend of its
// accounts, on the plain store and the hot path's: concurrent calls of two
// accounts never pass the cap together, each refusal names it, an account
// outside the organization is not bound by it, a settlement past it is
// charged up to it, and an account that leaves the organization leaves
// its cap behind.
func TestOrgCaps(t *testing.T) {
	for name, newF := range map[string]func(*testing.T, Policy) *fixture{"sqlite": newFixture, "cached": newCachedFixture} {
		t.Run(name, func(t *testing.T) {
			f := newF(t, Policy{})
			ctx := context.Background()
			if err := f.store.CreateOrg(ctx, store.Org{ID: "acme", DailyCap: ptr(usd("1.00")), CreatedAt: t0}); err != nil {
				t.Fatal(err)
			}
			f.account(t, store.Account{ID: "a", Plan: store.PlanPaid, Cleared: true, Org: "acme"})
			f.account(t, store.Account{ID: "b", Plan: store.PlanPaid, Cleared: true, Org: "acme"})
			f.account(t, store.Account{ID: "c", Plan: store.PlanPaid, Cleared: true})

			// 20 calls of 0.08 over two accounts against a 1.00 daily cap:
			// 12 fit.
			var (
				mu    sync.Mutex
				holds []*Hold
				codes = map[string]int{}
				wg    sync.WaitGroup
			)
			for i := range 20 {
				wg.Go(func() {
					account := []string{"a", "b"}[i%2]
					h, err := f.gate.Reserve(ctx, account, Chat, usd("0.08"))
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						codes[gwerr.As(err).Code]++
						return
					}
					holds = append(holds, h)
				})
			}
			wg.Wait()
			if len(holds) != 12 || codes[gwerr.CodeOrgDailyCap] != 8 {
				t.Fatalf("%d held, refusals %v; want 12 held and 8 org_daily_cap", len(holds), codes)
			}
			h, err := f.gate.Reserve(ctx, "c", Chat, usd("3"))
			if err != nil {
				t.Fatalf("an account outside the organization: %v", err)
			}
			h.Release(ctx)
			for i, h := range holds {
				e := store.Entry{RequestID: store.NewID("req"), Cost: usd("0.08")}
				if i == 0 {
					e.Cost = usd("0.20") // past its hold: charged up to the cap
				}
				if _, err := h.Settle(ctx, &e); err != nil {
					t.Fatal(err)
				}
				if i == 0 && (e.Cost != usd("0.20") || e.Shortfall != 0) {
					t.Fatalf("first settlement: charged %s short %s", e.Cost, e.Shortfall)
				}
			}
			sp, err := f.store.OrgSpend(ctx, "acme", f.now)
			if err != nil || sp.Today != usd("1.00") {
				t.Fatalf("organization spend %+v, %v; want the cap, 1.00, today", sp, err)
			}
			if _, err := f.gate.Reserve(ctx, "b", Chat, 0); code(t, err) != gwerr.CodeOrgDailyCap {
				t.Fatalf("at the cap: %v, want org_daily_cap", err)
			}
			// b leaves the organization: its cap no longer applies to b.
			if _, err := f.store.UpdateAccount(ctx, "b", func(a *store.Account) error { a.Org = ""; return nil }); err != nil {
				t.Fatal(err)
			}
			if err := f.gate.Check(ctx, Payer{Account: "b"}, Chat); err != nil {
				t.Fatalf("b outside the organization: %v", err)
			}
			if _, err := f.gate.Reserve(ctx, "a", Chat, 0); code(t, err) != gwerr.CodeOrgDailyCap {
				t.Fatalf("a still in it: %v, want org_daily_cap", err)
			}
		})
	}
}

// A call of an account that moved to another organization since its last
// call (the gate remembers the organization it last saw the account in)
// is held to its new organization's caps, and holds in its scope: the
// account is read again under the locks, and a call that locked the old
// organization takes the new one's lock instead. Likewise an account
// that joins an organization, and one that leaves it.
func TestOrgMoveBetweenCalls(t *testing.T) {
	for name, newF := range map[string]func(*testing.T, Policy) *fixture{"sqlite": newFixture, "cached": newCachedFixture} {
		t.Run(name, func(t *testing.T) {
			f := newF(t, Policy{})
			ctx := context.Background()
			for id, limit := range map[string]string{"x": "1.00", "y": "0.10"} {
				if err := f.store.CreateOrg(ctx, store.Org{ID: id, DailyCap: ptr(usd(limit)), CreatedAt: t0}); err != nil {
					t.Fatal(err)
				}
			}
			f.account(t, store.Account{ID: "a", Plan: store.PlanPaid, Cleared: true})
			move := func(org string) {
				t.Helper()
				if _, err := f.store.UpdateAccount(ctx, "a", func(a *store.Account) error { a.Org = org; return nil }); err != nil {
					t.Fatal(err)
				}
			}
			reserve := func(est string) (*Hold, error) { return f.gate.Reserve(ctx, "a", Chat, usd(est)) }
			held := func(scope, want string) {
				t.Helper()
				if got, err := heldIn(ctx, f.gate.Locks, scope); err != nil || got != usd(want) {
					t.Fatalf("%s holds %s (%v), want %s", scope, got, err, want)
				}
			}
			outside, err := reserve("0.50") // remembered in no organization
			if err != nil {
				t.Fatal(err)
			}
			move("x")
			inX, err := reserve("0.50")
			if err != nil {
				t.Fatal(err)
			}
			held("org:x", "0.50")
			if _, err := reserve("0.60"); code(t, err) != gwerr.CodeOrgDailyCap {
				t.Fatalf("past x's cap: %v, want org_daily_cap", err)
			}
			move("y")
			if _, err := reserve("0.20"); code(t, err) != gwerr.CodeOrgDailyCap {
				t.Fatalf("past y's cap, a last seen in x: %v, want org_daily_cap", err)
			}
			inY, err := reserve("0.05")
			if err != nil {
				t.Fatal(err)
			}
			held("org:y", "0.05")
			held("org:x", "0.50")
			move("")
			if h, err := reserve("3"); err != nil {
				t.Fatalf("a out of every organization, last seen in y: %v", err)
			} else {
				h.Release(ctx)
			}
			for _, h := range []*Hold{outside, inX, inY} {
				h.Release(ctx)
			}
			held("org:x", "0")
			held("org:y", "0")
			held("a", "0")
		})
	}
}

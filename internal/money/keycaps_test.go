package money

import (
	"context"
	"sync"
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// key issues a key of account with caps.
func (f *fixture) key(t *testing.T, k store.Key) {
	t.Helper()
	k.Hash = store.HashSecret(k.ID)
	if err := f.store.CreateKey(context.Background(), k); err != nil {
		t.Fatal(err)
	}
}

// TestKeyCaps: a key's caps bound the calls made with it, under its
// account's lock, on the plain store and the hot path's: concurrent
// reservations never pass a cap, each refusal names the cap, another key
// of the account and a call without a key are not bound by it, a released
// hold gives its room back, and a settlement past the cap is charged up
// to it, the rest a shortfall.
func TestKeyCaps(t *testing.T) {
	for name, newF := range map[string]func(*testing.T, Policy) *fixture{"sqlite": newFixture, "cached": newCachedFixture} {
		t.Run(name, func(t *testing.T) {
			f := newF(t, Policy{})
			ctx := context.Background()
			f.account(t, store.Account{ID: "a", Plan: store.PlanPaid, Cleared: true})
			f.key(t, store.Key{ID: "daily", AccountID: "a", DailyCap: ptr(usd("1.00"))})
			f.key(t, store.Key{ID: "total", AccountID: "a", TotalCap: ptr(usd("0.50")), MonthlyCap: ptr(usd("5"))})
			f.key(t, store.Key{ID: "open", AccountID: "a"})

			// 20 calls of 0.08 against a 1.00 daily cap: 12 fit.
			var (
				mu    sync.Mutex
				holds []*Hold
				codes = map[string]int{}
				wg    sync.WaitGroup
			)
			for range 20 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					h, err := f.gate.ReserveFor(ctx, Payer{Account: "a", Key: "daily"}, Chat, usd("0.08"))
					mu.Lock()
					defer mu.Unlock()
					if err != nil {
						codes[gwerr.As(err).Code]++
						return
					}
					holds = append(holds, h)
				}()
			}
			wg.Wait()
			if len(holds) != 12 || codes[gwerr.CodeKeyDailyCap] != 8 {
				t.Fatalf("%d held, refusals %v; want 12 held and 8 key_daily_cap", len(holds), codes)
			}
			if err := f.gate.Check(ctx, Payer{Account: "a", Key: "daily"}, Chat); code(t, err) != "" {
				t.Fatalf("a check with 0.04 left: %v", err)
			}
			if room, err := f.gate.Room(ctx, Payer{Account: "a", Key: "daily"}, Chat); err != nil || room != usd("0.04") {
				t.Fatalf("room %v, %v; want 0.04", room, err)
			}
			// Other keys and calls without a key are not bound by it.
			for _, p := range []Payer{{Account: "a", Key: "open"}, {Account: "a"}} {
				h, err := f.gate.ReserveFor(ctx, p, Chat, usd("3"))
				if err != nil {
					t.Fatalf("%+v: %v", p, err)
				}
				h.Release(ctx)
			}
			// A released hold gives its room back.
			holds[0].Release(ctx)
			h, err := f.gate.ReserveFor(ctx, Payer{Account: "a", Key: "daily"}, Chat, usd("0.12"))
			if err != nil {
				t.Fatalf("after a release: %v", err)
			}
			h.Release(ctx)
			for _, h := range holds[1:] {
				e := store.Entry{RequestID: store.NewID("req"), KeyID: "daily", Cost: usd("0.08")}
				if _, err := h.Settle(ctx, &e); err != nil {
					t.Fatal(err)
				}
			}
			// 11 × 0.08 = 0.88 spent: a call of 0.08 fits, and its
			// settlement of 0.20 is charged up to the cap.
			h, err = f.gate.ReserveFor(ctx, Payer{Account: "a", Key: "daily"}, Chat, usd("0.08"))
			if err != nil {
				t.Fatal(err)
			}
			e := store.Entry{RequestID: "past", KeyID: "daily", Cost: usd("0.20")}
			if _, err := h.Settle(ctx, &e); err != nil || e.Cost != usd("0.12") || e.Shortfall != usd("0.08") {
				t.Fatalf("settled past the cap: %v, charged %s short %s; want 0.12 and 0.08", err, e.Cost, e.Shortfall)
			}
			if _, err := f.gate.ReserveFor(ctx, Payer{Account: "a", Key: "daily"}, Chat, 0); code(t, err) != gwerr.CodeKeyDailyCap {
				t.Fatalf("at the cap: %v, want key_daily_cap", err)
			}
			sp, err := f.store.KeySpend(ctx, "daily", f.now)
			if err != nil || sp.Today != usd("1.00") {
				t.Fatalf("key spend %+v, %v; want 1.00 today", sp, err)
			}
			// The next day the daily cap is free again; a total cap is not.
			f.now = f.now.AddDate(0, 0, 1)
			if err := f.gate.Check(ctx, Payer{Account: "a", Key: "daily"}, Chat); err != nil {
				t.Fatalf("the next day: %v", err)
			}
			h, _ = f.gate.ReserveFor(ctx, Payer{Account: "a", Key: "total"}, Chat, usd("0.50"))
			if _, err := h.Settle(ctx, &store.Entry{RequestID: "t1", KeyID: "total", Cost: usd("0.50")}); err != nil {
				t.Fatal(err)
			}
			f.now = f.now.AddDate(0, 2, 0)
			if _, err := f.gate.ReserveFor(ctx, Payer{Account: "a", Key: "total"}, Chat, pricing.Money(1)); code(t, err) != gwerr.CodeKeyTotalCap {
				t.Fatalf("two months later: %v, want key_total_cap", err)
			}
		})
	}
}

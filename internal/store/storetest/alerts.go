package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// pending returns the outbox of webhook id, oldest first, as
// "type cap threshold account key org spend/limit balance" lines.
func pending(t *testing.T, st store.Store, id string) []string {
	t.Helper()
	ds, err := st.Deliveries(context.Background(), id, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for i := len(ds) - 1; i >= 0; i-- {
		var ev store.Event
		if err := json.Unmarshal(ds[i].Body, &ev); err != nil {
			t.Fatal(err)
		}
		if ev.ID != ds[i].EventID || ev.Type != ds[i].Type || ev.Account != ds[i].Account {
			t.Fatalf("delivery %+v holds event %+v", ds[i], ev)
		}
		show := func(m *pricing.Money) string {
			if m == nil {
				return "-"
			}
			return m.String()
		}
		out = append(out, fmt.Sprintf("%s %s %d %s %s %s %s/%s %s", ev.Type, ev.Cap, ev.Threshold, ev.Account, ev.KeyID, ev.Org,
			show(ev.Spend), show(ev.Limit), show(ev.Balance)))
	}
	return out
}

// Webhooks are created, listed oldest first and deleted; a taken id is
// refused, and a deleted one is not found.
func testWebhooks(t *testing.T, st store.Store) {
	ctx := context.Background()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, w := range []store.Webhook{
		{ID: "wh_b", URL: "http://127.0.0.1:1/a", Secret: "s1", Events: []string{store.EventCapThreshold}, CreatedAt: t0},
		{ID: "wh_a", URL: "https://example.test/b", Secret: "s2", Events: store.EventTypes, CreatedAt: t0.Add(time.Second)},
	} {
		if err := st.CreateWebhook(ctx, w); err != nil {
			t.Fatalf("webhook %d: %v", i, err)
		}
	}
	if err := st.CreateWebhook(ctx, store.Webhook{ID: "wh_a", URL: "http://x", Events: []string{}}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("a second wh_a: %v", err)
	}
	list, err := st.ListWebhooks(ctx)
	if err != nil || len(list) != 2 || list[0].ID != "wh_b" || list[1].ID != "wh_a" || list[0].Secret != "s1" ||
		!slices.Equal(list[1].Events, store.EventTypes) || !list[0].CreatedAt.Equal(t0) || list[1].URL != "https://example.test/b" {
		t.Fatalf("ListWebhooks = %+v, %v", list, err)
	}
	if err := st.DeleteWebhook(ctx, "wh_b"); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteWebhook(ctx, "wh_b"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleting wh_b again: %v", err)
	}
	if _, err := st.Deliveries(ctx, "wh_b", 10); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deliveries of a deleted webhook: %v", err)
	}
	if list, err := st.ListWebhooks(ctx); err != nil || len(list) != 1 || list[0].ID != "wh_a" {
		t.Fatalf("ListWebhooks after the delete = %+v, %v", list, err)
	}
}

// Charges that take a cap's spend across 50, 80 and 100 % raise one
// cap.threshold event per threshold and period, for the account's, the
// key's and the organization's caps, to the webhooks subscribed to the
// type; a prepaid balance crossing its low mark raises balance.low, and a
// revoked key key.revoked.
func testAlerts(t *testing.T, st store.Store) {
	ctx := context.Background()
	day := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	hooks := map[string][]string{"wh_all": store.EventTypes, "wh_caps": {store.EventCapThreshold}, "wh_keys": {store.EventKeyRevoked}}
	for _, id := range []string{"wh_all", "wh_caps", "wh_keys"} {
		if err := st.CreateWebhook(ctx, store.Webhook{ID: id, URL: "http://127.0.0.1:1/" + id, Secret: "s", Events: hooks[id]}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.CreateOrg(ctx, store.Org{ID: "o", DailyCap: ptr(usd("6"))}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateAccount(ctx, store.Account{ID: "a", Plan: store.PlanPaid, Balance: ptr(usd("100")), LowBalance: ptr(usd("97")),
		DailyCap: ptr(usd("4")), Org: "o"}); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateKey(ctx, store.Key{ID: "k", AccountID: "a", Hash: "h", TotalCap: ptr(usd("2"))}); err != nil {
		t.Fatal(err)
	}
	settle := func(id string, cost string, at time.Time) {
		t.Helper()
		e := store.Entry{RequestID: id, AccountID: "a", KeyID: "k", Cost: usd(cost), Time: at}
		if ok, err := st.Settle(ctx, &e); err != nil || !ok {
			t.Fatalf("settle %s: %v, %v", id, ok, err)
		}
	}
	settle("r1", "0.99", day) // key 0.99 of 2: below 50 %
	settle("r2", "0.01", day) // key 1.00: 50 %
	settle("r3", "1.20", day) // floored to 1.00: key 2.00, 80 and 100 %; account 2.00 of 4, 50 %
	settle("r4", "1.00", day) // floored to nothing: the key's total cap is spent
	if _, err := st.UpdateKey(ctx, "k", func(k *store.Key) error { k.TotalCap = nil; return nil }); err != nil {
		t.Fatal(err)
	}
	settle("r5", "1.20", day)                  // account 3.20: 80 %; organization 3.20 of 6: 50 %; balance 96.80 < 97
	settle("r6", "2.00", day)                  // floored to 0.80: account 4.00, 100 %
	settle("r7", "3.50", day.AddDate(0, 0, 1)) // a new day: account 50 and 80 %, organization 50 % again
	if err := st.DeleteKey(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	caps := []string{
		"cap.threshold key_total_cap 50 a k  1.00/2.00 -",
		"cap.threshold daily_cap 50 a   2.00/4.00 -",
		"cap.threshold key_total_cap 80 a k  2.00/2.00 -",
		"cap.threshold key_total_cap 100 a k  2.00/2.00 -",
		"cap.threshold daily_cap 80 a   3.20/4.00 -",
		"cap.threshold org_daily_cap 50 a  o 3.20/6.00 -",
		"cap.threshold daily_cap 100 a   4.00/4.00 -",
		"cap.threshold daily_cap 50 a   3.50/4.00 -",
		"cap.threshold daily_cap 80 a   3.50/4.00 -",
		"cap.threshold org_daily_cap 50 a  o 3.50/6.00 -",
	}
	if got := pending(t, st, "wh_caps"); !slices.Equal(got, caps) {
		t.Fatalf("wh_caps outbox\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(caps, "\n"))
	}
	revoked := "key.revoked  0 a k  -/- -"
	wantAll := slices.Concat(caps[:6], []string{"balance.low  0 a   -/97.00 96.80"}, caps[6:], []string{revoked})
	if got := pending(t, st, "wh_all"); !slices.Equal(got, wantAll) {
		t.Fatalf("wh_all outbox\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(wantAll, "\n"))
	}
	if got := pending(t, st, "wh_keys"); !slices.Equal(got, []string{revoked}) {
		t.Fatalf("wh_keys outbox %q", got)
	}
}

// The outbox hands out, at each moment, the oldest pending delivery of
// each webhook and account whose time has come: a later event of the same
// account waits for the one before it, another account's does not. A
// claim takes a delivery once however many ask; a failed attempt is due
// again at its next time, a delivered one never.
func testDeliveries(t *testing.T, st store.Store) {
	ctx := context.Background()
	if err := st.CreateWebhook(ctx, store.Webhook{ID: "wh", URL: "http://127.0.0.1:1/", Secret: "s", Events: []string{store.EventKeyRevoked}}); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"a", "b"} {
		if err := st.CreateAccount(ctx, store.Account{ID: a, Plan: store.PlanPaid}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"a1", "b1", "a2"} {
		if err := st.CreateKey(ctx, store.Key{ID: k, AccountID: k[:1], Hash: "h" + k}); err != nil {
			t.Fatal(err)
		}
		if err := st.DeleteKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	keyOf := func(d store.Delivery) string {
		var ev store.Event
		if err := json.Unmarshal(d.Body, &ev); err != nil {
			t.Fatal(err)
		}
		return ev.KeyID
	}
	due := func(now time.Time) []string {
		t.Helper()
		ds, err := st.Due(ctx, now, 10)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, d := range ds {
			if d.URL != "http://127.0.0.1:1/" || d.Secret != "s" || d.WebhookID != "wh" {
				t.Fatalf("due %+v", d)
			}
			ids = append(ids, keyOf(d))
		}
		return ids
	}
	now := time.Now().Add(time.Minute)
	if got := due(now); !slices.Equal(got, []string{"a1", "b1"}) {
		t.Fatalf("due at first: %q, want a1 and b1 (a2 waits for a1)", got)
	}
	ds, _ := st.Due(ctx, now, 10)
	a1 := ds[0]
	// Many claim a1 at once: one wins.
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		won int
	)
	lease := now.Add(time.Minute)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d := a1
			ok, err := st.Claim(ctx, &d, lease)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				won++
				mu.Unlock()
				if d.Attempts != 1 || !d.NextAt.Equal(lease) {
					t.Errorf("claimed %+v", d)
				}
			}
		}()
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d claims of a1 won, want 1", won)
	}
	if got := due(now); !slices.Equal(got, []string{"b1"}) {
		t.Fatalf("due while a1 is claimed: %q, want b1", got)
	}
	retry := now.Add(2 * time.Minute)
	if err := st.Attempted(ctx, a1.Seq, now, retry, 503, strings.Repeat("x", store.MaxDeliveryError+10)); err != nil {
		t.Fatal(err)
	}
	if got := due(now); !slices.Equal(got, []string{"b1"}) {
		t.Fatalf("due before a1's retry: %q, want b1", got)
	}
	if got := due(retry); !slices.Equal(got, []string{"a1", "b1"}) {
		t.Fatalf("due at a1's retry: %q", got)
	}
	if err := st.Attempted(ctx, a1.Seq, retry, time.Time{}, 204, ""); err != nil {
		t.Fatal(err)
	}
	if got := due(retry); !slices.Equal(got, []string{"b1", "a2"}) {
		t.Fatalf("due once a1 is delivered: %q, want b1 and a2", got)
	}
	log, err := st.Deliveries(ctx, "wh", 2)
	if err != nil || len(log) != 2 || keyOf(log[0]) != "a2" || keyOf(log[1]) != "b1" {
		t.Fatalf("newest deliveries %+v, %v", log, err)
	}
	log, _ = st.Deliveries(ctx, "wh", 10)
	first := log[2]
	if keyOf(first) != "a1" || first.Attempts != 1 || first.Delivered == nil || !first.Delivered.Equal(retry.UTC().Truncate(0)) ||
		first.LastStatus != 204 || first.LastError != "" {
		t.Fatalf("a1's delivery %+v", first)
	}
	if err := st.DeleteWebhook(ctx, "wh"); err != nil {
		t.Fatal(err)
	}
	if got := due(retry); len(got) != 0 {
		t.Fatalf("due after the webhook's deletion: %q", got)
	}
}

package integration

import (
	"net/http"
	"sync"
	"testing"

	"github.com/caddy-gw/caddy-gw/pricing"
)

// TestKeyCaps: a key's daily cap bounds the calls made with it, on one
// node and on two sharing PostgreSQL and Redis, with 24 calls at once and
// then one after another until the cap refuses one, against a provider
// that bills three times the gateway's count: the key never spends past
// its cap (what it would have cost beyond is each entry's shortfall),
// every refusal is 402 key_daily_cap with its hold reason, the account's
// other key is not bound by it, and the key's spend on the admin API
// equals the ledger's entries made with it.
func TestKeyCaps(t *testing.T) {
	t.Parallel()
	overbilledNodes(t, keyCapsRun)
}

func keyCapsRun(t *testing.T, nodes []*gateway, capUSD, cost pricing.Money) {
	const account, n = "team", 24
	g := nodes[0]
	g.createAccount(t, map[string]any{"id": account, "plan": "paid", "cleared": true})
	capped, cappedID := g.createKey(t, account, map[string]any{"name": "dev", "daily_cap_usd": capUSD.String()})
	other, _ := g.createKey(t, account, map[string]any{"name": "ops"})
	var (
		mu       sync.Mutex
		receipts pricing.Money
		served   int
		wg       sync.WaitGroup
	)
	for i := range n {
		wg.Go(func() {
			r := nodes[i%len(nodes)].do(t, http.MethodPost, "/v1/chat/completions", shortfallBody, bearer(capped)...)
			switch r.Status {
			case http.StatusOK:
				mu.Lock()
				receipts += mustUSD(t, r.Header.Get("X-Gw-Cost-Usd"))
				served++
				mu.Unlock()
			case http.StatusPaymentRequired:
				if r.Header.Get("X-Gw-Hold-Reason") != "key_daily_cap" {
					t.Errorf("402 %s (hold reason %q), want key_daily_cap", r.Body, r.Header.Get("X-Gw-Hold-Reason"))
				}
			default:
				t.Errorf("status %d %s, want 200 or 402", r.Status, r.Body)
			}
		})
	}
	wg.Wait()
	// Then one call after another until the cap refuses one: what is left
	// may still admit a call sized down to fit it.
	refused := false
	for range 30 {
		r := g.do(t, http.MethodPost, "/v1/chat/completions", shortfallBody, bearer(capped)...)
		if r.Status == http.StatusPaymentRequired {
			if r.Header.Get("X-Gw-Hold-Reason") != "key_daily_cap" {
				t.Errorf("402 %s (hold reason %q), want key_daily_cap", r.Body, r.Header.Get("X-Gw-Hold-Reason"))
			}
			refused = true
			break
		}
		if r.Status != http.StatusOK {
			t.Fatalf("status %d %s, want 200 or 402", r.Status, r.Body)
		}
		receipts += mustUSD(t, r.Header.Get("X-Gw-Cost-Usd"))
		served++
	}
	if !refused {
		t.Fatal("30 more calls and none refused by the key's cap")
	}
	var ledger pricing.Money
	entries := g.ledger(t, account)
	for _, l := range entries {
		c, s := mustUSD(t, l.Cost), mustUSD(t, l.Shortfall)
		if c < 0 || s < 0 || c+s != cost {
			t.Errorf("entry %s: cost %s + shortfall %s, want %s", l.RequestID, l.Cost, l.Shortfall, cost)
		}
		ledger += c
	}
	if len(entries) != served || served == 0 || ledger != receipts || ledger > capUSD {
		t.Fatalf("%d served, %d entries, ledger %s, receipts %s, cap %s: want them equal and within the cap", served, len(entries), ledger, receipts, capUSD)
	}
	k := g.adminJSON(t, http.MethodGet, "/gw/keys/"+cappedID, nil, http.StatusOK).JSON(t)
	spend, _ := k["spend"].(map[string]any)
	if k["daily_cap_usd"] != capUSD.String() || spend["today_usd"] != ledger.String() || spend["total_usd"] != ledger.String() {
		t.Errorf("GET /gw/keys/%s = %v, want daily_cap_usd %s and spend %s today and in all", cappedID, k, capUSD, ledger)
	}
	// The cap is the key's: the account's other key still calls.
	if r := nodes[len(nodes)-1].do(t, http.MethodPost, "/v1/chat/completions", shortfallBody, bearer(other)...); r.Status != http.StatusOK {
		t.Errorf("the other key: %d %s, want 200", r.Status, r.Body)
	}
	g.expectJournalOK(t)
}

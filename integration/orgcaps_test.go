package integration

import (
	"net/http"
	"sync"
	"testing"

	"github.com/caddy-gw/caddy-gw/pricing"
)

// TestOrgCaps: an organization's daily cap bounds the summed spend of its
// two accounts, on one node and on two sharing PostgreSQL and Redis, with
// 24 calls at once over both accounts and then one after another until
// the cap refuses one, against a provider that bills three times the
// gateway's count: the two never spend past the cap together (what the
// calls cost beyond it is their shortfall), every refusal is 402
// org_daily_cap with its hold reason, an account outside the organization
// is not bound by it, and the organization's spend on the admin API
// equals its accounts' ledgers.
func TestOrgCaps(t *testing.T) {
	t.Parallel()
	overbilledNodes(t, orgCapsRun)
}

func orgCapsRun(t *testing.T, nodes []*gateway, capUSD, cost pricing.Money) {
	const n = 24
	g := nodes[0]
	g.adminJSON(t, http.MethodPost, "/gw/orgs", map[string]any{"id": "acme", "name": "Acme", "daily_cap_usd": capUSD.String()}, http.StatusCreated)
	keys := []string{
		g.newAccountKey(t, map[string]any{"id": "acme-a", "plan": "paid", "cleared": true, "org": "acme"}),
		g.newAccountKey(t, map[string]any{"id": "acme-b", "plan": "paid", "cleared": true, "org": "acme"}),
	}
	outside := g.newAccountKey(t, map[string]any{"id": "elsewhere", "plan": "paid", "cleared": true})
	var (
		mu       sync.Mutex
		receipts pricing.Money
		served   int
		wg       sync.WaitGroup
	)
	call := func(node *gateway, key string) bool {
		r := node.do(t, http.MethodPost, "/v1/chat/completions", shortfallBody, bearer(key)...)
		switch r.Status {
		case http.StatusOK:
			mu.Lock()
			receipts += mustUSD(t, r.Header.Get("X-Gw-Cost-Usd"))
			served++
			mu.Unlock()
			return true
		case http.StatusPaymentRequired:
			if r.Header.Get("X-Gw-Hold-Reason") != "org_daily_cap" {
				t.Errorf("402 %s (hold reason %q), want org_daily_cap", r.Body, r.Header.Get("X-Gw-Hold-Reason"))
			}
		default:
			t.Errorf("status %d %s, want 200 or 402", r.Status, r.Body)
		}
		return false
	}
	for i := range n {
		wg.Go(func() { call(nodes[i%len(nodes)], keys[i%2]) })
	}
	wg.Wait()
	refused := false
	for i := range 30 {
		if !call(g, keys[i%2]) {
			refused = true
			break
		}
	}
	if !refused {
		t.Fatal("30 more calls and none refused by the organization's cap")
	}
	var ledger pricing.Money
	entries := 0
	for _, account := range []string{"acme-a", "acme-b"} {
		for _, l := range g.ledger(t, account) {
			c, s := mustUSD(t, l.Cost), mustUSD(t, l.Shortfall)
			if c < 0 || s < 0 || c+s != cost {
				t.Errorf("entry %s: cost %s + shortfall %s, want %s", l.RequestID, l.Cost, l.Shortfall, cost)
			}
			ledger += c
			entries++
		}
	}
	if entries != served || served == 0 || ledger != receipts || ledger > capUSD {
		t.Fatalf("%d served, %d entries, ledger %s, receipts %s, cap %s: want them equal and within the cap", served, entries, ledger, receipts, capUSD)
	}
	o := g.adminJSON(t, http.MethodGet, "/gw/orgs/acme", nil, http.StatusOK).JSON(t)
	spend, _ := o["spend"].(map[string]any)
	if o["daily_cap_usd"] != capUSD.String() || spend["today_usd"] != ledger.String() {
		t.Errorf("GET /gw/orgs/acme = %v, want daily_cap_usd %s and spend %s today", o, capUSD, ledger)
	}
	if r := nodes[len(nodes)-1].do(t, http.MethodPost, "/v1/chat/completions", shortfallBody, bearer(outside)...); r.Status != http.StatusOK {
		t.Errorf("an account outside the organization: %d %s, want 200", r.Status, r.Body)
	}
	g.expectJournalOK(t)
}

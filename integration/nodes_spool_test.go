package integration

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// TestNodesSpooledChargeHoldsKeyAndOrgCaps: a call made with a key that
// has caps, by an account in an organization with caps, is charged into
// its node's spool while PostgreSQL is down, and the node is killed. Once
// PostgreSQL is back (the dead node's spool not yet applied, its plain
// holds ended), the other node still counts that charge against the key's
// cap and the organization's: with both caps lowered to what it cost, a
// call with the key is refused 402 key_daily_cap and a call of another
// account of the organization 402 org_daily_cap, their holds kept in
// Redis at the charge's cost with no lease. The next gateway on the dead
// node's folder applies the spool and drops the kept holds of every
// scope; the charge is in the ledger, the key's spend and the
// organization's once.
func TestNodesSpooledChargeHoldsKeyAndOrgCaps(t *testing.T) {
	t.Parallel()
	s := startSharedNodes(t, 2, 1000)
	a, b, oa, pg, rs := s.nodes[0], s.nodes[1], s.oa, s.pg, s.rs
	const org, spender, other = "spool-org", "spool-a", "spool-b"
	a.adminJSON(t, http.MethodPost, "/gw/orgs", map[string]any{"id": org, "name": "Spool", "daily_cap_usd": "100"}, http.StatusCreated)
	a.createAccount(t, map[string]any{"id": spender, "plan": "paid", "cleared": true, "org": org})
	key, keyID := a.createKey(t, spender, map[string]any{"name": "capped", "daily_cap_usd": "100"})
	otherKey := a.newAccountKey(t, map[string]any{"id": other, "plan": "paid", "cleared": true, "org": org})

	id, cost := spoolThroughOutage(t, a, oa, pg, key,
		`{"model":"gw-pinned-gpt-4.1-mini","stream":true,"max_tokens":2000,"messages":[{"role":"user","content":"hi"}]}`,
		fake.Usage{Input: 12, Output: 2000})
	charged := mustUSD(t, cost)
	a.kill(t)
	pg.Start()

	opt, err := redis.ParseURL(rs.URL())
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(opt)
	t.Cleanup(func() { rc.Close() })
	ctx := context.Background()
	scopes := []string{spender, "key:" + keyID, "org:" + org}
	// Every plain hold of the dead node has ended (at most its lease,
	// 30 s): only kept holds count from here on.
	var plain []string
	for _, scope := range scopes {
		plain = append(plain, "gw:holds:{"+scope+"}")
	}
	for deadline := time.Now().Add(45 * time.Second); ; {
		n, err := rc.Exists(ctx, plain...).Result()
		if err == nil && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the dead node's holds are still there 45 s on (%d, %v)", n, err)
		}
		time.Sleep(100 * time.Millisecond) // polling Redis, an observable state
	}
	// Both caps lowered to what the spooled charge took, once node b's
	// connections to PostgreSQL are back: PostgreSQL has not got the
	// charge, the kept holds count it.
	for deadline := time.Now().Add(20 * time.Second); ; {
		r := b.adminDo(t, http.MethodGet, "/gw/orgs/"+org, nil)
		if r.Status == http.StatusOK {
			break
		}
		if r.Status != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("GET /gw/orgs/%s after PostgreSQL came back: %d %s", org, r.Status, r.Body)
		}
		time.Sleep(50 * time.Millisecond) // polling the node's answer, an observable state
	}
	b.adminJSON(t, http.MethodPatch, "/gw/keys/"+keyID, map[string]any{"daily_cap_usd": cost}, http.StatusOK)
	b.adminJSON(t, http.MethodPatch, "/gw/orgs/"+org, map[string]any{"daily_cap_usd": cost}, http.StatusOK)
	oa.SetDefault(fake.Script{Text: "ok", Usage: fake.Usage{Input: 8, Output: 2}})
	const small = `{"model":"gw-pinned-gpt-4.1-mini","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`
	refused := func(key, reason string) {
		t.Helper()
		r := b.do(t, http.MethodPost, "/v1/chat/completions", small, bearer(key)...)
		if r.Status != http.StatusPaymentRequired || r.Header.Get("X-Gw-Hold-Reason") != reason {
			t.Fatalf("a call on the other node: %d %s (hold reason %q), want 402 %s", r.Status, r.Body, r.Header.Get("X-Gw-Hold-Reason"), reason)
		}
	}
	refused(key, "key_daily_cap")
	refused(otherKey, "org_daily_cap")

	// Their holds are kept in Redis at the charge's cost, with no lease.
	for _, scope := range scopes {
		k := "gw:kept:{" + scope + "}"
		kept, err := rc.HGetAll(ctx, k).Result()
		if err != nil || len(kept) != 1 {
			t.Fatalf("kept holds of %s: %v (%v), want the spooled charge's", scope, kept, err)
		}
		for _, v := range kept {
			if v != strconv.FormatInt(int64(charged), 10) {
				t.Fatalf("kept hold of %s: %s nano-dollars, want the charge's %s USD", scope, v, cost)
			}
		}
		if ttl, err := rc.PTTL(ctx, k).Result(); err != nil || ttl != -1 {
			t.Fatalf("the kept holds of %s expire (%s, %v)", scope, ttl, err)
		}
	}

	// The next gateway on the dead node's folder applies the spool and
	// drops the kept holds of every scope.
	a.start(t)
	var kept []string
	for _, scope := range scopes {
		kept = append(kept, "gw:kept:{"+scope+"}")
	}
	for deadline := time.Now().Add(20 * time.Second); ; {
		n, err := rc.Exists(ctx, kept...).Result()
		if err == nil && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("kept holds still there 20 s after the restart (%d, %v)", n, err)
		}
		time.Sleep(50 * time.Millisecond) // polling Redis, an observable state
	}
	a.expectLedger(t, spender, ledgerEntry{RequestID: id, Endpoint: "chat", Model: "gpt-4.1-mini", Units: 2012, Unit: "token", Cost: cost})
	for path, what := range map[string]string{"/gw/keys/" + keyID: "key", "/gw/orgs/" + org: "organization"} {
		got := b.adminJSON(t, http.MethodGet, path, nil, http.StatusOK).JSON(t)
		spend, _ := got["spend"].(map[string]any)
		today, _ := spend["today_usd"].(string)
		if mustUSD(t, today) != charged {
			t.Errorf("the %s's spend today %v, want the charge's %s", what, spend, cost)
		}
	}
	// Now PostgreSQL counts it.
	refused(key, "key_daily_cap")
	refused(otherKey, "org_daily_cap")
	a.expectJournalOK(t)
}

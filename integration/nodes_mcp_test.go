package integration

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/testsvc"
)

// redisClient connects to the Redis of url for the test.
func redisClient(t *testing.T, url string) *redis.Client {
	t.Helper()
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	return c
}

// usedMemory is the Redis server's used_memory in bytes.
func usedMemory(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	info, err := c.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no used_memory in %q", info)
	return 0
}

// Two nodes on one Redis that holds 1 MB more than it does once they
// serve, refusing writes beyond (maxmemory-policy noeviction, as the money
// state needs): one key's 5,000 initialize calls, spread over both nodes,
// are all answered, and afterwards another account's billed call is
// charged and its session still works. Sessions are bounded per key, so
// the flood cannot fill Redis.
func TestNodesSessionFlood(t *testing.T) {
	t.Parallel()
	e := newNodes(t, 2, "\t\tlimits {\n\t\t\tmcp_requests_per_minute 1000000\n\t\t}")
	a, b := e.nodes[0], e.nodes[1]
	payer := a.newAccountKey(t, map[string]any{"id": "flood-payer", "plan": "paid", "cleared": true, "balance_usd": "1.00"})
	flooder := a.newAccountKey(t, map[string]any{"id": "flood-sessions", "plan": "paid", "cleared": true})
	kept := mcpSessionID(t, a, payer)
	if r := e.chat(t, 0, payer); r.Status != http.StatusOK {
		t.Fatalf("chat before the flood: %d %s", r.Status, r.Body)
	}
	rc := redisClient(t, e.redis)
	ctx := context.Background()
	limit := usedMemory(t, rc) + 1<<20
	if err := rc.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.ConfigSet(ctx, "maxmemory", strconv.FormatInt(limit, 10)).Err(); err != nil {
		t.Fatal(err)
	}
	floodSessions(t, e.nodes, flooder, 5_000)
	r := e.chat(t, 1, payer)
	if r.Status != http.StatusOK {
		t.Fatalf("another account's billed call after the flood: %d %s", r.Status, r.Body)
	}
	if l := b.ledger(t, "flood-payer"); len(l) != 2 || l[0].RequestID != r.Header.Get("X-Gw-Request-Id") {
		t.Fatalf("ledger after the flood: %+v", l)
	}
	if r := mcpPost(t, b, "/mcp", payer, kept, mcpToolsList); r.Status != http.StatusOK {
		t.Fatalf("another key's session after the flood: %d %s", r.Status, r.Body)
	}
	if used := usedMemory(t, rc); used >= limit {
		t.Fatalf("Redis holds %d bytes, at its limit of %d", used, limit)
	}
	checkSessionCap(t, b, flooder)
}

// With redis_cache_url the routing server's sessions and the decisions
// flux_explain reads live in the second Redis; the first holds only the
// money state and the rate budgets, and a session made on one node is
// used on the other.
func TestNodesCacheRedis(t *testing.T) {
	t.Parallel()
	cacheURL := testsvc.Redis(t)
	e := newNodes(t, 2, "", "GW_REDIS_CACHE_URL", cacheURL)
	key := e.nodes[0].newAccountKey(t, map[string]any{"id": "cache-redis", "plan": "paid", "cleared": true, "balance_usd": "1.00"})
	sess := mcpSessionID(t, e.nodes[0], key)
	r := mcpPost(t, e.nodes[1], "/mcp", key, sess, `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"flux_route","arguments":{"prompt":"hi","tier":"fast"}}}`)
	if r.Status != http.StatusOK || !strings.HasPrefix(gjson.GetBytes(r.Body, "result.structuredContent.decision_id").String(), "req-") {
		t.Fatalf("flux_route on the other node: %d %s", r.Status, r.Body)
	}
	ctx := context.Background()
	keys := func(c *redis.Client, pattern string) []string {
		t.Helper()
		k, err := c.Keys(ctx, pattern).Result()
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	money, cache := redisClient(t, e.redis), redisClient(t, cacheURL)
	for _, pattern := range []string{"gw:mcp:*", "gw:decision:*", "gw:decisions:*"} {
		if n := len(keys(cache, pattern)); n == 0 {
			t.Errorf("no %s in the cache Redis", pattern)
		}
		if k := keys(money, pattern); len(k) != 0 {
			t.Errorf("%s in the money Redis: %v", pattern, k)
		}
	}
	if n := len(keys(money, "*")); n == 0 {
		t.Errorf("the money Redis is empty")
	}
	if n := len(keys(cache, "*")) - len(keys(cache, "gw:mcp:*")) - len(keys(cache, "gw:decision*")); n != 0 {
		t.Errorf("%d other keys in the cache Redis: %v", n, keys(cache, "*"))
	}
}

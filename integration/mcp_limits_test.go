package integration

import (
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// JSON-RPC messages of the MCP tests.
const (
	mcpInit      = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	mcpPing      = `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	mcpToolsList = `{"jsonrpc":"2.0","id":3,"method":"tools/list"}`
)

// mcpPost sends one JSON-RPC message to an MCP server of g as key, in the
// session when one is given, with extra header pairs.
func mcpPost(t testing.TB, g *gateway, path, key, session, body string, header ...string) response {
	t.Helper()
	h := append(bearer(key), "Content-Type", "application/json", "Accept", "application/json, text/event-stream")
	if session != "" {
		h = append(h, "Mcp-Session-Id", session, "Mcp-Protocol-Version", "2025-11-25")
	}
	return g.do(t, http.MethodPost, path, body, append(h, header...)...)
}

// mcpSessionID opens a routing-server session for key and returns its id.
func mcpSessionID(t testing.TB, g *gateway, key string) string {
	t.Helper()
	r := mcpPost(t, g, "/mcp", key, "", mcpInit)
	id := r.Header.Get("Mcp-Session-Id")
	if r.Status != http.StatusOK || id == "" {
		t.Fatalf("initialize: %d %s", r.Status, r.Body)
	}
	return id
}

// wantRPCError fails unless r is the JSON-RPC error code with the HTTP
// status (a JSON body on /mcp, one event on /mcp-tools/ is never an error).
func wantRPCError(t testing.TB, what string, r response, status int, code int64) {
	t.Helper()
	if r.Status != status || gjson.GetBytes(r.Body, "jsonrpc").String() != "2.0" || gjson.GetBytes(r.Body, "error.code").Int() != code {
		t.Fatalf("%s: %d %s, want %d with error %d", what, r.Status, r.Body, status, code)
	}
}

// wantRateLimited fails unless r is the MCP servers' rate refusal: 429,
// -32003, Retry-After in whole seconds.
func wantRateLimited(t testing.TB, what string, r response) {
	t.Helper()
	wantRPCError(t, what, r, http.StatusTooManyRequests, -32003)
	if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 1 {
		t.Fatalf("%s: Retry-After %q", what, r.Header.Get("Retry-After"))
	}
}

// Both MCP servers draw every request from one budget per account
// (mcp_requests_per_minute): two on /mcp and one on /mcp-tools/ use a
// budget of three, the next on either server is refused, and another
// account is not touched.
func TestMCPRequestBudget(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, withGW(t, "\t\tlimits {\n\t\t\tmcp_requests_per_minute 3\n\t\t}"))
	a := e.account(t, "mcp-budget-a", nil)
	b := e.account(t, "mcp-budget-b", nil)
	sess := mcpSessionID(t, e.gateway, a)
	if r := mcpPost(t, e.gateway, "/mcp", a, sess, mcpPing); r.Status != http.StatusOK {
		t.Fatalf("ping: %d %s", r.Status, r.Body)
	}
	if r := mcpPost(t, e.gateway, "/mcp-tools/", a, "", mcpToolsList); r.Status != http.StatusOK {
		t.Fatalf("tools/list: %d %s", r.Status, r.Body)
	}
	wantRateLimited(t, "the fourth request, on /mcp", mcpPost(t, e.gateway, "/mcp", a, sess, mcpPing))
	wantRateLimited(t, "the fifth, on /mcp-tools/", mcpPost(t, e.gateway, "/mcp-tools/", a, "", mcpPing))
	if r := mcpPost(t, e.gateway, "/mcp-tools/", b, "", mcpPing); r.Status != http.StatusOK {
		t.Fatalf("another account: %d %s", r.Status, r.Body)
	}
}

// Without configuration each account has 600 MCP requests a minute: the
// first refusal comes after the 600th request (the budget refills one
// request every 100 ms while the test sends), and another account still
// gets through.
func TestMCPRequestBudgetDefault(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	a := e.account(t, "mcp-default-a", nil)
	b := e.account(t, "mcp-default-b", nil)
	const budget, slack = 600, 400
	var refused response
	n := 0
	for n = 1; n <= budget+slack; n++ {
		if refused = mcpPost(t, e.gateway, "/mcp-tools/", a, "", mcpPing); refused.Status != http.StatusOK {
			break
		}
	}
	if n <= budget || n > budget+slack {
		t.Fatalf("the first refusal was request %d (%d %s), want one after the %dth", n, refused.Status, refused.Body, budget)
	}
	wantRateLimited(t, "over the default budget", refused)
	if r := mcpPost(t, e.gateway, "/mcp-tools/", b, "", mcpPing); r.Status != http.StatusOK {
		t.Fatalf("another account: %d %s", r.Status, r.Body)
	}
}

// Each account may hold 16 MCP requests open at once by default: with 16
// flux_route calls waiting on their model, a 17th request of the account
// (on either server) is refused with Retry-After 1, another account's is
// served, and once the calls end the account is served again.
func TestMCPInFlightDefault(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	a := e.account(t, "mcp-inflight-a", nil)
	b := e.account(t, "mcp-inflight-b", nil)
	const held = 16
	gate := make(chan struct{})
	release := sync.OnceFunc(func() { close(gate) })
	defer release()
	e.OA.SetDefault(fake.Script{Text: "held", Usage: fake.Usage{Input: 5, Output: 5}, Gate: gate})
	sess := mcpSessionID(t, e.gateway, a)
	call := `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"flux_route","arguments":{"prompt":"hi","model":"gw-pinned-gpt-4.1-mini"}}}`
	type result struct {
		status int
		body   []byte
		err    error
	}
	results := make(chan result, held)
	for range held {
		go func() {
			resp, b, err := mcpRaw(e.BaseURL+"/mcp", a, call, "Mcp-Session-Id", sess, "Mcp-Protocol-Version", "2025-11-25")
			if err != nil {
				results <- result{err: err}
				return
			}
			results <- result{status: resp.StatusCode, body: b}
		}()
	}
	for {
		n, next := e.OA.Arrived()
		if n == held {
			break
		}
		<-next
	}
	r := mcpPost(t, e.gateway, "/mcp-tools/", a, "", mcpPing)
	wantRateLimited(t, "a 17th request", r)
	if r.Header.Get("Retry-After") != "1" {
		t.Fatalf("Retry-After %q, want 1", r.Header.Get("Retry-After"))
	}
	wantRateLimited(t, "a 17th request on /mcp", mcpPost(t, e.gateway, "/mcp", a, sess, mcpPing))
	if r := mcpPost(t, e.gateway, "/mcp-tools/", b, "", mcpPing); r.Status != http.StatusOK {
		t.Fatalf("another account: %d %s", r.Status, r.Body)
	}
	release()
	for range held {
		r := <-results
		if r.err != nil || r.status != http.StatusOK || gjson.GetBytes(r.body, "result.isError").Bool() {
			t.Fatalf("a held flux_route: %v %d %s", r.err, r.status, r.body)
		}
	}
	if r := mcpPost(t, e.gateway, "/mcp-tools/", a, "", mcpPing); r.Status != http.StatusOK {
		t.Fatalf("after the calls ended: %d %s", r.Status, r.Body)
	}
}

// One key opening ever more sessions never ends another key's: after
// 10,200 initialize calls of one key (more than the node keeps in all)
// another account's session still works. The flooding key keeps its 64
// most recently used sessions; its 65th takes its own least recently used.
func TestMCPSessionsPerKey(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, withGW(t, "\t\tlimits {\n\t\t\tmcp_requests_per_minute 1000000\n\t\t}"))
	a := e.account(t, "mcp-sessions-a", nil)
	b := e.account(t, "mcp-sessions-b", nil)
	kept := mcpSessionID(t, e.gateway, a)
	first := mcpSessionID(t, e.gateway, b)
	floodSessions(t, []*gateway{e.gateway}, b, 10_200)
	if r := mcpPost(t, e.gateway, "/mcp", a, kept, mcpToolsList); r.Status != http.StatusOK {
		t.Fatalf("the other account's session after the flood: %d %s", r.Status, r.Body)
	}
	wantRPCError(t, "the flooding key's first session", mcpPost(t, e.gateway, "/mcp", b, first, mcpPing), http.StatusNotFound, -32005)
	checkSessionCap(t, e.gateway, b)
}

// floodSessions sends n initialize calls of key, spread over the nodes,
// and fails on any that is not answered with a session.
func floodSessions(t *testing.T, nodes []*gateway, key string, n int) {
	t.Helper()
	const workers = 8
	var wg sync.WaitGroup
	var mu sync.Mutex
	failed := map[string]int{}
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				resp, _, err := mcpRaw(nodes[i%len(nodes)].BaseURL+"/mcp", key, mcpInit)
				why := ""
				switch {
				case err != nil:
					why = err.Error()
				case resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "":
					why = resp.Status
				}
				if why != "" {
					mu.Lock()
					failed[why]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("initialize calls of the flood not answered with a session: %v", failed)
	}
}

// mcpRaw posts one JSON-RPC message to url as key (no session), returning
// transport errors instead of failing the test, for calls made from other
// goroutines.
func mcpRaw(url, key, body string, header ...string) (*http.Response, []byte, error) {
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := mcpClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

var mcpClient = &http.Client{Timeout: requestTimeout, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16}}

// checkSessionCap opens 64 sessions of key in turn (all live), then one
// more: the least recently used of the 64 is gone, the next still works.
func checkSessionCap(t *testing.T, g *gateway, key string) {
	t.Helper()
	const perKey = 64
	var ids []string
	for range perKey {
		ids = append(ids, mcpSessionID(t, g, key))
	}
	for i, id := range ids {
		if r := mcpPost(t, g, "/mcp", key, id, mcpPing); r.Status != http.StatusOK {
			t.Fatalf("session %d of %d: %d %s", i+1, perKey, r.Status, r.Body)
		}
	}
	mcpSessionID(t, g, key)
	wantRPCError(t, "the least recently used after one more", mcpPost(t, g, "/mcp", key, ids[0], mcpPing), http.StatusNotFound, -32005)
	if r := mcpPost(t, g, "/mcp", key, ids[1], mcpPing); r.Status != http.StatusOK {
		t.Fatalf("the second least recently used: %d %s", r.Status, r.Body)
	}
}

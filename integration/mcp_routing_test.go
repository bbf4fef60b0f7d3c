package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// bearerTransport adds a key to every request of the MCP SDK's client.
type bearerTransport struct{ key string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}

// sessionsEra is the protocol version of the sessions era, which the
// tests that mean it pin: the SDK's client tries the stateless era first
// when it is given none.
const sessionsEra = "2025-11-25"

// sdkConnect connects the MCP Go SDK's client to url through rt, at
// version (empty: the SDK's default, the stateless era when the server
// offers it).
func sdkConnect(t *testing.T, url string, rt http.RoundTripper, version string) (*sdk.ClientSession, error) {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "gw-test", Version: "1"}, nil)
	s, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: url,
		HTTPClient: &http.Client{Transport: rt}, DisableStandaloneSSE: true}, &sdk.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { s.Close() })
	return s, nil
}

// mcpSession is a sessions-era session of the MCP Go SDK's client with key.
func mcpSession(t *testing.T, url, key string) *sdk.ClientSession {
	t.Helper()
	s, err := sdkConnect(t, url, bearerTransport{key}, sessionsEra)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func structured(t *testing.T, res *sdk.CallToolResult) map[string]any {
	t.Helper()
	b, _ := json.Marshal(res.StructuredContent)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("structured content %s", b)
	}
	return m
}

// The routing server with the MCP Go SDK: the session life cycle, the three
// tools, and flux_route billed exactly like the chat call it is.
func TestMCPRouting(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	key := e.account(t, "router", map[string]any{"balance_usd": "5.00"})
	s := mcpSession(t, e.BaseURL+"/mcp", key)
	ctx := context.Background()
	tools, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "flux_route,flux_explain,flux_models" {
		t.Fatalf("tools %v", names)
	}
	if s.InitializeResult().ServerInfo.Name != "gw-routing" {
		t.Fatalf("server %+v", s.InitializeResult().ServerInfo)
	}

	u := tokenUsage{Input: 40, Output: 12}
	e.OA.Push(fake.Script{Text: "Routed answer.", Usage: fakeUsage(false, u)})
	res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "flux_route", Arguments: map[string]any{"prompt": "hello", "tier": "fast", "max_tokens": 50}})
	if err != nil || res.IsError {
		t.Fatalf("flux_route: %v %+v", err, res)
	}
	out := structured(t, res)
	id, _ := out["decision_id"].(string)
	cost := listCost(t, "gpt-4.1-nano", u, false)
	if out["answer"] != "Routed answer." || out["model"] != "gpt-4.1-nano" || out["cost_usd"] != cost.String() || !strings.HasPrefix(id, "req-") {
		t.Fatalf("flux_route %v", out)
	}
	if c, ok := ledgerOf(t, e.gateway, "router")[id]; !ok || c != cost {
		t.Fatalf("ledger %v %v, want %v", c, ok, cost)
	}
	if got := e.OA.Requests()[0].JSON(); got["max_completion_tokens"] != float64(50) && got["max_tokens"] != float64(50) {
		t.Fatalf("upstream request %v", got)
	}

	res, err = s.CallTool(ctx, &sdk.CallToolParams{Name: "flux_explain", Arguments: map[string]any{"decision_id": id}})
	if err != nil || res.IsError {
		t.Fatalf("flux_explain: %v %+v", err, res)
	}
	if ex := structured(t, res); ex["model"] != "gpt-4.1-nano" || ex["tier"] != "fast" || ex["cost_usd"] != cost.String() || ex["requested_model"] != "gw-fast" {
		t.Fatalf("flux_explain %v", ex)
	}
	res, err = s.CallTool(ctx, &sdk.CallToolParams{Name: "flux_models", Arguments: map[string]any{"tier": "reasoning"}})
	if err != nil || res.IsError {
		t.Fatalf("flux_models: %v %+v", err, res)
	}
	var ids []string
	for _, m := range structured(t, res)["models"].([]any) {
		ids = append(ids, m.(map[string]any)["id"].(string))
	}
	if strings.Join(ids, ",") != "gw-reasoning,gw-pinned-o4-mini,gw-pinned-claude-opus-4-1" {
		t.Fatalf("flux_models reasoning %v", ids)
	}

	// Another account cannot read the decision.
	other := e.account(t, "router-other", nil)
	s2 := mcpSession(t, e.BaseURL+"/mcp", other)
	if _, err := s2.CallTool(ctx, &sdk.CallToolParams{Name: "flux_explain", Arguments: map[string]any{"decision_id": id}}); err == nil ||
		!strings.Contains(err.Error(), "unknown decision_id") {
		t.Fatalf("another account's decision: %v", err)
	}
	// A key limited to one model lists only it.
	limited, _ := e.createKey(t, "router", map[string]any{"name": "one", "models": []string{"gw-pinned-o4-mini"}})
	s3 := mcpSession(t, e.BaseURL+"/mcp", limited)
	res, _ = s3.CallTool(ctx, &sdk.CallToolParams{Name: "flux_models", Arguments: map[string]any{}})
	if b, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(b), "gw-pinned-o4-mini") || strings.Count(string(b), `"id"`) != 1 {
		t.Fatalf("limited key's models %s", b)
	}
}

// Every error of the routing server (docs/mcp.md) with its HTTP status,
// through raw requests where an SDK would not send them.
func TestMCPRoutingErrors(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, withGW(t, "\t\tlimits {\n\t\t\tchat_requests_per_minute 20\n\t\t}"))
	key := e.account(t, "rpc", nil)
	url := e.BaseURL + "/mcp"
	post := func(t *testing.T, body string, header ...string) response {
		t.Helper()
		h := append([]string{"Content-Type", "application/json", "Accept", "application/json, text/event-stream"}, header...)
		return e.send(t, url, http.MethodPost, []byte(body), h)
	}
	init := post(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`, bearer(key)...)
	sess := init.Header.Get("Mcp-Session-Id")
	if init.Status != 200 || sess == "" || gjson.GetBytes(init.Body, "result.protocolVersion").String() != "2025-06-18" {
		t.Fatalf("initialize: %d %v %s", init.Status, init.Header, init.Body)
	}
	old := post(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"1999-01-01"}}`, bearer(key)...)
	if gjson.GetBytes(old.Body, "result.protocolVersion").String() != "2025-11-25" {
		t.Fatalf("unknown version negotiated: %s", old.Body)
	}
	withSession := append(bearer(key), "Mcp-Session-Id", sess)
	if r := post(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, withSession...); r.Status != http.StatusAccepted {
		t.Fatalf("notification: %d", r.Status)
	}
	if r := post(t, `{"jsonrpc":"2.0","id":"p","method":"ping"}`, withSession...); r.Status != 200 || gjson.GetBytes(r.Body, "result").Raw != "{}" {
		t.Fatalf("ping: %d %s", r.Status, r.Body)
	}
	for _, tc := range []struct {
		name, body string
		header     []string
		status     int
		code       int64
	}{
		{"no key", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, nil, 401, -32002},
		{"x-api-key is not read", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, apiKey(key), 401, -32002},
		{"not JSON", `{"jsonrpc":`, withSession, 400, -32700},
		{"not JSON-RPC 2.0", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, withSession, 400, -32600},
		{"a batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, withSession, 400, -32600},
		{"no session", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, bearer(key), 400, -32004},
		{"unknown session", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, append(bearer(key), "Mcp-Session-Id", "nope"), 404, -32005},
		{"another key's session", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, append(bearer(e.BootKey), "Mcp-Session-Id", sess), 404, -32005},
		{"unknown method", `{"jsonrpc":"2.0","id":1,"method":"resources/list"}`, withSession, 200, -32601},
		{"invalid arguments", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"flux_explain","arguments":{}}}`, withSession, 200, -32602},
		{"unknown tool", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"flux_nope"}}`, withSession, 200, -32602},
		{"protocol version mismatch", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, append(withSession, "Mcp-Protocol-Version", "2025-11-25"), 400, -32001},
		{"foreign origin", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, append(withSession, "Origin", "http://evil.example"), 403, -32001},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := post(t, tc.body, tc.header...)
			if r.Status != tc.status || gjson.GetBytes(r.Body, "error.code").Int() != tc.code || gjson.GetBytes(r.Body, "jsonrpc").String() != "2.0" {
				t.Fatalf("%d %s, want %d with %d", r.Status, r.Body, tc.status, tc.code)
			}
		})
	}
	if r := e.send(t, url, http.MethodGet, nil, bearer(key)); r.Status != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d", r.Status)
	}
	// DELETE ends the session.
	if r := e.send(t, url, http.MethodDelete, nil, withSession); r.Status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", r.Status, r.Body)
	}
	if r := post(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, withSession...); r.Status != 404 || gjson.GetBytes(r.Body, "error.code").Int() != -32005 {
		t.Fatalf("after DELETE: %d %s", r.Status, r.Body)
	}
	// The account's rate budget: -32003 with 429.
	var last response
	for range 25 {
		if last = post(t, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, withSession...); last.Status == http.StatusTooManyRequests {
			break
		}
	}
	if last.Status != http.StatusTooManyRequests || gjson.GetBytes(last.Body, "error.code").Int() != -32003 || last.Header.Get("Retry-After") == "" {
		t.Fatalf("rate limited: %d %s", last.Status, last.Body)
	}
}

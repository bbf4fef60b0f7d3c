package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// mcpGatewayEnv is a gateway with two upstream MCP servers: "tools", of
// the stateless era behind an OAuth server of the test's own (client
// credentials), and "legacy", of the sessions era behind a static bearer
// token, with a short time-out.
type mcpGatewayEnv struct {
	g      *gateway
	oauth  *fake.OAuth
	tools  *fake.MCP
	legacy *fake.MCP
}

// legacyToken is the static token the gateway sends the legacy server.
const legacyToken = "legacy-upstream-token"

func newMCPGatewayEnv(t *testing.T) *mcpGatewayEnv {
	t.Helper()
	e := &mcpGatewayEnv{oauth: fake.NewOAuth(t)}
	e.tools = fake.NewMCP(t, fake.MCPOptions{Stateless: true, Auth: e.oauth, Extra: []string{"secret_dump"}})
	e.legacy = fake.NewMCP(t, fake.MCPOptions{Auth: fake.StaticBearer(legacyToken)})
	e.g = startGateway(t, gwOptions{Caddyfile: withGW(t, fmt.Sprintf(`		mcp_server tools {
			url %s
			auth oauth_client_credentials %s %s %s mcp.read
			deny secret_*
			price 0.002
			tool_price add 0.005
		}
		mcp_server legacy {
			url %s
			auth bearer %s
			allow echo fail slow boom
			price 0.001
			timeout 1s
		}`, e.tools.URL(), e.oauth.URL(), e.oauth.ClientID, e.oauth.ClientSecret, e.legacy.URL(), legacyToken))})
	return e
}

// gatewaySession connects the SDK's client to url as key in the era of
// version ("" for the stateless era first).
func gatewaySession(t *testing.T, url, key, version string) *sdk.ClientSession {
	t.Helper()
	s, err := sdkConnect(t, url, bearerTransport{key}, version)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// listed is the tools a session lists, each name with its description's
// price line.
func listed(t *testing.T, s *sdk.ClientSession) []string {
	t.Helper()
	res, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tl := range res.Tools {
		_, price, _ := strings.Cut(tl.Description, "\n\n")
		if !strings.HasSuffix(tl.Description, price) || price == "" {
			price = tl.Description
		}
		out = append(out, tl.Name+" | "+price)
	}
	return out
}

// receiptOf is a tool call result's receipt: its _meta's request id and
// cost.
func receiptOf(t *testing.T, res *sdk.CallToolResult) (requestID, cost string) {
	t.Helper()
	id, _ := res.Meta["gw/request_id"].(string)
	cost, _ = res.Meta["gw/cost_usd"].(string)
	if !strings.HasPrefix(id, "req-") {
		t.Fatalf("the result's _meta has no request id: %v", res.Meta)
	}
	return id, cost
}

// text is a result's first content block's text.
func text(t *testing.T, res *sdk.CallToolResult) string {
	t.Helper()
	if len(res.Content) == 0 {
		t.Fatalf("a result without content: %+v", res)
	}
	tc, ok := res.Content[0].(*sdk.TextContent)
	if !ok {
		t.Fatalf("content %T", res.Content[0])
	}
	return tc.Text
}

// toolErrorOf is the tool error object of a failed result.
func toolErrorOf(t *testing.T, res *sdk.CallToolResult) map[string]any {
	t.Helper()
	if !res.IsError {
		t.Fatalf("want a tool error, got %+v", res)
	}
	var obj map[string]any
	if err := json.Unmarshal([]byte(text(t, res)), &obj); err != nil {
		t.Fatalf("tool error text %q", text(t, res))
	}
	return obj
}

// The MCP gateway to the SDK's client in both eras: every server's tools
// at /mcp-gateway/ as <server>__<tool> with their prices, one server's at
// its own path, each successful call billed at its price with its
// receipt in _meta and its ledger entry, failures unbilled, and the
// upstreams reached with the gateway's credentials only.
func TestMCPGateway(t *testing.T) {
	t.Parallel()
	e := newMCPGatewayEnv(t)
	g := e.g
	key := g.newAccountKey(t, map[string]any{"id": "mcpgw", "plan": "paid", "cleared": true, "balance_usd": "1.00"})
	wantAll := []string{
		"tools__add | Price: 0.005 USD per successful call.",
		"tools__boom | Price: 0.002 USD per successful call.",
		"tools__echo | Price: 0.002 USD per successful call.",
		"tools__fail | Price: 0.002 USD per successful call.",
		"tools__slow | Price: 0.002 USD per successful call.",
		"legacy__boom | Price: 0.001 USD per successful call.",
		"legacy__echo | Price: 0.001 USD per successful call.",
		"legacy__fail | Price: 0.001 USD per successful call.",
		"legacy__slow | Price: 0.001 USD per successful call.",
	}
	var ids []string
	for _, era := range []string{sessionsEra, ""} {
		s := gatewaySession(t, g.BaseURL+"/mcp-gateway/", key, era)
		if got := listed(t, s); !slices.Equal(got, wantAll) {
			t.Fatalf("era %q: tools/list\n%s\nwant\n%s", era, strings.Join(got, "\n"), strings.Join(wantAll, "\n"))
		}
		echo, add := map[string]any{"text": "hi"}, map[string]any{"a": 1, "b": 2}
		for _, c := range []struct {
			tool string
			args map[string]any
			text string
			cost string
		}{
			{"tools__echo", echo, "echo: hi", "0.002"},
			{"tools__add", add, "3", "0.005"},
			{"legacy__echo", echo, "echo: hi", "0.001"},
		} {
			res := callTool(t, s, c.tool, c.args)
			id, cost := receiptOf(t, res)
			if res.IsError || text(t, res) != c.text || cost != c.cost {
				t.Fatalf("era %q: %s: %+v %q cost %q", era, c.tool, res, text(t, res), cost)
			}
			ids = append(ids, id)
		}
		for _, tool := range []string{"tools__fail", "legacy__fail"} {
			res := callTool(t, s, tool, nil)
			if _, cost := receiptOf(t, res); !res.IsError || text(t, res) != fake.FailText || cost != "0.00" {
				t.Fatalf("era %q: %s: %+v cost %q", era, tool, res, cost)
			}
		}
		res := callTool(t, s, "legacy__boom", nil)
		if obj := toolErrorOf(t, res); !sameJSON(mustJSON(t, obj), fmt.Sprintf(
			`{"error":"upstream_error","capability":"mcp_gateway","retryable":false,"message":"legacy answered error %d: boom"}`, fake.BoomCode)) {
			t.Fatalf("era %q: boom: %v", era, obj)
		}
		res = callTool(t, s, "legacy__slow", map[string]any{"ms": 5000})
		if obj := toolErrorOf(t, res); !sameJSON(mustJSON(t, obj),
			`{"error":"upstream_timeout","capability":"mcp_gateway","retryable":true,"message":"legacy did not answer within 1s"}`) {
			t.Fatalf("era %q: slow: %v", era, obj)
		}
	}

	// One server at its own path, with its own names.
	one := gatewaySession(t, g.BaseURL+"/mcp-gateway/legacy/", key, "")
	if got := listed(t, one); !slices.Equal(got, []string{
		"boom | Price: 0.001 USD per successful call.", "echo | Price: 0.001 USD per successful call.",
		"fail | Price: 0.001 USD per successful call.", "slow | Price: 0.001 USD per successful call.",
	}) {
		t.Fatalf("/mcp-gateway/legacy/ lists %v", got)
	}
	res := callTool(t, one, "echo", map[string]any{"text": "one"})
	id, cost := receiptOf(t, res)
	if res.IsError || text(t, res) != "echo: one" || cost != "0.001" {
		t.Fatalf("legacy echo: %+v %q", res, cost)
	}
	ids = append(ids, id)

	// A tool the server's block denies is neither listed nor called.
	if _, err := one.CallTool(context.Background(), &sdk.CallToolParams{Name: "add"}); err == nil {
		t.Fatal("a tool the legacy block does not allow was called")
	}

	// The ledger: one entry per successful call, newest first.
	l := g.ledger(t, "mcpgw")
	want := []string{"legacy/echo 0.001", "legacy/echo 0.001", "tools/add 0.005", "tools/echo 0.002", "legacy/echo 0.001", "tools/add 0.005", "tools/echo 0.002"}
	var got []string
	for i, x := range l {
		got = append(got, x.Model+" "+x.Cost)
		if x.Endpoint != "mcp_gateway" || x.Units != 1 || x.Unit != "call" || x.RequestID != ids[len(ids)-1-i] {
			t.Fatalf("ledger entry %d: %+v (request ids %v)", i, x, ids)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ledger %v, want %v", got, want)
	}
	if got := g.getAccount(t, "mcpgw")["balance_usd"]; got != "0.983" {
		t.Fatalf("balance %v, want 0.983", got)
	}

	// The upstreams saw the gateway's credentials, never the caller's key:
	// one access token fetched for all the calls, with the block's scope.
	if n := e.oauth.Issued(); n != 1 || e.oauth.Scope() != "mcp.read" {
		t.Fatalf("tokens issued %d, scope %q", n, e.oauth.Scope())
	}
	for _, a := range e.tools.Authorizations() {
		if !strings.HasPrefix(a, "Bearer ") || !e.oauth.Valid(strings.TrimPrefix(a, "Bearer ")) {
			t.Fatalf("the tools server saw Authorization %q", a)
		}
	}
	for _, a := range e.legacy.Authorizations() {
		if a != "Bearer "+legacyToken {
			t.Fatalf("the legacy server saw Authorization %q", a)
		}
	}
	if e.tools.Calls("secret_dump") != 0 {
		t.Fatal("a denied tool was called")
	}

	m := scrape(t, g)
	for name, want := range map[string]float64{
		`gw_mcp_tool_calls_total{outcome="ok",server="tools",tool="echo"}`:              2,
		`gw_mcp_tool_calls_total{outcome="ok",server="legacy",tool="echo"}`:             3,
		`gw_mcp_tool_calls_total{outcome="tool_error",server="tools",tool="fail"}`:      2,
		`gw_mcp_tool_calls_total{outcome="upstream_error",server="legacy",tool="boom"}`: 2,
		`gw_mcp_tool_calls_total{outcome="upstream_error",server="legacy",tool="slow"}`: 2,
		`gw_mcp_server_up{server="tools"}`:                                              1,
		`gw_mcp_server_up{server="legacy"}`:                                             1,
		`gw_cost_usd_total{family="mcp",model="tools/add"}`:                             0.01,
	} {
		if got := m[name]; got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
}

// A key's mcp_tools allowlist: tools/list shows only what it may call,
// and a call of any other is the tool error not_allowed, unbilled. An
// account without the mcp_gateway ability, or without the balance for a
// tool's price, is refused.
func TestMCPGatewayRefusals(t *testing.T) {
	t.Parallel()
	e := newMCPGatewayEnv(t)
	g := e.g
	g.newAccountKey(t, map[string]any{"id": "narrow", "plan": "paid", "cleared": true, "balance_usd": "1.00"})
	r := g.adminJSON(t, http.MethodPost, "/gw/accounts/narrow/keys", map[string]any{"name": "narrow", "mcp_tools": []string{"tools__e*", "legacy__fail"}}, http.StatusCreated)
	var k struct {
		Key string `json:"key"`
	}
	if err := json.Unmarshal(r.Body, &k); err != nil || k.Key == "" {
		t.Fatalf("key: %s", r.Body)
	}
	for _, era := range []string{sessionsEra, ""} {
		s := gatewaySession(t, g.BaseURL+"/mcp-gateway/", k.Key, era)
		if got := listed(t, s); !slices.Equal(got, []string{"tools__echo | Price: 0.002 USD per successful call.", "legacy__fail | Price: 0.001 USD per successful call."}) {
			t.Fatalf("era %q: the narrow key lists %v", era, got)
		}
		res := callTool(t, s, "tools__add", map[string]any{"a": 1, "b": 2})
		if obj := toolErrorOf(t, res); !sameJSON(mustJSON(t, obj),
			`{"error":"not_allowed","capability":"mcp_gateway","retryable":false,"message":"this key may not call tools__add"}`) {
			t.Fatalf("era %q: add: %v", era, obj)
		}
	}
	if e.tools.Calls("add") != 0 || len(g.ledger(t, "narrow")) != 0 {
		t.Fatal("a call outside the key's allowlist reached the server or was billed")
	}

	// The balance covers no call at the tool's price.
	poor := g.newAccountKey(t, map[string]any{"id": "poor", "plan": "paid", "cleared": true, "balance_usd": "0.001"})
	s := gatewaySession(t, g.BaseURL+"/mcp-gateway/", poor, "")
	res := callTool(t, s, "tools__echo", map[string]any{"text": "x"})
	if obj := toolErrorOf(t, res); obj["error"] != "credit_exhausted" || obj["capability"] != "mcp_gateway" {
		t.Fatalf("echo on 0.001: %v", obj)
	}
	if res := callTool(t, s, "legacy__echo", map[string]any{"text": "x"}); res.IsError {
		t.Fatalf("legacy echo at 0.001 on 0.001: %+v", res)
	}
	if got := g.getAccount(t, "poor")["balance_usd"]; got != "0.00" {
		t.Fatalf("poor balance %v", got)
	}
	if e.tools.Calls("echo") != 0 {
		t.Fatal("a refused call reached the server")
	}

	// A key's total cap bounds its calls as any billed call's: two calls
	// at 0.002 fit 0.004, the third is refused with the cap's code.
	r = g.adminJSON(t, http.MethodPost, "/gw/accounts/narrow/keys", map[string]any{"name": "capped", "total_cap_usd": "0.004"}, http.StatusCreated)
	if err := json.Unmarshal(r.Body, &k); err != nil || k.Key == "" {
		t.Fatalf("key: %s", r.Body)
	}
	capped := gatewaySession(t, g.BaseURL+"/mcp-gateway/", k.Key, "")
	for i := range 2 {
		if res := callTool(t, capped, "tools__echo", map[string]any{"text": "x"}); res.IsError {
			t.Fatalf("call %d under the key's cap: %+v", i, res)
		}
	}
	if obj := toolErrorOf(t, callTool(t, capped, "tools__echo", map[string]any{"text": "x"})); obj["error"] != "key_total_cap" {
		t.Fatalf("call past the key's cap: %v", obj)
	}
	if l := g.ledger(t, "narrow"); len(l) != 2 {
		t.Fatalf("narrow's ledger %+v", l)
	}

	// The ability switched off: the server refuses before any tool.
	off := g.newAccountKey(t, map[string]any{"id": "off", "plan": "paid", "cleared": true, "balance_usd": "1.00", "abilities": []string{"search"}})
	if _, err := sdkConnect(t, g.BaseURL+"/mcp-gateway/", bearerTransport{off}, sessionsEra); err == nil {
		t.Fatal("an account without mcp_gateway connected")
	}
	hello := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	resp := g.do(t, http.MethodPost, "/mcp-gateway/", hello, append(bearer(off), "Content-Type", "application/json", "Accept", "application/json, text/event-stream")...)
	if resp.Status != http.StatusNotFound || !sameJSON(string(resp.Body),
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"mcp_gateway is not switched on for this account"}}`) {
		t.Fatalf("switched off: %d %s", resp.Status, resp.Body)
	}
	// An unknown server's path is 404.
	resp = g.do(t, http.MethodPost, "/mcp-gateway/nope/", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, bearer(poor)...)
	if resp.Status != http.StatusNotFound || !sameJSON(string(resp.Body),
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"no MCP server \"nope\" on this gateway"}}`) {
		t.Fatalf("unknown server: %d %s", resp.Status, resp.Body)
	}
}

// The upstreams' sessions and tokens: an access token the server stops
// taking is replaced once and the call goes through; a server that goes
// down makes its tools fail with upstream_unavailable and shows in the
// metrics, and works again once it is back; a reload that keeps a
// server's block keeps its session and token.
func TestMCPGatewayUpstreams(t *testing.T) {
	t.Parallel()
	e := newMCPGatewayEnv(t)
	g := e.g
	key := g.newAccountKey(t, map[string]any{"id": "ups", "plan": "paid", "cleared": true, "balance_usd": "1.00"})
	s := gatewaySession(t, g.BaseURL+"/mcp-gateway/", key, "")
	call := func(tool string) *sdk.CallToolResult {
		t.Helper()
		return callTool(t, s, tool, map[string]any{"text": "x"})
	}
	if res := call("tools__echo"); res.IsError {
		t.Fatalf("echo: %+v", res)
	}
	e.oauth.RevokeAll()
	if res := call("tools__echo"); res.IsError {
		t.Fatalf("echo after the token was revoked: %+v", res)
	}
	if n := e.oauth.Issued(); n != 2 {
		t.Fatalf("tokens issued %d, want 2", n)
	}

	e.legacy.Stop()
	res := call("legacy__echo")
	if obj := toolErrorOf(t, res); !sameJSON(mustJSON(t, obj),
		`{"error":"upstream_unavailable","capability":"mcp_gateway","retryable":true,"message":"legacy could not be reached; retry later"}`) {
		t.Fatalf("echo while legacy is down: %v", obj)
	}
	if up := scrape(t, g)[`gw_mcp_server_up{server="legacy"}`]; up != 0 {
		t.Fatalf("legacy up = %v while down", up)
	}
	e.legacy.Start()
	if res := call("legacy__echo"); res.IsError {
		t.Fatalf("echo once legacy is back: %+v", res)
	}
	if up := scrape(t, g)[`gw_mcp_server_up{server="legacy"}`]; up != 1 {
		t.Fatalf("legacy up = %v once back", up)
	}
	sessions, tokens := e.legacy.Sessions(), e.oauth.Issued()
	if sessions != 1 {
		t.Fatalf("legacy sessions %d", sessions)
	}

	g.reload(t)
	// The old config's server closed its idle connections; the SDK's
	// client dials again, as any client of a reloaded Caddy does.
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	s = gatewaySession(t, g.BaseURL+"/mcp-gateway/", key, "")
	for _, tool := range []string{"tools__echo", "legacy__echo"} {
		if res := call(tool); res.IsError {
			t.Fatalf("%s after a reload: %+v", tool, res)
		}
	}
	if got := e.legacy.Sessions(); got != sessions {
		t.Fatalf("legacy sessions %d after a reload, want %d (kept)", got, sessions)
	}
	if got := e.oauth.Issued(); got != tokens {
		t.Fatalf("tokens issued %d after a reload, want %d (kept)", got, tokens)
	}
	if l := g.ledger(t, "ups"); len(l) != 5 {
		t.Fatalf("ledger %+v, want the 5 successful calls", l)
	}
}

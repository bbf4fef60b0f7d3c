package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// statelessEra is the protocol version without sessions, the one the MCP
// Go SDK's client tries first.
const statelessEra = "2026-07-28"

// allVersions are the versions both servers speak, newest first, as
// server/discover and an unsupported version's refusal list them.
const allVersions = `["2026-07-28","2025-11-25","2025-06-18","2025-03-26","2024-11-05"]`

// exchange is one HTTP request of the SDK's client and its answer's
// headers.
type exchange struct {
	sent, got http.Header
	status    int
}

// wireLog is a RoundTripper that adds a key to every request of the SDK's
// client and records each exchange.
type wireLog struct {
	key string
	mu  sync.Mutex
	log []exchange
}

func (l *wireLog) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+l.key)
	resp, err := http.DefaultTransport.RoundTrip(r)
	x := exchange{sent: r.Header.Clone()}
	if resp != nil {
		x.got, x.status = resp.Header.Clone(), resp.StatusCode
	}
	l.mu.Lock()
	l.log = append(l.log, x)
	l.mu.Unlock()
	return resp, err
}

// methods are the Mcp-Method headers sent so far, in order.
func (l *wireLog) methods() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, x := range l.log {
		out = append(out, x.sent.Get("Mcp-Method"))
	}
	return out
}

// wantStateless fails unless every exchange so far was of the stateless
// era and the methods sent were exactly want: the version header on every
// request, no Mcp-Session-Id either way, every answer a 200.
func (l *wireLog) wantStateless(t *testing.T, want ...string) {
	t.Helper()
	if got := l.methods(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("methods sent %q, want %q", got, want)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, x := range l.log {
		if v := x.sent.Get("Mcp-Protocol-Version"); v != statelessEra {
			t.Errorf("request %d (%s): Mcp-Protocol-Version %q", i, x.sent.Get("Mcp-Method"), v)
		}
		if x.sent.Get("Mcp-Session-Id") != "" || x.got.Get("Mcp-Session-Id") != "" || x.status != http.StatusOK {
			t.Errorf("request %d (%s): sent session %q, got %d with session %q", i, x.sent.Get("Mcp-Method"),
				x.sent.Get("Mcp-Session-Id"), x.status, x.got.Get("Mcp-Session-Id"))
		}
	}
}

// statelessSession connects the SDK's client with its default options
// (the stateless era first) to url as key, recording the wire.
func statelessSession(t *testing.T, url, key string) (*sdk.ClientSession, *wireLog) {
	t.Helper()
	l := &wireLog{key: key}
	s, err := sdkConnect(t, url, l, "")
	if err != nil {
		t.Fatal(err)
	}
	return s, l
}

// wantToolError fails unless err is the JSON-RPC error code.
func wantToolError(t *testing.T, what string, err error, code int64) {
	t.Helper()
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != code {
		t.Fatalf("%s: %v, want JSON-RPC error %d", what, err, code)
	}
}

// The routing server to the SDK's client in the stateless era: connected
// by server/discover without initialize or a session, its three tools, a
// flux_route billed like the chat call it is, and decisions explained
// across the eras both ways.
func TestMCPStatelessRouting(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	key := e.account(t, "stateless-router", map[string]any{"balance_usd": "5.00"})
	ctx := context.Background()
	s, wire := statelessSession(t, e.BaseURL+"/mcp", key)
	wire.wantStateless(t, "server/discover")
	if got := s.InitializeResult(); got.ProtocolVersion != statelessEra || got.ServerInfo == nil || got.ServerInfo.Name != "gw-routing" ||
		got.ServerInfo.Version != "1.0.0" || s.ID() != "" {
		t.Fatalf("connected: %+v %+v session %q", got, got.ServerInfo, s.ID())
	}
	if got := toolNames(t, s); got != "flux_route,flux_explain,flux_models" {
		t.Fatalf("tools %s", got)
	}

	u := tokenUsage{Input: 40, Output: 12}
	e.OA.Push(fake.Script{Text: "Stateless answer.", Usage: fakeUsage(false, u)})
	res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "flux_route", Arguments: map[string]any{"prompt": "hello", "tier": "fast", "max_tokens": 50}})
	if err != nil || res.IsError {
		t.Fatalf("flux_route: %v %+v", err, res)
	}
	out := structured(t, res)
	id, _ := out["decision_id"].(string)
	cost := listCost(t, "gpt-4.1-nano", u, false)
	if out["answer"] != "Stateless answer." || out["model"] != "gpt-4.1-nano" || out["cost_usd"] != cost.String() || !strings.HasPrefix(id, "req-") {
		t.Fatalf("flux_route %v", out)
	}
	if c, ok := ledgerOf(t, e.gateway, "stateless-router")[id]; !ok || c != cost {
		t.Fatalf("ledger %v %v, want %v", c, ok, cost)
	}
	if reqs := e.OA.Requests(); len(reqs) != 1 || reqs[0].JSON()["messages"].([]any)[0].(map[string]any)["content"] != "hello" {
		t.Fatalf("upstream requests %d", len(reqs))
	}

	explain := func(t *testing.T, s *sdk.ClientSession, id string) map[string]any {
		t.Helper()
		res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "flux_explain", Arguments: map[string]any{"decision_id": id}})
		if err != nil || res.IsError {
			t.Fatalf("flux_explain: %v %+v", err, res)
		}
		return structured(t, res)
	}
	// The decision in the same era, then from a sessions-era session.
	legacy := mcpSession(t, e.BaseURL+"/mcp", key)
	for era, sess := range map[string]*sdk.ClientSession{statelessEra: s, sessionsEra: legacy} {
		if ex := explain(t, sess, id); ex["decision_id"] != id || ex["model"] != "gpt-4.1-nano" || ex["tier"] != "fast" ||
			ex["cost_usd"] != cost.String() || ex["requested_model"] != "gw-fast" {
			t.Fatalf("flux_explain in %s: %v", era, ex)
		}
	}
	// A sessions-era decision explained in the stateless era.
	e.OA.Push(fake.Script{Text: "Session answer.", Usage: fakeUsage(false, u)})
	res, err = legacy.CallTool(ctx, &sdk.CallToolParams{Name: "flux_route", Arguments: map[string]any{"prompt": "again", "tier": "fast"}})
	if err != nil || res.IsError {
		t.Fatalf("sessions-era flux_route: %v %+v", err, res)
	}
	legacyID, _ := structured(t, res)["decision_id"].(string)
	if ex := explain(t, s, legacyID); ex["decision_id"] != legacyID || legacyID == id || ex["model"] != "gpt-4.1-nano" || ex["cost_usd"] != cost.String() {
		t.Fatalf("the sessions-era decision %q in the stateless era: %v", legacyID, ex)
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
	_, err = s.CallTool(ctx, &sdk.CallToolParams{Name: "flux_nope"})
	wantToolError(t, "an unknown tool", err, -32602)
	wire.wantStateless(t, "server/discover", "tools/list", "tools/call", "tools/call", "tools/call", "tools/call", "tools/call")
}

// The tools server to the SDK's client in the stateless era: connected by
// server/discover, its tools, list_capabilities, an unknown tool, and the
// paid-tool listing states, which the client sees change because the
// list may not be reused (ttlMs 0).
func TestMCPStatelessTools(t *testing.T) {
	t.Parallel()
	g := startGateway(t, gwOptions{})
	key := g.newAccountKey(t, map[string]any{"id": "stateless-tools", "plan": "paid", "cleared": true, "balance_usd": "1.00"})
	ctx := context.Background()
	s, wire := statelessSession(t, g.BaseURL+"/mcp-tools/", key)
	if got := s.InitializeResult(); got.ProtocolVersion != statelessEra || got.ServerInfo == nil || got.ServerInfo.Name != "gw-tools" || s.ID() != "" {
		t.Fatalf("connected: %+v session %q", got, s.ID())
	}
	const all = "list_capabilities,web_fetch,web_search,image_generate,transcribe,speak"
	if got := toolNames(t, s); got != all {
		t.Fatalf("tools %s", got)
	}
	res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "list_capabilities"})
	if err != nil || res.IsError {
		t.Fatalf("list_capabilities: %v %+v", err, res)
	}
	if caps := structured(t, res); caps["tier"] != "paid" || caps["premium_unlocked"] != true {
		t.Fatalf("list_capabilities %v", caps)
	}
	_, err = s.CallTool(ctx, &sdk.CallToolParams{Name: "no_such_tool"})
	wantToolError(t, "an unknown tool", err, -32602)
	wire.wantStateless(t, "server/discover", "tools/list", "tools/call", "tools/call")

	free := g.newAccountKey(t, map[string]any{"id": "stateless-free", "plan": "free"})
	fs, fwire := statelessSession(t, g.BaseURL+"/mcp-tools/", free)
	res, err = fs.CallTool(ctx, &sdk.CallToolParams{Name: "image_generate", Arguments: map[string]any{"prompt": "a fox"}})
	if err != nil || !res.IsError || structured(t, res)["error"] != "premium_locked" {
		t.Fatalf("image_generate on free: %v %+v", err, res)
	}
	if got := toolNames(t, fs); !strings.Contains(got, "image_generate") {
		t.Fatalf("first listing after the refusal lacks image_generate: %s", got)
	}
	if got := toolNames(t, fs); strings.Contains(got, "image_generate") {
		t.Fatalf("second listing after the refusal still has image_generate: %s", got)
	}
	fwire.wantStateless(t, "server/discover", "tools/call", "tools/list", "tools/list")
}

// statelessMeta is the _meta a stateless-era request carries.
func statelessMeta(version string) map[string]any {
	return map[string]any{
		"io.modelcontextprotocol/protocolVersion":    version,
		"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "raw", "version": "1"},
	}
}

// statelessRequest is a JSON-RPC request of the stateless era at version:
// params (nil: none besides _meta) with the _meta, and the headers a
// client sends with it (Mcp-Name when params has a name), besides the key.
func statelessRequest(t *testing.T, id any, method, version string, params map[string]any) (string, []string) {
	t.Helper()
	p := map[string]any{"_meta": statelessMeta(version)}
	for k, v := range params {
		p[k] = v
	}
	body := mustJSONText(t, map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": p})
	h := []string{"Content-Type", "application/json", "Accept", "application/json, text/event-stream",
		"Mcp-Protocol-Version", version, "Mcp-Method", method}
	if name, ok := params["name"].(string); ok {
		h = append(h, "Mcp-Name", name)
	}
	return body, h
}

// without is header (name, value pairs) without name.
func without(header []string, name string) []string {
	var out []string
	for i := 0; i+1 < len(header); i += 2 {
		if !strings.EqualFold(header[i], name) {
			out = append(out, header[i], header[i+1])
		}
	}
	return out
}

// rpcMessage is the JSON-RPC message of an answer: its one event's data
// on an event stream, else its body.
func rpcMessage(t *testing.T, r response) []byte {
	t.Helper()
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") {
		return r.Body
	}
	var data []byte
	for _, line := range bytes.Split(r.Body, []byte("\n")) {
		if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			if data != nil {
				t.Fatalf("more than one event: %s", r.Body)
			}
			data = d
		}
	}
	return data
}

// Both servers on the wire in the stateless era: server/discover and
// tools/list exactly, each check of the request's headers and _meta with
// its status and JSON-RPC error, and no Mcp-Session-Id on any answer.
func TestMCPStatelessWire(t *testing.T) {
	t.Parallel()
	g := startGateway(t, gwOptions{})
	key := g.newAccountKey(t, map[string]any{"id": "stateless-wire", "plan": "paid", "cleared": true, "balance_usd": "1.00"})
	for _, srv := range []struct {
		path, name, instructions, tool, listCache, contentType string
	}{
		{"/mcp", "gw-routing", "Route prompts through the gateway with flux_route; explain a decision with flux_explain.",
			"flux_models", `"ttlMs":3600000,"cacheScope":"public"`, "application/json"},
		{"/mcp-tools/", "gw-tools", "Every tool calls the gateway's API with your key and is billed as a direct call; call list_capabilities first.",
			"list_capabilities", `"ttlMs":0,"cacheScope":"private"`, "text/event-stream"},
	} {
		t.Run(srv.name, func(t *testing.T) {
			url := g.BaseURL + srv.path
			post := func(t *testing.T, body string, header []string) response {
				t.Helper()
				r := g.send(t, url, http.MethodPost, []byte(body), append(bearer(key), header...))
				if sess := r.Header.Get("Mcp-Session-Id"); sess != "" {
					t.Fatalf("an answer with Mcp-Session-Id %q: %s", sess, r.Body)
				}
				return r
			}
			serverInfo := `"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"` + srv.name + `","version":"1.0.0"}}`

			body, h := statelessRequest(t, "d1", "server/discover", statelessEra, nil)
			r := post(t, body, h)
			if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), srv.contentType) {
				t.Fatalf("server/discover: %d %v %s", r.Status, r.Header, r.Body)
			}
			matchJSON(t, rpcMessage(t, r), `{"jsonrpc":"2.0","id":"d1","result":{"resultType":"complete",
				"supportedVersions":`+allVersions+`,
				"capabilities":{"tools":{"listChanged":false},"prompts":{"listChanged":false},"resources":{"listChanged":false,"subscribe":false}},
				"instructions":`+mustJSONText(t, srv.instructions)+`,"ttlMs":3600000,"cacheScope":"public",`+serverInfo+`}}`)

			body, h = statelessRequest(t, 2, "tools/list", statelessEra, nil)
			r = post(t, body, h)
			msg := rpcMessage(t, r)
			if r.Status != http.StatusOK || gjson.GetBytes(msg, "result.tools.#").Int() < 3 {
				t.Fatalf("tools/list: %d %s", r.Status, r.Body)
			}
			rest, _ := json.Marshal(map[string]any{"tools": json.RawMessage(gjson.GetBytes(msg, "result.tools").Raw)})
			matchJSON(t, msg, `{"jsonrpc":"2.0","id":2,"result":{"resultType":"complete",`+string(rest[1:len(rest)-1])+`,`+srv.listCache+`,`+serverInfo+`}}`)

			body, h = statelessRequest(t, 3, "tools/call", statelessEra, map[string]any{"name": srv.tool, "arguments": map[string]any{}})
			r = post(t, body, h)
			if msg := rpcMessage(t, r); r.Status != http.StatusOK || gjson.GetBytes(msg, "result.resultType").String() != "complete" ||
				gjson.GetBytes(msg, "result.isError").Bool() || gjson.GetBytes(msg, `result._meta.io\.modelcontextprotocol/serverInfo.name`).String() != srv.name {
				t.Fatalf("tools/call %s: %d %s", srv.tool, r.Status, r.Body)
			}

			for _, tc := range []struct {
				name   string
				body   string
				header []string
				status int
				want   string
			}{
				{"no Mcp-Method", body, without(h, "Mcp-Method"), http.StatusBadRequest,
					`{"jsonrpc":"2.0","id":3,"error":{"code":-32020,"message":"Header mismatch: Mcp-Method header is missing; the body says 'tools/call'"}}`},
				{"Mcp-Method of another method", body, append(without(h, "Mcp-Method"), "Mcp-Method", "tools/list"), http.StatusBadRequest,
					`{"jsonrpc":"2.0","id":3,"error":{"code":-32020,"message":"Header mismatch: Mcp-Method header value 'tools/list' does not match body value 'tools/call'"}}`},
				{"Mcp-Name of another tool", body, append(without(h, "Mcp-Name"), "Mcp-Name", "other_tool"), http.StatusBadRequest,
					`{"jsonrpc":"2.0","id":3,"error":{"code":-32020,"message":"Header mismatch: Mcp-Name header value 'other_tool' does not match body value '` + srv.tool + `'"}}`},
				{"no Mcp-Name", body, without(h, "Mcp-Name"), http.StatusBadRequest,
					`{"jsonrpc":"2.0","id":3,"error":{"code":-32020,"message":"Header mismatch: Mcp-Name header is missing; the body says '` + srv.tool + `'"}}`},
				{"no Mcp-Protocol-Version", body, without(h, "Mcp-Protocol-Version"), http.StatusBadRequest,
					`{"jsonrpc":"2.0","id":3,"error":{"code":-32020,"message":"Header mismatch: Mcp-Protocol-Version header is missing; the body says '2026-07-28'"}}`},
			} {
				t.Run(tc.name, func(t *testing.T) {
					r := post(t, tc.body, tc.header)
					if r.Status != tc.status || r.Header.Get("Content-Type") != "application/json" {
						t.Fatalf("%d %v %s, want %d", r.Status, r.Header, r.Body, tc.status)
					}
					matchJSON(t, r.Body, tc.want)
				})
			}

			t.Run("initialize with a stateless _meta", func(t *testing.T) {
				body, h := statelessRequest(t, 4, "initialize", statelessEra,
					map[string]any{"protocolVersion": statelessEra, "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw", "version": "1"}})
				r := post(t, body, h)
				if r.Status != http.StatusNotFound {
					t.Fatalf("%d %s", r.Status, r.Body)
				}
				matchJSON(t, r.Body, `{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"unknown method initialize"}}`)
			})
			t.Run("an unsupported version", func(t *testing.T) {
				body, h := statelessRequest(t, 5, "tools/list", "v999.0.0", nil)
				r := post(t, body, h)
				if r.Status != http.StatusBadRequest {
					t.Fatalf("%d %s", r.Status, r.Body)
				}
				matchJSON(t, r.Body, `{"jsonrpc":"2.0","id":5,"error":{"code":-32022,"message":"Unsupported protocol version",
					"data":{"supported":`+allVersions+`,"requested":"v999.0.0"}}}`)
			})
			t.Run("an unknown tool", func(t *testing.T) {
				body, h := statelessRequest(t, 6, "tools/call", statelessEra, map[string]any{"name": "no_such_tool", "arguments": map[string]any{}})
				r := post(t, body, h)
				if r.Status != http.StatusOK {
					t.Fatalf("%d %s", r.Status, r.Body)
				}
				if code := gjson.GetBytes(rpcMessage(t, r), "error.code").Int(); code != -32602 || gjson.GetBytes(rpcMessage(t, r), "id").Raw != "6" {
					t.Fatalf("error %d in %s", code, r.Body)
				}
			})
		})
	}
}

// A refusal the pipeline makes before the request is read, to a client of
// the stateless era (by its Mcp-Protocol-Version header): a key missing
// on /mcp is -31401 and the MCP budget spent on either server -31429 with
// Retry-After, never the sessions era's -32002 and -32003, which a client
// without that header still gets.
func TestMCPStatelessRefusals(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, withGW(t, "\t\tlimits {\n\t\t\tmcp_requests_per_minute 2\n\t\t}"))
	key := e.account(t, "stateless-budget", nil)
	body, h := statelessRequest(t, 1, "tools/list", statelessEra, nil)

	r := e.send(t, e.BaseURL+"/mcp", http.MethodPost, []byte(body), h)
	if r.Status != http.StatusUnauthorized {
		t.Fatalf("no key: %d %s", r.Status, r.Body)
	}
	matchJSON(t, r.Body, `{"jsonrpc":"2.0","id":null,"error":{"code":-31401,"message":"missing API key"}}`)
	r = e.send(t, e.BaseURL+"/mcp", http.MethodPost, []byte(mcpToolsList), []string{"Content-Type", "application/json", "Accept", "application/json, text/event-stream"})
	if r.Status != http.StatusUnauthorized {
		t.Fatalf("no key, sessions era: %d %s", r.Status, r.Body)
	}
	matchJSON(t, r.Body, `{"jsonrpc":"2.0","id":null,"error":{"code":-32002,"message":"missing API key"}}`)

	for _, path := range []string{"/mcp", "/mcp-tools/"} {
		if r := e.send(t, e.BaseURL+path, http.MethodPost, []byte(body), append(bearer(key), h...)); r.Status != http.StatusOK {
			t.Fatalf("%s within the budget: %d %s", path, r.Status, r.Body)
		}
	}
	for _, path := range []string{"/mcp", "/mcp-tools/"} {
		r := e.send(t, e.BaseURL+path, http.MethodPost, []byte(body), append(bearer(key), h...))
		wantRPCError(t, path+" over the budget", r, http.StatusTooManyRequests, -31429)
		if s, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || s < 1 || r.Header.Get("Mcp-Session-Id") != "" || gjson.GetBytes(r.Body, "id").Raw != "null" {
			t.Fatalf("%s over the budget: %v %s", path, r.Header, r.Body)
		}
	}
	wantRateLimited(t, "the sessions era over the budget", mcpPost(t, e.gateway, "/mcp-tools/", key, "", mcpPing))
}

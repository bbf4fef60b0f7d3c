package fake_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// The protocol revisions of the two eras.
const (
	era2026 = "2026-07-28"
	era2025 = "2025-11-25"
)

// connectMCP opens a Go SDK client session on url asking for version
// ("" = the client's default, the 2026-07-28 era first), with hc as its
// HTTP client (nil: the default one) and no standalone GET stream.
func connectMCP(t *testing.T, url, version string, hc *http.Client) (*mcp.ClientSession, error) {
	t.Helper()
	var opts *mcp.ClientSessionOptions
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "fake-test", Version: "1.0.0"}, nil)
	cs, err := client.Connect(context.Background(),
		&mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, DisableStandaloneSSE: true, MaxRetries: -1}, opts)
	if err == nil {
		t.Cleanup(func() { _ = cs.Close() })
	}
	return cs, err
}

// mustConnect is connectMCP that fails the test on an error.
func mustConnect(t *testing.T, url, version string, hc *http.Client) *mcp.ClientSession {
	t.Helper()
	cs, err := connectMCP(t, url, version, hc)
	if err != nil {
		t.Fatalf("connect %s (%q): %v", url, version, err)
	}
	return cs
}

// callText calls tool with args and returns its only text content and
// whether it is an error result.
func callText(t *testing.T, cs *mcp.ClientSession, tool string, args any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("%s: content %v", tool, res.Content)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("%s: content %T", tool, res.Content[0])
	}
	return tc.Text, res.IsError
}

// TestMCPBothEras: each kind of server (stateless, stateful) with each
// client era: the era it ends up in, the session it holds, the tool list
// with its input schemas, and every tool's answer.
func TestMCPBothEras(t *testing.T) {
	for _, c := range []struct {
		name      string
		stateless bool
		ask       string // the client's version; "" = its default
		era       string // the version the session speaks
		session   bool   // whether it has an Mcp-Session-Id
		first     string // Mcp-Method of the first request
	}{
		{"stateless/2026 client", true, "", era2026, false, "server/discover"},
		{"stateless/2025 client", true, era2025, era2025, false, ""},
		{"stateful/2026 client falls back", false, "", era2025, true, "server/discover"},
		{"stateful/2025 client", false, era2025, era2025, true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := fake.MCPOptions{Stateless: c.stateless, Extra: []string{"x_one", "x_two"}}
			m := fake.NewMCP(t, opts)
			cs := mustConnect(t, m.URL(), c.ask, nil)
			if got := cs.InitializeResult().ProtocolVersion; got != c.era {
				t.Fatalf("era %q, want %q", got, c.era)
			}
			if got := cs.InitializeResult().ServerInfo; got == nil || got.Name != fake.MCPServerName {
				t.Fatalf("server info %+v", got)
			}
			if (cs.ID() != "") != c.session || (m.Sessions() == 1) != c.session {
				t.Fatalf("session id %q, server sessions %d", cs.ID(), m.Sessions())
			}
			h := m.Headers()
			if got := h[0].Get("Mcp-Method"); got != c.first {
				t.Fatalf("first request's Mcp-Method %q", got)
			}
			if c.era == era2026 && h[len(h)-1].Get("Mcp-Protocol-Version") != era2026 {
				t.Fatalf("last request's headers %v", h[len(h)-1])
			}
			checkTools(t, cs, opts)
			checkCalls(t, m, cs, opts)
			if err := cs.Close(); err != nil {
				t.Fatal(err)
			}
			if m.Sessions() != 0 {
				t.Fatalf("%d sessions after close", m.Sessions())
			}
		})
	}
}

// checkTools: the list is ToolNames, each with its input schema.
func checkTools(t *testing.T, cs *mcp.ClientSession, opts fake.MCPOptions) {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	props := map[string][]string{}
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		schema, _ := json.Marshal(tool.InputSchema)
		var s struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if err := json.Unmarshal(schema, &s); err != nil || s.Type != "object" {
			t.Fatalf("%s: input schema %s", tool.Name, schema)
		}
		for p := range s.Properties {
			props[tool.Name] = append(props[tool.Name], p)
		}
		slices.Sort(props[tool.Name])
		slices.Sort(s.Required)
		if !slices.Equal(s.Required, props[tool.Name]) {
			t.Fatalf("%s: required %v of %v", tool.Name, s.Required, props[tool.Name])
		}
		if tool.Description == "" {
			t.Fatalf("%s: no description", tool.Name)
		}
	}
	if !slices.Equal(names, fake.ToolNames(opts)) {
		t.Fatalf("tools %v, want %v", names, fake.ToolNames(opts))
	}
	want := map[string][]string{"echo": {"text"}, "add": {"a", "b"}, "slow": {"ms"}}
	if !reflect.DeepEqual(props, want) {
		t.Fatalf("properties %v, want %v", props, want)
	}
}

// checkCalls calls every tool once and checks its answer and count.
func checkCalls(t *testing.T, m *fake.MCP, cs *mcp.ClientSession, opts fake.MCPOptions) {
	t.Helper()
	ctx := context.Background()
	if text, isErr := callText(t, cs, "echo", map[string]any{"text": "héllo"}); text != "echo: héllo" || isErr {
		t.Fatalf("echo: %q %v", text, isErr)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "add", Arguments: map[string]any{"a": 1.5, "b": 2}})
	if err != nil {
		t.Fatal(err)
	}
	if text := res.Content[0].(*mcp.TextContent).Text; text != "3.5" || res.IsError || len(res.Content) != 1 ||
		!reflect.DeepEqual(res.StructuredContent, map[string]any{"sum": 3.5}) {
		t.Fatalf("add: %q %v %#v", text, res.IsError, res.StructuredContent)
	}
	if text, isErr := callText(t, cs, "fail", nil); text != fake.FailText || !isErr {
		t.Fatalf("fail: %q %v", text, isErr)
	}
	if text, isErr := callText(t, cs, "slow", map[string]any{"ms": 1}); text != fake.SlowDone || isErr {
		t.Fatalf("slow: %q %v", text, isErr)
	}
	_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "boom"})
	var jerr *jsonrpc.Error
	if !errors.As(err, &jerr) || jerr.Code != fake.BoomCode || jerr.Message != fake.BoomMessage {
		t.Fatalf("boom: %v", err)
	}
	for _, name := range opts.Extra {
		if text, isErr := callText(t, cs, name, nil); text != fake.ExtraText || isErr {
			t.Fatalf("%s: %q %v", name, text, isErr)
		}
	}
	// A call with arguments the schema refuses does not reach the tool.
	if text, isErr := callText(t, cs, "echo", map[string]any{"text": 3}); !isErr || !strings.Contains(text, "text") {
		t.Fatalf("echo with a number: %q %v", text, isErr)
	}
	for _, name := range fake.ToolNames(opts) {
		if got := m.Calls(name); got != 1 {
			t.Fatalf("%s called %d times", name, got)
		}
	}
}

// TestMCPCancel: the slow tool's context ends when the client gives up,
// in both eras (the POST closed; the cancellation notification).
func TestMCPCancel(t *testing.T) {
	for _, c := range []struct {
		name      string
		stateless bool
		ask       string
	}{{"2026", true, ""}, {"2025", false, era2025}} {
		t.Run(c.name, func(t *testing.T) {
			inFlight := make(chan context.Context, 1)
			m := fake.NewMCP(t, fake.MCPOptions{Stateless: c.stateless, OnCall: func(ctx context.Context, tool string) {
				if tool == "slow" {
					inFlight <- ctx
				}
			}})
			cs := mustConnect(t, m.URL(), c.ask, nil)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"ms": 600000}})
				done <- err
			}()
			serverCtx := within(t, inFlight, "the slow call reaching the server")
			cancel()
			if err := within(t, done, "the cancelled call returning"); !errors.Is(err, context.Canceled) {
				t.Fatalf("call: %v", err)
			}
			within(t, serverCtx.Done(), "the server seeing the call end")
		})
	}
}

// within is what ch yields, and fails the test when it yields nothing
// within a minute (what says what was awaited).
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatalf("%s: nothing within a minute", what)
		panic("unreachable")
	}
}

// bearerClient is an HTTP client that sends "Authorization: Bearer tok".
func bearerClient(tok string) *http.Client {
	return oauth2.NewClient(context.Background(), oauth2.StaticTokenSource(&oauth2.Token{AccessToken: tok}))
}

// TestMCPStaticBearer: only the one token is let in; a refusal is 401
// with a Bearer challenge; every Authorization value is recorded.
func TestMCPStaticBearer(t *testing.T) {
	m := fake.NewMCP(t, fake.MCPOptions{Stateless: true, Auth: fake.StaticBearer("s3cret")})
	for _, c := range []struct {
		authorization, challenge string
	}{
		{"", `Bearer realm="fake-mcp"`},
		{"Bearer wrong", `Bearer realm="fake-mcp", error="invalid_token"`},
		{"Basic czNjcmV0Og==", `Bearer realm="fake-mcp", error="invalid_token"`},
	} {
		res := postMCP(t, m.URL(), c.authorization)
		if res.StatusCode != http.StatusUnauthorized || res.Header.Get("WWW-Authenticate") != c.challenge {
			t.Fatalf("%q: %d %v", c.authorization, res.StatusCode, res.Header)
		}
	}
	if _, err := connectMCP(t, m.URL(), "", bearerClient("wrong")); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Fatalf("wrong token connected: %v", err)
	}
	refused := m.Unauthorized()
	if refused != 5 { // three POSTs, then discover and initialize
		t.Fatalf("%d refusals", refused)
	}
	cs := mustConnect(t, m.URL(), "", bearerClient("s3cret"))
	if text, _ := callText(t, cs, "echo", map[string]any{"text": "x"}); text != "echo: x" {
		t.Fatalf("echo: %q", text)
	}
	if m.Unauthorized() != refused || m.Requests() != refused+2 {
		t.Fatalf("%d requests, %d refused", m.Requests(), m.Unauthorized())
	}
	want := []string{"", "Bearer wrong", "Basic czNjcmV0Og==", "Bearer wrong", "Bearer wrong", "Bearer s3cret", "Bearer s3cret"}
	if got := m.Authorizations(); !slices.Equal(got, want) {
		t.Fatalf("authorizations %q", got)
	}
}

// TestMCPReset: Reset forgets the headers kept, not the counts.
func TestMCPReset(t *testing.T) {
	m := fake.NewMCP(t, fake.MCPOptions{Stateless: true, Auth: fake.StaticBearer("s3cret")})
	postMCP(t, m.URL(), "Bearer wrong")
	m.Reset()
	if len(m.Headers()) != 0 || len(m.Authorizations()) != 0 || m.Requests() != 1 || m.Unauthorized() != 1 {
		t.Fatalf("after Reset: %d headers, %d requests, %d refused", len(m.Headers()), m.Requests(), m.Unauthorized())
	}
	postMCP(t, m.URL(), "Bearer s3cret")
	if got := m.Authorizations(); !slices.Equal(got, []string{"Bearer s3cret"}) || m.Requests() != 2 {
		t.Fatalf("after one more request: %q, %d requests", got, m.Requests())
	}
}

// postMCP POSTs a tools/list request of the 2025 era with the given
// Authorization value.
func postMCP(t *testing.T, url, authorization string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res
}

// TestMCPOAuth: the MCP fake lets in the OAuth fake's tokens, got with
// the standard client, until they are revoked; a new token gets in again.
func TestMCPOAuth(t *testing.T) {
	for _, c := range []struct {
		name      string
		stateless bool
		ask       string
		refused   int
	}{{"2026", true, "", 1}, {"2025", false, era2025, 2}} {
		t.Run(c.name, func(t *testing.T) {
			o := fake.NewOAuth(t)
			m := fake.NewMCP(t, fake.MCPOptions{Stateless: c.stateless, Auth: o})
			cfg := clientConfig(o, oauth2.AuthStyleInHeader, "mcp")
			ctx := context.Background()
			cs := mustConnect(t, m.URL(), c.ask, cfg.Client(ctx))
			if text, _ := callText(t, cs, "echo", map[string]any{"text": "a"}); text != "echo: a" {
				t.Fatalf("echo: %q", text)
			}
			if o.Issued() != 1 || m.Unauthorized() != 0 {
				t.Fatalf("issued %d, refused %d", o.Issued(), m.Unauthorized())
			}
			o.RevokeAll()
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "b"}}); err == nil ||
				!strings.Contains(err.Error(), "Unauthorized") {
				t.Fatalf("revoked token: %v", err)
			}
			// The SDK's client takes a 401 as the end of the connection;
			// in the 2025 era closing it sends a DELETE, refused too.
			_ = cs.Close()
			if m.Unauthorized() != c.refused || m.Calls("echo") != 1 {
				t.Fatalf("refused %d, echo calls %d", m.Unauthorized(), m.Calls("echo"))
			}
			cs = mustConnect(t, m.URL(), c.ask, cfg.Client(ctx))
			if text, _ := callText(t, cs, "echo", map[string]any{"text": "c"}); text != "echo: c" {
				t.Fatalf("echo: %q", text)
			}
			if o.Issued() != 2 || m.Calls("echo") != 2 {
				t.Fatalf("issued %d, echo calls %d", o.Issued(), m.Calls("echo"))
			}
		})
	}
}

// TestMCPStopStart: a stopped server refuses connections; started again
// it answers on the same URL; a 2025 session of before is gone (404).
func TestMCPStopStart(t *testing.T) {
	for _, c := range []struct {
		name      string
		stateless bool
		ask       string
	}{{"2026", true, ""}, {"2025", false, era2025}} {
		t.Run(c.name, func(t *testing.T) {
			m := fake.NewMCP(t, fake.MCPOptions{Stateless: c.stateless})
			url := m.URL()
			before := mustConnect(t, url, c.ask, nil)
			if text, _ := callText(t, before, "echo", map[string]any{"text": "1"}); text != "echo: 1" {
				t.Fatalf("echo: %q", text)
			}
			m.Stop()
			if m.Sessions() != 0 {
				t.Fatalf("%d sessions while stopped", m.Sessions())
			}
			// A new connection is refused (one kept alive from before
			// was closed: a request on it gets EOF).
			_, err := freshClient().Post(url, "application/json", strings.NewReader("{}"))
			if !errors.Is(err, syscall.ECONNREFUSED) {
				t.Fatalf("stopped: %v", err)
			}
			if _, err := connectMCP(t, url, c.ask, freshClient()); !errors.Is(err, syscall.ECONNREFUSED) {
				t.Fatalf("connect while stopped: %v", err)
			}
			m.Start()
			if m.URL() != url {
				t.Fatalf("URL %s, was %s", m.URL(), url)
			}
			after := mustConnect(t, url, c.ask, nil)
			if text, _ := callText(t, after, "echo", map[string]any{"text": "2"}); text != "echo: 2" {
				t.Fatalf("echo: %q", text)
			}
			_, err = before.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "3"}})
			if c.stateless && err != nil {
				t.Fatalf("stateless client after restart: %v", err)
			}
			if !c.stateless && !errors.Is(err, mcp.ErrSessionMissing) {
				t.Fatalf("old session after restart: %v", err)
			}
			if m.Calls("echo") != map[bool]int{true: 3, false: 2}[c.stateless] {
				t.Fatalf("echo calls %d", m.Calls("echo"))
			}
		})
	}
}

// TestMCPStopInFlight: Stop does not wait for a slow call in flight; the
// call fails at the client.
func TestMCPStopInFlight(t *testing.T) {
	for _, c := range []struct {
		name      string
		stateless bool
		ask       string
	}{{"2026", true, ""}, {"2025", false, era2025}} {
		t.Run(c.name, func(t *testing.T) {
			inFlight := make(chan struct{})
			m := fake.NewMCP(t, fake.MCPOptions{Stateless: c.stateless, OnCall: func(_ context.Context, tool string) {
				if tool == "slow" {
					close(inFlight)
				}
			}})
			cs := mustConnect(t, m.URL(), c.ask, nil)
			done := make(chan error, 1)
			go func() {
				_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "slow", Arguments: map[string]any{"ms": 600000}})
				done <- err
			}()
			<-inFlight
			m.Stop()
			if err := <-done; err == nil {
				t.Fatal("the call in flight succeeded")
			}
		})
	}
}

// TestMCPJSONResponse: with JSONResponse a call is answered with one
// application/json body, and the SDK's client reads it in both eras.
func TestMCPJSONResponse(t *testing.T) {
	for _, stateless := range []bool{true, false} {
		m := fake.NewMCP(t, fake.MCPOptions{Stateless: stateless, JSONResponse: true})
		cs := mustConnect(t, m.URL(), "", nil)
		if text, _ := callText(t, cs, "echo", map[string]any{"text": "j"}); text != "echo: j" {
			t.Fatalf("stateless %v: echo %q", stateless, text)
		}
	}
	m := fake.NewMCP(t, fake.MCPOptions{Stateless: true, JSONResponse: true})
	req, err := http.NewRequest(http.MethodPost, m.URL(), strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"boom","arguments":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body map[string]any
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil || res.StatusCode != http.StatusOK ||
		res.Header.Get("Content-Type") != "application/json" ||
		!reflect.DeepEqual(body, map[string]any{"jsonrpc": "2.0", "id": 7.0, "error": map[string]any{"code": -32603.0, "message": "boom"}}) {
		t.Fatalf("%d %v %v %v", res.StatusCode, res.Header, body, err)
	}
}

// freshClient is an HTTP client with no connection kept from before.
func freshClient() *http.Client { return &http.Client{Transport: &http.Transport{}} }

// TestMCPPages: with a page size, tools/list pages carry a cursor and the
// client's iterator sees every tool.
func TestMCPPages(t *testing.T) {
	opts := fake.MCPOptions{Stateless: true, PageSize: 2, Extra: []string{"a1", "a2", "a3"}}
	m := fake.NewMCP(t, opts)
	cs := mustConnect(t, m.URL(), "", nil)
	first, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(first.Tools) != 2 || first.NextCursor == "" {
		t.Fatalf("first page %+v %v", first, err)
	}
	var names []string
	for tool, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, tool.Name)
	}
	if !slices.Equal(names, fake.ToolNames(opts)) {
		t.Fatalf("tools %v", names)
	}
}

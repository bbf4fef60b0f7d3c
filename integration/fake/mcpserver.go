package fake

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCPPath is the path of the MCP fake's Streamable HTTP endpoint.
const MCPPath = "/mcp"

// The MCP fake's fixed answers.
const (
	// EchoPrefix starts the echo tool's text: "echo: <text>".
	EchoPrefix = "echo: "
	// FailText is the text of the fail tool's error result.
	FailText = "fail: this tool always fails"
	// SlowDone is the slow tool's text once it has waited.
	SlowDone = "done"
	// ExtraText is the text every Extra tool answers.
	ExtraText = "ok"
	// BoomCode and BoomMessage are the JSON-RPC error the boom tool's
	// call is answered with.
	BoomCode    = jsonrpc.CodeInternalError
	BoomMessage = "boom"
)

// MCPServerName is the name the MCP fake gives in its server info.
const MCPServerName = "fake-mcp"

// mcpRealm is the realm of the MCP fake's Bearer challenges.
const mcpRealm = "fake-mcp"

// An Authorizer decides whether the MCP fake lets a request in, from the
// value of its Authorization header ("" when there is none). StaticBearer
// and *OAuth are Authorizers.
type Authorizer interface {
	Authorize(authorization string) bool
}

// StaticBearer lets in the requests that carry exactly this token with the
// Bearer scheme.
type StaticBearer string

// Authorize lets in "Bearer <token>".
func (s StaticBearer) Authorize(authorization string) bool {
	tok, ok := bearerToken(authorization)
	return ok && s != "" && tok == string(s)
}

// MCPOptions configure an MCP fake.
type MCPOptions struct {
	// Stateless serves the way the SDK's stateless handler does: the
	// 2026-07-28 revision (server/discover, per-request _meta, no
	// sessions), and older clients too, each request on its own (no
	// Mcp-Session-Id, GET and DELETE 405). False serves the 2025-11-25
	// revision and the older ones with sessions (initialize,
	// Mcp-Session-Id, a GET stream, DELETE); a 2026-07-28 request is
	// refused with -32022, and the SDK's client then falls back to
	// initialize.
	Stateless bool
	// JSONResponse answers each POST with application/json instead of a
	// text/event-stream.
	JSONResponse bool
	// Auth, when set, decides which requests are let in; a request it
	// refuses gets 401 with a WWW-Authenticate: Bearer challenge and
	// never reaches the MCP server. Nil lets every request in.
	Auth Authorizer
	// Extra are more tools, beside the built-in ones, that take no
	// arguments and answer ExtraText. A name already used is a test
	// failure.
	Extra []string
	// PageSize is how many tools a tools/list page holds (0: the SDK's
	// default, 1000); past it the page carries a nextCursor.
	PageSize int
	// OnCall, when set, is called with the call's context and the tool's
	// name as a call reaches a tool (after its arguments were checked),
	// before the tool runs: a test learns that a call is in flight, and
	// from the context's end that the server saw it cancelled. It runs on
	// the server's goroutine: do not block in it.
	OnCall func(ctx context.Context, tool string)
}

// MCP is an MCP server on 127.0.0.1, built with the official Go SDK and
// served over Streamable HTTP at URL(), with these tools:
//
//   - echo {text}: the text content EchoPrefix + text.
//   - add {a, b numbers}: the sum as text and structuredContent {"sum": a+b}.
//   - fail {}: a result with isError true and the text FailText.
//   - slow {ms}: waits ms milliseconds, then answers SlowDone; it ends
//     early, with no answer that can reach anyone, when the call's
//     context ends or the server stops. In the 2026-07-28 era the context
//     ends when the POST is closed; in the 2025-11-25 era only when the
//     client cancels the request (notifications/cancelled) or the session
//     ends, not when the POST is closed.
//   - boom {}: no result but the JSON-RPC error BoomCode, BoomMessage.
//   - each of MCPOptions.Extra: answers ExtraText.
//
// It counts the HTTP requests and the 401s, keeps every request's headers
// (so a test can see which Authorization values reached it), and counts
// the calls of each tool. Stop and Start take it down and bring it up
// again on the same address; it is stopped when the test ends.
type MCP struct {
	t    testing.TB
	opts MCPOptions
	addr string // host:port, fixed for the fake's life

	mu           sync.Mutex
	srv          *http.Server // nil while stopped
	server       *mcp.Server
	down         chan struct{} // closed by Stop: slow calls end
	requests     int
	unauthorized int
	headers      []http.Header
	calls        map[string]int
}

// NewMCP starts an MCP fake on 127.0.0.1 on a free port; it is stopped
// when the test ends.
func NewMCP(t testing.TB, opts MCPOptions) *MCP {
	t.Helper()
	m := &MCP{t: t, opts: opts, calls: map[string]int{}}
	m.checkExtra()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("fake: MCP listen: %v", err)
	}
	m.addr = l.Addr().String()
	m.serve(l)
	t.Cleanup(m.Stop)
	return m
}

// URL is the Streamable HTTP endpoint (the same across Stop and Start).
func (m *MCP) URL() string { return "http://" + m.addr + MCPPath }

// Stop takes the server down: the listener and every connection are
// closed (a new connection is refused) and its sessions end. Stopping a
// stopped server does nothing.
func (m *MCP) Stop() {
	m.mu.Lock()
	srv, server, down := m.srv, m.server, m.down
	m.srv, m.server = nil, nil
	m.mu.Unlock()
	if srv == nil {
		return
	}
	_ = srv.Close() // first: no call in flight gets its answer out
	close(down)
	for ss := range server.Sessions() {
		_ = ss.Close()
	}
}

// Start brings a stopped server up again on the same address, as a
// restarted process would: the counts are kept, the sessions of before
// are gone (their requests get 404, as the protocol says for an unknown
// session). Starting a running server does nothing. Call it from the
// test's goroutine: a port taken in between fails the test.
func (m *MCP) Start() {
	m.t.Helper()
	m.mu.Lock()
	running := m.srv != nil
	m.mu.Unlock()
	if running {
		return
	}
	l, err := net.Listen("tcp", m.addr)
	if err != nil {
		m.t.Fatalf("fake: MCP listen again on %s: %v", m.addr, err)
	}
	m.serve(l)
}

// serve builds a fresh MCP server and serves it on l.
func (m *MCP) serve(l net.Listener) {
	down := make(chan struct{})
	server := m.newServer(down)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{
		Stateless:                    m.opts.Stateless,
		JSONResponse:                 m.opts.JSONResponse,
		PropagateRequestCancellation: true,
	})
	mux := http.NewServeMux()
	mux.Handle(MCPPath, m.guard(h))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: time.Minute}
	m.mu.Lock()
	m.srv, m.server, m.down = srv, server, down
	m.mu.Unlock()
	go func() { _ = srv.Serve(l) }()
}

// guard records each request and lets in only those Auth accepts.
func (m *MCP) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.requests++
		m.headers = append(m.headers, r.Header.Clone())
		m.mu.Unlock()
		if m.opts.Auth != nil {
			authz := r.Header.Get("Authorization")
			if !m.opts.Auth.Authorize(authz) {
				m.mu.Lock()
				m.unauthorized++
				m.mu.Unlock()
				challenge := fmt.Sprintf("Bearer realm=%q", mcpRealm)
				if authz != "" {
					challenge += `, error="invalid_token"`
				}
				w.Header().Set("WWW-Authenticate", challenge)
				http.Error(w, "Unauthorized", http.StatusUnauthorized)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// Requests is how many HTTP requests reached the server (refused ones
// included).
func (m *MCP) Requests() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.requests
}

// Unauthorized is how many requests were answered 401.
func (m *MCP) Unauthorized() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.unauthorized
}

// Headers returns a copy of every request's headers, in arrival order.
func (m *MCP) Headers() []http.Header {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]http.Header, len(m.headers))
	for i, h := range m.headers {
		out[i] = h.Clone()
	}
	return out
}

// Authorizations is the Authorization header of every request, in arrival
// order ("" for a request without one).
func (m *MCP) Authorizations() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, len(m.headers))
	for i, h := range m.headers {
		out[i] = h.Get("Authorization")
	}
	return out
}

// Reset forgets the headers kept so far, as a long load does between
// batches; the counts stay.
func (m *MCP) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.headers = nil
}

// Calls is how many calls reached the named tool.
func (m *MCP) Calls(tool string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[tool]
}

// Sessions is how many initialized sessions with an Mcp-Session-Id the
// running server holds (always 0 for a stateless or a stopped one).
func (m *MCP) Sessions() int {
	m.mu.Lock()
	server := m.server
	m.mu.Unlock()
	if server == nil {
		return 0
	}
	n := 0
	for ss := range server.Sessions() {
		if ss.ID() != "" && ss.InitializeParams() != nil {
			n++
		}
	}
	return n
}

// builtinTools are the names of the tools every MCP fake has.
var builtinTools = []string{"echo", "add", "fail", "slow", "boom"}

// checkExtra fails the test when an Extra tool's name is taken.
func (m *MCP) checkExtra() {
	seen := map[string]bool{}
	for _, n := range builtinTools {
		seen[n] = true
	}
	for _, n := range m.opts.Extra {
		if seen[n] {
			m.t.Fatalf("fake: MCP tool %q is defined twice", n)
		}
		seen[n] = true
	}
}

// reached counts a call of tool and tells OnCall.
func (m *MCP) reached(ctx context.Context, tool string) {
	m.mu.Lock()
	m.calls[tool]++
	m.mu.Unlock()
	if m.opts.OnCall != nil {
		m.opts.OnCall(ctx, tool)
	}
}

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

type addIn struct {
	A float64 `json:"a" jsonschema:"the first number"`
	B float64 `json:"b" jsonschema:"the second number"`
}

type addOut struct {
	Sum float64 `json:"sum" jsonschema:"a + b"`
}

type slowIn struct {
	Ms int `json:"ms" jsonschema:"how many milliseconds to wait"`
}

// textResult is a result with one text content.
func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// newServer builds the SDK server with the fake's tools; slow calls end
// when down is closed.
func (m *MCP) newServer(down <-chan struct{}) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: MCPServerName, Version: "1.0.0"}, &mcp.ServerOptions{PageSize: m.opts.PageSize})
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echoes the text."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			m.reached(ctx, "echo")
			return textResult(EchoPrefix + in.Text), nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "add", Description: "Adds two numbers."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
			m.reached(ctx, "add")
			sum := in.A + in.B
			return textResult(strconv.FormatFloat(sum, 'f', -1, 64)), addOut{Sum: sum}, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "fail", Description: "Always ends in a tool error."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			m.reached(ctx, "fail")
			res := textResult(FailText)
			res.IsError = true
			return res, nil, nil
		})
	mcp.AddTool(s, &mcp.Tool{Name: "slow", Description: "Waits ms milliseconds, then answers done."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, any, error) {
			m.reached(ctx, "slow")
			return slow(ctx, down, in.Ms)
		})
	s.AddTool(&mcp.Tool{Name: "boom", Description: "Always ends in a protocol error.", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			m.reached(ctx, "boom")
			return nil, &jsonrpc.Error{Code: BoomCode, Message: BoomMessage}
		})
	for _, name := range m.opts.Extra {
		mcp.AddTool(s, &mcp.Tool{Name: name, Description: "Answers ok."},
			func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
				m.reached(ctx, name)
				return textResult(ExtraText), nil, nil
			})
	}
	return s
}

// errStopped ends the slow calls in flight when the server stops.
var errStopped = errors.New("fake: the MCP server stopped")

// slow is the slow tool: it waits ms milliseconds, or until ctx ends or
// the server stops (a session's end waits for its calls to finish).
func slow(ctx context.Context, down <-chan struct{}, ms int) (*mcp.CallToolResult, any, error) {
	wait := time.NewTimer(time.Duration(max(ms, 0)) * time.Millisecond)
	defer wait.Stop()
	select {
	case <-wait.C:
		return textResult(SlowDone), nil, nil
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	case <-down:
		return nil, nil, errStopped
	}
}

// ToolNames lists the tools of an MCP fake made with opts, sorted by name
// as its tools/list lists them.
func ToolNames(opts MCPOptions) []string {
	return slices.Sorted(slices.Values(slices.Concat(builtinTools, opts.Extra)))
}

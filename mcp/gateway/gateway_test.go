package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/pricing"
)

// tokenServer is an OAuth 2 token endpoint of the client credentials
// grant and a resource that takes only the tokens it issued and did not
// revoke.
type tokenServer struct {
	mu      sync.Mutex
	issued  int
	valid   map[string]bool
	bodies  []string
	token   *httptest.Server
	content *httptest.Server
}

func newTokenServer(t *testing.T) *tokenServer {
	ts := &tokenServer{valid: map[string]bool{}}
	ts.token = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		id, secret, ok := r.BasicAuth()
		if !ok {
			id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		}
		if r.PostForm.Get("grant_type") != "client_credentials" || id != "client" || secret != "secret" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":"invalid_client"}`)
			return
		}
		ts.mu.Lock()
		ts.issued++
		tok := fmt.Sprintf("tok-%d", ts.issued)
		ts.valid[tok] = true
		ts.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":3600}`, tok)
	}))
	ts.content = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.mu.Lock()
		ok := ts.valid[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
		b, _ := io.ReadAll(r.Body)
		ts.bodies = append(ts.bodies, string(b))
		ts.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(ts.token.Close)
	t.Cleanup(ts.content.Close)
	return ts
}

func (ts *tokenServer) revokeAll() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	clear(ts.valid)
}

func (ts *tokenServer) client(secret string) *http.Client {
	u := NewUpstream(Conn{URL: ts.content.URL, Auth: Auth{Kind: AuthClientCredentials, TokenURL: ts.token.URL, ClientID: "client", ClientSecret: secret}}, nil)
	return u.client
}

func post(t *testing.T, c *http.Client, url, body string) (int, error) {
	t.Helper()
	resp, err := c.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, nil
}

// A token is fetched once and kept; when the server refuses it, one new
// token is fetched and the request sent once more, body and all.
func TestClientCredentialsTokenKeptAndRenewed(t *testing.T) {
	ts := newTokenServer(t)
	c := ts.client("secret")
	for range 3 {
		if code, err := post(t, c, ts.content.URL, `{"n":1}`); err != nil || code != http.StatusOK {
			t.Fatalf("post: %d %v", code, err)
		}
	}
	if ts.issued != 1 {
		t.Fatalf("tokens issued for three calls: %d, want 1", ts.issued)
	}
	ts.revokeAll()
	if code, err := post(t, c, ts.content.URL, `{"n":2}`); err != nil || code != http.StatusOK {
		t.Fatalf("post after revoke: %d %v", code, err)
	}
	if ts.issued != 2 {
		t.Fatalf("tokens issued after a 401: %d, want 2", ts.issued)
	}
	if got := ts.bodies[len(ts.bodies)-2:]; got[0] != `{"n":2}` || got[1] != `{"n":2}` {
		t.Fatalf("the retried request's bodies: %q", got)
	}
}

// A token endpoint that refuses the credentials is errTokenRefused, and
// nothing reaches the server.
func TestClientCredentialsRefused(t *testing.T) {
	ts := newTokenServer(t)
	_, err := post(t, ts.client("wrong"), ts.content.URL, `{}`)
	if !errors.Is(err, errTokenRefused) {
		t.Fatalf("err = %v, want errTokenRefused", err)
	}
	if len(ts.bodies) != 0 {
		t.Fatalf("the server was reached %d times", len(ts.bodies))
	}
}

// A static bearer token goes on every request.
func TestBearer(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = append(got, r.Header.Get("Authorization")) }))
	defer srv.Close()
	u := NewUpstream(Conn{URL: srv.URL, Auth: Auth{Kind: AuthBearer, Token: "s3cret"}}, nil)
	if _, err := post(t, u.client, srv.URL, `{}`); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "Bearer s3cret" {
		t.Fatalf("Authorization = %q", got)
	}
}

// mcpServer is an MCP server of the Go SDK with tools echo, fail (isError),
// boom (a protocol error) and slow (until its context ends or release is
// called).
func mcpServer(stateless bool, jsonResponse ...bool) (h http.Handler, release func()) {
	end := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(end) }) }
	s := sdk.NewServer(&sdk.Implementation{Name: "upstream", Version: "1"}, nil)
	type text struct {
		Text string `json:"text"`
	}
	sdk.AddTool(s, &sdk.Tool{Name: "echo", Description: "Echo the text."}, func(_ context.Context, _ *sdk.CallToolRequest, in text) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "echo: " + in.Text}}}, nil, nil
	})
	sdk.AddTool(s, &sdk.Tool{Name: "fail"}, func(context.Context, *sdk.CallToolRequest, struct{}) (*sdk.CallToolResult, any, error) {
		return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "failed"}}}, nil, nil
	})
	s.AddTool(&sdk.Tool{Name: "boom", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: -32001, Message: "boom"}
	})
	sdk.AddTool(s, &sdk.Tool{Name: "slow"}, func(ctx context.Context, _ *sdk.CallToolRequest, _ struct{}) (*sdk.CallToolResult, any, error) {
		select {
		case <-ctx.Done():
		case <-end:
		}
		return nil, nil, errors.New("ended")
	})
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, &sdk.StreamableHTTPOptions{Stateless: stateless, JSONResponse: len(jsonResponse) > 0 && jsonResponse[0]}), release
}

// The upstream lists and calls in the era its server offers, and tells a
// result with isError, the server's own protocol error, a time-out and a
// server that is down apart.
func TestUpstreamCalls(t *testing.T) {
	for _, c := range []struct{ stateless, json bool }{{true, false}, {true, true}, {false, false}} {
		stateless := c.stateless
		t.Run(fmt.Sprintf("stateless=%v,json=%v", stateless, c.json), func(t *testing.T) {
			h, release := mcpServer(stateless, c.json)
			srv := httptest.NewServer(h)
			defer srv.Close()
			defer release()
			u := NewUpstream(Conn{URL: srv.URL, Timeout: 2 * time.Second}, nil)
			defer u.Close()
			ctx := context.Background()
			tools, fresh, err := u.Tools(ctx)
			if err != nil || !fresh || len(tools) != 4 {
				t.Fatalf("Tools: %d %v %v", len(tools), fresh, err)
			}
			if _, fresh, _ := u.Tools(ctx); fresh {
				t.Fatal("the list was asked again within ToolsTTL")
			}
			res, err := u.Call(ctx, "echo", json.RawMessage(`{"text":"hi"}`))
			if err != nil || res.IsError || gjson.GetBytes(res.Raw, "content.0.text").String() != "echo: hi" {
				t.Fatalf("echo: %+v %v", res, err)
			}
			if res, err := u.Call(ctx, "fail", nil); err != nil || !res.IsError {
				t.Fatalf("fail: %+v %v", res, err)
			}
			var rpcErr *jsonrpc.Error
			if _, err := u.Call(ctx, "boom", nil); !errors.As(err, &rpcErr) || rpcErr.Code != -32001 {
				t.Fatalf("boom: %v", err)
			}
			short := NewUpstream(Conn{URL: srv.URL, Timeout: 50 * time.Millisecond}, nil)
			defer short.Close()
			if _, err := short.Call(ctx, "slow", nil); !errors.Is(err, ErrTimeout) {
				t.Fatalf("slow: %v, want ErrTimeout", err)
			}
			// A sessions-era server's handler is not told the client gave
			// up: end it before the server is closed.
			release()
		})
	}
}

// A server that is down is ErrUnavailable; once it is back on the same
// address the next call reaches it, a sessions-era server's new session
// opened without repeating anything.
func TestUpstreamDownAndBack(t *testing.T) {
	for _, stateless := range []bool{true, false} {
		t.Run(fmt.Sprintf("stateless=%v", stateless), func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := l.Addr().String()
			h, _ := mcpServer(stateless)
			srv := &http.Server{Handler: h}
			go srv.Serve(l)
			u := NewUpstream(Conn{URL: "http://" + addr, Timeout: 2 * time.Second}, nil)
			defer u.Close()
			ctx := context.Background()
			if _, err := u.Call(ctx, "echo", json.RawMessage(`{"text":"a"}`)); err != nil {
				t.Fatal(err)
			}
			_ = srv.Close()
			if _, err := u.Call(ctx, "echo", json.RawMessage(`{"text":"b"}`)); !errors.Is(err, ErrUnavailable) {
				t.Fatalf("down: %v, want ErrUnavailable", err)
			}
			l, err = net.Listen("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			h, _ = mcpServer(stateless)
			srv = &http.Server{Handler: h}
			go srv.Serve(l)
			defer srv.Close()
			if res, err := u.Call(ctx, "echo", json.RawMessage(`{"text":"c"}`)); err != nil || gjson.GetBytes(res.Raw, "content.0.text").String() != "echo: c" {
				t.Fatalf("back: %+v %v", res, err)
			}
		})
	}
}

// A sessions-era server that restarted and answers the old session's
// requests 404 with a JSON-RPC error naming the request in the body: the
// session is opened again and the call made once, in the new one.
func TestUpstreamSessionEndedJSONBody(t *testing.T) {
	var cur atomic.Pointer[http.Handler]
	swap := func() {
		h, _ := mcpServer(false)
		cur.Store(&h)
	}
	swap()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		rec := httptest.NewRecorder()
		(*cur.Load()).ServeHTTP(rec, r)
		if rec.Code == http.StatusNotFound {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32001,"message":"Session not found"}}`, gjson.GetBytes(body, "id").Raw)
			return
		}
		maps.Copy(w.Header(), rec.Header())
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	}))
	defer srv.Close()
	u := NewUpstream(Conn{URL: srv.URL, Timeout: 2 * time.Second}, nil)
	defer u.Close()
	ctx := context.Background()
	for i, text := range []string{"a", "b"} {
		if i == 1 {
			swap() // the server restarted: its sessions are gone
		}
		res, err := u.Call(ctx, "echo", json.RawMessage(`{"text":"`+text+`"}`))
		if err != nil || gjson.GetBytes(res.Raw, "content.0.text").String() != "echo: "+text {
			t.Fatalf("call %d: %s %v", i, res.Raw, err)
		}
	}
}

// A server's tools are offered by its allow and deny globs (deny wins)
// and the MCP name rule; a tool's own price wins over the server's.
func TestServerOffersAndPrices(t *testing.T) {
	s := &Server{Allow: []string{"read_*", "list"}, Deny: []string{"read_secret*"}, Price: pricing.Micro(1000),
		ToolPrices: map[string]pricing.Money{"list": pricing.Micro(5)}}
	for tool, want := range map[string]bool{"read_file": true, "list": true, "read_secrets": false, "write": false,
		"": false, "bad name": false, strings.Repeat("r", 129): false, "read_" + strings.Repeat("x", 123): true} {
		if got := s.offers(tool); got != want {
			t.Errorf("offers(%q) = %v, want %v", tool, got, want)
		}
	}
	if got := s.price("list"); got != pricing.Micro(5) {
		t.Errorf("price(list) = %s", got)
	}
	if got := s.price("read_file"); got != pricing.Micro(1000) {
		t.Errorf("price(read_file) = %s", got)
	}
	if got := describe("Read a file. ", pricing.Micro(1000)); got != "Read a file.\n\nPrice: 0.001 USD per successful call." {
		t.Errorf("describe = %q", got)
	}
}

// FuzzResolve: any name a caller sends resolves to a declared server and
// the rest of the name, or to nothing; it never panics.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{"github__read", "github__", "__x", "nope__x", "github", "github__a__b", "\x00__"} {
		f.Add(s)
	}
	v := view{g: &Gateway{Servers: []*Server{{Name: "github"}, {Name: "a.b-c"}}}}
	f.Fuzz(func(t *testing.T, name string) {
		s, tool, ok := v.resolve(name)
		if !ok {
			return
		}
		if s.Name+Separator+tool != name {
			t.Fatalf("resolve(%q) = %s, %q", name, s.Name, tool)
		}
		one := view{g: v.g, only: s}
		if s2, tool2, ok := one.resolve(tool); !ok || s2 != s || tool2 != tool {
			t.Fatalf("one server's resolve(%q) = %v %q %v", tool, s2, tool2, ok)
		}
	})
}

// FuzzResponse: whatever a server answers, the reader finds the response
// to its call or fails; it never panics, and what it finds has the call's
// id.
func FuzzResponse(f *testing.F) {
	for _, seed := range []struct {
		ct, body string
	}{
		{"application/json", `{"jsonrpc":"2.0","id":7,"result":{"content":[]}}`},
		{"application/json", "{\n \"jsonrpc\": \"2.0\",\n \"id\": 7,\n \"error\": {\"code\": -32602, \"message\": \"x\"}\n}"},
		{"text/event-stream", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n"},
		{"text/event-stream; charset=utf-8", "data: {\"id\":8}\n\n"},
		{"text/plain", "Unauthorized"},
	} {
		f.Add(seed.ct, seed.body)
	}
	f.Fuzz(func(t *testing.T, ct, body string) {
		resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {ct}}, Body: io.NopCloser(strings.NewReader(body))}
		msg, err := response(resp, 7)
		if err == nil && gjson.GetBytes(msg, "id").Int() != 7 {
			t.Fatalf("response %q has another id", msg)
		}
	})
}

// The log never holds a server's URL or token URL beyond its host.
func TestRedact(t *testing.T) {
	u := NewUpstream(Conn{URL: "https://mcp.example.com/k/s3cret?key=s3cret", Auth: Auth{Kind: AuthClientCredentials,
		TokenURL: "https://auth.example.com/t?secret=s3cret", ClientID: "i", ClientSecret: "s3cret"}}, nil)
	err := fmt.Errorf(`Post "https://mcp.example.com/k/s3cret?key=s3cret": dial tcp: refused; token from https://auth.example.com/t?secret=s3cret`)
	got := u.Redact(err)
	if strings.Contains(got, "s3cret") || !strings.Contains(got, "https://mcp.example.com/…") || !strings.Contains(got, "https://auth.example.com/…") {
		t.Fatalf("Redact = %q", got)
	}
}

// Once the kept list is old, one caller asks the server again while the
// others get the old list at once, without waiting for it.
func TestToolsAskedOnceWhenOld(t *testing.T) {
	h, release := mcpServer(true)
	defer release()
	var lists atomic.Int32
	gate, held := make(chan struct{}), make(chan struct{}, 1)
	var holding atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") == "tools/list" {
			lists.Add(1)
			if holding.Load() {
				held <- struct{}{}
				<-gate
			}
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	u := NewUpstream(Conn{URL: srv.URL, Timeout: 5 * time.Second}, nil)
	defer u.Close()
	ctx := context.Background()
	if tools, fresh, err := u.Tools(ctx); err != nil || !fresh || len(tools) != 4 {
		t.Fatalf("first list: %d %v %v", len(tools), fresh, err)
	}
	u.mu.Lock()
	u.toolsAt = time.Now().Add(-ToolsTTL) // the kept list is old
	u.mu.Unlock()
	holding.Store(true)
	asked := make(chan bool)
	go func() {
		_, fresh, _ := u.Tools(ctx)
		asked <- fresh
	}()
	<-held // the server holds the second list
	for range 8 {
		if tools, fresh, err := u.Tools(ctx); err != nil || fresh || len(tools) != 4 {
			t.Fatalf("while the server is asked: %d %v %v", len(tools), fresh, err)
		}
	}
	close(gate)
	if !<-asked {
		t.Fatal("the asking caller did not get a fresh list")
	}
	if n := lists.Load(); n != 2 {
		t.Fatalf("the server was asked %d times, want 2", n)
	}
}

// A call that runs past its time-out leaves the session to the calls that
// share it: the next call is made in the same session, not a new one.
func TestUpstreamTimeoutKeepsSession(t *testing.T) {
	h, release := mcpServer(false)
	var inits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if gjson.GetBytes(body, "method").String() == "initialize" {
				inits.Add(1)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	defer release()
	u := NewUpstream(Conn{URL: srv.URL, Timeout: 200 * time.Millisecond}, nil)
	defer u.Close()
	ctx := context.Background()
	if _, err := u.Call(ctx, "echo", json.RawMessage(`{"text":"a"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := u.Call(ctx, "slow", nil); !errors.Is(err, ErrTimeout) {
		t.Fatalf("slow: %v, want ErrTimeout", err)
	}
	if res, err := u.Call(ctx, "echo", json.RawMessage(`{"text":"b"}`)); err != nil || gjson.GetBytes(res.Raw, "content.0.text").String() != "echo: b" {
		t.Fatalf("echo after a time-out: %+v %v", res, err)
	}
	if n := inits.Load(); n != 1 {
		t.Fatalf("%d sessions opened, want 1: the time-out ended the shared session", n)
	}
	release()
}

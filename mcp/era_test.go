package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/store"
)

// statelessMeta is the _meta of a stateless-era request.
const statelessMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}`

// statelessRequest is a POST of body with the headers given in pairs.
func statelessRequest(t *testing.T, body string, header ...string) (*http.Request, *Message) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	msg, err := Parse([]byte(body))
	if err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return r, msg
}

// TestStatelessEra: a request is of the stateless era by its _meta or by
// an Mcp-Protocol-Version header newer than the sessions era's, whatever
// its method.
func TestStatelessEra(t *testing.T) {
	for _, tc := range []struct {
		body, header string
		want         bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{` + statelessMeta + `}}`, "", true},
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{` + statelessMeta + `}}`, "2026-07-28", true},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`, "2026-07-28", true},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "2099-01-01", true},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "2025-11-25", false},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`, "2024-11-05", false},
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2026-07-28"}}`, "", false},
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, "", false},
	} {
		r, msg := statelessRequest(t, tc.body, HeaderProtocol, tc.header)
		if got := Stateless(r, msg); got != tc.want {
			t.Errorf("%s with header %q: stateless %v, want %v", tc.body, tc.header, got, tc.want)
		}
	}
}

// TestCheckStateless: the revision's checks, in its order, each a 400
// with its code; a request that passes them all is served.
func TestCheckStateless(t *testing.T) {
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"web_search","arguments":{},` + statelessMeta + `}}`
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{` + statelessMeta + `}}`
	good := []string{HeaderProtocol, StatelessVersion, HeaderMethod, "tools/call", HeaderName, "web_search"}
	with := func(pairs ...string) []string { return append(append([]string{}, good...), pairs...) }
	for _, tc := range []struct {
		name   string
		body   string
		header []string
		code   int
		msg    string
	}{
		{"served", call, good, 0, ""},
		{"list needs no name", list, []string{HeaderProtocol, StatelessVersion, HeaderMethod, "tools/list"}, 0, ""},
		{"name in base64", call, with(HeaderName, "=?base64?"+base64.StdEncoding.EncodeToString([]byte("web_search"))+"?="), 0, ""},
		{"no _meta", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`, []string{HeaderProtocol, StatelessVersion, HeaderMethod, "tools/list"},
			gwerr.RPCInvalidParams, "params._meta must carry io.modelcontextprotocol/protocolVersion (a string) and io.modelcontextprotocol/clientCapabilities (an object)"},
		{"no capabilities", `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`,
			[]string{HeaderProtocol, StatelessVersion, HeaderMethod, "tools/list"}, gwerr.RPCInvalidParams, "params._meta must carry"},
		{"no version header", call, with(HeaderProtocol, ""), CodeHeaderMismatch, "Header mismatch: Mcp-Protocol-Version header is missing; the body says '2026-07-28'"},
		{"version header disagrees", strings.Replace(call, `"2026-07-28"`, `"v999.0.0"`, 1), good, CodeHeaderMismatch,
			"Header mismatch: Mcp-Protocol-Version header value '2026-07-28' does not match body value 'v999.0.0'"},
		{"unsupported version", strings.Replace(call, `"2026-07-28"`, `"v999.0.0"`, 1), with(HeaderProtocol, "v999.0.0"), CodeUnsupportedVersion, "Unsupported protocol version"},
		{"a sessions-era version in _meta", strings.Replace(call, `"2026-07-28"`, `"2025-11-25"`, 1), with(HeaderProtocol, "2025-11-25"), CodeUnsupportedVersion,
			"protocol version 2025-11-25 is served with sessions: send initialize, without the stateless _meta"},
		{"no method header", call, with(HeaderMethod, ""), CodeHeaderMismatch, "Header mismatch: Mcp-Method header is missing; the body says 'tools/call'"},
		{"method header in capitals", call, with(HeaderMethod, "TOOLS/CALL"), CodeHeaderMismatch, "Mcp-Method header value 'TOOLS/CALL' does not match body value 'tools/call'"},
		{"no name header", call, with(HeaderName, ""), CodeHeaderMismatch, "Mcp-Name header is missing; the body says 'web_search'"},
		{"name header disagrees", call, with(HeaderName, "image_generate"), CodeHeaderMismatch, "Mcp-Name header value 'image_generate' does not match body value 'web_search'"},
		{"resource by uri", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///a",` + statelessMeta + `}}`,
			[]string{HeaderProtocol, StatelessVersion, HeaderMethod, "resources/read", HeaderName, "file:///b"}, CodeHeaderMismatch, "Mcp-Name header value 'file:///b'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, msg := statelessRequest(t, tc.body, tc.header...)
			err := CheckStateless(r, msg)
			if tc.code == 0 {
				if err != nil {
					t.Fatalf("refused: %+v", err)
				}
				return
			}
			if err == nil || err.Code != tc.code || err.Status != http.StatusBadRequest || !strings.Contains(err.Message, tc.msg) {
				t.Fatalf("got %+v, want 400 %d %q", err, tc.code, tc.msg)
			}
			if tc.code == CodeUnsupportedVersion {
				want := map[string]any{"supported": SupportedVersions, "requested": gjsonMeta(msg)}
				if !reflect.DeepEqual(err.Data, want) {
					t.Errorf("data %v, want %v", err.Data, want)
				}
			}
		})
	}
}

// gjsonMeta is the protocol version msg's _meta names.
func gjsonMeta(msg *Message) string { return meta(msg).Get(metaPath(MetaProtocolVersion)).String() }

// TestStatelessReplies: the shared answers of the stateless era, exactly.
func TestStatelessReplies(t *testing.T) {
	for _, tc := range []struct {
		method, want string
		status       int
	}{
		{"server/discover", `{"jsonrpc":"2.0","id":1,"result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1.0.0"}},` +
			`"cacheScope":"public","capabilities":{"prompts":{"listChanged":false},"resources":{"listChanged":false,"subscribe":false},"tools":{"listChanged":false}},` +
			`"instructions":"do","resultType":"complete","supportedVersions":["2026-07-28","2025-11-25","2025-06-18","2025-03-26","2024-11-05"],"ttlMs":3600000}}`, 200},
		{"prompts/list", `{"jsonrpc":"2.0","id":1,"result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1.0.0"}},"cacheScope":"public","prompts":[],"resultType":"complete","ttlMs":3600000}}`, 200},
		{"resources/templates/list", `{"jsonrpc":"2.0","id":1,"result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"1.0.0"}},"cacheScope":"public","resourceTemplates":[],"resultType":"complete","ttlMs":3600000}}`, 200},
		{"resources/read", `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"unknown resource file:///x"}}`, 200},
	} {
		w := httptest.NewRecorder()
		msg := &Message{JSONRPC: "2.0", ID: json.RawMessage(`1`), Method: tc.method, Params: json.RawMessage(`{"uri":"file:///x"}`)}
		if !ServeStateless(w, msg, "s", "do", false) {
			t.Fatalf("%s: not served", tc.method)
		}
		if got := canonical(t, w.Body.Bytes()); w.Code != tc.status || got != canonical(t, []byte(tc.want)) {
			t.Errorf("%s: %d %s\nwant %d %s", tc.method, w.Code, got, tc.status, tc.want)
		}
	}
	if ServeStateless(httptest.NewRecorder(), &Message{JSONRPC: "2.0", ID: json.RawMessage(`1`), Method: "tools/list"}, "s", "", false) {
		t.Error("tools/list served as a shared answer")
	}
}

// canonical re-encodes JSON with sorted keys.
func canonical(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// FuzzCheckStateless: any body and headers are refused or passed, never
// a panic, and a refusal is always a 400 with one of the era's codes.
func FuzzCheckStateless(f *testing.F) {
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x",`+statelessMeta+`}}`, "2026-07-28", "tools/call", "x")
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":5}}`, "", "", "=?base64?!!?=")
	f.Add(`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":{"a":1},`+statelessMeta+`}}`, "2026-07-28", "prompts/get", "=?base64??=")
	f.Fuzz(func(t *testing.T, body, version, method, name string) {
		msg, perr := Parse([]byte(body))
		if perr != nil {
			return
		}
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		r.Header = http.Header{HeaderProtocol: {version}, HeaderMethod: {method}, HeaderName: {name}}
		Stateless(r, msg)
		if err := CheckStateless(r, msg); err != nil {
			if err.Status != http.StatusBadRequest || (err.Code != gwerr.RPCInvalidParams && err.Code != CodeHeaderMismatch && err.Code != CodeUnsupportedVersion) {
				t.Fatalf("refusal %+v", err)
			}
		}
	})
}

// TestRoutingArgumentRefusal: in the stateless era a routing tool's
// refusal of its arguments is a tool result with isError (the revision
// reports input validation as a tool execution error), while a call the
// server cannot make stays a protocol error; the sessions era keeps
// -32602 for both.
func TestRoutingArgumentRefusal(t *testing.T) {
	sessions := NewMemorySessions(time.Now)
	sess := Session{ID: NewSessionID(), KeyID: "k", Version: LatestVersion}
	if err := sessions.Create(context.Background(), sess); err != nil {
		t.Fatal(err)
	}
	s := &Routing{Sessions: sessions}
	call := func(name, args string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + name + `","arguments":` + args + `,` + statelessMeta + `}}`
	}
	stateless := func(name string) []string {
		return []string{HeaderProtocol, StatelessVersion, HeaderMethod, "tools/call", HeaderName, name}
	}
	refused := func(tool, msg string) string {
		obj := `{"capability":"` + tool + `","error":"invalid_request","message":"` + msg + `","retryable":false}`
		text, _ := json.Marshal(obj)
		return `{"jsonrpc":"2.0","id":7,"result":{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"gw-routing","version":"1.0.0"}},` +
			`"content":[{"type":"text","text":` + string(text) + `}],"isError":true,"resultType":"complete","structuredContent":` + obj + `}}`
	}
	for _, tc := range []struct {
		name, body string
		header     []string
		status     int
		want       string
	}{
		{"stateless: no prompt", call(ToolRoute, `{}`), stateless(ToolRoute), 200, refused(ToolRoute, "give exactly one of prompt and messages")},
		{"stateless: bad tier", call(ToolModels, `{"tier":"slow"}`), stateless(ToolModels), 200,
			refused(ToolModels, "tier must be fast, standard, reasoning, pinned or all")},
		{"stateless: no decision_id", call(ToolExplain, `{}`), stateless(ToolExplain), 200, refused(ToolExplain, "decision_id is required")},
		{"stateless: unknown tool", call("flux_nope", `{}`), stateless("flux_nope"), 200,
			`{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"unknown tool flux_nope"}}`},
		{"stateless: arguments not an object", call(ToolRoute, `[1]`), stateless(ToolRoute), 200,
			`{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"arguments must be an object"}}`},
		{"sessions: no prompt", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"flux_route","arguments":{}}}`,
			[]string{HeaderSession, sess.ID, HeaderProtocol, LatestVersion}, 200,
			`{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"give exactly one of prompt and messages"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _ := statelessRequest(t, tc.body, tc.header...)
			r.Host = "localhost"
			w := httptest.NewRecorder()
			if err := s.Serve(&pipeline.Call{W: w, R: r, Key: store.Key{ID: "k"}}); err != nil {
				t.Fatal(err)
			}
			if got := canonical(t, w.Body.Bytes()); w.Code != tc.status || got != canonical(t, []byte(tc.want)) {
				t.Errorf("%d %s\nwant %d %s", w.Code, got, tc.status, tc.want)
			}
		})
	}
}

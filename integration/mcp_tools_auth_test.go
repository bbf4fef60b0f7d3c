package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// headerTransport sends its headers (name, value pairs) on every request.
type headerTransport []string

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for i := 0; i+1 < len(h); i += 2 {
		r.Header.Set(h[i], h[i+1])
	}
	return http.DefaultTransport.RoundTrip(r)
}

// toolsSessionWith is a sessions-era session of the MCP Go SDK's client
// with url, sending header (name, value pairs), or no key at all when
// header is empty.
func toolsSessionWith(t *testing.T, url string, header ...string) *sdk.ClientSession {
	t.Helper()
	s, err := sdkConnect(t, url, headerTransport(header), sessionsEra)
	if err != nil {
		t.Fatalf("connecting with %v: %v", header, err)
	}
	return s
}

// toolsPost sends one raw JSON-RPC request to the tools server and returns
// the answer with the JSON-RPC message of its one event.
func toolsPost(t *testing.T, g *gateway, body string, header ...string) (response, map[string]any) {
	t.Helper()
	r := g.send(t, g.BaseURL+"/mcp-tools/", http.MethodPost, []byte(body),
		append(header, "Content-Type", "application/json", "Accept", "application/json, text/event-stream"))
	var msg map[string]any
	for _, line := range bytes.Split(r.Body, []byte("\n")) {
		if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			if err := json.Unmarshal(data, &msg); err != nil {
				t.Fatalf("event data %s: %v", data, err)
			}
		}
	}
	return r, msg
}

// jsonText is v as JSON with its keys sorted, for exact comparisons.
func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The tools server answers a key it cannot accept (none, a wrong one, a
// revoked or expired one, or one sent only as x-api-key) with HTTP 200:
// initialize and tools/list work, and every tools/call is a tool result
// carrying the auth_failed error object, never a protocol fault. Nothing
// is called and nothing is charged.
func TestMCPToolsAuthFailed(t *testing.T) {
	t.Parallel()
	g := startGateway(t, gwOptions{})
	good := g.newAccountKey(t, map[string]any{"id": "keyholder", "plan": "paid", "cleared": true, "balance_usd": "1.00"})
	revoked, revokedID := g.createKey(t, "keyholder", map[string]any{"name": "revoked"})
	g.deleteKey(t, revokedID)
	expired, _ := g.createKey(t, "keyholder", map[string]any{"name": "old", "expires_at": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)})

	// Without an accepted key the list is the one a default account is
	// offered: every tool, the paid ones with their plan and cost.
	const all = "list_capabilities,web_fetch,web_search,image_generate,transcribe,speak"
	calls := []struct {
		tool       string
		args       map[string]any
		capability string
	}{
		{"list_capabilities", nil, ""},
		{"web_search", map[string]any{"query": "weather"}, "search"},
		{"web_fetch", map[string]any{"url": "https://example.com/"}, "fetch"},
		{"image_generate", map[string]any{"prompt": "a fox"}, "images"},
		{"transcribe", map[string]any{"audio_url": "https://example.com/a.wav"}, "transcription"},
		{"speak", map[string]any{"text": "hi"}, "speech"},
	}
	for _, tc := range []struct {
		name    string
		header  []string
		message string
	}{
		{"no key", nil, "missing API key"},
		{"wrong key", bearer("sk-not-a-key-of-this-gateway-0123456789"), "invalid API key"},
		{"revoked key", bearer(revoked), "invalid API key"},
		{"expired key", bearer(expired), "API key expired"},
		{"x-api-key only", apiKey(good), "missing API key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := toolsSessionWith(t, g.BaseURL+"/mcp-tools/", tc.header...)
			if got := toolNames(t, s); got != all {
				t.Fatalf("tools/list %s, want %s", got, all)
			}
			for _, c := range calls {
				res, err := s.CallTool(context.Background(), &sdk.CallToolParams{Name: c.tool, Arguments: c.args})
				if err != nil || !res.IsError {
					t.Fatalf("%s: %v %+v", c.tool, err, res)
				}
				want := jsonText(t, map[string]any{"error": "auth_failed", "capability": c.capability, "message": tc.message, "retryable": false})
				if got := jsonText(t, structured(t, res)); got != want {
					t.Fatalf("%s error object %s\nwant %s", c.tool, got, want)
				}
			}

			// Raw, without initialize: HTTP 200 and one event each.
			r, msg := toolsPost(t, g, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"web_search","arguments":{"query":"weather"}}}`, tc.header...)
			if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("raw tools/call: %d %v %s", r.Status, r.Header, r.Body)
			}
			obj := `{"capability":"search","error":"auth_failed","message":"` + tc.message + `","retryable":false}`
			want := `{"id":7,"jsonrpc":"2.0","result":{"content":[{"text":` + jsonText(t, obj) + `,"type":"text"}],"isError":true,"structuredContent":` + obj + `}}`
			if got := jsonText(t, msg); got != want {
				t.Fatalf("raw tools/call %s\nwant %s", got, want)
			}
			r, msg = toolsPost(t, g, `{"jsonrpc":"2.0","id":8,"method":"tools/list"}`, tc.header...)
			if r.Status != http.StatusOK || msg["error"] != nil || len(msg["result"].(map[string]any)["tools"].([]any)) != len(strings.Split(all, ",")) {
				t.Fatalf("raw tools/list: %d %s", r.Status, r.Body)
			}
		})
	}
	if l := g.ledger(t, "keyholder"); len(l) != 0 {
		t.Fatalf("refused calls were charged: %+v", l)
	}
	// The good key still works, as a bearer key.
	s := mcpSession(t, g.BaseURL+"/mcp-tools/", good)
	res, err := s.CallTool(context.Background(), &sdk.CallToolParams{Name: "list_capabilities"})
	if err != nil || res.IsError || structured(t, res)["tier"] != "paid" {
		t.Fatalf("list_capabilities with the key: %v %+v", err, res)
	}
}

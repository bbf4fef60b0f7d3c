package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// An app linked through one node's tools server is listed by another's
// (links live in PostgreSQL), and a paid tool's listing state moves the
// same on every node (Redis).
func TestNodesAppLinks(t *testing.T) {
	t.Parallel()
	app := sdk.NewServer(&sdk.Implementation{Name: "tracker", Version: "1"}, nil)
	app.AddTool(&sdk.Tool{Name: "create_issue", Description: "Create an issue", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "ok"}}}, nil
		})
	appSrv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return app }, nil))
	t.Cleanup(appSrv.Close)
	e := newNodes(t, 2, "", "GW_APPS", "tracker="+appSrv.URL)
	key := e.nodes[0].newAccountKey(t, map[string]any{"id": "linker", "plan": "paid", "cleared": true, "balance_usd": "1.00"})
	ctx := context.Background()
	a := mcpSession(t, e.nodes[0].BaseURL+"/mcp-tools/", key)
	if res, err := a.CallTool(ctx, &sdk.CallToolParams{Name: "apps_connect", Arguments: map[string]any{"app": "tracker"}}); err != nil || res.IsError {
		t.Fatalf("apps_connect: %v %+v", err, res)
	}
	b := mcpSession(t, e.nodes[1].BaseURL+"/mcp-tools/", key)
	res, err := b.CallTool(ctx, &sdk.CallToolParams{Name: "apps_list"})
	if err != nil || res.IsError {
		t.Fatalf("apps_list: %v %+v", err, res)
	}
	if raw, _ := json.Marshal(res.StructuredContent); !strings.Contains(string(raw), `"links":[""]`) {
		t.Fatalf("the link made on another node is missing: %s", raw)
	}

	// The paid-tool states: refused on one node, listed once more on the
	// other, then dropped on the first.
	free := e.nodes[0].newAccountKey(t, map[string]any{"id": "free-linker", "plan": "free"})
	fa, fb := mcpSession(t, e.nodes[0].BaseURL+"/mcp-tools/", free), mcpSession(t, e.nodes[1].BaseURL+"/mcp-tools/", free)
	if res, err := fa.CallTool(ctx, &sdk.CallToolParams{Name: "speak", Arguments: map[string]any{"text": "hi"}}); err != nil || !res.IsError {
		t.Fatalf("speak on free: %v %+v", err, res)
	}
	has := func(s *sdk.ClientSession) bool { return strings.Contains(","+toolNames(t, s)+",", ",speak,") }
	if !has(fb) {
		t.Fatal("the next listing (other node) dropped speak already")
	}
	if has(fa) {
		t.Fatal("the listing after that (first node) still shows speak")
	}
}

// The chat, embeddings and page-reading caches are shared: an answer
// cached on one node is a hit on another (not billed again).
func TestNodesSharedCaches(t *testing.T) {
	t.Parallel()
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(articleHTML))
	}))
	t.Cleanup(site.Close)
	e := newNodes(t, 2, "\t\tcache_ttl 5m", "GW_FETCH_ALLOW", strings.TrimPrefix(site.URL, "http://"))
	key := e.nodes[0].newAccountKey(t, map[string]any{"id": "cacher", "plan": "paid", "cleared": true})
	body := `{"model":"gw-pinned-gpt-4.1-mini","temperature":0,"max_tokens":100,"messages":[{"role":"user","content":"cache me"}]}`
	first := e.nodes[0].do(t, http.MethodPost, "/v1/chat/completions", body, bearer(key)...)
	second := e.nodes[1].do(t, http.MethodPost, "/v1/chat/completions", body, bearer(key)...)
	if first.Status != 200 || second.Status != 200 || second.Header.Get("X-Gw-Cache") != "hit" || string(first.Body) != string(second.Body) {
		t.Fatalf("chat on the second node: %d %q %s", second.Status, second.Header.Get("X-Gw-Cache"), second.Body)
	}
	embed := `{"model":"gw-embed","input":["cache me","across nodes"]}`
	first = e.nodes[0].do(t, http.MethodPost, "/v1/embeddings", embed, bearer(key)...)
	second = e.nodes[1].do(t, http.MethodPost, "/v1/embeddings", embed, bearer(key)...)
	if first.Status != 200 || second.Status != 200 || second.Header.Get("X-Gw-Cache") != "hit" || string(first.Body) != string(second.Body) {
		t.Fatalf("embeddings on the second node: %d %q %s", second.Status, second.Header.Get("X-Gw-Cache"), second.Body)
	}
	read := `{"url":"` + site.URL + `/article"}`
	for i, g := range e.nodes {
		if r := g.do(t, http.MethodPost, "/v1/fetch", read, bearer(key)...); r.Status != 200 {
			t.Fatalf("read on node %d: %d %s", i, r.Status, r.Body)
		}
	}
	if l := e.nodes[1].ledger(t, "cacher"); len(l) != 3 {
		t.Fatalf("ledger %+v: want the first chat call, the first embeddings call and the first read only", l)
	}
}

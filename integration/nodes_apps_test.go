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

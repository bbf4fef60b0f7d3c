package integration

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

func toolNames(t *testing.T, s *sdk.ClientSession) string {
	t.Helper()
	res, err := s.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, tl := range res.Tools {
		n = append(n, tl.Name)
	}
	return strings.Join(n, ",")
}

// The tools server with the MCP Go SDK: the tool list, list_capabilities,
// tool failures as tool results with the tool error object, the paid-tool
// listing states, and connected apps against a real MCP server billed per
// action.
func TestMCPTools(t *testing.T) {
	t.Parallel()
	var appCalls int
	app := sdk.NewServer(&sdk.Implementation{Name: "tracker", Version: "1"}, nil)
	app.AddTool(&sdk.Tool{Name: "create_issue", Description: "Create an issue in the tracker", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			appCalls++
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "issue #7"}}}, nil
		})
	appSrv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return app }, nil))
	t.Cleanup(appSrv.Close)

	oa := fake.NewOpenAI()
	t.Cleanup(oa.Close)
	g := startGateway(t, gwOptions{BootstrapKey: "sk-bootstrap-tools-test-0123456789abcdef", Caddyfile: withGW(t, "\t\tapp_action_price 0.005"),
		Env: map[string]string{"GW_APPS": "tracker=" + appSrv.URL, "GW_OPENAI_BASE_URL": oa.URL, "GW_BILLING_URL": "https://billing.example/upgrade"}})
	key := g.newAccountKey(t, map[string]any{"id": "toolsy", "plan": "paid", "cleared": true, "balance_usd": "1.00"})
	ctx := context.Background()
	s := mcpSession(t, g.BaseURL+"/mcp-tools/", key)
	if s.InitializeResult().ServerInfo.Name != "gw-tools" {
		t.Fatalf("server %+v", s.InitializeResult().ServerInfo)
	}
	all := "list_capabilities,web_fetch,web_search,image_generate,transcribe,speak,apps_list,apps_connect,apps_find_actions,apps_execute"
	if got := toolNames(t, s); got != all {
		t.Fatalf("tools %s", got)
	}
	res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: "list_capabilities"})
	if err != nil || res.IsError {
		t.Fatalf("list_capabilities: %v %+v", err, res)
	}
	caps := structured(t, res)
	if caps["tier"] != "paid" || caps["premium_unlocked"] != true || caps["enabled"].(map[string]any)["images"].(map[string]any)["est_microcents"] != float64(11000) { // the lowest image price
		t.Fatalf("list_capabilities %v", caps)
	}
	// image_generate calls the generation route with the caller's key: the
	// generation response plus cost_microcents, billed as a direct call.
	res, err = s.CallTool(ctx, &sdk.CallToolParams{Name: "image_generate", Arguments: map[string]any{"prompt": "a fox"}})
	if err != nil || res.IsError {
		t.Fatalf("image_generate: %v %+v", err, res)
	}
	cost := usageCost(t, "a fox", 0, 1, "", "", 0, false)
	if obj := structured(t, res); obj["cost_microcents"] != float64(cost.Microcents()) || obj["created"] == nil ||
		obj["data"].([]any)[0].(map[string]any)["b64_json"] == "" {
		t.Fatalf("image_generate result %v", obj)
	}
	if l := g.ledger(t, "toolsy"); len(l) != 1 || l[0].Unit != "image" || l[0].Cost != cost.String() || l[0].Endpoint != "images" {
		t.Fatalf("image_generate ledger %+v", l)
	}
	// A route's refusal: a tool result with the error object, never a
	// protocol fault.
	res, err = s.CallTool(ctx, &sdk.CallToolParams{Name: "image_generate", Arguments: map[string]any{"prompt": " "}})
	if err != nil || !res.IsError {
		t.Fatalf("image_generate without a prompt: %v %+v", err, res)
	}
	if obj := structured(t, res); obj["error"] != "invalid_request" || obj["capability"] != "images" || obj["retryable"] != false {
		t.Fatalf("image_generate error object %v", obj)
	}

	// transcribe's audio_url goes through page reading's address guard.
	res, err = s.CallTool(ctx, &sdk.CallToolParams{Name: "transcribe", Arguments: map[string]any{"audio_url": "https://169.254.169.254/clip.mp3"}})
	if err != nil || !res.IsError {
		t.Fatalf("transcribe: %v %+v", err, res)
	}
	if obj := structured(t, res); obj["error"] != "invalid_request" || obj["capability"] != "transcription" {
		t.Fatalf("transcribe of a private address %v", obj)
	}

	// Connected apps through the gateway, billed per action.
	for _, step := range []struct{ tool, args string }{
		{"apps_connect", `{"app":"tracker"}`},
		{"apps_find_actions", `{"task":"create an issue"}`},
		{"apps_execute", `{"action":"tracker/create_issue","arguments":{"title":"fire"}}`},
	} {
		var args map[string]any
		_ = json.Unmarshal([]byte(step.args), &args)
		res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: step.tool, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", step.tool, err, res)
		}
	}
	if appCalls != 1 {
		t.Fatalf("the app ran %d actions", appCalls)
	}
	l := g.ledger(t, "toolsy")
	if len(l) != 2 || l[0].Cost != "0.005" || l[0].Unit == "image" {
		t.Fatalf("ledger (the action newest, then the image) %+v", l)
	}

	// The paid-tool states on a Free plan.
	free := g.newAccountKey(t, map[string]any{"id": "toolsy-free", "plan": "free"})
	fs := mcpSession(t, g.BaseURL+"/mcp-tools/", free)
	res, err = fs.CallTool(ctx, &sdk.CallToolParams{Name: "image_generate", Arguments: map[string]any{"prompt": "a fox"}})
	if err != nil || !res.IsError {
		t.Fatalf("image_generate on free: %v %+v", err, res)
	}
	if obj := structured(t, res); obj["error"] != "premium_locked" || obj["upgrade_url"] != "https://billing.example/upgrade" || obj["price_microcents"] != float64(11000) {
		t.Fatalf("premium_locked object %v", obj)
	}
	if got := toolNames(t, fs); !strings.Contains(got, "image_generate") {
		t.Fatalf("first listing after the refusal lacks image_generate: %s", got)
	}
	if got := toolNames(t, fs); strings.Contains(got, "image_generate") {
		t.Fatalf("second listing after the refusal still has image_generate: %s", got)
	}
	// Raw: no session needed, answers are events, GET is 405.
	r := g.send(t, g.BaseURL+"/mcp-tools/", http.MethodPost, []byte(`{"jsonrpc":"2.0","id":9,"method":"tools/list"}`),
		append(bearer(key), "Content-Type", "application/json", "Accept", "application/json, text/event-stream"))
	if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") || !strings.Contains(string(r.Body), `"list_capabilities"`) {
		t.Fatalf("stateless tools/list: %d %v %s", r.Status, r.Header, r.Body)
	}
	if r := g.send(t, g.BaseURL+"/mcp-tools/", http.MethodGet, nil, bearer(key)); r.Status != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d", r.Status)
	}
}

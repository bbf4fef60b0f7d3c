package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// startLenientApp is an app that answers a call of any tool name (listed
// or not) with an isError result, as some servers do, and lists a tool
// whose name breaks the MCP rule. It counts the tools/call requests it
// gets.
func startLenientApp(t *testing.T) (*appServer, string) {
	t.Helper()
	a := &appServer{}
	srv := sdk.NewServer(&sdk.Implementation{Name: "tracker", Version: "1"}, nil)
	obj := json.RawMessage(`{"type":"object"}`)
	ok := func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "done"}}}, nil
	}
	srv.AddTool(&sdk.Tool{Name: "create_issue", Description: "Create an issue", InputSchema: obj}, ok)
	srv.AddTool(&sdk.Tool{Name: "close issue\x1b[31m", Description: "Close an issue", InputSchema: obj}, ok)
	srv.AddTool(&sdk.Tool{Name: "archive_issue", Description: "Archive an issue", InputSchema: obj},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "cannot archive"}}}, nil
		})
	srv.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			if method != "tools/call" {
				return next(ctx, method, req)
			}
			a.mu.Lock()
			a.calls++
			a.mu.Unlock()
			if name := req.(*sdk.CallToolRequest).Params.Name; name != "create_issue" && name != "archive_issue" && name != "close issue\x1b[31m" {
				return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "no such tool"}}}, nil
			}
			return next(ctx, method, req)
		}
	})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return a, ts.URL
}

// apps_execute calls only a tool the app listed under a name the MCP rule
// allows: anything else is invalid_request before any call to the app,
// and costs nothing; an answer the app marks isError costs nothing
// either.
func TestAppsExecuteRefusesUnlisted(t *testing.T) {
	app, url := startLenientApp(t)
	f := newAppsFixtureAt(t, app, url)
	acme := store.Account{ID: "acme", Plan: store.PlanPaid, Cleared: true}
	if res := f.call(t, f.paidKey, acme, ToolAppsConnect, `{"app":"tracker"}`); res.IsError {
		t.Fatalf("connect: %s", asJSON(t, res.Structured))
	}
	found := f.call(t, f.paidKey, acme, ToolAppsFindActions, `{"task":"close an issue"}`).Structured["actions"].([]map[string]any)
	for _, a := range found {
		if a["tool"] != "create_issue" && a["tool"] != "archive_issue" {
			t.Fatalf("an action the gateway does not offer was found: %s", asJSON(t, found))
		}
	}
	refused := `{"capability":"apps","error":"invalid_request","message":"tracker offers no action of that name; apps_find_actions names them","retryable":false}`
	for _, tool := range []string{"\x1b]0;pwned\x07\x1b[2J" + strings.Repeat("A", 500), "close issue\x1b[31m", "create_issue ", "Create_issue"} {
		args, _ := json.Marshal(map[string]any{"action": "tracker/" + tool})
		res := f.call(t, f.paidKey, acme, ToolAppsExecute, string(args))
		if got := asJSON(t, res.Structured); !res.IsError || got != refused {
			t.Fatalf("execute %q = %s\nwant %s", tool, got, refused)
		}
	}
	if app.calls != 0 {
		t.Fatalf("the app got %d calls of unlisted tools", app.calls)
	}

	res := f.call(t, f.paidKey, acme, ToolAppsExecute, `{"action":"tracker/archive_issue"}`)
	if got := asJSON(t, res.Structured); !res.IsError || got != `{"action":"tracker/archive_issue","content":[{"text":"cannot archive","type":"text"}],"cost_microcents":0,"cost_usd":"0.00","is_error":true,"structured":null}` {
		t.Fatalf("an action the app failed = %v %s", res.IsError, got)
	}
	if entries, _ := f.db.Entries(context.Background(), "acme", 10); len(entries) != 0 {
		t.Fatalf("refused or failed actions were billed: %+v", entries)
	}
	if res := f.call(t, f.paidKey, acme, ToolAppsExecute, `{"action":"tracker/create_issue"}`); res.IsError {
		t.Fatalf("a listed action: %s", asJSON(t, res.Structured))
	}
	entries, _ := f.db.Entries(context.Background(), "acme", 10)
	if len(entries) != 1 || entries[0].Model != "tracker/create_issue" || entries[0].Cost != pricing.Micro(appPrice) || app.calls != 2 {
		t.Fatalf("ledger %+v after %d calls of the app", entries, app.calls)
	}
}

// An alias is at most MaxAlias plain characters, and an account holds at
// most MaxLinks links (DefaultMaxLinks when unset); past it a tool error
// names the limit.
func TestAppsConnectBounds(t *testing.T) {
	f := newAppsFixture(t)
	acme := store.Account{ID: "acme", Plan: store.PlanPaid, Cleared: true}
	connect := func(alias string) Result {
		args, _ := json.Marshal(map[string]any{"app": "tracker", "alias": alias})
		return f.call(t, f.paidKey, acme, ToolAppsConnect, string(args))
	}
	badAlias := `{"capability":"apps","error":"invalid_request","message":"an alias is at most 64 characters of A-Z, a-z, 0-9, '.', '_' and '-'","retryable":false}`
	for _, alias := range []string{strings.Repeat("a", MaxAlias+1), "work space", "w\x1b[31m", "é", "a/b", "a:b"} {
		if res := connect(alias); !res.IsError || asJSON(t, res.Structured) != badAlias {
			t.Fatalf("alias %q: %s", alias, asJSON(t, res.Structured))
		}
	}
	if res := connect(strings.Repeat("a", MaxAlias)); res.IsError {
		t.Fatalf("a %d-character alias: %s", MaxAlias, asJSON(t, res.Structured))
	}
	for i := 1; i < DefaultMaxLinks; i++ {
		if res := connect(fmt.Sprintf("l-%d.x_y", i)); res.IsError {
			t.Fatalf("link %d: %s", i+1, asJSON(t, res.Structured))
		}
	}
	full := `{"capability":"apps","error":"invalid_request","message":"this account holds 50 app links, the most it may","retryable":false}`
	if res := connect("one-more"); !res.IsError || asJSON(t, res.Structured) != full {
		t.Fatalf("link %d: %s", DefaultMaxLinks+1, asJSON(t, res.Structured))
	}
	if links, _ := f.appsList.Links.List(context.Background(), "acme"); len(links) != DefaultMaxLinks {
		t.Fatalf("%d links kept", len(links))
	}

	f.appsList.MaxLinks = 2
	free := store.Account{ID: "free", Plan: store.PlanFree}
	for _, args := range []string{`{"app":"tracker"}`, `{"app":"chat"}`} {
		if res := f.call(t, f.freeKey, free, ToolAppsConnect, args); res.IsError {
			t.Fatalf("%s: %s", args, asJSON(t, res.Structured))
		}
	}
	res := f.call(t, f.freeKey, free, ToolAppsConnect, `{"app":"chat","alias":"second"}`)
	if want := strings.Replace(full, "50", "2", 1); !res.IsError || asJSON(t, res.Structured) != want {
		t.Fatalf("third link of two: %s", asJSON(t, res.Structured))
	}
	// A link that exists is still named as such, not as over the limit.
	if res := f.call(t, f.freeKey, free, ToolAppsConnect, `{"app":"chat"}`); !strings.Contains(asJSON(t, res.Structured), "linked already") {
		t.Fatalf("the same link again: %s", asJSON(t, res.Structured))
	}
}

// Unknown names are repeated in tool errors quoted and cut short.
func TestAppsEchoBounded(t *testing.T) {
	f := newAppsFixture(t)
	acme := store.Account{ID: "acme", Plan: store.PlanPaid, Cleared: true}
	long := strings.Repeat("x", 10_000)
	res := f.call(t, f.paidKey, acme, ToolAppsConnect, `{"app":"`+long+`"}`)
	if want := `unknown app "` + strings.Repeat("x", maxEcho) + `"…; apps_list names them`; res.Structured["message"] != want {
		t.Fatalf("message %q", res.Structured["message"])
	}
	res = f.call(t, f.paidKey, acme, ToolAppsExecute, `{"action":"\u001b[31m/x"}`)
	if res.Structured["message"] != `unknown app "\x1b[31m"` {
		t.Fatalf("message %q", res.Structured["message"])
	}
}

// FuzzAppNames: an alias is accepted exactly when it is at most MaxAlias
// bytes of A-Z, a-z, 0-9, '.', '_' and '-', and a tool name exactly when
// it is 1 to MaxToolName of them.
func FuzzAppNames(f *testing.F) {
	for _, s := range []string{"", "work", "a b", "\x1b[31m", strings.Repeat("a", 65), "é", "x.y_z-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		plain := true
		for _, r := range s {
			if !strings.ContainsRune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", r) {
				plain = false
			}
		}
		if got, want := aliasOK(s), plain && len(s) <= MaxAlias; got != want {
			t.Fatalf("aliasOK(%q) = %v", s, got)
		}
		if got, want := ToolNameOK(s), plain && len(s) >= 1 && len(s) <= MaxToolName; got != want {
			t.Fatalf("ToolNameOK(%q) = %v", s, got)
		}
	})
}

package tools

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-gw/caddy-gw/internal/gwtest"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/internal/store/sqlite"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// appServer is a real MCP server (the SDK's) standing in for a connected
// app. It records the metadata of each call.
type appServer struct {
	mu    sync.Mutex
	metas []map[string]any
	calls int
}

func startApp(t *testing.T) (*appServer, string) {
	t.Helper()
	a := &appServer{}
	srv := sdk.NewServer(&sdk.Implementation{Name: "tracker", Version: "1"}, nil)
	obj := json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"}}}`)
	srv.AddTool(&sdk.Tool{Name: "create_issue", Description: "Create an issue in the tracker", InputSchema: obj},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			a.mu.Lock()
			a.calls++
			a.metas = append(a.metas, req.Params.Meta)
			a.mu.Unlock()
			var args struct{ Title string }
			_ = json.Unmarshal(req.Params.Arguments, &args)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "created: " + args.Title}}}, nil
		})
	srv.AddTool(&sdk.Tool{Name: "list_issues", Description: "List open issues", InputSchema: obj},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return nil, errors.New("tracker is down")
		})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return a, ts.URL
}

// appsFixture is a gateway with a store, one paid prepaid account and one
// free account, and the tools server offering the app.
type appsFixture struct {
	s        *Server
	db       *sqlite.DB
	paidKey  string
	freeKey  string
	app      *appServer
	appsList *Apps
}

const appPrice = 5000 // microcents per action

func newAppsFixture(t *testing.T) *appsFixture {
	t.Helper()
	app, url := startApp(t)
	return newAppsFixtureAt(t, app, url)
}

// newAppsFixtureAt is newAppsFixture with the app at url.
func newAppsFixtureAt(t *testing.T, app *appServer, url string) *appsFixture {
	t.Helper()
	balance := pricing.USD(1)
	fx := gwtest.New(t, gwtest.Options{Account: store.Account{ID: "acme", Plan: store.PlanPaid, Cleared: true, Balance: &balance}})
	fx.AddAccount(t, store.Account{ID: "free", Plan: store.PlanFree})
	freeKey := fx.AddKey(t, store.Key{ID: "k-free", AccountID: "free"})
	apps := &Apps{List: []App{{Name: "tracker", URL: url, PriceMicrocents: appPrice}, {Name: "chat", URL: url}}, Links: NewMemoryLinks(), Gateway: fx.Gateway}
	t.Cleanup(func() { apps.Close() })
	s := &Server{States: NewMemoryStates(), Apps: apps, UpgradeURL: "https://billing.example/"}
	return &appsFixture{s: s, db: fx.DB, paidKey: fx.Key, freeKey: freeKey, app: app, appsList: apps}
}

func (f *appsFixture) call(t *testing.T, key string, acct store.Account, name, args string) Result {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/mcp-tools/", nil)
	r.Header.Set("Authorization", "Bearer "+key)
	return f.s.Call(context.Background(), &pipeline.Call{R: r, Account: acct}, name, json.RawMessage(args))
}

func TestApps(t *testing.T) {
	f := newAppsFixture(t)
	acme := store.Account{ID: "acme", Plan: store.PlanPaid, Cleared: true}
	mustOK := func(name, args string) map[string]any {
		t.Helper()
		res := f.call(t, f.paidKey, acme, name, args)
		if res.IsError {
			t.Fatalf("%s %s: %s", name, args, asJSON(t, res.Structured))
		}
		return res.Structured
	}
	mustErr := func(name, args, want string) {
		t.Helper()
		res := f.call(t, f.paidKey, acme, name, args)
		if got := asJSON(t, res.Structured); !res.IsError || got != want {
			t.Fatalf("%s %s = %s\nwant %s", name, args, got, want)
		}
	}

	if got := asJSON(t, mustOK(ToolAppsList, `{}`)); got != `{"apps":[{"app":"tracker","connected":false,"links":[],"price_microcents":5000},{"app":"chat","connected":false,"links":[],"price_microcents":0}]}` {
		t.Fatalf("apps_list = %s", got)
	}
	mustOK(ToolAppsConnect, `{"app":"tracker"}`)
	mustErr(ToolAppsConnect, `{"app":"tracker"}`, `{"capability":"apps","error":"invalid_request","message":"tracker is linked already; give an alias for a second link","retryable":false}`)
	mustErr(ToolAppsConnect, `{"app":"nope"}`, `{"capability":"apps","error":"invalid_request","message":"unknown app \"nope\"; apps_list names them","retryable":false}`)
	mustOK(ToolAppsConnect, `{"app":"tracker","alias":"work"}`)
	if got := asJSON(t, mustOK(ToolAppsList, `{}`)["apps"]); got != `[{"app":"tracker","connected":true,"links":["","work"],"price_microcents":5000},{"app":"chat","connected":false,"links":[],"price_microcents":0}]` {
		t.Fatalf("apps_list after connecting = %s", got)
	}

	found := mustOK(ToolAppsFindActions, `{"task":"create an issue for the outage"}`)["actions"].([]map[string]any)
	if len(found) != 4 || found[0]["action"] != "tracker/create_issue" || found[1]["action"] != "tracker:work/create_issue" ||
		found[2]["action"] != "tracker/list_issues" || found[0]["price_microcents"] != int64(appPrice) {
		t.Fatalf("actions = %s", asJSON(t, found))
	}
	if got := mustOK(ToolAppsFindActions, `{"task":"paint a fence"}`)["actions"].([]map[string]any); len(got) != 0 {
		t.Fatalf("unrelated task found %s", asJSON(t, got))
	}

	out := mustOK(ToolAppsExecute, `{"action":"tracker:work/create_issue","arguments":{"title":"outage"}}`)
	if got := asJSON(t, out); got != `{"action":"tracker:work/create_issue","content":[{"text":"created: outage","type":"text"}],"cost_microcents":5000,"cost_usd":"0.005","is_error":false,"structured":null}` {
		t.Fatalf("apps_execute = %s", got)
	}
	if f.app.calls != 1 || f.app.metas[0]["gw/account"] != "acme" || f.app.metas[0]["gw/link"] != "work" {
		t.Fatalf("the app saw %d calls, meta %v", f.app.calls, f.app.metas)
	}
	entries, err := f.db.Entries(context.Background(), "acme", 10)
	if err != nil || len(entries) != 1 || entries[0].Cost != pricing.Micro(appPrice) || entries[0].Unit != UnitAction || entries[0].Model != "tracker/create_issue" {
		t.Fatalf("ledger = %+v, %v", entries, err)
	}

	// The app failing is apps_error, retryable, and costs nothing.
	mustErr(ToolAppsExecute, `{"action":"tracker/list_issues"}`, `{"capability":"apps","error":"apps_error","message":"the app tracker failed: calling \"tools/call\": tracker is down","retryable":true}`)
	mustErr(ToolAppsExecute, `{"action":"chat/create_issue"}`, `{"capability":"apps","error":"invalid_request","message":"\"chat\" is not linked to this account; use apps_connect","retryable":false}`)
	mustErr(ToolAppsExecute, `{"action":"nonsense"}`, `{"capability":"apps","error":"invalid_request","message":"action must be one that apps_find_actions returned","retryable":false}`)
	if entries, _ := f.db.Entries(context.Background(), "acme", 10); len(entries) != 1 {
		t.Fatalf("failed actions were billed: %+v", entries)
	}
	a, _ := f.db.Account(context.Background(), "acme")
	if *a.Balance != pricing.USD(1)-pricing.Micro(appPrice) {
		t.Fatalf("balance %v", *a.Balance)
	}
}

// A Free plan cannot execute actions: premium_locked, the app is never
// called, and the paid-tool states apply to apps_execute.
func TestAppsExecuteFreePlan(t *testing.T) {
	f := newAppsFixture(t)
	free := store.Account{ID: "free", Plan: store.PlanFree}
	if res := f.call(t, f.freeKey, free, ToolAppsConnect, `{"app":"tracker"}`); res.IsError {
		t.Fatalf("connect: %s", asJSON(t, res.Structured))
	}
	res := f.call(t, f.freeKey, free, ToolAppsExecute, `{"action":"tracker/create_issue"}`)
	if !res.IsError || res.Structured["error"] != "premium_locked" || res.Structured["upgrade_url"] != "https://billing.example/" {
		t.Fatalf("free execute = %s", asJSON(t, res.Structured))
	}
	if f.app.calls != 0 {
		t.Fatalf("the app was called %d times", f.app.calls)
	}
	ctx := context.Background()
	listed := func() bool {
		for _, tool := range f.s.List(ctx, free) {
			if tool.Name == ToolAppsExecute {
				return true
			}
		}
		return false
	}
	if !listed() || listed() {
		t.Fatal("apps_execute should be listed once after its refusal, then dropped")
	}
}

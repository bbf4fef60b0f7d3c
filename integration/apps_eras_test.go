package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
)

// eraApp is a connected app for the era tests: an MCP Go SDK server with
// one tool, recording each request it gets and each run of its tool.
type eraApp struct {
	url string

	mu sync.Mutex
	// wire is each request as "method version": the JSON-RPC method of
	// its body and its Mcp-Protocol-Version header ("-" without one).
	wire []string
	// sessions counts answers that carried an Mcp-Session-Id.
	sessions int
	// runs is each run of the tool as "version account link": the version
	// the call was made in and the account and link the gateway passed.
	runs []string
}

// startEraApp serves tool through the SDK's Streamable HTTP handler,
// stateless (the stateless era; the sessions era without sessions) or
// stateful (the sessions era only).
func startEraApp(t *testing.T, tool, description string, stateless bool) *eraApp {
	t.Helper()
	a := &eraApp{}
	srv := sdk.NewServer(&sdk.Implementation{Name: tool + "-app", Version: "1"}, nil)
	srv.AddTool(&sdk.Tool{Name: tool, Description: description, InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			meta := req.Params.Meta
			a.mu.Lock()
			a.runs = append(a.runs, strings.Join([]string{req.Extra.Header.Get("Mcp-Protocol-Version"), meta["gw/account"].(string), meta["gw/link"].(string)}, " "))
			a.mu.Unlock()
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: tool + " done"}}}, nil
		})
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, &sdk.StreamableHTTPOptions{Stateless: stateless})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		version := r.Header.Get("Mcp-Protocol-Version")
		if version == "" {
			version = "-"
		}
		a.mu.Lock()
		a.wire = append(a.wire, r.Method+" "+gjson.GetBytes(body, "method").String()+" "+version)
		a.mu.Unlock()
		h.ServeHTTP(w, r)
		if w.Header().Get("Mcp-Session-Id") != "" {
			a.mu.Lock()
			a.sessions++
			a.mu.Unlock()
		}
	}))
	t.Cleanup(ts.Close)
	a.url = ts.URL
	return a
}

// seen is what the app recorded so far.
func (a *eraApp) seen() (wire, runs []string, sessions int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.wire...), append([]string(nil), a.runs...), a.sessions
}

// The tools server reaches each connected app in the era the app offers:
// the stateless era, with no initialize and no session, to an app served
// statelessly; the sessions era to a stateful app, which refuses the
// stateless era (server/discover lists only the sessions era's versions),
// after that one probe. apps_execute runs and bills an action of either.
func TestAppsEras(t *testing.T) {
	t.Parallel()
	modern := startEraApp(t, "create_ticket", "Create a ticket in the helpdesk", true)
	legacy := startEraApp(t, "create_issue", "Create an issue in the tracker", false)
	g := startGateway(t, gwOptions{Caddyfile: withGW(t, "\t\tapp_action_price 0.005"),
		Env: map[string]string{"GW_APPS": "helpdesk=" + modern.url + ",tracker=" + legacy.url}})
	key := g.newAccountKey(t, map[string]any{"id": "era-apps", "plan": "paid", "cleared": true, "balance_usd": "1.00"})
	s, _ := statelessSession(t, g.BaseURL+"/mcp-tools/", key)
	ctx := context.Background()
	call := func(t *testing.T, tool string, args map[string]any) map[string]any {
		t.Helper()
		res, err := s.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: args})
		if err != nil || res.IsError {
			t.Fatalf("%s %v: %v %+v", tool, args, err, res)
		}
		return structured(t, res)
	}
	call(t, "apps_connect", map[string]any{"app": "helpdesk"})
	call(t, "apps_connect", map[string]any{"app": "tracker", "alias": "work"})
	found := call(t, "apps_find_actions", map[string]any{"task": "create a ticket and an issue"})
	var actions []string
	for _, a := range found["actions"].([]any) {
		actions = append(actions, a.(map[string]any)["action"].(string))
	}
	if strings.Join(actions, ",") != "helpdesk/create_ticket,tracker:work/create_issue" {
		t.Fatalf("actions %v", actions)
	}
	for _, action := range actions {
		out := call(t, "apps_execute", map[string]any{"action": action, "arguments": map[string]any{"title": "fire"}})
		if out["action"] != action || out["is_error"] != false || out["cost_usd"] != "0.005" {
			t.Fatalf("apps_execute %s: %v", action, out)
		}
	}
	if l := g.ledger(t, "era-apps"); len(l) != 2 || l[0].Model != "tracker/create_issue" || l[1].Model != "helpdesk/create_ticket" ||
		l[0].Cost != "0.005" || l[1].Cost != "0.005" {
		t.Fatalf("ledger (newest first) %+v", l)
	}

	wire, runs, sessions := modern.seen()
	if strings.Join(runs, ";") != statelessEra+" era-apps " || sessions != 0 {
		t.Fatalf("the stateless app ran %q with %d sessions", runs, sessions)
	}
	if want := []string{
		"POST server/discover " + statelessEra,
		"POST tools/list " + statelessEra,
		"POST tools/call " + statelessEra,
	}; strings.Join(wire, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the stateless app saw\n%s\nwant\n%s", strings.Join(wire, "\n"), strings.Join(want, "\n"))
	}
	wire, runs, sessions = legacy.seen()
	if strings.Join(runs, ";") != sessionsEra+" era-apps work" || sessions != 1 {
		t.Fatalf("the stateful app ran %q with %d sessions", runs, sessions)
	}
	if want := []string{
		"POST server/discover " + statelessEra,
		"POST initialize -",
		"POST notifications/initialized " + sessionsEra,
		"POST tools/list " + sessionsEra,
		"POST tools/call " + sessionsEra,
	}; strings.Join(wire, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the stateful app saw\n%s\nwant\n%s", strings.Join(wire, "\n"), strings.Join(want, "\n"))
	}
}

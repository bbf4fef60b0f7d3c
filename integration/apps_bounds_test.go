package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// lenientApp is a connected app (the MCP Go SDK's server) that, as some
// servers do, answers a call of any tool name, listed or not, with an
// isError result. It lists create_issue (which works) and archive_issue
// (which the app always fails), and counts the calls it gets by name.
type lenientApp struct {
	URL   string
	mu    sync.Mutex
	calls map[string]int
}

func startLenientApp(t *testing.T) *lenientApp {
	t.Helper()
	a := &lenientApp{calls: map[string]int{}}
	srv := sdk.NewServer(&sdk.Implementation{Name: "tracker", Version: "1"}, nil)
	obj := json.RawMessage(`{"type":"object"}`)
	srv.AddTool(&sdk.Tool{Name: "create_issue", Description: "Create an issue", InputSchema: obj},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "issue #7"}}}, nil
		})
	srv.AddTool(&sdk.Tool{Name: "archive_issue", Description: "Archive an issue", InputSchema: obj},
		func(context.Context, *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
			return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "cannot archive"}}}, nil
		})
	srv.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			if method != "tools/call" {
				return next(ctx, method, req)
			}
			name := req.(*sdk.CallToolRequest).Params.Name
			a.mu.Lock()
			a.calls[name]++
			a.mu.Unlock()
			if name != "create_issue" && name != "archive_issue" {
				return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "no such tool"}}}, nil
			}
			return next(ctx, method, req)
		}
	})
	ts := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	a.URL = ts.URL
	return a
}

// total is how many tools/call requests the app got.
func (a *lenientApp) total() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, c := range a.calls {
		n += c
	}
	return n
}

// callTool calls a tool of the tools server with args.
func callTool(t *testing.T, s *sdk.ClientSession, name string, args map[string]any) *sdk.CallToolResult {
	t.Helper()
	res, err := s.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

// escapeNames are tool names full of terminal escape sequences, and one
// of 500 KB.
func escapeNames() []string {
	var names []string
	for i := range 20 {
		names = append(names, fmt.Sprintf("\x1b]0;owned %d\x07\x1b[2J\x1b[31mcreate_issue\x1b[0m", i))
	}
	return append(names, strings.Repeat("\x1b[1m", 100_000))
}

// apps_execute calls only a tool the app listed: a name full of escape
// sequences (or of 500 KB) is a tool error before any call to the app,
// is not billed, and never reaches the ledger, the metrics or the
// command line; an action the app answers with isError is not billed.
func TestAppsExecuteListedToolsOnly(t *testing.T) {
	t.Parallel()
	app := startLenientApp(t)
	g := startGateway(t, gwOptions{Env: map[string]string{"GW_APPS": "tracker=" + app.URL}})
	key := g.newAccountKey(t, map[string]any{"id": "executor", "plan": "paid", "cleared": true, "balance_usd": "1.00"})
	s := mcpSession(t, g.BaseURL+"/mcp-tools/", key)
	if res := callTool(t, s, "apps_connect", map[string]any{"app": "tracker"}); res.IsError {
		t.Fatalf("apps_connect: %v", structured(t, res))
	}
	before := g.adminDo(t, http.MethodGet, "/metrics", nil)

	for _, name := range escapeNames() {
		res := callTool(t, s, "apps_execute", map[string]any{"action": "tracker/" + name})
		if got := structured(t, res); !res.IsError || !sameJSON(mustJSON(t, got),
			`{"error":"invalid_request","capability":"apps","retryable":false,"message":"tracker offers no action of that name; apps_find_actions names them"}`) {
			t.Fatalf("apps_execute of an unlisted tool (%d bytes): isError %v %v", len(name), res.IsError, got)
		}
	}
	if n := app.total(); n != 0 {
		t.Fatalf("the app got %d calls of unlisted tools", n)
	}

	// A listed action that the app fails: its answer, not billed.
	res := callTool(t, s, "apps_execute", map[string]any{"action": "tracker/archive_issue"})
	if got := structured(t, res); !res.IsError || got["is_error"] != true || got["cost_usd"] != "0.00" || got["cost_microcents"] != float64(0) {
		t.Fatalf("apps_execute of an action the app fails: isError %v %v", res.IsError, got)
	}
	if l := g.ledger(t, "executor"); len(l) != 0 {
		t.Fatalf("refused or failed actions were billed: %+v", l)
	}
	if got := g.getAccount(t, "executor")["balance_usd"]; got != "1.00" {
		t.Fatalf("balance %v after refused and failed actions", got)
	}
	after := g.adminDo(t, http.MethodGet, "/metrics", nil)
	for _, body := range []string{string(before.Body), string(after.Body)} {
		if strings.Contains(body, "\x1b") || strings.Contains(body, "gw_cost_usd_total{") {
			t.Fatalf("the metrics carry a refused name or a cost:\n%s", grepLines(body, "gw_cost_usd_total"))
		}
	}
	if grew := len(after.Body) - len(before.Body); grew > 16<<10 {
		t.Fatalf("the metrics grew by %d bytes over refused calls", grew)
	}
	for _, args := range [][]string{{"ledger", "executor"}, {"usage", "--account", "executor", "--by", "model"}} {
		if r := g.gw(t, args...).ok(t, args[0]); strings.Contains(r.stdout, "\x1b") {
			t.Fatalf("caddy gw %s printed an escape sequence: %q", args[0], r.stdout)
		}
	}

	// A listed action that works: billed at the app's price, under its
	// listed name.
	res = callTool(t, s, "apps_execute", map[string]any{"action": "tracker/create_issue"})
	if got := structured(t, res); res.IsError || got["cost_usd"] != "0.001" {
		t.Fatalf("apps_execute create_issue: %v", got)
	}
	if l := g.ledger(t, "executor"); len(l) != 1 || l[0].Model != "tracker/create_issue" || l[0].Cost != "0.001" || l[0].Unit != "action" {
		t.Fatalf("ledger %+v", l)
	}
	if v := scrape(t, g)[`gw_cost_usd_total{family="mcp",model="tracker/create_issue"}`]; v != 0.001 {
		t.Fatalf("gw_cost_usd_total of the action %v", v)
	}
	app.mu.Lock()
	defer app.mu.Unlock()
	if len(app.calls) != 2 || app.calls["archive_issue"] != 1 || app.calls["create_issue"] != 1 {
		t.Fatalf("the app's calls %v", app.calls)
	}
}

// mustJSON marshals v.
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// mustJSONNoFail marshals v, for a goroutine of a test ("" when it
// cannot).
func mustJSONNoFail(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// seriesLabel finds a label's value in a printed series name.
var seriesLabel = regexp.MustCompile(`(model|provider|tool|server)="((?:[^"\\]|\\.)*)"`)

// series are the names (with labels) of the gw_ series of a scrape.
func series(t *testing.T, g *gateway) []string {
	t.Helper()
	var out []string
	for name := range scrape(t, g) {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// The metrics' model and provider labels take only names the
// configuration declared or an app listed: 50 unknown model names on
// every model route and 50 unlisted app tools, sent with junk headers,
// add no series after the first of each.
func TestMetricsLabelsDeclaredOnly(t *testing.T) {
	t.Parallel()
	app := startLenientApp(t)
	oa, an := fake.NewOpenAI(), fake.NewAnthropic()
	t.Cleanup(oa.Close)
	t.Cleanup(an.Close)
	g := startGateway(t, gwOptions{Env: map[string]string{"GW_APPS": "tracker=" + app.URL, "GW_OPENAI_BASE_URL": oa.URL, "GW_ANTHROPIC_BASE_URL": an.URL}})
	key := g.newAccountKey(t, map[string]any{"id": "labeller", "plan": "paid", "cleared": true, "balance_usd": "5.00"})
	s := mcpSession(t, g.BaseURL+"/mcp-tools/", key)
	if res := callTool(t, s, "apps_connect", map[string]any{"app": "tracker"}); res.IsError {
		t.Fatalf("apps_connect: %v", structured(t, res))
	}
	round := func(i int) {
		name := fmt.Sprintf("unknown-%d-\x1b[31m", i)
		junk := fmt.Sprintf("junk-%d", i)
		header := append(bearer(key), "X-Gw-Model", junk, "X-Gw-Routed-Model", junk, "X-Gw-Provider", junk, "Anthropic-Version", junk,
			"OpenAI-Organization", junk, "User-Agent", junk)
		body := func(model string, more string) string {
			b, _ := json.Marshal(model)
			return `{"model":` + string(b) + more + `}`
		}
		chat := `,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]`
		for _, c := range []struct{ path, body string }{
			{"/v1/chat/completions", body(name, chat)},
			{"/v1/responses", body(name, `,"input":"hi"`)},
			{"/alt/v1/messages", body(name, chat)},
			{"/alt/v1/messages/count_tokens", body(name, `,"messages":[{"role":"user","content":"hi"}]`)},
			{"/v1/embeddings", body(name, `,"input":"hi"`)},
			{"/v1/images/generations", body(name, `,"prompt":"a fox"`)},
			{"/v1/audio/speech", body(name, `,"input":"hi","voice":"alloy"`)},
		} {
			if r := g.do(t, http.MethodPost, c.path, c.body, header...); r.Status/100 != 4 {
				t.Fatalf("%s with model %q: %d %s", c.path, name, r.Status, r.Body)
			}
		}
		// A call that is served, with the same junk headers.
		oa.Push(fake.Script{Text: "ok", Usage: fake.Usage{Input: 5, Output: 2}})
		if r := g.do(t, http.MethodPost, "/v1/chat/completions", body("gw-pinned-gpt-4.1-mini", chat), header...); r.Status != http.StatusOK {
			t.Fatalf("chat: %d %s", r.Status, r.Body)
		}
		callTool(t, s, "apps_execute", map[string]any{"action": "tracker/" + name})
	}
	round(0)
	first := series(t, g)
	for i := 1; i < 50; i++ {
		round(i)
	}
	last := series(t, g)
	if !slices.Equal(first, last) {
		var added []string
		for _, name := range last {
			if !slices.Contains(first, name) {
				added = append(added, name)
			}
		}
		t.Fatalf("%d series before the next 49 rounds, %d after; added:\n%s", len(first), len(last), strings.Join(added, "\n"))
	}
	for _, name := range last {
		for _, m := range seriesLabel.FindAllStringSubmatch(name, -1) {
			if strings.Contains(m[2], "unknown-") || strings.Contains(m[2], "junk-") {
				t.Errorf("a label from the request: %s", name)
			}
		}
	}
	if app.total() != 0 {
		t.Errorf("the app got %d calls", app.total())
	}
}

// An alias is at most 64 characters of A-Z, a-z, 0-9, '.', '_' and '-',
// and an account holds at most 50 links (app_links_per_account); past
// that a tool error names the limit, and the account's links stay as they
// were.
func TestAppsConnectBounded(t *testing.T) {
	t.Parallel()
	app := startLenientApp(t)
	g := startGateway(t, gwOptions{Env: map[string]string{"GW_APPS": "tracker=" + app.URL}})
	key := g.newAccountKey(t, map[string]any{"id": "linker", "plan": "paid", "cleared": true})
	s := mcpSession(t, g.BaseURL+"/mcp-tools/", key)
	connect := func(alias string) *sdk.CallToolResult {
		return callTool(t, s, "apps_connect", map[string]any{"app": "tracker", "alias": alias})
	}
	badAlias := `{"error":"invalid_request","capability":"apps","retryable":false,"message":"an alias is at most 64 characters of A-Z, a-z, 0-9, '.', '_' and '-'"}`
	for _, alias := range []string{strings.Repeat("a", 2<<20), strings.Repeat("a", 65), "\x1b[31mwork", "work space", "työ"} {
		if res := connect(alias); !res.IsError || !sameJSON(mustJSON(t, structured(t, res)), badAlias) {
			t.Fatalf("alias of %d bytes: isError %v, message %.200v", len(alias), res.IsError, structured(t, res)["message"])
		}
	}
	aliases := []string{strings.Repeat("a", 64)}
	for i := 1; i < 50; i++ {
		aliases = append(aliases, fmt.Sprintf("Link-%02d.x_y", i))
	}
	for _, alias := range aliases {
		if res := connect(alias); res.IsError {
			t.Fatalf("link %q: %v", alias, structured(t, res))
		}
	}
	full := `{"error":"invalid_request","capability":"apps","retryable":false,"message":"this account holds 50 app links, the most it may"}`
	for _, alias := range []string{"one-more", "another"} {
		if res := connect(alias); !res.IsError || !sameJSON(mustJSON(t, structured(t, res)), full) {
			t.Fatalf("link 51 (alias %q): %v", alias, structured(t, res))
		}
	}
	res := callTool(t, s, "apps_list", nil)
	list := structured(t, res)["apps"].([]any)[0].(map[string]any)
	if got := list["links"].([]any); res.IsError || len(got) != 50 || got[0] != aliases[0] || got[49] != aliases[49] {
		t.Fatalf("apps_list links %v", got)
	}
}

// A configured app_links_per_account holds on every node of one database
// at once: links added concurrently through two nodes stop at exactly
// the limit.
func TestNodesAppLinksBounded(t *testing.T) {
	t.Parallel()
	app := startLenientApp(t)
	e := newNodes(t, 2, "\t\tapp_links_per_account 4", "GW_APPS", "tracker="+app.URL)
	key := e.nodes[0].newAccountKey(t, map[string]any{"id": "linker", "plan": "paid", "cleared": true})
	sessions := []*sdk.ClientSession{mcpSession(t, e.nodes[0].BaseURL+"/mcp-tools/", key), mcpSession(t, e.nodes[1].BaseURL+"/mcp-tools/", key)}
	var mu sync.Mutex
	var linked, refused int
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			res, err := sessions[i%2].CallTool(context.Background(), &sdk.CallToolParams{Name: "apps_connect",
				Arguments: map[string]any{"app": "tracker", "alias": fmt.Sprintf("a%d", i)}})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Errorf("apps_connect %d: %v", i, err)
			case !res.IsError:
				linked++
			case gjson.Get(mustJSONNoFail(res.StructuredContent), "message").String() == "this account holds 4 app links, the most it may":
				refused++
			default:
				t.Errorf("apps_connect %d: %s", i, mustJSONNoFail(res.StructuredContent))
			}
		})
	}
	wg.Wait()
	res := callTool(t, sessions[1], "apps_list", nil)
	links := structured(t, res)["apps"].([]any)[0].(map[string]any)["links"].([]any)
	if linked != 4 || refused != 8 || len(links) != 4 {
		t.Fatalf("%d linked, %d refused, %d listed: want 4, 8, 4", linked, refused, len(links))
	}
}

package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/money"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// Connected apps: the upstream MCP servers an operator
// offers. An account links an app (a second link of the same app needs an
// alias), finds actions among its linked apps' tools by the words of a
// task, and executes one, billed per action at the app's price.

// Limits of the apps tools.
const (
	// MaxActions is how many actions apps_find_actions returns at most.
	MaxActions = 10
	// AppCallTimeout bounds one call to an upstream app.
	AppCallTimeout = 30 * time.Second
	// toolsTTL is how long an app's tool list is kept before it is asked
	// again.
	toolsTTL = 5 * time.Minute
	// UnitAction is the ledger unit of apps_execute.
	UnitAction = "action"
	// MaxAlias is the longest alias of a link, in characters of
	// A-Z, a-z, 0-9, '.', '_' and '-'.
	MaxAlias = 64
	// DefaultMaxLinks is how many links one account may hold when the
	// configuration names no other number (app_links_per_account).
	DefaultMaxLinks = 50
	// MaxToolName is the longest tool name of an app that the gateway
	// offers: as the MCP specification (2025-11-25) asks, a name is 1 to
	// 128 characters of A-Z, a-z, 0-9, '_', '-' and '.'; an app's tool
	// named otherwise is left out.
	MaxToolName = 128
	// maxEcho is how much of an unknown name a tool error repeats.
	maxEcho = 64
)

// App is an upstream MCP server offered as a connected app.
type App struct {
	// Name is the app's id (GW_APPS name=url).
	Name string `json:"name"`
	// URL is the app's Streamable HTTP endpoint.
	URL string `json:"url"`
	// PriceMicrocents is the plan price of one executed action.
	PriceMicrocents int64 `json:"price_microcents,omitempty"`
}

// Link is one account's link to an app.
type Link struct {
	App   string `json:"app"`
	Alias string `json:"alias"`
}

// Links stores which apps each account linked.
type Links interface {
	// Add links app under alias for account; false when that link exists,
	// store.ErrTooMany when the account holds most links already.
	Add(ctx context.Context, account string, l Link, most int) (bool, error)
	// List returns the account's links, in the order they were made.
	List(ctx context.Context, account string) ([]Link, error)
}

// MemoryLinks keeps links in memory (one node).
type MemoryLinks struct {
	mu sync.Mutex
	m  map[string][]Link
}

// NewMemoryLinks returns empty links.
func NewMemoryLinks() *MemoryLinks { return &MemoryLinks{m: map[string][]Link{}} }

// Add implements Links.
func (l *MemoryLinks) Add(_ context.Context, account string, link Link, most int) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if slices.Contains(l.m[account], link) {
		return false, nil
	}
	if len(l.m[account]) >= most {
		return false, store.ErrTooMany
	}
	l.m[account] = append(l.m[account], link)
	return true, nil
}

// List implements Links.
func (l *MemoryLinks) List(_ context.Context, account string) ([]Link, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.m[account]), nil
}

// Apps holds the offered apps and one pooled session to each.
type Apps struct {
	// List is the offered apps, in config order.
	List []App
	// Links stores the accounts' links.
	Links Links
	// Gateway runs apps_execute through the pipeline (ability, plan,
	// money, ledger).
	Gateway *pipeline.Gateway
	// HTTPClient reaches the apps (nil: a default client).
	HTTPClient *http.Client
	// MaxLinks is how many links one account may hold (0:
	// DefaultMaxLinks).
	MaxLinks int

	mu       sync.Mutex
	sessions map[string]*sdk.ClientSession
	tools    map[string]cachedTools
}

type cachedTools struct {
	tools []*sdk.Tool
	at    time.Time
}

func (a *Apps) app(name string) (App, bool) {
	for _, x := range a.List {
		if x.Name == name {
			return x, true
		}
	}
	return App{}, false
}

// session returns the pooled session to app, connecting on first use in
// the protocol era the app offers: the SDK's client asks server/discover
// first (the stateless era, no session) and falls back to initialize (the
// sessions era) when the app does not offer it.
func (a *Apps) session(ctx context.Context, app App) (*sdk.ClientSession, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := a.sessions[app.Name]; s != nil {
		return s, nil
	}
	client := sdk.NewClient(&sdk.Implementation{Name: ServerName, Version: "1"}, nil)
	s, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: app.URL, HTTPClient: a.HTTPClient, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return nil, err
	}
	if a.sessions == nil {
		a.sessions = map[string]*sdk.ClientSession{}
	}
	a.sessions[app.Name] = s
	return s, nil
}

// drop forgets a session that failed, so the next call reconnects.
func (a *Apps) drop(app string, s *sdk.ClientSession) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sessions[app] == s {
		delete(a.sessions, app)
		delete(a.tools, app)
		_ = s.Close()
	}
}

// Close ends every pooled session.
func (a *Apps) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for name, s := range a.sessions {
		_ = s.Close()
		delete(a.sessions, name)
	}
	return nil
}

// maxLinks is how many links one account may hold.
func (a *Apps) maxLinks() int {
	if a.MaxLinks > 0 {
		return a.MaxLinks
	}
	return DefaultMaxLinks
}

// appTools lists app's tools, cached for toolsTTL: those whose names fit
// MaxToolName's rule, the only ones the gateway offers and calls. Their
// "<app>/<tool>" names become labels of the metrics, up to
// pipeline.MaxListedLabels per app.
func (a *Apps) appTools(ctx context.Context, app App) ([]*sdk.Tool, error) {
	a.mu.Lock()
	c, ok := a.tools[app.Name]
	a.mu.Unlock()
	if ok && time.Since(c.at) < toolsTTL {
		return c.tools, nil
	}
	s, err := a.session(ctx, app)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, AppCallTimeout)
	defer cancel()
	var tools []*sdk.Tool
	var labels []string
	for t, err := range s.Tools(ctx, nil) {
		if err != nil {
			a.drop(app.Name, s)
			return nil, err
		}
		if ToolNameOK(t.Name) {
			tools = append(tools, t)
			labels = append(labels, app.Name+"/"+t.Name)
		}
	}
	if a.Gateway != nil {
		a.Gateway.Metrics.Admit(app.Name, labels)
	}
	a.mu.Lock()
	if a.tools == nil {
		a.tools = map[string]cachedTools{}
	}
	a.tools[app.Name] = cachedTools{tools: tools, at: time.Now()}
	a.mu.Unlock()
	return tools, nil
}

// offers reports whether app offers a tool named name, from its listed
// tools (cached); an app that cannot list them is apps_error.
func (a *Apps) offers(ctx context.Context, app App, name string) (bool, *gwerr.Error) {
	tools, err := a.appTools(ctx, app)
	if err != nil {
		return false, appsError("the app %s could not list its actions", app.Name)
	}
	return slices.ContainsFunc(tools, func(t *sdk.Tool) bool { return t.Name == name }), nil
}

// ToolNameOK reports whether name is a tool name the gateway offers: 1 to
// MaxToolName characters of A-Z, a-z, 0-9, '_', '-' and '.'.
func ToolNameOK(name string) bool {
	return len(name) > 0 && len(name) <= MaxToolName && PlainName(name)
}

// aliasOK reports whether alias may name a link: at most MaxAlias
// characters of A-Z, a-z, 0-9, '.', '_' and '-' (empty: the app's first
// link).
func aliasOK(alias string) bool {
	return len(alias) <= MaxAlias && PlainName(alias)
}

// PlainName reports whether s holds only A-Z, a-z, 0-9, '.', '_' and '-':
// the characters of a tool name (and of the names the gateway makes of
// them).
func PlainName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// echo is how a tool error repeats a name it did not know: quoted, and
// cut to maxEcho bytes.
func echo(name string) string {
	if len(name) > maxEcho {
		return strconv.Quote(name[:maxEcho]) + "…"
	}
	return strconv.Quote(name)
}

// appsTool is the apps tools' table rows.
var appsTools = []Tool{
	{Name: ToolAppsList, Ability: store.AbilityApps, Description: "List the connected apps this gateway offers and which ones this account linked.",
		InputSchema: schema(`{"type":"object","properties":{}}`)},
	{Name: ToolAppsConnect, Ability: store.AbilityApps, Description: "Link an app to this account; give an alias for a second link of the same app.",
		InputSchema: schema(`{"type":"object","properties":{"app":{"type":"string"},"alias":{"type":"string"}},"required":["app"]}`)},
	{Name: ToolAppsFindActions, Ability: store.AbilityApps, Description: "Find actions of the linked apps that fit a task.",
		InputSchema: schema(`{"type":"object","properties":{"task":{"type":"string"},"app":{"type":"string"}},"required":["task"]}`)},
	{Name: ToolAppsExecute, Ability: store.AbilityApps, Paid: true, CostBasis: "one action", Description: "Execute an action found by apps_find_actions with its arguments; billed per action.",
		InputSchema: schema(`{"type":"object","properties":{"action":{"type":"string"},"arguments":{"type":"object"}},"required":["action"]}`)},
}

// appsError is a failure on the app's side (retryable once).
func appsError(format string, args ...any) *gwerr.Error {
	return gwerr.New(gwerr.Upstream, format, args...).WithCode(gwerr.CodeAppsError)
}

// linkName is how an action names a link: the app, or app:alias.
func linkName(l Link) string {
	if l.Alias == "" {
		return l.App
	}
	return l.App + ":" + l.Alias
}

func (s *Server) appsList(ctx context.Context, c *pipeline.Call) (Result, *gwerr.Error) {
	links, err := s.Apps.Links.List(ctx, c.Account.ID)
	if err != nil {
		return Result{}, gwerr.New(gwerr.Unavailable, "the app links could not be read")
	}
	apps := []map[string]any{}
	for _, app := range s.Apps.List {
		aliases := []string{}
		for _, l := range links {
			if l.App == app.Name {
				aliases = append(aliases, l.Alias)
			}
		}
		apps = append(apps, map[string]any{"app": app.Name, "connected": len(aliases) > 0, "links": aliases,
			"price_microcents": app.PriceMicrocents})
	}
	return ok(map[string]any{"apps": apps}), nil
}

func (s *Server) appsConnect(ctx context.Context, c *pipeline.Call, a gjson.Result) (Result, *gwerr.Error) {
	name := a.Get("app").String()
	if _, found := s.Apps.app(name); !found {
		return Result{}, invalid("app", "unknown app %s; apps_list names them", echo(name))
	}
	alias := a.Get("alias").String()
	if !aliasOK(alias) {
		return Result{}, invalid("alias", "an alias is at most %d characters of A-Z, a-z, 0-9, '.', '_' and '-'", MaxAlias)
	}
	links, err := s.Apps.Links.List(ctx, c.Account.ID)
	if err != nil {
		return Result{}, gwerr.New(gwerr.Unavailable, "the app links could not be read")
	}
	for _, l := range links {
		if l.App == name && alias == "" {
			return Result{}, invalid("alias", "%s is linked already; give an alias for a second link", name)
		}
	}
	most := s.Apps.maxLinks()
	added, err := s.Apps.Links.Add(ctx, c.Account.ID, Link{App: name, Alias: alias}, most)
	if errors.Is(err, store.ErrTooMany) {
		return Result{}, invalid("app", "this account holds %d app links, the most it may", most)
	}
	if err != nil {
		return Result{}, gwerr.New(gwerr.Unavailable, "the link could not be stored")
	}
	if !added {
		return Result{}, invalid("alias", "the alias %q of %s is taken", alias, name)
	}
	return ok(map[string]any{"app": name, "alias": alias, "connected": true}), nil
}

// stopWords carry no meaning for matching a task to an action.
var stopWords = map[string]bool{"a": true, "an": true, "the": true, "for": true, "in": true, "of": true, "to": true,
	"and": true, "or": true, "on": true, "with": true, "my": true, "me": true, "i": true, "it": true, "this": true, "that": true}

// words splits text into lower-case words for matching, without stop
// words and with a plural "s" folded ("issues" matches "issue").
func words(text string) []string {
	var out []string
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127)
	}) {
		if stopWords[w] {
			continue
		}
		if len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss") {
			w = w[:len(w)-1]
		}
		out = append(out, w)
	}
	return out
}

func (s *Server) appsFindActions(ctx context.Context, c *pipeline.Call, a gjson.Result) (Result, *gwerr.Error) {
	task := a.Get("task").String()
	taskWords := words(task)
	if len(taskWords) == 0 {
		return Result{}, invalid("task", "task is required")
	}
	only := a.Get("app").String()
	links, err := s.Apps.Links.List(ctx, c.Account.ID)
	if err != nil {
		return Result{}, gwerr.New(gwerr.Unavailable, "the app links could not be read")
	}
	type scored struct {
		action map[string]any
		score  int
	}
	var found []scored
	for _, l := range links {
		if only != "" && l.App != only {
			continue
		}
		app, _ := s.Apps.app(l.App)
		tools, err := s.Apps.appTools(ctx, app)
		if err != nil {
			return Result{}, appsError("the app %s could not list its actions", app.Name)
		}
		for _, t := range tools {
			have := words(t.Name + " " + strings.ReplaceAll(t.Name, "_", " ") + " " + t.Description)
			score := 0
			for _, w := range taskWords {
				if slices.Contains(have, w) {
					score++
				}
			}
			if score == 0 {
				continue
			}
			found = append(found, scored{score: score, action: map[string]any{
				"action": linkName(l) + "/" + t.Name, "app": l.App, "alias": l.Alias, "tool": t.Name,
				"description": t.Description, "input_schema": t.InputSchema, "price_microcents": app.PriceMicrocents}})
		}
	}
	sort.SliceStable(found, func(i, j int) bool { return found[i].score > found[j].score })
	actions := []map[string]any{}
	for i := 0; i < len(found) && i < MaxActions; i++ {
		actions = append(actions, found[i].action)
	}
	return ok(map[string]any{"actions": actions}), nil
}

// appsSpend is the billing kind of apps_execute.
var appsSpend = money.Ability

func (s *Server) appsExecute(ctx context.Context, c *pipeline.Call, t Tool, a gjson.Result) (Result, *gwerr.Error) {
	action := a.Get("action").String()
	link, tool, found := strings.Cut(action, "/")
	if !found || tool == "" {
		return Result{}, invalid("action", "action must be one that apps_find_actions returned")
	}
	appName, alias, _ := strings.Cut(link, ":")
	app, known := s.Apps.app(appName)
	if !known {
		return Result{}, invalid("action", "unknown app %s", echo(appName))
	}
	links, err := s.Apps.Links.List(ctx, c.Account.ID)
	if err != nil {
		return Result{}, gwerr.New(gwerr.Unavailable, "the app links could not be read")
	}
	if !slices.Contains(links, Link{App: appName, Alias: alias}) {
		return Result{}, invalid("action", "%s is not linked to this account; use apps_connect", echo(link))
	}
	args := map[string]any{}
	if v := a.Get("arguments"); v.Exists() {
		if !v.IsObject() {
			return Result{}, invalid("arguments", "arguments must be an object")
		}
		_ = json.Unmarshal([]byte(v.Raw), &args)
	}
	var out map[string]any
	var appFailed *gwerr.Error
	// The action runs as a billed call of the apps ability: the pipeline
	// checks the ability, the plan and the money; the tool must be one
	// the app lists, checked before anything is reserved or called; the
	// price is reserved before the app is called and settled when it
	// answered with a result that is not an error.
	ep := &pipeline.Endpoint{Name: "apps", Family: gwerr.Tools, Auth: pipeline.BearerOnly, Ability: store.AbilityApps, Billing: &appsSpend,
		Handler: func(call *pipeline.Call) error {
			offered, e := s.Apps.offers(call.R.Context(), app, tool)
			if e != nil {
				appFailed = e
				return e
			}
			if !offered {
				return invalid("action", "%s offers no action of that name; apps_find_actions names them", app.Name)
			}
			price := pricing.Cost(call.Account.PAYG, pricing.Line{Units: 1, Rate: pricing.PerUnit(pricing.Micro(app.PriceMicrocents))})
			if err := call.Reserve(price); err != nil {
				return err
			}
			res, err := s.Apps.call(call.R.Context(), app, tool, args, call.Account.ID, alias)
			if err != nil {
				appFailed = err
				return err
			}
			var charged pricing.Money
			if !res.IsError {
				var cerr error
				charged, cerr = call.Charge(pipeline.Bill{Units: 1, Unit: UnitAction, Model: app.Name + "/" + tool, Cost: price})
				if cerr != nil {
					return cerr
				}
			}
			content, _ := json.Marshal(res.Content)
			var blocks []any
			_ = json.Unmarshal(content, &blocks)
			out = map[string]any{"action": action, "content": blocks, "structured": res.StructuredContent,
				"is_error": res.IsError, "cost_usd": charged.String(), "cost_microcents": charged.Microcents()}
			return nil
		}}
	r, _ := http.NewRequestWithContext(ctx, http.MethodPost, "/mcp-tools/apps_execute", nil)
	r.Header.Set("Authorization", c.R.Header.Get("Authorization"))
	_, refused := s.Apps.Gateway.Invoke(r, ep)
	if appFailed != nil {
		return Result{}, appFailed
	}
	if refused != nil {
		return Result{}, refused
	}
	// An action the app answered as failed is not billed, and its
	// result is a tool error too.
	res := ok(out)
	res.IsError = out["is_error"] == true
	return res, nil
}

// call runs tool on app for account's link, reconnecting once when the
// pooled session has gone away.
func (a *Apps) call(ctx context.Context, app App, tool string, args map[string]any, account, alias string) (*sdk.CallToolResult, *gwerr.Error) {
	ctx, cancel := context.WithTimeout(ctx, AppCallTimeout)
	defer cancel()
	params := &sdk.CallToolParams{Name: tool, Arguments: args, Meta: sdk.Meta{"gw/account": account, "gw/link": alias}}
	s, err := a.session(ctx, app)
	if err != nil {
		return nil, appsError("the app %s could not be reached", app.Name)
	}
	res, err := s.CallTool(ctx, params)
	if err != nil {
		// The action may or may not have run: never repeat it here. The
		// next call starts a fresh session.
		a.drop(app.Name, s)
		return nil, appsError("the app %s failed: %s", app.Name, shortErr(err))
	}
	return res, nil
}

// shortErr keeps an upstream error message short.
func shortErr(err error) string {
	msg := err.Error()
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	return msg
}

// appsFor dispatches the apps tools.
func (s *Server) appsFor(ctx context.Context, c *pipeline.Call, t Tool, a gjson.Result) (Result, *gwerr.Error) {
	if s.Apps == nil {
		return Result{}, gwerr.New(gwerr.Unavailable, "no connected apps are offered on this gateway")
	}
	if !c.Account.HasAbility(store.AbilityApps) {
		return Result{}, gwerr.New(gwerr.Disabled, "apps are not switched on for this account")
	}
	switch t.Name {
	case ToolAppsList:
		return s.appsList(ctx, c)
	case ToolAppsConnect:
		return s.appsConnect(ctx, c, a)
	case ToolAppsFindActions:
		return s.appsFindActions(ctx, c, a)
	case ToolAppsExecute:
		return s.appsExecute(ctx, c, t, a)
	}
	return Result{}, gwerr.New(gwerr.Internal, "%s", fmt.Sprint("unknown apps tool ", t.Name))
}

// LinkStore is a durable store of app links (PostgreSQL, for several
// nodes).
type LinkStore interface {
	// AddLink links app under alias for account; false when that link
	// exists, store.ErrTooMany when the account holds most links already.
	AddLink(ctx context.Context, account, app, alias string, most int) (bool, error)
	Links(ctx context.Context, account string) ([][2]string, error)
}

// StoredLinks are Links kept in a LinkStore.
type StoredLinks struct{ Store LinkStore }

// Add implements Links.
func (l StoredLinks) Add(ctx context.Context, account string, link Link, most int) (bool, error) {
	return l.Store.AddLink(ctx, account, link.App, link.Alias, most)
}

// List implements Links.
func (l StoredLinks) List(ctx context.Context, account string) ([]Link, error) {
	rows, err := l.Store.Links(ctx, account)
	if err != nil {
		return nil, err
	}
	out := make([]Link, len(rows))
	for i, r := range rows {
		out[i] = Link{App: r[0], Alias: r[1]}
	}
	return out, nil
}

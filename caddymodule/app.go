package caddymodule

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddy-gw/caddy-gw/handlers/chat"
	"github.com/caddy-gw/caddy-gw/handlers/decide"
	"github.com/caddy-gw/caddy-gw/handlers/embeddings"
	"github.com/caddy-gw/caddy-gw/internal/admin"
	"github.com/caddy-gw/caddy-gw/internal/alerts"
	"github.com/caddy-gw/caddy-gw/internal/answercache"
	"github.com/caddy-gw/caddy-gw/internal/bodyrate"
	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/lanes"
	"github.com/caddy-gw/caddy-gw/internal/limits"
	"github.com/caddy-gw/caddy-gw/internal/money"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/internal/store/cached"
	"github.com/caddy-gw/caddy-gw/mcp"
	"github.com/caddy-gw/caddy-gw/mcp/tools"
	"github.com/caddy-gw/caddy-gw/pricing"
	"github.com/caddy-gw/caddy-gw/routes"
)

func init() {
	caddy.RegisterModule(App{})
}

// App is the `gw` app: one per config. It holds the providers, the model
// catalogue, the aliases and the store; the `gw` HTTP handler serves the
// gateway's routes from it.
type App struct {
	// Providers are the upstream APIs.
	Providers []ProviderConfig `json:"providers,omitempty"`
	// Models is the catalogue of backing chat models.
	Models []catalog.Model `json:"models,omitempty"`
	// Embeddings is the catalogue of backing embedding models.
	Embeddings []catalog.EmbeddingModel `json:"embeddings,omitempty"`
	// EmbedModel is the embedding model gw-embed serves. Default: the
	// first of Embeddings.
	EmbedModel string `json:"embed_model,omitempty"`
	// Abilities map the ability aliases (gw-image, gw-voice, ...) to
	// provider models.
	Abilities []catalog.Ability `json:"abilities,omitempty"`
	// Aliases are extra chat aliases.
	Aliases []catalog.Alias `json:"aliases,omitempty"`
	// DecideModel is the backing model decision mode asks for
	// log-probabilities; gw-decide is listed only when it is set.
	DecideModel string `json:"decide_model,omitempty"`
	// AltPrefix is the path prefix of the messages-style endpoints.
	// Default: /alt.
	AltPrefix string `json:"alt_prefix,omitempty"`
	// Store says where accounts, keys and the ledger live.
	Store StoreConfig `json:"store,omitzero"`
	// Durability says when a billed answer completes against its charge
	// reaching the disk. Default: mode sync, once the charge is synced.
	Durability DurabilityConfig `json:"durability,omitzero"`
	// RedisURL, when not empty after placeholders are expanded
	// ({env.GW_REDIS_URL}), is a redis:// (or unix://) URL: rate budgets,
	// money holds and account locks, and the routing server's sessions are
	// kept there, shared by every node that names it. Empty: in memory. It
	// is never logged.
	RedisURL string `json:"redis_url,omitempty"`
	// RedisCacheURL, when not empty after placeholders are expanded
	// ({env.GW_REDIS_CACHE_URL}), is a second Redis for what can be lost:
	// the routing server's sessions, the decision records flux_explain
	// reads, the paid-tool states and the chat and page caches. RedisURL
	// then keeps only the money state and the rate budgets, which must
	// never be evicted. Empty: everything in RedisURL's. It is never
	// logged, and needs RedisURL.
	RedisCacheURL string `json:"redis_cache_url,omitempty"`
	// BootstrapKey, when not empty after placeholders are expanded
	// ({env.GW_BOOTSTRAP_KEY}), makes sure at start that an account
	// "default" (paid, cleared) exists and holds this key.
	BootstrapKey string `json:"bootstrap_key,omitempty"`
	// CacheTTL keeps answers of identical non-streaming temperature-0 chat
	// requests of one account this long (a hit costs nothing). 0: no cache.
	CacheTTL caddy.Duration `json:"cache_ttl,omitempty"`
	// SecondOpinionConcurrency is how many second opinions may run at once;
	// more answer 503 with Retry-After. Default: 4.
	SecondOpinionConcurrency int `json:"second_opinion_concurrency,omitempty"`
	// Betas changes the table of betas forwarded to messages-style models:
	// each entry adds a beta or replaces the default entry of its name.
	// Default: the gateway's own table (docs/chat.md).
	Betas chat.Betas `json:"betas,omitempty"`
	// Money sets the configurable money rules.
	Money MoneyConfig `json:"money,omitzero"`
	// Limits sets the configurable rate limits.
	Limits LimitsConfig `json:"limits,omitzero"`
	// Webhooks tunes the sending of alert events to webhooks.
	Webhooks WebhooksConfig `json:"webhooks,omitzero"`
	// Search configures web search (POST /v1/search): the provider and
	// model that run it and its prices. Without it search answers 502
	// capability_unavailable.
	Search *SearchConfig `json:"search,omitempty"`
	// Audio sets the configurable parts of transcription and speech (the
	// voices are declared in the speech ability blocks).
	Audio *AudioConfig `json:"audio,omitempty"`
	// Images is the configurable part of image generation and edits.
	Images *ImagesConfig `json:"images,omitempty"`
	// Runtime tunes the Go runtime of the whole process; nil (the
	// default) tunes nothing.
	Runtime *RuntimeConfig `json:"runtime,omitempty"`
	// FetchAllow lists hosts (host or host:port) exempt from page
	// reading's address guard, for internal sites. Placeholders expand at
	// load and an element may hold several hosts, comma-separated, so
	// ["{env.GW_FETCH_ALLOW}"] takes a list from the environment.
	FetchAllow []string `json:"fetch_allow,omitempty"`
	// FetchPriceMicrocents and FetchRenderPriceMicrocents are the plan
	// prices of a plain and a rendered page read, in millionths of a USD.
	// Defaults: 2,000 and 5,000.
	FetchPriceMicrocents       int64 `json:"fetch_price_microcents,omitempty"`
	FetchRenderPriceMicrocents int64 `json:"fetch_render_price_microcents,omitempty"`
	// FetchTimeout bounds one page read. Default: 25s (docs/abilities.md); a
	// shorter one serves tests.
	FetchTimeout caddy.Duration `json:"fetch_timeout,omitempty"`
	// BillingURL is the operator's page to upgrade a plan or add credit:
	// the upgrade_url of the tools server's premium_locked and
	// payment_required answers (expanded from {env.GW_BILLING_URL}; empty:
	// no upgrade_url).
	BillingURL string `json:"billing_url,omitempty"`
	// Apps are the connected apps the tools server offers: name=url of
	// upstream MCP servers. Placeholders expand at load and an element may
	// hold several, comma-separated, so ["{env.GW_APPS}"] takes a list
	// from the environment.
	Apps []string `json:"apps,omitempty"`
	// AppActionPriceMicrocents is the plan price of one executed app
	// action, in millionths of a USD. Default: 1000.
	AppActionPriceMicrocents int64 `json:"app_action_price_microcents,omitempty"`
	// AppLinksPerAccount is how many app links (apps_connect) one account
	// may hold; past it apps_connect answers a tool error naming the
	// number. Default: 50.
	AppLinksPerAccount int `json:"app_links_per_account,omitempty"`
	// MCPAllowedHosts are the origins (host or host:port), besides
	// loopback names, from which browsers may call the MCP servers; any
	// other Origin is refused (DNS rebinding protection).
	MCPAllowedHosts []string `json:"mcp_allowed_hosts,omitempty"`
	// MCPServers are the upstream MCP servers the MCP gateway offers
	// (/mcp-gateway/).
	MCPServers []MCPServerConfig `json:"mcp_servers,omitempty"`
	// MCPServerURLs are more of them given as name=url (auth none, price
	// MCPPrice). Placeholders expand at load and an element may hold
	// several, comma-separated, so ["{env.GW_MCP_SERVERS}"] takes a list
	// from the environment.
	MCPServerURLs []string `json:"mcp_server_urls,omitempty"`
	// MCPPrice is the price of one call of a server of MCPServerURLs, in
	// US dollars. Default: 0.001.
	MCPPrice *pricing.Money `json:"mcp_price,omitempty"`

	// Built by Provision from the config alone: the catalogue, the money
	// rules and the routes' handlers (on the process's in-memory state).
	ctx     caddy.Context
	catalog *catalog.Catalog
	policy  money.Policy
	opts    routes.Options
	// syncInterval is Durability's: 0 in mode sync.
	syncInterval time.Duration

	// Set by Start, once the store and Redis are open.
	gateway *pipeline.Gateway
	router  *routes.Router
	// started is closed once Start has run (or the config is let go of
	// unstarted): the handler waits for it, since Caddy may start the
	// http app first.
	started   chan struct{}
	startOnce *sync.Once
	// inflight counts requests being served by this config, so Cleanup can
	// let go of the store only after the last one (a reload that moves the
	// store to another folder must not close it under them).
	inflight *inflight
	// prev is the app that served before this one started, handed the
	// admin API back if this one is stopped after a failed reload.
	prev   *atomic.Pointer[App]
	admin  *admin.API
	apps   *tools.Apps
	alerts *alerts.Sender
	// durable is the store this config gave its durability to; stopped
	// is set once the config is stopped.
	durable store.Store
	stopped *atomic.Bool
	// mcpKeys are this config's references to the MCP gateway's pooled
	// upstreams.
	mcpKeys  []string
	storeKey string
	redisKey string
	lockKey  string
	logger   *zap.Logger
}

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "gw", New: func() caddy.Module { return new(App) }}
}

// metrics are created once per process; each config registers them.
var metrics = pipeline.NewMetrics()

// Provision builds the app from its configuration: placeholders expanded,
// the catalogue, the money rules and the routes' handlers. It opens
// nothing and writes nothing (`caddy validate` runs it); Start does.
func (a *App) Provision(ctx caddy.Context) error {
	a.ctx = ctx
	a.logger = ctx.Logger()
	a.inflight = newInflight()
	a.prev, a.stopped = new(atomic.Pointer[App]), new(atomic.Bool)
	a.started, a.startOnce = make(chan struct{}), new(sync.Once)
	repl := caddy.NewReplacer()
	providers := a.catalogProviders()
	for i := range providers {
		p := &providers[i]
		p.BaseURL = repl.ReplaceAll(p.BaseURL, "")
		p.APIKey = repl.ReplaceAll(p.APIKey, "")
		for _, fb := range p.APIKeyFallbacks {
			if p.APIKey != "" {
				break
			}
			p.APIKey = repl.ReplaceAll(fb, "")
		}
		for j := range p.Deployments {
			d := &p.Deployments[j]
			d.BaseURL, d.APIKey = repl.ReplaceAll(d.BaseURL, ""), repl.ReplaceAll(d.APIKey, "")
		}
		for _, f := range []*string{&p.Project, &p.Location, &p.CredentialsFile, &p.Region, &p.AccessKeyID, &p.SecretAccessKey, &p.SessionToken} {
			*f = strings.TrimSpace(repl.ReplaceAll(*f, ""))
		}
	}
	providers, models := a.withCredentials(providers)
	a.BootstrapKey = repl.ReplaceAll(a.BootstrapKey, "")
	a.Store.Dir = repl.ReplaceAll(a.Store.Dir, "")
	a.Store.DatabaseURL = strings.TrimSpace(repl.ReplaceAll(a.Store.DatabaseURL, ""))
	a.RedisURL = strings.TrimSpace(repl.ReplaceAll(a.RedisURL, ""))
	a.RedisCacheURL = strings.TrimSpace(repl.ReplaceAll(a.RedisCacheURL, ""))
	if a.Store.Backend == "" {
		a.Store.Backend = DefaultStoreBackend
	}
	if a.Store.Dir == "" {
		a.Store.Dir = repl.ReplaceAll("{env.GW_DATA_DIR}", "")
	}
	if a.Store.Dir == "" {
		a.Store.Dir = DefaultDataDir
	}
	syncInterval, err := a.Durability.syncInterval()
	if err != nil {
		return err
	}
	a.syncInterval = syncInterval
	cat, err := catalog.New(providers, models, a.Abilities, a.Aliases, a.DecideModel)
	if err != nil {
		return err
	}
	for _, id := range cat.Unpriced {
		a.logger.Warn("model has no price: it is served to no account until it has one (0 is a price)", zap.String("model", id))
	}
	if err := cat.AddEmbeddings(a.Embeddings, a.EmbedModel); err != nil {
		return err
	}
	if err := a.Betas.Validate(); err != nil {
		return err
	}
	a.catalog = cat
	if err := metrics.Register(ctx.GetMetricsRegistry()); err != nil {
		return fmt.Errorf("registering metrics: %w", err)
	}
	a.policy = money.Policy{FreeMonthlyCredit: a.Money.FreeMonthlyCredit, Ceiling: money.DefaultCeiling}
	if c := a.Money.Ceiling; c != nil {
		a.policy.Ceiling = money.Ceiling{Base: c.Base, PerMonth: c.PerMonth, SpendPercent: c.SpendPercent, Max: c.Max}
	}
	chatHandler := &chat.Handler{Picker: &lanes.Picker{Catalog: cat, Health: health}, Upstream: upstreams, Decisions: decisions,
		Opinions: chat.NewOpinions(a.SecondOpinionConcurrency), Betas: chat.DefaultBetas(a.Betas)}
	if a.CacheTTL > 0 {
		chatHandler.Cache = answercache.New(time.Duration(a.CacheTTL), 0)
	}
	routing := &mcp.Routing{Sessions: mcpSessions, Decisions: decisions, AllowedHosts: a.MCPAllowedHosts}
	toolSet, err := a.toolSet(cat)
	if err != nil {
		return err
	}
	searchH, err := a.searchHandler(cat)
	if err != nil {
		return err
	}
	a.declareServices(cat, searchH)
	opts := routes.Options{AltPrefix: a.AltPrefix, Chat: chatHandler, Decide: &decide.Handler{Upstream: upstreams}, Routing: routing,
		Embeddings: &embeddings.Handler{Upstream: upstreams, Cache: chatHandler.Cache},
		Tools:      &mcp.ToolsServer{Tools: toolSet, AllowedHosts: a.MCPAllowedHosts}, Search: searchH, Fetch: a.fetchHandler()}
	if opts.MCPGateway, err = a.mcpGateway(toolSet.UpgradeURL); err != nil {
		return err
	}
	if opts.Images, err = a.imagesHandler(cat); err != nil {
		return err
	}
	if opts.Audio, err = a.audioHandler(cat); err != nil {
		return err
	}
	if n := a.Limits.ChatRequestsPerMinute; n > 0 {
		opts.ChatBudgets = []limits.Budget{{Name: ChatBudgetName, Limit: n, Period: time.Minute}}
	}
	if n := a.Limits.DecideRequestsPerMinute; n > 0 {
		opts.DecideBudgets = []limits.Budget{{Name: DecideBudgetName, Limit: n, Period: time.Minute}}
	}
	countTokens := a.Limits.CountTokensPerMinute
	if countTokens <= 0 {
		countTokens = DefaultCountTokensPerMinute
	}
	opts.CountTokensBudgets = []limits.Budget{{Name: CountTokensBudgetName, Limit: countTokens, Period: time.Minute}}
	countBytes := a.Limits.CountTokensBytesPerMinute
	if countBytes <= 0 {
		countBytes = DefaultCountTokensBytesPerMinute
	}
	chatHandler.CountBytes = limits.Budget{Name: CountTokensBytesBudgetName, Limit: countBytes, Period: time.Minute}
	opts.MCPBudgets = []limits.Budget{{Name: MCPBudgetName, Limit: cmp.Or(a.Limits.MCPRequestsPerMinute, DefaultMCPRequestsPerMinute), Period: time.Minute}}
	opts.MCPConcurrency = &limits.Bound{Name: MCPBudgetName, Max: cmp.Or(a.Limits.MCPMaxInFlight, DefaultMCPMaxInFlight)}
	a.opts = opts
	return nil
}

// Validate refuses a configuration that cannot work: a decide model that
// no chat-completions-style provider serves, a weak bootstrap key.
func (a *App) Validate() error {
	if a.DecideModel != "" {
		if _, _, err := a.catalog.DecideTarget(); err != nil {
			return err
		}
	}
	if a.BootstrapKey != "" {
		return checkBootstrapKey(a.BootstrapKey)
	}
	return nil
}

// Start opens what the configuration names and serves it: the data
// folder is taken for this process, the store opened (its charge log
// replayed), Redis connected, the bootstrap key made sure of, the gateway
// built on them, and the admin API handed to this config. Requests wait
// for it; a Start that fails serves none of them.
func (a *App) Start() error {
	defer a.markStarted()
	if err := a.lockDataDir(); err != nil {
		return err
	}
	st, err := a.openStore()
	if err != nil {
		return err
	}
	sh, err := a.openShared()
	if err != nil {
		return err
	}
	if a.BootstrapKey != "" {
		if err := ensureBootstrap(a.ctx, st, a.BootstrapKey); err != nil {
			return fmt.Errorf("bootstrap key: %w", err)
		}
	}
	// Set once nothing can fail: a reload that fails leaves the running
	// config's durability.
	if err := a.setDurability(st); err != nil {
		return err
	}
	a.durable = st
	if a.syncInterval > 0 {
		a.logger.Info(durabilityIntervalMsg, zap.Duration("interval", a.syncInterval))
	}
	var (
		locks   money.Locks    = memLocks
		limiter limits.Limiter = memLimits
	)
	opts := a.opts
	toolSet := opts.Tools.Tools
	if sh != nil {
		locks, limiter = sh.locks, sh.limits
		records := &lanes.RedisDecisions{Client: sh.cache}
		opts.Chat.Decisions, opts.Routing.Decisions, opts.Routing.Sessions = records, records, sh.sessions
		toolSet.States = &tools.RedisStates{Client: sh.cache}
		opts.Fetch.Shared = sh.cache
		if a.CacheTTL > 0 {
			opts.Chat.Cache = answercache.NewShared(time.Duration(a.CacheTTL), sh.cache)
			opts.Embeddings.Cache = opts.Chat.Cache
		}
	}
	backend := store.Store(st)
	if b, ok := st.(*cached.Batched); ok {
		backend = b.Unwrap()
		// A charge this node keeps in its spool keeps its hold on every
		// node until PostgreSQL has it, even past this node's life.
		spoolHold := func(f func(context.Context, money.Locks, store.Entry) error) func(store.Entry) {
			return func(e store.Entry) {
				ctx, cancel := context.WithTimeout(context.Background(), spoolHoldWait)
				defer cancel()
				if err := f(ctx, locks, e); err != nil {
					a.logger.Warn("a spooled charge's hold could not be kept or dropped now; the next renewal tries again",
						zap.String("request_id", e.RequestID), zap.Error(err))
				}
			}
		}
		b.SetSpoolHooks(spoolHold(money.KeepSpooled), spoolHold(money.DropSpooled))
	}
	if ls, ok := backend.(tools.LinkStore); ok && toolSet.Apps != nil {
		toolSet.Apps.Links = tools.StoredLinks{Store: ls}
	}
	upstreams.SetLimiter(limiter)
	upstreams.SetRefused(func(provider string, err error) {
		a.logger.Warn("provider credentials failed; its calls answer 503", zap.String("provider", provider), zap.Error(err))
	})
	a.gateway = &pipeline.Gateway{Store: st, Catalog: a.catalog, Logger: a.logger, Metrics: metrics, Annotate: annotate, Identify: identify,
		Money: &money.Gate{Store: st, Locks: locks, Policy: a.policy, OnOverrun: a.logOverrun, OnShortfall: a.logShortfall}, Limits: limiter,
		InFlight: memInFlight, MaxInFlight: a.Limits.MaxInFlight,
		BodyRate: bodyrate.Limits{Grace: time.Duration(a.Limits.BodyGrace), MinRate: a.Limits.MinBodyRate}}
	a.router = routes.New(a.gateway, opts)
	opts.Routing.Invoker = a.router
	toolSet.Invoker = a.router
	if toolSet.Apps != nil {
		toolSet.Apps.Gateway = a.gateway
		a.apps = toolSet.Apps
	}
	a.admin = admin.New(st)
	a.alerts = &alerts.Sender{Store: st, Poll: time.Duration(a.Webhooks.Poll), Timeout: time.Duration(a.Webhooks.Timeout),
		RetryMin: time.Duration(a.Webhooks.RetryMin), RetryMax: time.Duration(a.Webhooks.RetryMax), Log: a.logger.Named("webhooks"),
		OnAttempt: func(d store.Delivery) { metrics.WebhookAttempts.WithLabelValues(alerts.Outcome(d)).Inc() }}
	a.alerts.Start()
	a.prev.Store(current.Swap(a))
	// Tuned only once the config serves: a Start that fails leaves the
	// runtime as the running config set it.
	tuneProcess(a)
	return nil
}

// durabilityIntervalMsg is logged at the start of a config in durability
// interval mode.
const durabilityIntervalMsg = "durability interval: answers wait for their charge's write, not its sync; a power cut may lose the last interval's charges"

// markStarted lets the requests waiting for Start go on (to a 503 when
// Start failed).
func (a *App) markStarted() { a.startOnce.Do(func() { close(a.started) }) }

// serving returns the routes once Start has run, or nil when it failed or
// ctx ended first.
func (a *App) serving(ctx context.Context) *routes.Router {
	select {
	case <-a.started:
		return a.router
	case <-ctx.Done():
		return nil
	}
}

// logOverrun records a settlement above its hold: the provider answered
// past the limit the gateway sent, and the account was charged what it
// used.
func (a *App) logOverrun(account, requestID string, held, cost pricing.Money) {
	a.logger.Warn("settlement above its hold", zap.String("account", account), zap.String("request_id", requestID),
		zap.Stringer("held_usd", held), zap.Stringer("cost_usd", cost))
}

// spoolHoldWait bounds how long keeping or dropping a spooled charge's
// hold waits for Redis.
const spoolHoldWait = 2 * time.Second

// logShortfall records a settlement the account could not pay in full:
// it was charged what it had left, and the rest is the operator's loss.
func (a *App) logShortfall(account, requestID string, charged, shortfall pricing.Money) {
	a.logger.Warn("shortfall: the provider billed more than the account could pay", zap.String("account", account),
		zap.String("request_id", requestID), zap.Stringer("charged_usd", charged), zap.Stringer("shortfall_usd", shortfall))
}

// current is the running app, for the admin API (whose modules are
// rebuilt before the apps on every load and get no config of their own).
var current atomic.Pointer[App]

// Stop hands the admin API back. On a reload a newer app has already
// taken it; when Caddy stops this app because the reload that started it
// failed, the app that served before gets it back.
func (a *App) Stop() error {
	if a.alerts != nil {
		a.alerts.Stop()
	}
	if a.stopped != nil {
		a.stopped.Store(true)
	}
	prev := a.prev.Swap(nil)
	switch live := prev != nil && prev.durable != nil && prev.stopped != nil && !prev.stopped.Load(); {
	case !current.CompareAndSwap(a, prev):
		// A config that started since serves.
	case live:
		// A reload that failed after this config started: the config
		// serving again keeps its own durability.
		_ = prev.setDurability(prev.durable)
	default:
		// The process stops: what interval mode wrote and did not yet
		// sync is synced before it exits.
		if s, ok := a.durable.(interface{ Sync() error }); ok {
			if err := s.Sync(); err != nil && a.logger != nil {
				a.logger.Error("syncing the charges at stop", zap.Error(err))
			}
		}
	}
	untuneProcess(a)
	return nil
}

// Cleanup drops the app's references to the store, Redis and the data
// folder's lock once the requests this config is still serving have
// finished; each is closed when no config uses it any more.
func (a *App) Cleanup() error {
	if a.started != nil {
		a.markStarted() // a config cleaned up unstarted serves nothing
	}
	key, rkey, lkey, mkeys := a.storeKey, a.redisKey, a.lockKey, a.mcpKeys
	a.storeKey, a.redisKey, a.lockKey, a.mcpKeys = "", "", "", nil
	if key == "" && rkey == "" && lkey == "" && len(mkeys) == 0 {
		return nil
	}
	go func() {
		<-a.inflight.drained()
		releaseMCP(mkeys)
		if a.apps != nil {
			_ = a.apps.Close()
		}
		if key != "" {
			if _, err := stores.Delete(key); err != nil && a.logger != nil {
				a.logger.Error("closing the store", zap.Error(err))
			}
		}
		if rkey != "" {
			if _, err := sharedPool.Delete(rkey); err != nil && a.logger != nil {
				a.logger.Error("closing Redis", zap.Error(err))
			}
		}
		if lkey != "" {
			if err := unlockDataDir(lkey); err != nil && a.logger != nil {
				a.logger.Error("releasing the data folder", zap.Error(err))
			}
		}
	}()
	return nil
}

// inflight counts a config's requests in flight. Unlike a WaitGroup it
// may be entered while someone waits for it to drain (requests keep
// arriving at an old config for a moment after a reload).
type inflight struct {
	mu      sync.Mutex
	n       int
	closing bool
	idle    chan struct{}
	closed  bool
}

func newInflight() *inflight { return &inflight{idle: make(chan struct{})} }

func (f *inflight) enter() {
	f.mu.Lock()
	f.n++
	f.mu.Unlock()
}

func (f *inflight) leave() {
	f.mu.Lock()
	f.n--
	f.signal()
	f.mu.Unlock()
}

// drained returns a channel closed once no request is in flight.
func (f *inflight) drained() <-chan struct{} {
	f.mu.Lock()
	f.closing = true
	f.signal()
	f.mu.Unlock()
	return f.idle
}

// signal closes idle when draining and empty; f.mu must be held.
func (f *inflight) signal() {
	if f.closing && f.n == 0 && !f.closed {
		f.closed = true
		close(f.idle)
	}
}

// Interface guards
var (
	_ caddy.App          = (*App)(nil)
	_ caddy.Provisioner  = (*App)(nil)
	_ caddy.Validator    = (*App)(nil)
	_ caddy.CleanerUpper = (*App)(nil)
)

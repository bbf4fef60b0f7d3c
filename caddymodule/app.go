package caddymodule

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/caddy-gw/caddy-gw/handlers/audio"
	"github.com/caddy-gw/caddy-gw/handlers/chat"
	"github.com/caddy-gw/caddy-gw/handlers/decide"
	"github.com/caddy-gw/caddy-gw/handlers/fetch"
	"github.com/caddy-gw/caddy-gw/handlers/images"
	"github.com/caddy-gw/caddy-gw/handlers/search"
	"github.com/caddy-gw/caddy-gw/internal/admin"
	"github.com/caddy-gw/caddy-gw/internal/bodyrate"
	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/limits"
	"github.com/caddy-gw/caddy-gw/internal/money"
	"github.com/caddy-gw/caddy-gw/internal/netguard"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/router"
	"github.com/caddy-gw/caddy-gw/internal/routes"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/internal/store/cached"
	"github.com/caddy-gw/caddy-gw/internal/store/postgres"
	"github.com/caddy-gw/caddy-gw/internal/store/sqlite"
	"github.com/caddy-gw/caddy-gw/internal/upstream"
	"github.com/caddy-gw/caddy-gw/mcp"
	"github.com/caddy-gw/caddy-gw/mcp/tools"
	"github.com/caddy-gw/caddy-gw/pricing"
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
	// Search configures web search (POST /v1/search): the provider and
	// model that run it and its prices. Without it search answers 502
	// capability_unavailable.
	Search *SearchConfig `json:"search,omitempty"`
	// Audio sets the configurable parts of transcription and speech (the
	// voices are declared in the speech ability blocks).
	Audio *AudioConfig `json:"audio,omitempty"`
	// Images is the configurable part of image generation and edits.
	Images *ImagesConfig `json:"images,omitempty"`
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
	// FetchTimeout bounds one page read. Default: 25s (the spec's); a
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
	// MCPAllowedHosts are the origins (host or host:port), besides
	// loopback names, from which browsers may call the MCP servers; any
	// other Origin is refused (DNS rebinding protection).
	MCPAllowedHosts []string `json:"mcp_allowed_hosts,omitempty"`

	// Built by Provision from the config alone: the catalogue, the money
	// rules and the routes' handlers (on the process's in-memory state).
	ctx     caddy.Context
	catalog *catalog.Catalog
	policy  money.Policy
	opts    routes.Options

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
	prev     *atomic.Pointer[App]
	admin    *admin.API
	apps     *tools.Apps
	storeKey string
	redisKey string
	lockKey  string
	logger   *zap.Logger
}

// StoreConfig selects the store backend.
type StoreConfig struct {
	// Backend is "sqlite" (the embedded default).
	Backend string `json:"backend,omitempty"`
	// Dir is the folder of the SQLite store. Default: ./data, or
	// {env.GW_DATA_DIR} when set.
	Dir string `json:"dir,omitempty"`
	// DatabaseURL, when not empty after placeholders are expanded
	// ({env.GW_DATABASE_URL}), is a postgres:// URL: accounts, keys, the
	// ledger and every durable record live in PostgreSQL, shared by every
	// node that names it; Dir then holds only the node's charge spool
	// (charges the database could not take yet), so each node needs a
	// Dir of its own. It is never logged.
	DatabaseURL string `json:"database_url,omitempty"`
}

// MoneyConfig is the configurable part of the money rules.
type MoneyConfig struct {
	// FreeMonthlyCredit is given to every account each UTC month and spent
	// before a prepaid balance, in US dollars. Default: 0.
	FreeMonthlyCredit pricing.Money `json:"free_monthly_credit_usd,omitempty"`
	// Ceiling is a paid account's monthly spend ceiling. Default: base
	// 100 USD, plus 50 USD per whole month of account age, plus 50 % of its
	// lifetime cleared spend, at most 10,000 USD.
	Ceiling *CeilingConfig `json:"ceiling,omitempty"`
}

// CeilingConfig sets the account ceiling's rule:
// base + per_month × months of age + spend_percent % of cleared spend, at
// most max. A base of 0 switches the ceiling off.
type CeilingConfig struct {
	// Base is the ceiling of a new account, in US dollars.
	Base pricing.Money `json:"base_usd"`
	// PerMonth is added for every whole month of account age.
	PerMonth pricing.Money `json:"per_month_usd,omitempty"`
	// SpendPercent of the lifetime cleared spend is added.
	SpendPercent int64 `json:"spend_percent,omitempty"`
	// Max bounds the ceiling; 0 means unbounded.
	Max pricing.Money `json:"max_usd,omitempty"`
}

// Names of the configurable per-minute budgets.
const (
	ChatBudgetName        = "chat_requests"
	DecideBudgetName      = "decide_requests"
	CountTokensBudgetName = "count_tokens"
	// MCPBudgetName is the budget both MCP servers draw from, and the name
	// their calls in flight are counted under.
	MCPBudgetName = "mcp_requests"
)

// LimitsConfig sets the configurable rate limits. The spec's shared
// budgets of the abilities are fixed.
type LimitsConfig struct {
	// ChatRequestsPerMinute bounds each account's chat calls (chat
	// completions, responses, messages). 0 means no limit.
	ChatRequestsPerMinute int64 `json:"chat_requests_per_minute,omitempty"`
	// DecideRequestsPerMinute bounds each account's decision-mode calls
	// (429 rate_limit_exceeded beyond it). 0 means no limit.
	DecideRequestsPerMinute int64 `json:"decide_requests_per_minute,omitempty"`
	// CountTokensPerMinute bounds each account's count_tokens calls (429
	// beyond it; they are not billed). Default: 600.
	CountTokensPerMinute int64 `json:"count_tokens_per_minute,omitempty"`
	// MaxInFlight bounds each account's billed calls in flight at once
	// (429 beyond it). Default: 32.
	MaxInFlight int `json:"max_in_flight,omitempty"`
	// MCPRequestsPerMinute bounds each account's requests to the two MCP
	// servers together (429 with -32003 beyond it). Default: 600.
	MCPRequestsPerMinute int64 `json:"mcp_requests_per_minute,omitempty"`
	// MCPMaxInFlight bounds each account's requests to the two MCP
	// servers in flight at once, counted apart from billed calls (429
	// with -32003 beyond it). Default: 16.
	MCPMaxInFlight int `json:"mcp_max_in_flight,omitempty"`
	// MinBodyRate is the least average rate, in bytes a second, at which
	// a client must send a request body (JSON or an upload) once BodyGrace
	// has passed; a slower body is answered 408 request_timeout and its
	// connection closed. Default: 1024.
	MinBodyRate int64 `json:"min_body_rate,omitempty"`
	// BodyGrace is how long a request body may take before MinBodyRate
	// counts. Default: 10s.
	BodyGrace caddy.Duration `json:"body_grace,omitempty"`
}

// Defaults of the configurable limits.
const (
	// DefaultCountTokensPerMinute is each account's count_tokens budget.
	DefaultCountTokensPerMinute = 600
	// DefaultMCPRequestsPerMinute is each account's budget of requests to
	// the MCP servers: ten a second, well above what an agent's tool
	// calls need, so that one account cannot flood them.
	DefaultMCPRequestsPerMinute = 600
	// DefaultMCPMaxInFlight is how many MCP requests of one account may be
	// open at once (each tools/call is held open while its tool runs).
	DefaultMCPMaxInFlight = 16
)

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "gw", New: func() caddy.Module { return new(App) }}
}

// metrics are created once per process; each config registers them.
var metrics = pipeline.NewMetrics()

// memLocks and memLimits are the single-node reservations and rate
// counters. They belong to the process, not to a config, so a reload keeps
// every outstanding reservation and every account's used budget.
var (
	memLocks    = money.NewMemoryLocks()
	memLimits   = limits.NewMemory(nil)
	memInFlight = limits.NewInFlight()
	// health, decisions and upstreams are process-wide too: a reload keeps
	// which models are cooling down, the decisions flux_explain reads, and
	// the upstream connection pools.
	health = router.NewHealth()
	// mcpSessions are the routing server's sessions, paidToolStates the
	// tools server's paid-tool listing states and appLinks the accounts'
	// app links: a reload keeps them.
	mcpSessions    = mcp.NewMemorySessions(nil)
	paidToolStates = tools.NewMemoryStates()
	appLinks       = tools.NewMemoryLinks()
	decisions      = router.NewDecisions()
	upstreams      = upstream.New()
)

// stores keeps store backends open across config reloads: a reload
// provisions the new config (taking a reference) before the old one is
// cleaned up (dropping its own), so the store is never closed under a
// request of either.
var stores = caddy.NewUsagePool()

type pooledStore struct{ store.Store }

func (p pooledStore) Destruct() error { return p.Close() }

// Default store backend and folder.
const (
	DefaultStoreBackend = "sqlite"
	DefaultDataDir      = "./data"
	// SpoolDir is the folder, in the data folder, of a node's charges
	// that the shared database could not take yet.
	SpoolDir = "spool"
)

// Provision builds the app from its configuration: placeholders expanded,
// the catalogue, the money rules and the routes' handlers. It opens
// nothing and writes nothing (`caddy validate` runs it); Start does.
func (a *App) Provision(ctx caddy.Context) error {
	a.ctx = ctx
	a.logger = ctx.Logger()
	a.inflight = newInflight()
	a.prev = new(atomic.Pointer[App])
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
	}
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
	cat, err := catalog.New(providers, a.Models, a.Abilities, a.Aliases, a.DecideModel)
	if err != nil {
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
	chatHandler := &chat.Handler{Router: &router.Router{Catalog: cat, Health: health}, Upstream: upstreams, Decisions: decisions,
		Opinions: chat.NewOpinions(a.SecondOpinionConcurrency), Betas: chat.DefaultBetas(a.Betas)}
	if a.CacheTTL > 0 {
		chatHandler.Cache = chat.NewCache(time.Duration(a.CacheTTL), 0)
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
	opts := routes.Options{AltPrefix: a.AltPrefix, Chat: chatHandler, Decide: &decide.Handler{Upstream: upstreams}, Routing: routing,
		Tools: &mcp.ToolsServer{Tools: toolSet, AllowedHosts: a.MCPAllowedHosts}, Search: searchH, Fetch: a.fetchHandler()}
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
	tuneProcess(a.logger)
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
	var (
		locks   money.Locks    = memLocks
		limiter limits.Limiter = memLimits
	)
	opts := a.opts
	toolSet := opts.Tools.Tools
	if sh != nil {
		locks, limiter = sh.locks, sh.limits
		records := &router.RedisDecisions{Client: sh.cache}
		opts.Chat.Decisions, opts.Routing.Decisions, opts.Routing.Sessions = records, records, sh.sessions
		toolSet.States = &tools.RedisStates{Client: sh.cache}
		opts.Fetch.Shared = sh.cache
		if a.CacheTTL > 0 {
			opts.Chat.Cache = chat.NewSharedCache(time.Duration(a.CacheTTL), sh.cache)
		}
	}
	backend := store.Store(st)
	if b, ok := st.(*cached.Batched); ok {
		backend = b.Unwrap()
	}
	if ls, ok := backend.(tools.LinkStore); ok && toolSet.Apps != nil {
		toolSet.Apps.Links = tools.StoredLinks{Store: ls}
	}
	a.gateway = &pipeline.Gateway{Store: st, Catalog: a.catalog, Logger: a.logger, Metrics: metrics, Annotate: annotate,
		Money: &money.Gate{Store: st, Locks: locks, Policy: a.policy, OnOverrun: a.logOverrun}, Limits: limiter,
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
	a.prev.Store(current.Swap(a))
	return nil
}

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

func (a *App) openStore() (store.Store, error) {
	if url := a.Store.DatabaseURL; url != "" {
		spoolDir, err := filepath.Abs(filepath.Join(a.Store.Dir, SpoolDir))
		if err != nil {
			return nil, err
		}
		// The pool's name hides the URL (it may hold a password).
		a.storeKey = "postgres:" + secretName(url)
		v, _, err := stores.LoadOrNew(a.storeKey, func() (caddy.Destructor, error) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			db, err := postgres.Open(ctx, url)
			if err != nil {
				return nil, err
			}
			// Concurrent charges share a transaction (group commit); those
			// the database cannot take now wait in the node's spool.
			b, err := cached.NewSpooled(db, spoolDir)
			if err != nil {
				db.Close()
				return nil, err
			}
			b.OnError = func(err error) { caddy.Log().Named("gw").Error("charge spool", zap.Error(err)) }
			b.ObserveCommits(metrics.ObserveCommit)
			return pooledStore{b}, nil
		})
		if err != nil {
			a.storeKey = ""
			return nil, fmt.Errorf("opening the PostgreSQL store: %w", err)
		}
		return v.(pooledStore).Store, nil
	}
	switch a.Store.Backend {
	case "sqlite":
		dir, err := filepath.Abs(a.Store.Dir)
		if err != nil {
			return nil, err
		}
		a.storeKey = "sqlite:" + dir
		v, _, err := stores.LoadOrNew(a.storeKey, func() (caddy.Destructor, error) {
			db, err := sqlite.Open(dir)
			if err != nil {
				return nil, err
			}
			// Only this process writes the embedded store: keys, accounts
			// and totals are kept in memory, charges made durable in a
			// group-committed charge log beside it.
			c, err := cached.New(db, dir)
			if err != nil {
				db.Close()
				return nil, err
			}
			c.OnError = func(err error) { a.logger.Error("charge log", zap.Error(err)) }
			c.ObserveCommits(metrics.ObserveCommit)
			if why := c.SyncsPlain(); why != nil {
				raiseProcs(a.logger, why.Error())
			}
			// The store outlives this config: what it hears later goes
			// to Caddy's own logger.
			c.OnSyncsPlain(func(why error) { raiseProcs(caddy.Log().Named("gw"), why.Error()) })
			return pooledStore{c}, nil
		})
		if err != nil {
			a.storeKey = ""
			return nil, fmt.Errorf("opening store in %s: %w", dir, err)
		}
		return v.(pooledStore).Store, nil
	}
	return nil, fmt.Errorf("store backend %q: unknown (want sqlite)", a.Store.Backend)
}

// secretName is a stable name for a URL that may hold a password.
func secretName(url string) string {
	sum := sha256.Sum256([]byte(url))
	return hex.EncodeToString(sum[:8])
}

// shared is what several nodes keep in Redis: rate budgets, money holds
// and locks in client; routing-server sessions and the caches in cache
// (client itself unless redis_cache_url names another). One per pair of
// Redis URLs and process, kept across reloads.
type shared struct {
	client   *redis.Client
	cache    *redis.Client
	limits   *limits.Redis
	locks    *money.RedisLocks
	sessions *mcp.RedisSessions
}

func (s *shared) Destruct() error {
	_ = s.locks.Destruct()
	if s.cache != s.client {
		_ = s.cache.Close()
	}
	return s.client.Close()
}

var sharedPool = caddy.NewUsagePool()

// openShared connects to the Redis of RedisURL, and to RedisCacheURL's
// when it names one (nil when RedisURL is empty).
func (a *App) openShared() (*shared, error) {
	url, cacheURL := a.RedisURL, a.RedisCacheURL
	if url == "" {
		if cacheURL != "" {
			return nil, errors.New("redis_cache_url needs redis_url")
		}
		return nil, nil
	}
	a.redisKey = "redis:" + secretName(url+"\x00"+cacheURL)
	v, _, err := sharedPool.LoadOrNew(a.redisKey, func() (caddy.Destructor, error) {
		opt, err := redisOptions(url)
		if err != nil {
			return nil, err
		}
		cacheOpt := opt
		if cacheURL != "" {
			if cacheOpt, err = redisOptions(cacheURL); err != nil {
				return nil, fmt.Errorf("redis_cache_url: %w", err)
			}
		}
		c := redis.NewClient(opt)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		locks, err := money.NewRedisLocks(ctx, c)
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("redis: %w", err)
		}
		cache := c
		if cacheOpt != opt {
			cache = redis.NewClient(cacheOpt)
			if err := cache.Ping(ctx).Err(); err != nil {
				_ = locks.Destruct()
				cache.Close()
				c.Close()
				return nil, fmt.Errorf("the cache Redis: %w", err)
			}
		}
		return &shared{client: c, cache: cache, limits: &limits.Redis{Client: c}, locks: locks, sessions: &mcp.RedisSessions{Client: cache}}, nil
	})
	if err != nil {
		a.redisKey = ""
		return nil, fmt.Errorf("opening Redis: %w", err)
	}
	return v.(*shared), nil
}

// redisOptions reads a redis:// (or unix://) URL, never repeating it in
// an error (it may hold a password).
func redisOptions(url string) (*redis.Options, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, errors.New("the Redis URL could not be parsed")
	}
	return opt, nil
}

// BootstrapAccount is the account GW_BOOTSTRAP_KEY's key belongs to.
const BootstrapAccount = "default"

// SearchConfig is web search's provider, model and prices.
type SearchConfig struct {
	// Provider names the responses-style provider with a web search tool.
	Provider string `json:"provider"`
	// Model is the provider's model that runs the search. Default:
	// gpt-4.1-mini.
	Model string `json:"model,omitempty"`
	// PricePerSearchMicrocents is the plan price of one web search, in
	// millionths of a USD. Default: 25,000 (0.025 USD).
	PricePerSearchMicrocents int64 `json:"price_per_search_microcents,omitempty"`
	// InputPrice and OutputPrice are plan prices in USD per million
	// tokens. Default: 0.40 and 1.60.
	InputPrice  *pricing.Money `json:"input_price_usd_per_m,omitempty"`
	OutputPrice *pricing.Money `json:"output_price_usd_per_m,omitempty"`
}

// ProviderConfig is an upstream API in the gw app's config: the
// catalogue's provider, with its time-outs as Caddy durations ("10s" or
// nanoseconds), so that no package below caddymodule needs Caddy.
type ProviderConfig struct {
	catalog.Provider
	// DialTimeout bounds connecting to the provider. Default: 10s.
	DialTimeout caddy.Duration `json:"dial_timeout,omitempty"`
	// HeaderTimeout bounds the wait for the response headers (the first
	// byte of an answer). Default: 120s.
	HeaderTimeout caddy.Duration `json:"header_timeout,omitempty"`
	// IdleTimeout bounds the gap between two chunks of a streamed answer.
	// Default: 60s.
	IdleTimeout caddy.Duration `json:"idle_timeout,omitempty"`
}

// catalogProviders returns the providers as the catalogue takes them.
func (a *App) catalogProviders() []catalog.Provider {
	out := make([]catalog.Provider, len(a.Providers))
	for i, pc := range a.Providers {
		out[i] = pc.Provider
		out[i].DialTimeout, out[i].HeaderTimeout, out[i].IdleTimeout = time.Duration(pc.DialTimeout), time.Duration(pc.HeaderTimeout), time.Duration(pc.IdleTimeout)
	}
	return out
}

// AudioConfig is the configurable part of transcription and speech.
type AudioConfig struct {
	// AccurateUpTo is the clip length up to which gw-voice picks
	// gw-voice-accurate; longer clips go to gw-voice-fast. Default: 5m.
	AccurateUpTo caddy.Duration `json:"accurate_up_to,omitempty"`
	// VerboseModel is the provider model that answers verbose_json (the
	// provider's newer transcription models answer only json and text).
	// Default: whisper-1.
	VerboseModel string `json:"verbose_model,omitempty"`
	// TranscriptionTimeout bounds a transcription. Default: 60s (the
	// spec's); a shorter one serves tests.
	TranscriptionTimeout caddy.Duration `json:"transcription_timeout,omitempty"`
	// FirstAudioTimeout bounds the wait for speech's first audio byte.
	// Default: 30s (the spec's).
	FirstAudioTimeout caddy.Duration `json:"first_audio_timeout,omitempty"`
	// GapTimeout bounds a gap between two chunks of speech audio; a longer
	// one ends the stream. Default: 30s (the spec's).
	GapTimeout caddy.Duration `json:"gap_timeout,omitempty"`
}

// ImagesConfig is the configurable part of image generation and edits.
type ImagesConfig struct {
	// GenerateTimeout bounds a generation. Default: 60s (the spec's).
	GenerateTimeout caddy.Duration `json:"generate_timeout,omitempty"`
	// EditTimeout bounds an edit. Default: 90s (the spec's).
	EditTimeout caddy.Duration `json:"edit_timeout,omitempty"`
}

// imagesHandler builds image generation and edits.
func (a *App) imagesHandler(cat *catalog.Catalog) (*images.Handler, error) {
	var cfg images.Config
	if c := a.Images; c != nil {
		cfg = images.Config{GenerateTimeout: time.Duration(c.GenerateTimeout), EditTimeout: time.Duration(c.EditTimeout)}
	}
	return images.New(upstreams, cat, cfg)
}

// audioHandler builds transcription, speech and the voice list.
func (a *App) audioHandler(cat *catalog.Catalog) (*audio.Handler, error) {
	var cfg audio.Config
	if c := a.Audio; c != nil {
		cfg = audio.Config{AccurateUpTo: time.Duration(c.AccurateUpTo), VerboseModel: c.VerboseModel,
			TranscriptionTimeout: time.Duration(c.TranscriptionTimeout), FirstAudioTimeout: time.Duration(c.FirstAudioTimeout),
			GapTimeout: time.Duration(c.GapTimeout)}
	}
	return audio.New(upstreams, cat, cfg)
}

// Search defaults.
const (
	DefaultSearchModel                    = "gpt-4.1-mini"
	DefaultSearchPricePerSearchMicrocents = 25_000
)

// searchHandler builds web search from its config (nil: not configured).
func (a *App) searchHandler(cat *catalog.Catalog) (*search.Handler, error) {
	if a.Search == nil {
		return &search.Handler{Upstream: upstreams}, nil
	}
	p := cat.Providers[a.Search.Provider]
	if p == nil {
		return nil, fmt.Errorf("search: provider %q is not defined", a.Search.Provider)
	}
	h := &search.Handler{Upstream: upstreams, Provider: p, Model: a.Search.Model,
		PerSearch: pricing.Micro(a.Search.PricePerSearchMicrocents), InputPrice: pricing.Micro(400_000), OutputPrice: pricing.Micro(1_600_000)}
	if h.Model == "" {
		h.Model = DefaultSearchModel
	}
	if a.Search.PricePerSearchMicrocents <= 0 {
		h.PerSearch = pricing.Micro(DefaultSearchPricePerSearchMicrocents)
	}
	if a.Search.InputPrice != nil {
		h.InputPrice = *a.Search.InputPrice
	}
	if a.Search.OutputPrice != nil {
		h.OutputPrice = *a.Search.OutputPrice
	}
	return h, nil
}

// Page reading defaults.
const (
	DefaultFetchPriceMicrocents       = 2_000
	DefaultFetchRenderPriceMicrocents = 5_000
)

// fetchHandler builds page reading: its guard's allow list and prices.
func (a *App) fetchHandler() *fetch.Handler {
	allow := expandList(a.FetchAllow)
	price, render := a.FetchPriceMicrocents, a.FetchRenderPriceMicrocents
	if price <= 0 {
		price = DefaultFetchPriceMicrocents
	}
	if render <= 0 {
		render = DefaultFetchRenderPriceMicrocents
	}
	return &fetch.Handler{Guard: netguard.New(allow), Price: pricing.Micro(price), RenderPrice: pricing.Micro(render),
		Timeout: time.Duration(a.FetchTimeout)}
}

// AudioFetchTimeout bounds downloading transcribe's audio_url.
const AudioFetchTimeout = 30 * time.Second

// fetchAudio downloads transcribe's audio_url through the address guard of
// page reading, at most limit bytes.
func fetchAudio(g *netguard.Guard) func(ctx context.Context, url string, limit int64) ([]byte, error) {
	client := g.Client(AudioFetchTimeout)
	return func(ctx context.Context, raw string, limit int64) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
		if err != nil {
			return nil, gwerr.New(gwerr.Invalid, "audio_url cannot be read").WithParam("audio_url")
		}
		if err := netguard.CheckURL(req.URL); err != nil {
			return nil, gwerr.New(gwerr.Invalid, "%s", err.Error()).WithParam("audio_url")
		}
		resp, err := client.Do(req)
		if err != nil {
			if errors.Is(err, netguard.ErrBlocked) {
				return nil, gwerr.New(gwerr.Invalid, "audio_url: a private or non-public address is refused").WithParam("audio_url")
			}
			return nil, gwerr.New(gwerr.Upstream, "the audio could not be downloaded")
		}
		defer resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return nil, gwerr.New(gwerr.Upstream, "the audio could not be downloaded (%d)", resp.StatusCode)
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
		if err != nil {
			return nil, gwerr.New(gwerr.Upstream, "the audio download broke off")
		}
		if int64(len(b)) > limit {
			return nil, gwerr.New(gwerr.TooLarge, "audio is larger than 8 MB").WithParam("audio_url")
		}
		return b, nil
	}
}

// DefaultAppActionPriceMicrocents is an app action's price when the config
// names none.
const DefaultAppActionPriceMicrocents = 1000

// toolSet builds the tools server's tools: advisory prices from the
// catalogue and the page reading and search prices, the connected apps of
// a.Apps.
func (a *App) toolSet(cat *catalog.Catalog) (*tools.Server, error) {
	fetchH := a.fetchHandler()
	guard := fetchH.Guard
	// Page reading and search are priced outside the catalogue's aliases.
	other := map[string]int64{"fetch": fetchH.Price.Microcents()}
	if searchH, err := a.searchHandler(cat); err == nil && searchH.Provider != nil {
		other["search"] = searchH.PerSearch.Microcents()
	}
	upgrade := strings.TrimSpace(caddy.NewReplacer().ReplaceAll(a.BillingURL, ""))
	if u, err := url.Parse(upgrade); upgrade != "" && (err != nil || u.Scheme != "https" && u.Scheme != "http" || u.Host == "") {
		return nil, fmt.Errorf("billing_url: %q is not an http or https URL", upgrade)
	}
	s := &tools.Server{States: paidToolStates, UpgradeURL: upgrade, Fetch: fetchAudio(guard),
		Prices: func(alias string) (int64, bool) {
			if ab := cat.Abilities[alias]; ab != nil && ab.PriceMicrocents != nil {
				return *ab.PriceMicrocents, true
			}
			p, ok := other[alias]
			return p, ok
		}}
	appsList := expandList(a.Apps)
	if len(appsList) == 0 {
		return s, nil
	}
	price := a.AppActionPriceMicrocents
	if price <= 0 {
		price = DefaultAppActionPriceMicrocents
	}
	var list []tools.App
	for _, item := range appsList {
		name, url, ok := strings.Cut(item, "=")
		if !ok || name == "" || !strings.HasPrefix(url, "http") {
			return nil, fmt.Errorf("apps: %q is not name=url", item)
		}
		list = append(list, tools.App{Name: name, URL: url, PriceMicrocents: price})
	}
	s.Apps = &tools.Apps{List: list, Links: appLinks}
	return s, nil
}

// logOverrun records a settlement above its hold: the provider answered
// past the limit the gateway sent, and the account was charged what it
// used.
func (a *App) logOverrun(account, requestID string, held, cost pricing.Money) {
	a.logger.Warn("settlement above its hold", zap.String("account", account), zap.String("request_id", requestID),
		zap.Stringer("held_usd", held), zap.Stringer("cost_usd", cost))
}

// MinBootstrapKeyChars is how many characters a bootstrap key must have
// after its "sk-" prefix, and minBootstrapDistinct how many different
// ones: a short or patterned key is guessable, and it opens a paid account.
const (
	MinBootstrapKeyChars = 32
	minBootstrapDistinct = 10
)

// bootstrapPrefix starts every key (spec "Authentication" 1).
const bootstrapPrefix = "sk-"

// checkBootstrapKey refuses a weak bootstrap key (never repeating it).
func checkBootstrapKey(secret string) error {
	rest, ok := strings.CutPrefix(secret, bootstrapPrefix)
	distinct := map[rune]bool{}
	for _, r := range rest {
		distinct[r] = true
	}
	if !ok || len(rest) < MinBootstrapKeyChars || len(distinct) < minBootstrapDistinct {
		return fmt.Errorf("the bootstrap key must be %q followed by at least %d random characters", bootstrapPrefix, MinBootstrapKeyChars)
	}
	return nil
}

// ensureBootstrap makes sure account "default" (paid, cleared) exists and
// holds the key secret. The key is created once: a bootstrap key revoked
// through the admin API stays revoked across restarts and reloads.
func ensureBootstrap(ctx context.Context, st store.Store, secret string) error {
	err := st.CreateAccount(ctx, store.Account{ID: BootstrapAccount, Plan: store.PlanPaid, Cleared: true, CreatedAt: time.Now().UTC()})
	if err != nil && !errors.Is(err, store.ErrExists) {
		return err
	}
	if issued, err := st.KeyIssued(ctx, store.HashSecret(secret)); err != nil || issued {
		return err
	}
	err = st.CreateKey(ctx, store.Key{ID: store.NewID("key"), AccountID: BootstrapAccount, Name: "bootstrap", Hash: store.HashSecret(secret), CreatedAt: time.Now().UTC()})
	if errors.Is(err, store.ErrExists) {
		return nil // another node made it first
	}
	return err
}

// current is the running app, for the admin API (whose modules are
// rebuilt before the apps on every load and get no config of their own).
var current atomic.Pointer[App]

// Stop hands the admin API back. On a reload a newer app has already
// taken it; when Caddy stops this app because the reload that started it
// failed, the app that served before gets it back.
func (a *App) Stop() error {
	current.CompareAndSwap(a, a.prev.Swap(nil))
	return nil
}

// Cleanup drops the app's references to the store, Redis and the data
// folder's lock once the requests this config is still serving have
// finished; each is closed when no config uses it any more.
func (a *App) Cleanup() error {
	if a.started != nil {
		a.markStarted() // a config cleaned up unstarted serves nothing
	}
	key, rkey, lkey := a.storeKey, a.redisKey, a.lockKey
	a.storeKey, a.redisKey, a.lockKey = "", "", ""
	if key == "" && rkey == "" && lkey == "" {
		return nil
	}
	go func() {
		<-a.inflight.drained()
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

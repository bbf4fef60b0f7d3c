package caddymodule

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/caddy-gw/caddy-gw/internal/lanes"
	"github.com/caddy-gw/caddy-gw/internal/limits"
	"github.com/caddy-gw/caddy-gw/internal/money"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/internal/store/cached"
	"github.com/caddy-gw/caddy-gw/internal/store/postgres"
	"github.com/caddy-gw/caddy-gw/internal/upstream"
	"github.com/caddy-gw/caddy-gw/mcp"
	"github.com/caddy-gw/caddy-gw/mcp/tools"
)

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
	health = lanes.NewHealth()
	// mcpSessions are the routing server's sessions, paidToolStates the
	// tools server's paid-tool listing states and appLinks the accounts'
	// app links: a reload keeps them.
	mcpSessions    = mcp.NewMemorySessions(nil)
	paidToolStates = tools.NewMemoryStates()
	appLinks       = tools.NewMemoryLinks()
	decisions      = lanes.NewDecisions()
	upstreams      = upstream.New()
)

// stores keeps store backends open across config reloads: a reload
// provisions the new config (taking a reference) before the old one is
// cleaned up (dropping its own), so the store is never closed under a
// request of either.
var stores = caddy.NewUsagePool()

type pooledStore struct{ store.Store }

func (p pooledStore) Destruct() error { return p.Close() }

// syncSetter is a store whose charges' durability the config sets (the
// embedded store's charge log, a node's spool).
type syncSetter interface {
	SetSyncInterval(time.Duration) error
}

// setDurability gives st, which outlives configs, this config's
// durability: a reload that changes it changes the pooled store's.
func (a *App) setDurability(st store.Store) error {
	if s, ok := st.(syncSetter); ok {
		return s.SetSyncInterval(a.syncInterval)
	}
	return nil
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
			// Only this process writes the embedded store: keys, accounts
			// and totals are kept in memory, charges made durable in a
			// group-committed charge log beside it.
			c, err := cached.Open(dir)
			if err != nil {
				return nil, err
			}
			c.OnError = func(err error) { a.logger.Error("charge log", zap.Error(err)) }
			c.ObserveCommits(metrics.ObserveCommit)
			if why := c.SyncsPlain(); why != nil {
				warnSyncsPlain(a.logger, why)
			}
			// The store outlives this config: what it hears later goes
			// to Caddy's own logger.
			c.OnSyncsPlain(func(why error) { warnSyncsPlain(caddy.Log().Named("gw"), why) })
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

package caddymodule

import (
	"fmt"
	"slices"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/store/cached"
	"github.com/caddy-gw/caddy-gw/pricing"
)

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

// DurabilityConfig says when a billed answer may complete, against its
// charge reaching the disk: the embedded store's charge log, or with
// several nodes the node's spool (PostgreSQL's commits are as durable as
// its own settings make them).
type DurabilityConfig struct {
	// Mode is "sync" (the default): an answer completes once its charge
	// is synced to disk; or "interval": once the charge is written (a
	// killed process loses nothing), synced within Interval by one
	// background syncer, so a power cut loses at most the last Interval's
	// charges (never charging one twice).
	Mode string `json:"mode,omitempty"`
	// Interval is how long, in mode interval, a written charge may wait
	// for its sync: more than 0, at most 1s (cached.MaxSyncInterval).
	Interval caddy.Duration `json:"interval,omitempty"`
}

// Durability modes.
const (
	DurabilitySync     = "sync"
	DurabilityInterval = "interval"
)

// syncInterval is how long a written charge may wait for its sync: 0 in
// mode sync. It refuses a mode it does not know and an interval out of
// bounds.
func (d DurabilityConfig) syncInterval() (time.Duration, error) {
	switch d.Mode {
	case "", DurabilitySync:
		if d.Interval != 0 {
			return 0, fmt.Errorf("durability sync: takes no interval (got %s)", time.Duration(d.Interval))
		}
		return 0, nil
	case DurabilityInterval:
		iv := time.Duration(d.Interval)
		if iv <= 0 || iv > cached.MaxSyncInterval {
			return 0, fmt.Errorf("durability interval: want a duration greater than 0 and at most %s, got %s", cached.MaxSyncInterval, iv)
		}
		return iv, nil
	}
	return 0, fmt.Errorf("durability: mode %q: want %s or %s", d.Mode, DurabilitySync, DurabilityInterval)
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

// WebhooksConfig tunes how alert events reach their webhooks.
type WebhooksConfig struct {
	// Poll is how often the outbox is read for deliveries due. Default:
	// 1s.
	Poll caddy.Duration `json:"poll,omitempty"`
	// Timeout bounds one attempt: a receiver that has not answered by
	// then is tried again later. Default: 10s.
	Timeout caddy.Duration `json:"timeout,omitempty"`
	// RetryMin is the wait after a first failed attempt, doubled after
	// each further one up to RetryMax. Defaults: 1s and 10m.
	RetryMin caddy.Duration `json:"retry_min,omitempty"`
	RetryMax caddy.Duration `json:"retry_max,omitempty"`
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
	// CountTokensBytesBudgetName is the budget of body bytes each key's
	// count_tokens calls take from.
	CountTokensBytesBudgetName = "count_tokens_bytes"
	// MCPBudgetName is the budget both MCP servers draw from, and the name
	// their calls in flight are counted under.
	MCPBudgetName = "mcp_requests"
)

// LimitsConfig sets the configurable rate limits. The abilities' shared
// budgets (internal/limits) are fixed.
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
	// CountTokensBytesPerMinute bounds the bytes of count_tokens bodies
	// each key sends a minute, the length of a body taken before it is
	// counted (429 beyond it; a larger body than the whole budget is
	// 413). Counting costs CPU by the byte. Default: 64 MiB.
	CountTokensBytesPerMinute int64 `json:"count_tokens_bytes_per_minute,omitempty"`
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
	// DefaultCountTokensBytesPerMinute is each key's budget of
	// count_tokens body bytes a minute (docs/benchmarks.md gives what the
	// tokenizer spends on them).
	DefaultCountTokensBytesPerMinute = 64 << 20
	// DefaultMCPRequestsPerMinute is each account's budget of requests to
	// the MCP servers: ten a second, well above what an agent's tool
	// calls need, so that one account cannot flood them.
	DefaultMCPRequestsPerMinute = 600
	// DefaultMCPMaxInFlight is how many MCP requests of one account may be
	// open at once (each tools/call is held open while its tool runs).
	DefaultMCPMaxInFlight = 16
)

// Default store backend and folder.
const (
	DefaultStoreBackend = "sqlite"
	DefaultDataDir      = "./data"
	// SpoolDir is the folder, in the data folder, of a node's charges
	// that the shared database could not take yet.
	SpoolDir = "spool"
)

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
	// Cooldown is how long a deployment that failed rests before calls go
	// to it again (a 429 or 529 with Retry-After rests it that long).
	// Default: 30s.
	Cooldown caddy.Duration `json:"cooldown,omitempty"`
}

// catalogProviders returns the providers as the catalogue takes them.
func (a *App) catalogProviders() []catalog.Provider {
	out := make([]catalog.Provider, len(a.Providers))
	for i, pc := range a.Providers {
		out[i] = pc.Provider
		out[i].DialTimeout, out[i].HeaderTimeout, out[i].IdleTimeout = time.Duration(pc.DialTimeout), time.Duration(pc.HeaderTimeout), time.Duration(pc.IdleTimeout)
		out[i].Cooldown = time.Duration(pc.Cooldown)
		out[i].Deployments = slices.Clone(pc.Deployments)
	}
	return out
}

// withCredentials leaves out the cloud providers whose credentials are
// absent (an environment that names no key), with their models, logging
// each: a config can name every cloud and serve the ones it has keys for.
func (a *App) withCredentials(providers []catalog.Provider) ([]catalog.Provider, []catalog.Model) {
	left := map[string]bool{}
	kept := providers[:0]
	for _, p := range providers {
		if p.HasCredentials() {
			kept = append(kept, p)
			continue
		}
		left[p.Name] = true
		a.logger.Info("provider left out: its credentials are not set", zap.String("provider", p.Name), zap.String("format", p.Format))
	}
	if len(left) == 0 {
		return kept, a.Models
	}
	var models []catalog.Model
	for _, m := range a.Models {
		if !left[m.Provider] {
			models = append(models, m)
		}
	}
	return kept, models
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
	// TranscriptionTimeout bounds a transcription. Default: 60s
	// (docs/abilities.md); a shorter one serves tests.
	TranscriptionTimeout caddy.Duration `json:"transcription_timeout,omitempty"`
	// FirstAudioTimeout bounds the wait for speech's first audio byte.
	// Default: 30s (docs/abilities.md).
	FirstAudioTimeout caddy.Duration `json:"first_audio_timeout,omitempty"`
	// GapTimeout bounds a gap between two chunks of speech audio; a longer
	// one ends the stream. Default: 30s (docs/abilities.md).
	GapTimeout caddy.Duration `json:"gap_timeout,omitempty"`
}

// ImagesConfig is the configurable part of image generation and edits.
type ImagesConfig struct {
	// GenerateTimeout bounds a generation. Default: 60s (docs/abilities.md).
	GenerateTimeout caddy.Duration `json:"generate_timeout,omitempty"`
	// EditTimeout bounds an edit. Default: 90s (docs/abilities.md).
	EditTimeout caddy.Duration `json:"edit_timeout,omitempty"`
}

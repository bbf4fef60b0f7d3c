package chat

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/lanes"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// BetaPrice is what a beta does to the price of a call that carries it.
type BetaPrice struct {
	// Refused marks a beta whose price the gateway does not bill: a call
	// carrying it to a messages-style model is refused.
	Refused bool `json:"refused,omitempty"`
	// InputPercent and OutputPercent are the percentages of the model's
	// list input and output prices a call carrying the beta is billed at
	// (cached and cache-write input follow the input percentage); 0 means
	// 100, a price-neutral beta.
	InputPercent  int64 `json:"input_percent,omitempty"`
	OutputPercent int64 `json:"output_percent,omitempty"`
}

// percent is a percentage as the table gives it: 0 is 100.
func percent(p int64) int64 {
	if p == 0 {
		return 100
	}
	return p
}

// Betas is the table of the betas the gateway forwards to messages-style
// models, by name. A beta outside it is refused.
type Betas map[string]BetaPrice

// neutral marks a price-neutral beta, refused one whose price the gateway
// does not bill.
var (
	neutral = BetaPrice{}
	refused = BetaPrice{Refused: true}
)

// defaultBetas are the betas the official SDKs, the Vercel AI SDK and
// LangChain send on their own, and a few more clients name. Those that
// turn on a priced feature (server tools, connectors, containers, a longer
// context or cache at a premium, a fallback to another model) are refused:
// the catalogue prices tokens only, and the features are refused in the
// body as well. Fast mode is billed at six times the standard rates, as
// it costs.
var defaultBetas = Betas{
	// Behaviour only.
	"prompt-caching-2024-07-31":                   neutral,
	"token-efficient-tools-2025-02-19":            neutral,
	"interleaved-thinking-2025-05-14":             neutral,
	"fine-grained-tool-streaming-2025-05-14":      neutral,
	"output-128k-2025-02-19":                      neutral,
	"computer-use-2024-10-22":                     neutral,
	"computer-use-2025-01-24":                     neutral,
	"computer-use-2025-11-24":                     neutral,
	"pdfs-2024-09-25":                             neutral,
	"token-counting-2024-11-01":                   neutral, // @anthropic-ai/sdk beta.messages.countTokens
	"structured-outputs-2025-11-13":               neutral, // @ai-sdk/anthropic with tools
	"structured-outputs-2025-12-15":               neutral, // @anthropic-ai/sdk beta.messages.parse
	"advanced-tool-use-2025-11-20":                neutral,
	"context-management-2025-06-27":               neutral,
	"task-budgets-2026-03-13":                     neutral,
	"mid-conversation-system-2026-04-07":          neutral,
	"mid-conversation-tool-changes-2026-07-01":    neutral,
	"mid-conversation-output-config-2026-07-01":   neutral,
	"mid-conversation-system-clear-at-2026-08-21": neutral,
	"inline-tools-2026-09-15":                     neutral,
	"thinking-display-updates-2026-08-18":         neutral,
	"thinking-binding-controls-2026-08-01":        neutral,
	"dangerous-tool-use-2026-09-03":               neutral,
	"fallback-credit-2026-07-01":                  neutral, // @anthropic-ai/sdk refusal fallback middleware
	// Priced.
	"fast-mode-2026-02-01":                {InputPercent: 600, OutputPercent: 600},
	"context-1m-2025-08-07":               refused,
	"extended-cache-ttl-2025-04-11":       refused,
	"compact-2026-01-12":                  refused,
	"code-execution-2025-05-22":           refused,
	"code-execution-2025-08-25":           refused,
	"code-execution-web-tools-2026-02-09": refused,
	"web-fetch-2025-09-10":                refused,
	"mcp-client-2025-04-04":               refused,
	"mcp-client-2025-11-20":               refused,
	"skills-2025-10-02":                   refused,
	"files-api-2025-04-14":                refused,
	"advisor-tool-2026-03-01":             refused,
	"server-side-fallback-2026-06-01":     refused,
	"server-side-fallback-2026-07-01":     refused,
}

// DefaultBetas returns the table the gateway starts from, with changes
// (the operator's) added over it; a change replaces the default entry of
// its name.
func DefaultBetas(changes Betas) Betas {
	t := maps.Clone(defaultBetas)
	maps.Copy(t, changes)
	return t
}

// Validate refuses an entry whose percentages are out of bounds (below 1
// or above MaxBetaPercent; 0 stands for 100).
func (t Betas) Validate() error {
	for name, p := range t {
		for _, pct := range []int64{p.InputPercent, p.OutputPercent} {
			if pct < 0 || pct > MaxBetaPercent {
				return fmt.Errorf("beta %s: percentage %d: want 1 to %d", name, pct, MaxBetaPercent)
			}
		}
	}
	return nil
}

// MaxBetas bounds the betas one call may carry.
const MaxBetas = 32

// MaxBetaPercent bounds the percentage of list prices a beta, or the
// betas of one call together, may set.
const MaxBetaPercent = 100_000

// Beta headers the gateway reads, each with its canonical key: read
// straight from the header map, with no key made per call.
var betaHeaders = []struct{ name, key string }{
	{"anthropic-beta", http.CanonicalHeaderKey("anthropic-beta")},
	{"vendor-beta", http.CanonicalHeaderKey("vendor-beta")},
}

// callBetas are the betas a call forwards to a messages-style model and
// the price they set.
type callBetas struct {
	names         []string
	inPct, outPct int64 // percentages of list prices, 100: list
}

// forCall checks the betas of a request's headers (comma-separated, in
// either header) against t: one outside it or refused is a 400 naming it
// and its header.
func (t Betas) forCall(h http.Header) (*callBetas, error) {
	cb := &callBetas{inPct: 100, outPct: 100}
	for _, hb := range betaHeaders {
		for _, v := range h[hb.key] {
			for beta := range strings.SplitSeq(v, ",") {
				beta = strings.TrimSpace(beta)
				if beta == "" || slices.Contains(cb.names, beta) {
					continue
				}
				p, ok := t[beta]
				switch {
				case !ok:
					return nil, invalid(hb.name, "the beta %q is not supported through the gateway", shorten(beta))
				case p.Refused:
					return nil, invalid(hb.name, "the beta %q changes the price in a way the gateway does not bill", shorten(beta))
				case len(cb.names) == MaxBetas:
					return nil, invalid(hb.name, "more than %d betas", MaxBetas)
				}
				cb.names = append(cb.names, beta)
				// Rounded up: betas priced together are never billed below
				// their prices.
				cb.inPct = (cb.inPct*percent(p.InputPercent) + 99) / 100
				cb.outPct = (cb.outPct*percent(p.OutputPercent) + 99) / 100
				if cb.inPct > MaxBetaPercent || cb.outPct > MaxBetaPercent {
					return nil, invalid(hb.name, "the betas together are priced beyond what the gateway bills")
				}
			}
		}
	}
	return cb, nil
}

// betasFor checks the betas of a call routed to rt: when any of its
// candidates speaks the messages format they may be forwarded, and are
// checked (nil: none sent); otherwise they mean nothing upstream and are
// dropped unread.
func (h *Handler) betasFor(c *http.Request, cat *catalog.Catalog, rt *lanes.Route) (*callBetas, error) {
	for _, m := range rt.Candidates {
		if takesBetas(cat.Providers[m.Provider], m) {
			return h.betas().forCall(c.Header)
		}
	}
	return nil, nil
}

// betas is the handler's table (the default one when none was set).
func (h *Handler) betas() Betas {
	if h.Betas == nil {
		return defaultBetas
	}
	return h.Betas
}

// forwarded are the betas sent to m: the call's, when m speaks the
// messages format; none otherwise (a translated call drops them).
func (cb *callBetas) forwarded(cat *catalog.Catalog, m *catalog.Model) []string {
	if cb == nil || !takesBetas(cat.Providers[m.Provider], m) {
		return nil
	}
	return cb.names
}

// priced is prices (served's own, or the lane's a call served by served
// is billed at) at the percentages the call's betas set, when served
// speaks the messages format (the betas reach it); prices as they are
// otherwise.
func (cb *callBetas) priced(cat *catalog.Catalog, served, prices *catalog.Model) *catalog.Model {
	if cb == nil || (cb.inPct == 100 && cb.outPct == 100) || !takesBetas(cat.Providers[served.Provider], served) {
		return prices
	}
	at := func(p pricing.Money, pct int64) pricing.Money { return p * pricing.Money(pct) / 100 }
	s := *prices
	s.InputPrice, s.CachedPrice, s.CacheWritePrice = at(prices.InputPrice, cb.inPct), at(prices.CachedPrice, cb.inPct), at(prices.CacheWritePrice, cb.inPct)
	s.OutputPrice = at(prices.OutputPrice, cb.outPct)
	return &s
}

// takesBetas reports a model whose provider's route forwards the call's
// betas.
func takesBetas(p *catalog.Provider, m *catalog.Model) bool { return reachOf(p, m.ID).betas() }

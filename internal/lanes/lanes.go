// Package lanes turns the `model` of a chat request into the backing
// models to try, in order: a pinned or bare model id is itself; a lane alias
// is the lane's cheapest healthy model that has what the request needs,
// then stronger lanes for escalation; gw-auto first classifies the task to
// pick the lane. Every decision is kept as a Decision for flux_explain.
package lanes

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// Needs is what a request asks of a model, read from its body.
type Needs struct {
	// Vision: the request carries an image.
	Vision bool
	// Tools: the request offers tools.
	Tools bool
	// JSON: the request asks for JSON output.
	JSON bool
	// PromptTokens is an estimate of the prompt's size, for routing (the
	// context window, long-context work).
	PromptTokens int
	// PromptBound is the most prompt tokens the request can be billed for
	// (a token is at least one byte of text), for the reservation, which
	// must be an upper bound. 0: PromptTokens.
	PromptBound int
	// Answers is how many answers the request asks for (chat completions'
	// n); every one is billed, so the estimate multiplies by it. 0 means 1.
	Answers int
	// MaxTokens is the most output the request allows (0: unknown).
	MaxTokens int
	// ExtraOutput is the most output an answer can be billed for beyond
	// MaxTokens (a predicted output it does not use is billed as output),
	// per answer.
	ExtraOutput int
	// Text is the last user message's text, for classification.
	Text string
}

// Route is the answer for one request.
type Route struct {
	// Requested is the model id the client sent.
	Requested string
	// Kind is the classified kind of task (gw-auto only).
	Kind Kind
	// Lane is the lane chosen ("" for a pinned model).
	Lane string
	// Candidates are the models to try, in order: the first is the choice,
	// the rest are escalations to stronger lanes. Never empty.
	Candidates []*catalog.Model
	// Pinned: the client named one model; it is never swapped.
	Pinned bool
}

// Picker picks, over a catalogue, the backing models that answer a chat
// request's model name (see Pick).
type Picker struct {
	Catalog *catalog.Catalog
	Health  *Health
}

// DefaultModel is the alias used when a request names no model.
const DefaultModel = catalog.AliasAuto

// maxAliasDepth bounds alias-to-alias resolution.
const maxAliasDepth = 4

// Pick resolves model for a request with needs: the models to try, in
// order.
func (r *Picker) Pick(model string, n Needs) (*Route, error) {
	if model == "" {
		model = DefaultModel
	}
	rt := &Route{Requested: model}
	target := model
	for range maxAliasDepth {
		next, ok := r.alias(target)
		if !ok {
			break
		}
		target = next
	}
	switch {
	case target == catalog.AliasAuto:
		rt.Kind = Classify(n)
		rt.Lane = laneOf[rt.Kind]
	case catalog.LaneAliases[target] != "":
		rt.Lane = catalog.LaneAliases[target]
	default:
		m, ok := r.Catalog.Model(strings.TrimPrefix(target, catalog.PinnedPrefix))
		if !ok {
			return nil, gwerr.New(gwerr.Invalid, "model %q does not exist; GET /v1/models lists the ids", model).
				WithCode("model_not_found").WithParam("model")
		}
		rt.Pinned, rt.Candidates = true, []*catalog.Model{m}
		return rt, nil
	}
	rt.Candidates = r.lanes(rt.Lane, n)
	if len(rt.Candidates) == 0 {
		return nil, gwerr.New(gwerr.Invalid, "no model of lane %s or stronger can serve this request (needs vision=%t tools=%t, %d tokens)",
			rt.Lane, n.Vision, n.Tools, n.PromptTokens+n.MaxTokens).WithParam("model")
	}
	return rt, nil
}

func (r *Picker) alias(id string) (string, bool) {
	for _, a := range r.Catalog.Aliases {
		if a.Name == id {
			return a.Target, true
		}
	}
	return "", false
}

// lanes lists, for lane and then each stronger lane, the model that lane
// would serve n with: the cheapest healthy one that fits (an unhealthy one
// only when no healthy one fits). The first is the choice; the others are
// the escalations, each stronger than the last.
func (r *Picker) lanes(lane string, n Needs) []*catalog.Model {
	start := slices.Index(catalog.Lanes, lane)
	var out []*catalog.Model
	for _, l := range catalog.Lanes[max(start, 0):] {
		var fit []*catalog.Model
		for _, m := range r.Catalog.Models {
			if m.Lane == l && Fits(m, n) {
				fit = append(fit, m)
			}
		}
		// Candidates compare by the likely cost (the prompt's estimate),
		// not by the reservation's bound.
		likely := n
		likely.PromptBound = 0
		slices.SortStableFunc(fit, func(a, b *catalog.Model) int {
			ha, hb := r.Health.Healthy(a.ID), r.Health.Healthy(b.ID)
			if ha != hb {
				if ha {
					return -1
				}
				return 1
			}
			return cmp.Compare(EstimateCost(a, likely), EstimateCost(b, likely))
		})
		if len(fit) > 0 {
			out = append(out, fit[0])
		}
	}
	return out
}

// Fits reports whether m has what n needs.
func Fits(m *catalog.Model, n Needs) bool {
	if n.Vision && !m.Has("vision") || n.Tools && !m.Has("tools") || n.JSON && !m.Has("json") && !m.Has("tools") {
		return false
	}
	return m.ContextWindow == 0 || n.PromptTokens+n.MaxTokens <= m.ContextWindow
}

// DefaultMaxTokens is the output assumed for estimates when a request sets
// no limit.
const DefaultMaxTokens = 4096

// EstimateLines is the most a request with n could cost on m, as priced
// lines: every prompt token (the larger of PromptBound and PromptTokens)
// at the dearer of the input and cache write prices, and the output limit
// (DefaultMaxTokens when unset) and the extra output at the output price
// times the answers asked for. The chat handler reserves it; the picker compares candidates
// by it. Units saturate rather than wrap, so no request can make its own
// estimate small by making it huge.
func EstimateLines(m *catalog.Model, n Needs) []pricing.Line {
	out := int64(n.MaxTokens)
	if out <= 0 {
		out = DefaultMaxTokens
	}
	return []pricing.Line{
		{Units: int64(max(n.PromptBound, n.PromptTokens, 0)), Rate: pricing.PerMillion(max(m.InputPrice, m.CacheWriteRate()))},
		{Units: mulSat(out+int64(max(n.ExtraOutput, 0)), int64(max(n.Answers, 1))), Rate: pricing.PerMillion(m.OutputPrice)},
	}
}

// mulSat is a×b for a, b > 0, at most math.MaxInt64.
func mulSat(a, b int64) int64 {
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

// EstimateCost is EstimateLines at list prices.
func EstimateCost(m *catalog.Model, n Needs) pricing.Money {
	return pricing.Cost(false, EstimateLines(m, n)...)
}

// String describes a route for logs.
func (rt *Route) String() string {
	ids := make([]string, len(rt.Candidates))
	for i, m := range rt.Candidates {
		ids[i] = m.ID
	}
	return fmt.Sprintf("%s → lane %q kind %q → %v", rt.Requested, rt.Lane, rt.Kind, ids)
}

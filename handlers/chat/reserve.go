package chat

import (
	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
	"github.com/caddy-gw/caddy-gw/internal/lanes"
	"github.com/caddy-gw/caddy-gw/internal/money"
	"github.com/caddy-gw/caddy-gw/internal/tokens"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// HeaderOutputLimit announces an output limit the gateway lowered to what
// the account's money left covers (the request set none).
const HeaderOutputLimit = "X-Gw-Output-Limit"

// MinOutputTokens is the least output limit the gateway lowers a call's
// to: a call that cannot afford this much output is refused (402). A
// reasoning model thinks before it answers, so its floor is
// MinReasoningOutputTokens.
const (
	MinOutputTokens          = 64
	MinReasoningOutputTokens = 1024
)

// tightenTries bounds how often a tightened reservation is tried again
// when concurrent calls of the account took the room it was sized for.
const tightenTries = 3

// replyPrimerTokens are the tokens a chat template adds to prime each
// reply, which the local count of a prompt does not see.
const replyPrimerTokens = 3

// reserve holds the estimate of a call to m: the worst case (the prompt's
// bound, the whole output limit). When that does not fit what the account
// has left, it tightens the estimate before it refuses: the prompt counted
// (countPrompt), then, when the request set no output limit, the limit the
// gateway sets lowered to what the money left covers, never below the
// model's floor (minOutput). limit is that lowered limit (0: the limit
// stands as it is). A limit the client set is never lowered: the call is
// refused when it does not fit. Only a call whose worst case does not fit
// pays for the count; concurrent calls still never reserve past what is
// left (Reserve checks again under the account's lock).
func (cl *call) reserve(m *catalog.Model) (limit int, err error) {
	refused := cl.Reserve(pricing.Cost(cl.Account.PAYG, lanes.EstimateLines(m, cl.req.needs)...))
	if refused == nil || !money.Tightenable(refused) {
		return 0, refused
	}
	// Nothing is counted when even an empty prompt would not fit.
	room, err := cl.Room()
	if err != nil {
		return 0, err
	}
	if _, _, ok := cl.fit(m, 0, room); !ok {
		return 0, refused
	}
	prompt := cl.countPrompt(m)
	for i := range tightenTries {
		if i > 0 {
			if room, err = cl.Room(); err != nil {
				return 0, err
			}
		}
		est, out, ok := cl.fit(m, prompt, room)
		if !ok {
			return 0, refused
		}
		err = cl.Reserve(est)
		if err == nil {
			if cl.req.needs.MaxTokens > 0 || out >= lanes.DefaultMaxTokens {
				return 0, nil
			}
			return out, nil
		}
		if !money.Tightenable(err) {
			return 0, err
		}
	}
	return 0, refused
}

// minOutput is the floor of a lowered output limit on m.
func minOutput(m *catalog.Model) int {
	if m.Lane == catalog.LaneReasoning {
		return MinReasoningOutputTokens
	}
	return MinOutputTokens
}

// fit prices a call to m with a prompt of prompt tokens into room (and
// the output it may be billed beyond its limit, ExtraOutput): the
// estimate with the client's output limit, or with the most output up to
// lanes.DefaultMaxTokens (at least minOutput) that room covers when the
// client set none (out). ok is false when it does not fit. It prices at
// the dearer of m's rates and the lane's when the call may be billed at
// the lane's price (lane billing).
func (cl *call) fit(m *catalog.Model, prompt int64, room pricing.Money) (est pricing.Money, out int, ok bool) {
	in, outRate := m.InputPrice, m.OutputPrice
	if mayHold(jsonbody.String(cl.body), "cache_control") {
		in = max(in, m.CacheWriteRate())
	}
	if cl.Account.LaneBilling && cl.route != nil && cl.route.Requested == catalog.AliasAuto {
		if lp := cl.Gateway.Catalog.LanePrice(billedLane(cl.route.Lane)); lp != nil {
			lp = cl.betas.priced(cl.Gateway.Catalog, m, lp)
			in, outRate = max(in, lp.InputPrice, lp.CacheWriteRate()), max(outRate, lp.OutputPrice)
		}
	}
	answers, extra := int64(max(cl.req.needs.Answers, 1)), int64(cl.req.needs.ExtraOutput)
	cost := func(out int) pricing.Money {
		return pricing.Cost(cl.Account.PAYG, pricing.Line{Units: prompt, Rate: pricing.PerMillion(in)},
			pricing.Line{Units: (int64(out) + extra) * answers, Rate: pricing.PerMillion(outRate)})
	}
	if set := cl.req.needs.MaxTokens; set > 0 {
		est = cost(set)
		return est, set, est <= room
	}
	floor := minOutput(m)
	if cost(floor) > room {
		return 0, 0, false
	}
	// The most output that fits: cost grows with out, so a binary search.
	lo, hi := floor, lanes.DefaultMaxTokens
	for lo < hi {
		mid := lo + (hi-lo+1)/2
		if cost(mid) <= room {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return cost(lo), lo, true
}

// countPrompt counts the call's prompt for m, from above: with the
// provider's own count endpoint (free) when m speaks the messages format
// (the members its count endpoint does not take counted locally), else
// (or when that endpoint fails) with the o200k tokenizer over the JSON of
// every member the format bills as prompt (promptBoundTokens); then
// tokens.WithMargin over. Inline documents are
// counted at their bound (documents), the count endpoint not asked.
func (cl *call) countPrompt(m *catalog.Model) int64 {
	p := cl.Gateway.Catalog.Providers[m.Provider]
	var n int64
	counted := false
	if rc := reachOf(p, m.ID); rc.counts() && cl.req.documentTokens == 0 {
		if rc.native != nil {
			// The cloud's count takes the whole request.
			if c, err := cl.h.countNative(cl.Call, p, m, rc, cl.body, cl.format); err == nil {
				n, counted = int64(c), true
			}
		} else {
			up := rc.format
			body := cl.body
			var err error
			if cl.format != up {
				body, _, err = requestFor(cl.body, cl.format, up, m.ID, false)
			}
			if err == nil {
				root := gjson.ParseBytes(body)
				var c int
				if c, err = cl.h.countUpstream(cl.Call, p, m, root, cl.betas.forwarded(cl.Gateway.Catalog, m)); err == nil {
					n, counted = int64(c)+uncountable(up.spec().billing, root), true
				}
			}
		}
	}
	if !counted {
		n = promptBoundTokens(cl.format.spec().billing, jsonbody.Parse(cl.body)) + replyPrimerTokens
	}
	n += int64(cl.req.documentTokens)
	return tokens.WithMargin(n)
}

// promptBoundTokens counts the members of a body that its format's table
// t bills as prompt (every member it does not say is unbilled) as raw
// JSON with the o200k tokenizer: quotes, keys and escapes only add
// tokens, so it bounds what the provider counts from above. An image part
// counts ImageTokenCeiling instead of its inline data; an inline document
// counts nothing here (its bound is added apart).
func promptBoundTokens(t memberTable, root gjson.Result) int64 {
	var n int64
	root.ForEach(func(k, v gjson.Result) bool {
		if t.counted(k.Str) {
			n += boundTokens(v)
		}
		return true
	})
	return n
}

// uncountable is promptBoundTokens for the members of a body sent to a
// count endpoint that its table t bills as prompt but the endpoint does
// not take (so its count leaves them out).
func uncountable(t memberTable, root gjson.Result) int64 {
	var n int64
	root.ForEach(func(k, v gjson.Result) bool {
		if r := t.rule(k.Str); r.billed != unbilled && !r.countable {
			n += boundTokens(v)
		}
		return true
	})
	return n
}

// boundTokens is promptBoundTokens for one value: an image part at its
// ceiling, an inline document at nothing, a value that may hold inline
// data member by member, any other value as its raw JSON.
func boundTokens(v gjson.Result) int64 {
	if !v.IsObject() && !v.IsArray() {
		return int64(tokens.Count(v.Raw))
	}
	if v.IsObject() {
		switch v.Get("type").String() {
		case "image_url", "input_image", "image":
			return ImageTokenCeiling
		}
		if _, ok := inlineFile(v); ok {
			return 0
		}
	}
	if !mayHold(v.Raw, "data") && !mayHold(v.Raw, "base64") {
		return int64(tokens.Count(v.Raw))
	}
	n := int64(2) // the brackets and separators, with room
	v.ForEach(func(k, x gjson.Result) bool {
		n += int64(tokens.Count(k.Raw)) + 1 + boundTokens(x)
		return true
	})
	return n
}

package chat

import (
	"slices"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
	"github.com/caddy-gw/caddy-gw/internal/router"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// HeaderOutputLimit announces an output limit the gateway lowered to what
// the account's money left covers (the request set none).
const HeaderOutputLimit = "X-Gw-Output-Limit"

// MinOutputTokens is the least output limit the gateway lowers a call's
// to: a call that cannot afford this much output is refused (402).
const MinOutputTokens = 64

// tightenTries bounds how often a tightened reservation is tried again
// when concurrent calls of the account took the room it was sized for.
const tightenTries = 3

// The gateway's own count of a prompt for a chat-completions-style model
// (the o200k tokenizer, the one of those models) errs on the high side by
// this much: a chat template adds a few tokens per reply, and a settlement
// above its hold would draw a balance past zero.
const (
	replyPrimerTokens  = 3
	countMarginPercent = 2
	countMarginTokens  = 16
)

// tightenable are the money refusals a tighter estimate can get past; the
// others (a store that cannot be read) stand.
var tightenable = []string{gwerr.CodeCreditExhausted, gwerr.CodeDailyCap, gwerr.CodeMonthlyCap}

// reserve holds the estimate of a call to m: the worst case (the prompt's
// bound, the whole output limit). When that does not fit what the account
// has left, it tightens the estimate before it refuses: the prompt counted
// exactly (exactPrompt), then, when the request set no output limit, the
// limit the gateway sets lowered to what the money left covers, never
// below MinOutputTokens. limit is that lowered limit (0: the gateway's
// default stands). A limit the client set is never lowered: the call is
// refused when it does not fit. Only a call whose worst case does not fit
// pays for the count; concurrent calls still never reserve past what is
// left (Reserve checks again under the account's lock).
func (cl *call) reserve(m *catalog.Model) (limit int, err error) {
	refused := cl.Reserve(pricing.Cost(cl.Account.PAYG, router.EstimateLines(m, cl.req.needs)...))
	if refused == nil || !slices.Contains(tightenable, gwerr.As(refused).Code) {
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
	prompt, err := cl.exactPrompt(m)
	if err != nil {
		return 0, refused
	}
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
			if out >= router.DefaultMaxTokens {
				return 0, nil
			}
			return out, nil
		}
		if !slices.Contains(tightenable, gwerr.As(err).Code) {
			return 0, err
		}
	}
	return 0, refused
}

// fit prices a call to m with a prompt of prompt tokens into room: the
// estimate with the client's output limit, or with the most output up to
// router.DefaultMaxTokens (at least MinOutputTokens) that room covers
// when the client set none (out). ok is false when it does not fit.
func (cl *call) fit(m *catalog.Model, prompt int64, room pricing.Money) (est pricing.Money, out int, ok bool) {
	in := m.InputPrice
	if mayHold(jsonbody.String(cl.body), "cache_control") {
		in = max(in, m.CacheWriteRate())
	}
	answers := int64(max(cl.req.needs.Answers, 1))
	cost := func(out int) pricing.Money {
		return pricing.Cost(cl.Account.PAYG, pricing.Line{Units: prompt, Rate: pricing.PerMillion(in)},
			pricing.Line{Units: int64(out) * answers, Rate: pricing.PerMillion(m.OutputPrice)})
	}
	if set := cl.req.needs.MaxTokens; set > 0 {
		est = cost(set)
		return est, set, est <= room
	}
	if cost(MinOutputTokens) > room {
		return 0, 0, false
	}
	// The most output that fits: cost grows with out, so a binary search.
	lo, hi := MinOutputTokens, router.DefaultMaxTokens
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

// exactPrompt counts the call's prompt for m: with the provider's own
// count endpoint (free) when m speaks the messages format, else with the
// o200k tokenizer, images at their ceiling and a small margin (see
// countMarginPercent).
func (cl *call) exactPrompt(m *catalog.Model) (int64, error) {
	p := cl.Gateway.Catalog.Providers[m.Provider]
	if upstreamFormat(p) == Messages {
		body := cl.body
		if cl.format != Messages {
			var err error
			if body, _, err = requestFor(cl.body, cl.format, Messages, m.ID, false); err != nil {
				return 0, err
			}
		}
		n, err := cl.h.countUpstream(cl.Call, p, m, gjson.ParseBytes(body))
		return int64(n), err
	}
	n := int64(promptTokens(cl.format, cl.body)) + int64(cl.req.images)*ImageTokenCeiling + replyPrimerTokens
	if cl.format == Responses {
		n += int64(countTokens(gjson.GetBytes(cl.body, "tools").Raw))
	}
	return n + n*countMarginPercent/100 + countMarginTokens, nil
}

package embeddings

import (
	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/money"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/tokens"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// SpecialTokens is what a model may add to each input of its own (start
// and end markers) beyond the tokens of its text or ids.
const SpecialTokens = 4

// bound is the most input tokens a provider can count of r: every token of
// a byte-level tokenizer is at least one byte of a text, each id of a
// token list one token, and each input may gain SpecialTokens.
func (r *request) bound() int64 {
	n := r.tokens + int64(r.inputs)*SpecialTokens
	for _, s := range r.texts {
		n += int64(len(s))
	}
	return n
}

// count is the gateway's own count of r's input: its texts with the o200k
// and cl100k tokenizers, the larger count of each (its bytes where a
// tokenizer is unavailable), and its ids. counted is false when a
// tokenizer was unavailable.
func (r *request) count() (n int64, counted bool) {
	n, counted = r.tokens, true
	for _, s := range r.texts {
		c, ok := tokens.Larger(s)
		if !ok {
			c, counted = len(s), false
		}
		n += int64(c)
	}
	return n, counted
}

// reserve holds the cost of r's input on m: its bound, or, when that does
// not fit what the account has left, its count with the margin a counted
// reservation takes (tokens.WithMargin; never above the bound). held is the tokens held; no settlement goes
// above them, so a balance is never drawn past zero.
func reserve(c *pipeline.Call, m *catalog.EmbeddingModel, r *request) (held int64, err error) {
	held = r.bound()
	err = c.Reserve(cost(c.Account.PAYG, m, held))
	if err == nil || !money.Tightenable(err) {
		return held, err
	}
	n, counted := r.count()
	if !counted {
		return 0, err
	}
	n += int64(r.inputs) * SpecialTokens
	tight := min(held, tokens.WithMargin(n))
	if tight == held {
		return 0, err
	}
	return tight, c.Reserve(cost(c.Account.PAYG, m, tight))
}

// billed is the input tokens a call is billed: what the provider reports,
// or the gateway's own count when it reports none, never more than held.
func billed(reported int64, ok bool, own, held int64) int64 {
	if !ok {
		reported = own
	}
	return min(reported, held)
}

// cost prices tokens of input on m for an account (payg: with the
// pay-as-you-go markup).
func cost(payg bool, m *catalog.EmbeddingModel, tokens int64) pricing.Money {
	return pricing.Cost(payg, pricing.Line{Units: tokens, Rate: pricing.PerMillion(m.Rate())})
}

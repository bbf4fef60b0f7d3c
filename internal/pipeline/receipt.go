package pipeline

import (
	"cmp"
	"net/http"
	"strconv"

	"github.com/caddy-gw/caddy-gw/pricing"
)

// Receipt headers (docs/chat.md, docs/abilities.md). writeReceipt alone sets them
// (X-Gw-Request-Id apart, which every answer carries from the start).
const (
	// HeaderRequestID carries the request id on every answer of the gateway.
	HeaderRequestID = "X-Gw-Request-Id"
	// HeaderRoutedModel names the concrete model that answered (chat and
	// ability responses).
	HeaderRoutedModel = "X-Gw-Routed-Model"
	// HeaderCost is the amount charged, in US dollars, exactly as the
	// ledger records it.
	HeaderCost = "X-Gw-Cost-Usd"
	// HeaderModel names the model that served a chat-style answer.
	HeaderModel = "X-Gw-Model"
	// HeaderOriginalModel is the model id a chat-style request asked for.
	HeaderOriginalModel = "X-Gw-Original-Model"
	// HeaderRouted says whether the gateway chose the model (true or false).
	HeaderRouted = "X-Gw-Routed"
	// HeaderEscalated is "true" when a stronger model was brought in.
	HeaderEscalated = "X-Gw-Escalated"
	// HeaderBilledLane is the lane a gw-auto call was billed at, under
	// lane billing.
	HeaderBilledLane = "X-Gw-Billed-Lane"
	// HeaderCache is "hit" on an answer from the cache.
	HeaderCache = "X-Gw-Cache"
	// HeaderAlias is the name asked for, on a chat stream and a decision.
	HeaderAlias = "X-Gw-Alias"
	// HeaderBilledSeconds is the seconds a transcription was billed.
	HeaderBilledSeconds = "X-Gw-Billed-Seconds"
	// HeaderBilledChars is the characters a speech was billed.
	HeaderBilledChars = "X-Gw-Billed-Chars"
)

// Receipt is the set of receipt headers an answer carries.
type Receipt uint8

const (
	// NoReceipt writes none: Charge leaves the headers to a later
	// WriteReceipt, or the bill is not the one the receipt shows.
	NoReceipt Receipt = iota
	// ChatReceipt is a whole chat-style answer's (chat, embeddings):
	// X-Gw-Model, X-Gw-Original-Model, X-Gw-Routed, X-Gw-Cost-Usd and
	// X-Gw-Routed-Model (X-Gw-Cache: hit in its place on a cache hit), with
	// X-Gw-Escalated and X-Gw-Billed-Lane when they apply.
	ChatReceipt
	// ChatStreamReceipt is a chat stream's, set before its first byte:
	// X-Gw-Alias. Its cost travels in its final usage block (CostUSD).
	ChatStreamReceipt
	// AbilityReceipt is an ability answer's: X-Gw-Routed-Model and
	// X-Gw-Cost-Usd, with X-Gw-Billed-Seconds or X-Gw-Billed-Chars for a
	// bill by the audio second or the character.
	AbilityReceipt
	// AbilityStreamReceipt is an ability stream's, set before its first
	// byte: X-Gw-Routed-Model.
	AbilityStreamReceipt
	// DecisionReceipt is a decision's: X-Gw-Alias, then what
	// AbilityReceipt writes.
	DecisionReceipt
)

// CostUSD is the bill's cost as every receipt shows it: US dollars,
// exactly as charged (X-Gw-Cost-Usd, a stream's cost_usd).
func (b *Bill) CostUSD() string { return b.Cost.String() }

// WriteReceipt sets the receipt headers of the call's answer from b, in
// the set b.Receipt names; an answer from the cache (CacheHit) shows as
// one. Call it before the body is written: Charge does for a bill that
// names its receipt.
func (c *Call) WriteReceipt(b Bill) {
	writeReceipt(c.W.Header(), &b, c.cacheHit)
}

// writeReceipt sets the receipt headers of b on h; cached: the answer
// came from the cache.
func writeReceipt(h http.Header, b *Bill, cached bool) {
	alias := cmp.Or(b.Alias, b.Model)
	switch b.Receipt {
	case ChatReceipt:
		setAll(h, HeaderModel, b.Model, HeaderOriginalModel, alias, HeaderRouted, strconv.FormatBool(b.Routed),
			HeaderCost, b.CostUSD())
		if cached {
			h.Set(HeaderCache, "hit")
		} else {
			h.Set(HeaderRoutedModel, b.Model)
		}
		if b.Escalated {
			h.Set(HeaderEscalated, "true")
		}
		if b.Lane != "" {
			h.Set(HeaderBilledLane, b.Lane)
		}
	case ChatStreamReceipt:
		h.Set(HeaderAlias, alias)
	case AbilityStreamReceipt:
		h.Set(HeaderRoutedModel, b.Model)
	case AbilityReceipt, DecisionReceipt:
		if b.Receipt == DecisionReceipt {
			h.Set(HeaderAlias, alias)
		}
		setAll(h, HeaderRoutedModel, b.Model, HeaderCost, b.CostUSD())
		switch b.Unit {
		case pricing.UnitAudioSecond:
			h.Set(HeaderBilledSeconds, strconv.FormatInt(b.Units, 10))
		case pricing.UnitCharacter:
			h.Set(HeaderBilledChars, strconv.FormatInt(b.Units, 10))
		}
	}
}

// setAll sets headers given as name, value, name, value…, each name in its
// canonical form already; the values share one allocation.
func setAll(h http.Header, kv ...string) {
	vals := make([]string, len(kv)/2)
	for i := range vals {
		vals[i] = kv[2*i+1]
		h[kv[2*i]] = vals[i : i+1 : i+1]
	}
}

// Package search serves web search: POST /v1/search (and /search). The
// query goes to the search provider's responses endpoint with its web
// search tool; the answer is the output text, the citations the cited URLs
// (in order, without repeats), and the call is billed per search and per
// token at the configured prices.
package search

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/translate"
	"github.com/caddy-gw/caddy-gw/internal/upstream"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// Limits of search (docs/abilities.md, Web search).
const (
	// MaxQueryChars bounds the query.
	MaxQueryChars = 2000
	// MaxBody bounds the request body.
	MaxBody = 64 << 10
	// Timeout: no answer in 30 seconds is a 502, not billed.
	Timeout = 30 * time.Second
	// MaxSearches bounds the web searches one call may make
	// (max_tool_calls), so the reservation bounds the call.
	MaxSearches = 3
	// MaxOutputTokens bounds the answer.
	MaxOutputTokens = 2048
	// EstimatedInputTokens is what the reservation assumes the query and
	// the pages read cost in input tokens (a provider reading more is
	// charged in full and logged as an overrun).
	EstimatedInputTokens = 32_000
	// MaxAnswer is the largest provider answer read.
	MaxAnswer = 8 << 20
	// UnitSearch is the ledger unit.
	UnitSearch = "search"
)

// Codes of search's 502 answers, none of them billed.
const (
	CodeUpstreamError         = "upstream_error"
	CodeUpstreamIncomplete    = "upstream_incomplete"
	CodeUpstreamEmpty         = "upstream_empty"
	CodeUsageUnavailable      = "usage_unavailable"
	CodeSettlementUnavailable = "settlement_unavailable"
	CodeCapabilityUnavailable = "capability_unavailable"
)

// Handler serves web search.
type Handler struct {
	Upstream *upstream.Client
	// Provider is the search provider (a responses-style API).
	Provider *catalog.Provider
	// Model is the provider's model that runs the search.
	Model string
	// PerSearch is the plan price of one web search.
	PerSearch pricing.Money
	// InputPrice and OutputPrice are plan prices per million tokens.
	InputPrice, OutputPrice pricing.Money
	// Timeout bounds the provider's answer (Timeout, 30 s, when
	// 0).
	Timeout time.Duration
}

func fail(code, msg string) error {
	return (&gwerr.Error{Kind: gwerr.Upstream, Code: code, Message: msg})
}

// Serve serves POST /v1/search.
func (h *Handler) Serve(c *pipeline.Call) error {
	query, err := parse(c.R.Body)
	if err != nil {
		return err
	}
	if h.Provider == nil {
		return fail(CodeCapabilityUnavailable, "search is not configured on this gateway")
	}
	est := h.cost(c.Account.PAYG, MaxSearches, translate.Usage{Input: EstimatedInputTokens, Output: MaxOutputTokens})
	if err := c.Reserve(est); err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]any{
		"model": h.Model, "input": query, "tools": []any{map[string]any{"type": "web_search"}},
		"max_tool_calls": MaxSearches, "max_output_tokens": MaxOutputTokens, "store": false,
	})
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = Timeout
	}
	ctx, cancel := context.WithTimeout(c.R.Context(), timeout)
	defer cancel()
	resp, err := h.Upstream.Do(ctx, upstream.Request{Provider: h.Provider, Path: upstream.PathResponses, Body: body})
	if err != nil {
		if upstream.AccountRefused(err) {
			return &gwerr.Error{Kind: gwerr.Unavailable, Code: CodeCapabilityUnavailable, Message: "search is unavailable; retry later"}
		}
		k := gwerr.As(err).Kind
		if k == gwerr.Timeout || errors.Is(ctx.Err(), context.DeadlineExceeded) || k == gwerr.Unavailable {
			return fail(CodeCapabilityUnavailable, "search did not answer in time")
		}
		return fail(CodeUpstreamError, "search failed")
	}
	defer resp.Body.Close()
	broke := func(code, msg string) error {
		upstream.Failed(ctx, resp.Body)
		return fail(code, msg)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswer))
	if err != nil || !jsonbody.Valid(b) {
		return broke(CodeUpstreamIncomplete, "search did not finish")
	}
	out := read(b)
	switch {
	case out.status != "completed":
		return broke(CodeUpstreamIncomplete, "search did not finish")
	case strings.TrimSpace(out.answer) == "":
		return broke(CodeUpstreamEmpty, "search found no answer")
	case !out.hasUsage || !out.usage.Valid():
		return broke(CodeUsageUnavailable, "search ran but could not be priced")
	}
	cost, err := c.Charge(pipeline.Bill{Units: max(out.searches, 1), Unit: UnitSearch, Model: h.Model, Cost: h.cost(c.Account.PAYG, out.searches, out.usage), Receipt: pipeline.AbilityReceipt,
		Tokens: pipeline.Tokens{Input: out.usage.Uncached(), Output: out.usage.Output, CacheRead: out.usage.CachedInput, CacheWrite: out.usage.CacheWrite}})
	if err != nil {
		return fail(CodeSettlementUnavailable, "search ran but could not be settled; nothing was charged")
	}
	answer, _ := json.Marshal(map[string]any{"answer": out.answer, "citations": out.citations, "searches": out.searches,
		"cost_microcents": cost.Microcents(), "cost_usd": cost.String()})
	pipeline.WriteWhole(c.W, http.StatusOK, "application/json", answer)
	return nil
}

// cost prices searches and usage, rounded to whole microcents so that
// cost_microcents and cost_usd are the same amount.
func (h *Handler) cost(payg bool, searches int64, u translate.Usage) pricing.Money {
	m := pricing.Cost(payg,
		pricing.Line{Units: searches, Rate: pricing.PerUnit(h.PerSearch)},
		pricing.Line{Units: u.Input, Rate: pricing.PerMillion(h.InputPrice)},
		pricing.Line{Units: u.Output, Rate: pricing.PerMillion(h.OutputPrice)})
	return pricing.Micro(m.Microcents())
}

// parse reads the strict body: exactly {"query": "..."}.
func parse(r io.Reader) (string, error) {
	b, err := jsonbody.Read(io.LimitReader(r, MaxBody+1), MaxBody)
	if err != nil {
		return "", gwerr.New(gwerr.Invalid, "the body must be one JSON object: {\"query\": \"...\"}")
	}
	root := gjson.ParseBytes(b)
	if !root.IsObject() {
		return "", gwerr.New(gwerr.Invalid, "the body must be a JSON object: {\"query\": \"...\"}")
	}
	var extra string
	root.ForEach(func(k, _ gjson.Result) bool {
		if k.Str != "query" {
			extra = k.Str
			return false
		}
		return true
	})
	if extra != "" {
		return "", gwerr.New(gwerr.Invalid, "only query may be sent; %q is not allowed", shorten(extra))
	}
	q := root.Get("query")
	if q.Type != gjson.String || strings.TrimSpace(q.Str) == "" {
		return "", gwerr.New(gwerr.Invalid, "query is required and must not be blank").WithParam("query")
	}
	if utf8.RuneCountInString(q.Str) > MaxQueryChars {
		return "", gwerr.New(gwerr.Invalid, "query is longer than %d characters", MaxQueryChars).WithParam("query")
	}
	return q.Str, nil
}

func shorten(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}

// result is what search reads of a responses answer.
type result struct {
	status    string
	answer    string
	citations []string
	searches  int64
	usage     translate.Usage
	hasUsage  bool
}

// read takes the answer text, the cited URLs (in order, without repeats)
// and the number of web searches from a responses answer.
func read(b []byte) result {
	out := result{status: gjson.GetBytes(b, "status").String(), citations: []string{}}
	seen := map[string]bool{}
	var text strings.Builder
	gjson.GetBytes(b, "output").ForEach(func(_, item gjson.Result) bool {
		switch item.Get("type").String() {
		case "web_search_call":
			out.searches++
		case "message":
			item.Get("content").ForEach(func(_, part gjson.Result) bool {
				if part.Get("type").String() != "output_text" {
					return true
				}
				text.WriteString(part.Get("text").String())
				part.Get("annotations").ForEach(func(_, a gjson.Result) bool {
					if u := a.Get("url").String(); a.Get("type").String() == "url_citation" && u != "" && !seen[u] {
						seen[u] = true
						out.citations = append(out.citations, u)
					}
					return true
				})
				return true
			})
		}
		return true
	})
	out.answer = text.String()
	if u := gjson.GetBytes(b, "usage"); u.IsObject() && u.Get("input_tokens").Exists() {
		out.hasUsage = true
		out.usage = translate.ResponsesUsage(b)
	}
	return out
}

// Package decide serves decision mode: POST /v1/decide (and
// /v1/systemone). Each question is asked of the backing chat model
// (GW_DECIDE_MODEL) for one answer token with its top log-probabilities;
// the options' probabilities are read from those, renormalised over the
// options and rounded to four decimals that sum to 1. Nothing of a request
// or an answer is kept: no log, cache or record holds either.
package decide

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tiktoken-go/tokenizer"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/upstream"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// Tunables of the upstream questions.
const (
	// TopLogprobs is how many top tokens each question asks for (the
	// provider's most).
	TopLogprobs = 20
	// Parallel bounds the questions of one call asked at once.
	Parallel = 8
	// Timeout bounds one call's questions together.
	Timeout = 60 * time.Second
	// MaxAnswer is the largest upstream answer read.
	MaxAnswer = 1 << 20
	// ImageTokens is what one image is reserved at, per question.
	ImageTokens = 6000
	// questionOverhead is what a question's prompt adds to the state and
	// instructions in the reservation (the framing text and options are
	// counted; this covers the message framing).
	questionOverhead = 64
)

// HeaderNoRetain says the decision was not kept.
const HeaderNoRetain = "X-Gw-No-Retain"

// Handler serves decision mode.
type Handler struct {
	Upstream *upstream.Client
}

var (
	codecOnce sync.Once
	codec     tokenizer.Codec
)

// countTokens counts s with o200k (the state limit and the reservation).
func countTokens(s string) int {
	codecOnce.Do(func() { codec, _ = tokenizer.Get(tokenizer.O200kBase) })
	if codec == nil {
		return len(s) // no tokenizer: bytes bound tokens from above
	}
	n, _ := codec.Count(s)
	return n
}

// Serve serves POST /v1/decide.
func (h *Handler) Serve(c *pipeline.Call) error {
	// Read to the limit and no further: a larger body is refused while
	// reading. The body's JSON is checked by parse, field by field in order.
	body, err := io.ReadAll(io.LimitReader(c.R.Body, MaxBody+1))
	if err != nil {
		return invalid("body", "The body could not be read.")
	}
	if len(body) > MaxBody {
		return refuse(gwerr.TooLarge, "request_too_large", "body", "The body is larger than 13 MB.")
	}
	req, err := parse(body, countTokens)
	if err != nil {
		return err
	}
	if err := c.AllowModel(Model); err != nil {
		return err
	}
	cat := c.Gateway.Catalog
	m, provider, err := cat.DecideTarget()
	if err != nil {
		return gwerr.New(gwerr.Unavailable, "Decision mode is not available on this gateway.")
	}
	prompts := make([][]byte, len(req.Questions))
	var estimate int64
	for i, q := range req.Questions {
		prompts[i] = prompt(m.ID, req, q)
		estimate += int64(countTokens(req.State)+countTokens(q.Instructions)+countOptions(q)+questionOverhead) + int64(len(req.Images))*ImageTokens
	}
	if err := c.Reserve(pricing.Cost(false, pricing.Line{Units: estimate, Rate: pricing.DecideRate})); err != nil {
		return err
	}
	answers, used, err := h.ask(c.R.Context(), provider, req, prompts)
	if err != nil {
		return err
	}
	if _, err := c.Charge(pipeline.Bill{Units: used, Unit: pricing.UnitToken, Model: Model,
		Cost: pricing.Cost(false, pricing.Line{Units: used, Rate: pricing.DecideRate}), Tokens: pipeline.Tokens{Input: used},
		Receipt: pipeline.DecisionReceipt}); err != nil {
		return err
	}
	out, _ := json.Marshal(map[string]any{"model": Model, "answers": answers, "usage": map[string]any{"input_tokens": used}})
	hd := c.W.Header()
	hd.Set(HeaderNoRetain, "applied")
	hd.Set("Cache-Control", "no-store")
	pipeline.WriteWhole(c.W, http.StatusOK, "application/json", out)
	return nil
}

func countOptions(q question) int {
	n := 0
	for _, o := range q.Options {
		n += countTokens(o.Meaning) + 4
	}
	return n
}

// systemPrompt frames every question.
const systemPrompt = "You are a careful decision model. Read the state and answer the question. " +
	"Reply with exactly one of the option labels and nothing else."

// prompt is the chat request of one question: the state, the question and
// its options each under its one-token label, asking for one token with
// its top log-probabilities.
func prompt(model string, req *request, q question) []byte {
	var b strings.Builder
	b.WriteString("State:\n")
	b.WriteString(req.State)
	b.WriteString("\n\nQuestion: ")
	b.WriteString(q.Instructions)
	b.WriteString("\n\nOptions (answer with the label only):\n")
	for _, o := range q.Options {
		fmt.Fprintf(&b, "%s: %s\n", o.Label, o.Meaning)
	}
	content := []any{map[string]any{"type": "text", "text": b.String()}}
	for _, im := range req.Images {
		content = append(content, map[string]any{"type": "image_url", "image_url": map[string]any{
			"url": "data:" + im.ContentType + ";base64," + base64.StdEncoding.EncodeToString(im.Data)}})
	}
	body, _ := json.Marshal(map[string]any{
		"model": model, "max_completion_tokens": 1, "temperature": 0, "logprobs": true, "top_logprobs": TopLogprobs,
		"messages": []any{
			map[string]any{"role": "system", "content": systemPrompt},
			map[string]any{"role": "user", "content": content},
		},
	})
	return body
}

// ask asks every question, at most Parallel at once, and returns the
// answers and the input tokens the provider reported for them all. The
// first failure fails the call (nothing billed).
func (h *Handler) ask(ctx context.Context, p *catalog.Provider, req *request, prompts [][]byte) (map[string]any, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	type result struct {
		answer map[string]any
		tokens int64
		err    error
	}
	results := make([]result, len(prompts))
	sem := make(chan struct{}, Parallel)
	var wg sync.WaitGroup
	for i := range prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if ctx.Err() != nil {
				results[i].err = upstreamErr(ctx.Err())
				return
			}
			results[i].answer, results[i].tokens, results[i].err = h.one(ctx, p, req.Questions[i], prompts[i])
			if results[i].err != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	answers := make(map[string]any, len(prompts))
	var used int64
	for i, r := range results {
		if r.err != nil {
			return nil, 0, r.err
		}
		answers[req.Questions[i].ID] = r.answer
		used += r.tokens
	}
	return answers, used, nil
}

// one asks one question.
func (h *Handler) one(ctx context.Context, p *catalog.Provider, q question, body []byte) (map[string]any, int64, error) {
	resp, err := h.Upstream.Do(ctx, upstream.Request{Provider: p, Path: upstream.PathChat, Body: body})
	if err != nil {
		return nil, 0, upstreamErr(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxAnswer))
	if err != nil || !jsonbody.Valid(b) {
		return nil, 0, gwerr.New(gwerr.Upstream, "The model's answer could not be read.")
	}
	tokens := gjson.GetBytes(b, "usage.prompt_tokens")
	if tokens.Type != gjson.Number || tokens.Int() < 0 || tokens.Int() > 100_000_000 {
		return nil, 0, gwerr.New(gwerr.Upstream, "The model's usage could not be read.")
	}
	var top []logprob
	gjson.GetBytes(b, "choices.0.logprobs.content.0.top_logprobs").ForEach(func(_, t gjson.Result) bool {
		top = append(top, logprob{Token: t.Get("token").String(), Logprob: t.Get("logprob").Float()})
		return true
	})
	if len(top) == 0 {
		// The chosen token alone, when the provider gave no alternatives.
		if t := gjson.GetBytes(b, "choices.0.logprobs.content.0"); t.Exists() {
			top = append(top, logprob{Token: t.Get("token").String(), Logprob: t.Get("logprob").Float()})
		}
	}
	probs, found := optionProbabilities(q.Options, top)
	if !found {
		return nil, 0, refuse(gwerr.Unprocessable, "upstream_rejected", "questions", "The model did not answer with one of the options.")
	}
	return answer(q, probs), tokens.Int(), nil
}

// answer shapes one question's answer, under answers.<question id>.
func answer(q question, probs []float64) map[string]any {
	rounded := round4(probs)
	switch q.Type {
	case TypeNoul:
		return map[string]any{"type": TypeNoul, "noul": rounded[0]}
	case TypeScore:
		byPos := make(map[string]float64, len(rounded))
		legend := make(map[string]string, len(q.Levels))
		var expected float64
		for i, p := range probs {
			expected += float64(i) * p
			byPos[q.Options[i].Key] = rounded[i]
			legend[q.Options[i].Key] = q.Levels[i]
		}
		return map[string]any{"type": TypeScore, "score": roundTo4(expected), "probabilities": byPos, "legend": legend}
	}
	byKey := make(map[string]float64, len(rounded))
	best := 0
	for i, p := range rounded {
		byKey[q.Options[i].Key] = p
		if probs[i] > probs[best] {
			best = i
		}
	}
	return map[string]any{"type": TypeChoice, "choice": q.Options[best].Key, "probabilities": byKey}
}

// upstreamErr maps a failed question to decision mode's codes: a model's
// refusal (400) is 422 upstream_rejected; the rest keep their kinds
// (529 upstream_overloaded, time-outs and failures 503 upstream_unavailable).
func upstreamErr(err error) error {
	e := gwerr.As(err)
	switch e.Kind {
	case gwerr.Invalid, gwerr.Unprocessable, gwerr.TooLarge:
		return refuse(gwerr.Unprocessable, "upstream_rejected", "body", "The model refused the request.")
	case gwerr.Overloaded:
		return &gwerr.Error{Kind: gwerr.Overloaded, Message: "The model is at capacity; retry later.", RetryAfter: e.RetryAfter}
	case gwerr.RateLimited:
		return &gwerr.Error{Kind: gwerr.Upstream, Message: "The model is unavailable; retry later."}
	}
	if err == context.DeadlineExceeded || e.Kind == gwerr.Timeout {
		return gwerr.New(gwerr.Timeout, "The model did not answer in time.")
	}
	return gwerr.New(gwerr.Upstream, "The model is unavailable; retry later.")
}

// Package embeddings serves POST /v1/embeddings in the chat-completions
// style: the input (a string, a list of strings, a token list or a list of
// token lists) goes to the embedding model's provider as the client wrote
// it, with the model set; the call reserves the most tokens its input can
// hold, is billed per input token the provider reports at the model's
// price (never more than it held), and is answered from the account's
// cache when the same request was answered before.
package embeddings

import (
	"errors"
	"io"
	"net/http"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"go.uber.org/zap"

	"github.com/caddy-gw/caddy-gw/internal/answercache"
	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/upstream"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// Limits of the embeddings endpoint.
const (
	// MaxBody is the largest request body: MaxInputs texts of a model's
	// most input tokens each, with room to spare.
	MaxBody = 16 << 20
	// MaxResponse is the largest provider answer read: MaxInputs vectors
	// of 3,072 dimensions written as JSON numbers fit.
	MaxResponse = 128 << 20
	// MaxCached is the largest answer kept in the cache: a larger one
	// would crowd out the account's and everyone's other answers.
	MaxCached = 4 << 20
)

// PathEmbeddings is the provider's embeddings endpoint, after a
// chat-completions-style base URL (which ends in /v1).
const PathEmbeddings = "/embeddings"

// Handler serves the embeddings endpoint.
type Handler struct {
	// Upstream sends the requests to the providers.
	Upstream *upstream.Client
	// Cache, when set, answers a request the account made before from the
	// answer it got then (the answer cache the chat endpoints use, in a
	// space of its own).
	Cache *answercache.Cache
}

// Serve serves POST /v1/embeddings.
func (h *Handler) Serve(c *pipeline.Call) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	req, err := parse(body)
	if err != nil {
		return err
	}
	requested := req.model
	if requested == "" {
		requested = catalog.AliasEmbed
	}
	m, ok := c.Gateway.Catalog.Embedding(requested)
	if !ok {
		return gwerr.New(gwerr.Invalid, "model %q is not an embedding model; GET /v1/models lists the ids (capability embedding)", requested).
			WithCode("model_not_found").WithParam("model")
	}
	if err := c.AllowModel(requested); err != nil {
		return err
	}
	routed := requested == catalog.AliasEmbed
	// The body as the provider gets it: the cache's key too, so that
	// gw-embed, gw-pinned-<id> and <id> share answers, and a change of
	// embed_model never serves the old model's vectors.
	out, err := sjson.SetBytes(body, "model", m.ID)
	if err != nil {
		return gwerr.New(gwerr.Invalid, "the request cannot be sent to %s: %v", m.ID, err)
	}
	if h.Cache != nil {
		if hit, ok := h.Cache.Get(c.Account.ID, answercache.Embeddings, out); ok {
			c.CacheHit()
			c.WriteReceipt(pipeline.Bill{Receipt: pipeline.ChatReceipt, Model: hit.Model, Alias: requested, Routed: routed})
			pipeline.WriteWhole(c.W, http.StatusOK, "application/json", hit.Body)
			return nil
		}
	}
	held, err := reserve(c, m, req)
	if err != nil {
		return err
	}
	own, _ := req.count()
	resp, err := h.Upstream.Do(c.R.Context(), upstream.Request{Provider: c.Gateway.Catalog.Providers[m.Provider], Path: PathEmbeddings, Body: out,
		Tokens: own})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, err := readAnswer(resp.Body, m)
	if err != nil {
		upstream.Broke(resp.Body)
		return err
	}
	n, ok := reported(answer)
	tokens := billed(n, ok, own, held)
	switch {
	case !ok:
		c.Gateway.Logger.Warn("answer without usable usage: billed from the gateway's own count", zap.String("request_id", c.RequestID),
			zap.String("model", m.ID), zap.Int64("input_tokens", tokens))
	case n > held:
		c.Gateway.Logger.Warn("the provider reported more input tokens than the input can hold: billed what was held", zap.String("request_id", c.RequestID),
			zap.String("model", m.ID), zap.Int64("reported", n), zap.Int64("input_tokens", tokens))
	}
	if _, err := c.Charge(pipeline.Bill{Units: tokens, Unit: pricing.UnitToken, Model: m.ID, Alias: requested, Routed: routed,
		Cost: cost(c.Account.PAYG, m, tokens), Tokens: pipeline.Tokens{Input: tokens}, Receipt: pipeline.ChatReceipt}); err != nil {
		return err
	}
	pipeline.WriteWhole(c.W, http.StatusOK, "application/json", answer)
	if h.Cache != nil && len(answer) <= MaxCached {
		h.Cache.Put(c.Account.ID, answercache.Embeddings, out, answercache.Hit{Body: answer, Model: m.ID})
	}
	return nil
}

// readAnswer reads the provider's answer for m: a failure when it broke
// off, is cut by MaxResponse (it cannot be served, so nothing is billed)
// or is not an embeddings list.
func readAnswer(r io.Reader, m *catalog.EmbeddingModel) ([]byte, error) {
	answer, err := io.ReadAll(io.LimitReader(r, MaxResponse+1))
	switch {
	case err != nil:
		return nil, gwerr.New(gwerr.Upstream, "the answer of %s broke off", m.ID)
	case len(answer) > MaxResponse:
		return nil, gwerr.New(gwerr.Upstream, "the answer of %s is larger than %d bytes", m.ID, MaxResponse)
	case !jsonbody.Valid(answer) || !gjson.GetBytes(answer, "data").IsArray():
		return nil, gwerr.New(gwerr.Upstream, "the answer of %s could not be read", m.ID)
	}
	return answer, nil
}

// reported is the input tokens the provider's answer reports
// (usage.prompt_tokens), when it reports a usable count.
func reported(answer []byte) (int64, bool) {
	v := gjson.GetBytes(answer, "usage.prompt_tokens")
	n, ok := wholeNumber(v)
	return n, ok && n > 0
}

// readBody reads the request body, at most MaxBody bytes.
func readBody(c *pipeline.Call) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(c.W, c.R.Body, MaxBody))
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, gwerr.New(gwerr.TooLarge, "the body is larger than %d bytes", MaxBody)
	}
	if err != nil {
		return nil, gwerr.New(gwerr.Invalid, "the body could not be read").WithParam("body")
	}
	return b, nil
}

// Package chat serves the chat endpoints in both wire formats: POST
// /v1/chat/completions, POST /v1/responses and POST {alt}/v1/messages (and
// count_tokens). A request is routed through its alias to backing models,
// sent to the model's provider (translated when the formats differ, streams
// event by event), escalated to a stronger model when the chosen one fails
// before anything reached the client, and billed through the money gate.
package chat

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"go.uber.org/zap"

	"github.com/caddy-gw/caddy-gw/internal/answercache"
	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
	"github.com/caddy-gw/caddy-gw/internal/lanes"
	"github.com/caddy-gw/caddy-gw/internal/limits"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/translate"
	"github.com/caddy-gw/caddy-gw/internal/upstream"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// Limits of the chat endpoints.
const (
	// MaxBody is the largest request body (images travel inline).
	MaxBody = 32 << 20
	// MaxResponse is the largest non-streamed upstream answer read.
	MaxResponse = 64 << 20
	// MaxAttempts bounds the models one request tries (the chosen one and
	// escalations).
	MaxAttempts = 3
)

// Handler serves the chat endpoints.
type Handler struct {
	// Picker picks the backing models each request tries.
	Picker    *lanes.Picker
	Upstream  *upstream.Client
	Decisions lanes.DecisionStore
	// Cache, when set, answers repeated non-streaming temperature-0
	// requests of one account.
	Cache *answercache.Cache
	// Opinions bounds concurrent second opinions; nil refuses them (503).
	Opinions *Opinions
	// Betas is the table of betas forwarded to messages-style models (nil:
	// the default table).
	Betas Betas
	// CountBytes is the budget of body bytes each key's count_tokens calls
	// take from (see CountTokens); a Limit of 0 means none.
	CountBytes limits.Budget
}

// ChatCompletions serves POST /v1/chat/completions.
func (h *Handler) ChatCompletions(c *pipeline.Call) error { return h.serve(c, ChatCompletions) }

// Responses serves POST /v1/responses.
func (h *Handler) Responses(c *pipeline.Call) error { return h.serve(c, Responses) }

// Messages serves POST {alt}/v1/messages.
func (h *Handler) Messages(c *pipeline.Call) error { return h.serve(c, Messages) }

// call is one chat request on its way.
type call struct {
	*pipeline.Call
	h       *Handler
	format  Format
	body    []byte
	req     *request
	route   *lanes.Route
	betas   *callBetas // nil: none to forward
	started time.Time
	// cacheable: the answer goes into the cache.
	cacheable bool
	// lowered: the attempt under way was sent an output limit the
	// gateway lowered (HeaderOutputLimit is set).
	lowered bool
	// committed: the first byte of a stream went to the client; the call
	// can no longer move to another model, and it finishes (and is billed)
	// even if the client leaves.
	committed atomic.Bool
	// broke: the provider's answer to the current attempt failed after it
	// began (counted as a failed upstream attempt).
	broke bool
	// reach is how the attempt under way reaches its model.
	reach reach
}

func (h *Handler) serve(c *pipeline.Call, f Format) error {
	body, err := readBody(c, MaxBody)
	if err != nil {
		return err
	}
	req, err := parse(body, f)
	if err != nil {
		return err
	}
	rt, err := h.Picker.Pick(req.model, req.needs)
	if err != nil {
		return err
	}
	if err := c.AllowModel(rt.Requested); err != nil {
		return err
	}
	betas, err := h.betasFor(c.R, c.Gateway.Catalog, rt)
	if err != nil {
		return err
	}
	if req.secondOpinion {
		if err := h.Opinions.admit(req, rt.Requested, len(body)); err != nil {
			return err
		}
	}
	cl := &call{Call: c, h: h, format: f, body: body, req: req, route: rt, betas: betas, started: time.Now()}
	// The cache is keyed on the body: an answer shaped by betas is not the
	// answer to the same body without them.
	cl.cacheable = !req.stream && req.temperatureZero && !req.secondOpinion && h.Cache != nil && (betas == nil || len(betas.names) == 0)
	if cl.cacheable {
		if hit, ok := h.Cache.Get(c.Account.ID, f.cacheSpace(), body); ok {
			cl.writeCached(hit)
			return nil
		}
	}
	var last error
	attempts := 0
	emptied := false // a model answered empty: the call escalated once for it
	for i, m := range rt.Candidates {
		if attempts == MaxAttempts {
			break
		}
		if i > 0 && !escalationAllowed(c.Key.Models, rt, m) {
			continue
		}
		attempts++
		m = betas.priced(c.Gateway.Catalog, m, m)
		// Each attempt holds its own model's estimate: an escalation to a
		// dearer model must pass the money check again.
		c.Release()
		limit, err := cl.reserve(m)
		if err != nil {
			if i == 0 {
				return err
			}
			return last
		}
		err = cl.attempt(m, i > 0, limit)
		if err == nil {
			return nil
		}
		last = err
		if c.R.Context().Err() != nil {
			// The client left: not the model's fault, and nobody to answer.
			return gwerr.New(gwerr.Unavailable, "the client closed the request")
		}
		if !upstream.Retryable(err) || selfInflicted(err, req) {
			// A failure the request itself explains is not the model's:
			// no other model is tried, and its health is untouched.
			break
		}
		h.Picker.Health.Fail(m.ID)
		if upstream.TimeoutsSpent(c.R.Context()) {
			// The call waited out its time-outs: no other model is tried.
			break
		}
		if isEmpty(err) {
			if emptied {
				break // an empty answer escalates once
			}
			emptied = true
		}
	}
	if cl.lowered {
		c.W.Header().Del(HeaderOutputLimit) // no attempt answered
	}
	return last
}

// LargeOutputTokens is the output limit past which a time-out waiting for
// a non-streamed answer is the request's own doing: a model asked for that
// much may well take longer than the provider's header time-out.
const LargeOutputTokens = 16384

// selfInflicted reports a failure the request explains, which must not
// steer the call to another model or count against the one that failed.
func selfInflicted(err error, req *request) bool {
	return gwerr.As(err).Kind == gwerr.Timeout && !req.stream && req.needs.MaxTokens > LargeOutputTokens
}

// escalationAllowed reports whether the key may be served by m when the
// call escalates beyond the model it asked for: m's lane or m itself must
// be on the key's list, or the key asked for gw-auto (which reaches every
// lane on its own).
func escalationAllowed(allowlist []string, rt *lanes.Route, m *catalog.Model) bool {
	return rt.Requested == catalog.AliasAuto || catalog.Allowed(allowlist, catalog.LaneAlias(m.Lane)) ||
		catalog.Allowed(allowlist, catalog.PinnedPrefix+m.ID)
}

// attempt sends the request to m, with the output limit the gateway
// lowered to what the account's money covers (0: none lowered). A
// returned error is retryable (per upstream.Retryable) only while nothing
// reached the client.
func (cl *call) attempt(m *catalog.Model, escalated bool, limit int) error {
	p := cl.Gateway.Catalog.Providers[m.Provider]
	rc := reachOf(p, m.ID)
	if served := cl.format.spec().servedBy; served != nil && rc.native == nil && served(p) {
		rc.format = cl.format
	}
	target := rc.format
	cl.reach = rc
	body := cl.body
	if cl.lowered {
		cl.W.Header().Del(HeaderOutputLimit) // an earlier attempt's
		cl.lowered = false
	}
	if limit > 0 {
		// Sent as if the client had set it, so every translation carries
		// it; the answer announces it, and is not cached (a later call
		// with more money left would get a longer one).
		var err error
		if body, err = sjson.SetBytes(cl.body, cl.format.spec().outputLimit[0], limit); err != nil {
			return gwerr.New(gwerr.Invalid, "the request cannot be sent to %s: %v", m.ID, err)
		}
		cl.W.Header().Set(HeaderOutputLimit, strconv.Itoa(limit))
		cl.cacheable, cl.lowered = false, true
	}
	body, path, err := rc.requestFor(body, cl.format, p, m.ID, cl.req.stream)
	if err != nil {
		return gwerr.New(gwerr.Invalid, "the request cannot be sent to %s: %v", m.ID, err)
	}
	// The upstream call outlives the client only once a stream has started
	// reaching it: from then on the answer is being delivered and billed,
	// so a client that hangs up still pays for what the provider made
	// (bounded by the provider's idle time-out). Before that (and for a
	// whole answer, always), a client gone cancels the call.
	ctx := cl.R.Context()
	if cl.req.stream {
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(context.WithoutCancel(ctx))
		defer cancel()
		stop := context.AfterFunc(cl.R.Context(), func() {
			if !cl.committed.Load() {
				cancel()
			}
		})
		defer stop()
	}
	resp, err := cl.h.Upstream.Do(ctx, upstream.Request{Provider: p, Path: path, Body: body, Client: cl.R,
		Betas: cl.betas.forwarded(cl.Gateway.Catalog, m), Tokens: int64(cl.req.needs.PromptTokens)})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	cl.broke = false
	if cl.req.stream {
		err = cl.stream(rc.streamOf(resp.Body, m.ID), m, target, escalated)
	} else {
		err = cl.whole(resp.Body, resp.ContentLength, m, target, escalated)
	}
	var ue *upstream.Error
	switch {
	case isEmpty(err):
		upstream.Empty(resp.Body)
	case cl.broke || errors.As(err, &ue):
		upstream.Broke(resp.Body)
	}
	return err
}

// emptyAnswer is the failure of an answer that came whole with nothing in
// it: set aside, and escalated at most once in a call.
type emptyAnswer struct{ err *upstream.Error }

func (e emptyAnswer) Error() string { return e.err.Error() }

// Unwrap lets errors.As find the upstream.Error.
func (e emptyAnswer) Unwrap() error { return e.err }

// errEmpty is the failure of m's empty answer; retryable tells whether
// another model may be tried.
func errEmpty(m *catalog.Model, retryable bool) error {
	return emptyAnswer{&upstream.Error{Err: gwerr.New(gwerr.Upstream, "%s gave an empty answer", m.ID), Retryable: retryable}}
}

// isEmpty reports whether err is an empty answer's failure.
func isEmpty(err error) bool {
	var e emptyAnswer
	return errors.As(err, &e)
}

// readFailed is the failure of m's answer whose reading failed with err
// before anything reached the client: a time-out when the provider fell
// silent past its idle time-out, otherwise an answer that broke off
// (what, "answer" or "stream"). Either may be tried on another model.
func readFailed(m *catalog.Model, what string, err error) error {
	if errors.Is(err, upstream.ErrIdle) {
		return &upstream.Error{Err: gwerr.New(gwerr.Timeout, "the %s of %s fell silent for longer than its idle time-out", what, m.ID), Retryable: true}
	}
	return &upstream.Error{Err: gwerr.New(gwerr.Upstream, "the %s of %s broke off", what, m.ID), Retryable: true}
}

// whole serves a non-streaming answer of size bytes (-1: unknown).
func (cl *call) whole(r io.Reader, size int64, m *catalog.Model, from Format, escalated bool) error {
	b, err := readAll(io.LimitReader(r, MaxResponse+1), size)
	if err != nil {
		return readFailed(m, "answer", err)
	}
	if len(b) > MaxResponse {
		// Cut, it cannot be served (and its usage, written last, is
		// lost): a failed call, billed nothing. The request's own size
		// explains it, so no other model is tried.
		return &upstream.Error{Err: gwerr.New(gwerr.Upstream, "the answer of %s is larger than %d bytes", m.ID, MaxResponse)}
	}
	if b, err = cl.reach.answerOf(b, m.ID); err != nil {
		return &upstream.Error{Err: gwerr.New(gwerr.Upstream, "the answer of %s could not be read: %v", m.ID, err), Retryable: true}
	}
	reported, empty := readAnswer(from, b)
	if !reported.Valid() {
		return &upstream.Error{Err: gwerr.New(gwerr.Upstream, "%s reported usage that cannot be right", m.ID), Retryable: true}
	}
	if empty && !cl.req.stops {
		// An empty answer after the request's own stop sequences is the
		// answer it asked for: served and billed, not escalated.
		return errEmpty(m, true)
	}
	out, err := responseFor(b, from, cl.format, m.ID)
	if err != nil {
		return &upstream.Error{Err: gwerr.New(gwerr.Upstream, "the answer of %s could not be read: %v", m.ID, err), Retryable: true}
	}
	usage := cl.billable(m, reported, func() int64 { return outputTokens(from, b) })
	bill := cl.priced(m, usage, escalated)
	if bill.Cost, err = cl.Charge(bill); err != nil {
		return err
	}
	cl.h.Picker.Health.OK(m.ID)
	cl.record(m, escalated, bill.Cost)
	h := cl.W.Header()
	if cl.req.secondOpinion {
		op, checkCost, err := cl.secondOpinion(out)
		if err != nil {
			op = &opinion{Verdict: verdictUnavailable, Notes: gwerr.As(err).Message}
		} else {
			bill.Cost += checkCost // the receipt shows both charges
			if op.Verdict != verdictUnavailable {
				h.Set(HeaderSecondOpinion, op.Verdict)
			}
		}
		if b, err := sjson.SetBytes(out, "second_opinion", op); err == nil {
			out = b
		}
	}
	bill.Receipt = pipeline.ChatReceipt
	cl.WriteReceipt(bill)
	pipeline.WriteWhole(cl.W, http.StatusOK, "application/json", out)
	if cl.cacheable {
		cl.h.Cache.Put(cl.Account.ID, cl.format.cacheSpace(), cl.body, answercache.Hit{Body: out, Model: m.ID})
	}
	return nil
}

// billable is the usage an answer of m is billed for (see billable): the
// prompt counted from the client's body, the output by output. A count
// used in place of the provider's is logged.
func (cl *call) billable(m *catalog.Model, reported translate.Usage, output func() int64) translate.Usage {
	return cl.billableAs(cl.RequestID, m, reported, func() int64 { return int64(promptTokens(cl.format, cl.body)) }, output)
}

// billableAs is billable for the answer billed under ledger id, with its
// own prompt count.
func (cl *call) billableAs(id string, m *catalog.Model, reported translate.Usage, prompt, output func() int64) translate.Usage {
	u, counted := billable(reported, prompt, output)
	if counted {
		cl.Gateway.Logger.Warn("answer without usable usage: billed from the gateway's own count", zap.String("request_id", id),
			zap.String("model", m.ID), zap.Int64("input_tokens", u.Input), zap.Int64("output_tokens", u.Output))
	}
	return u
}

// bill is the charge of usage on m at cost, under the ledger id id (the
// request id when empty), with the route's facts for the receipt.
func (cl *call) bill(m *catalog.Model, u translate.Usage, cost pricing.Money, id string) pipeline.Bill {
	return pipeline.Bill{ID: id, Units: u.Input + u.Output, Unit: pricing.UnitToken, Model: m.ID, Alias: cl.route.Requested,
		Routed: !cl.route.Pinned, Cost: cost,
		Tokens: pipeline.Tokens{Input: u.Uncached(), Output: u.Output, CacheRead: u.CachedInput, CacheWrite: u.CacheWrite}}
}

// priced is the bill of m's answer with usage u, at its price (see cost),
// with the lane it was billed at and whether it escalated.
func (cl *call) priced(m *catalog.Model, u translate.Usage, escalated bool) pipeline.Bill {
	b := cl.bill(m, u, 0, "")
	b.Cost, b.Lane = cl.cost(m, u, escalated)
	b.Escalated = escalated
	return b
}

// writeCached answers from the cache: no upstream call, no charge.
func (cl *call) writeCached(hit answercache.Hit) {
	cl.CacheHit()
	cl.WriteReceipt(pipeline.Bill{Receipt: pipeline.ChatReceipt, Model: hit.Model, Alias: cl.route.Requested, Routed: !cl.route.Pinned})
	pipeline.WriteWhole(cl.W, http.StatusOK, "application/json", hit.Body)
}

// cost prices usage on m, or at the lane's price when the account has lane
// billing and asked gw-auto; lane is the billed lane then.
func (cl *call) cost(m *catalog.Model, u translate.Usage, escalated bool) (pricing.Money, string) {
	prices := m
	lane := ""
	if cl.Account.LaneBilling && cl.route.Requested == catalog.AliasAuto {
		lane = billedLane(cl.route.Lane)
		if lp := cl.Gateway.Catalog.LanePrice(lane); lp != nil {
			prices = cl.betas.priced(cl.Gateway.Catalog, m, lp)
		}
	}
	cost := pricing.Cost(cl.Account.PAYG, usageLines(prices, u)...)
	if escalated {
		// An escalation is not the lane's choice: it is billed at the
		// dearer of the lane and the model that served, so a request
		// cannot steer itself onto a stronger model at the lane's price.
		cost = max(cost, pricing.Cost(cl.Account.PAYG, usageLines(m, u)...))
	}
	return cost, lane
}

// billedLane is the lane a gw-auto call is billed at: fast work at the
// fast lane's price, everything else at the standard lane's.
func billedLane(lane string) string {
	if lane == catalog.LaneFast {
		return catalog.LaneFast
	}
	return catalog.LaneStandard
}

// usageLines prices usage at m's list prices: uncached input, cached
// input (at the input price when the model has no cached price), input
// written to the cache (at the input price when the model has no cache
// write price) and output.
func usageLines(m *catalog.Model, u translate.Usage) []pricing.Line {
	return []pricing.Line{
		{Units: u.Uncached(), Rate: pricing.PerMillion(m.InputPrice)},
		{Units: u.CachedInput, Rate: pricing.PerMillion(m.CachedRate())},
		{Units: u.CacheWrite, Rate: pricing.PerMillion(m.CacheWriteRate())},
		{Units: u.Output, Rate: pricing.PerMillion(m.OutputPrice)},
	}
}

// record keeps the routing decision for flux_explain.
func (cl *call) record(m *catalog.Model, escalated bool, cost pricing.Money) {
	if cl.h.Decisions == nil {
		return
	}
	ids := make([]string, len(cl.route.Candidates))
	for i, c := range cl.route.Candidates {
		ids[i] = c.ID
	}
	cl.h.Decisions.Put(lanes.Decision{ID: cl.RequestID, AccountID: cl.Account.ID, Time: cl.started, Requested: cl.route.Requested,
		Kind: cl.route.Kind, Lane: cl.route.Lane, Vision: cl.req.needs.Vision, Tools: cl.req.needs.Tools, Prompt: cl.req.needs.PromptTokens,
		Candidates: ids, Chosen: m.ID, Escalated: escalated, Cost: cost, Latency: time.Since(cl.started)})
}

// presizeMost bounds the buffer readAll makes up front from a declared
// length, so a length declared and never sent costs no more than this.
const presizeMost = 64 << 10

// readAll is io.ReadAll with its buffer made once when the body's length
// is known (size, a Content-Length, up to presizeMost), rather than grown
// from 512 bytes by doubling: one byte more than size, where the end is
// read. A wrong size only costs a copy.
func readAll(r io.Reader, size int64) ([]byte, error) {
	if size <= 0 || size > presizeMost {
		return io.ReadAll(r)
	}
	b := make([]byte, 0, size+1)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // longer than declared: grow as append does
		}
	}
}

// readBody reads a request body of at most limit bytes.
func readBody(c *pipeline.Call, limit int64) ([]byte, error) {
	b, err := readAll(http.MaxBytesReader(c.W, c.R.Body, limit), c.R.ContentLength)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, gwerr.New(gwerr.TooLarge, "the body is larger than %d bytes", limit)
	}
	if err != nil {
		return nil, gwerr.New(gwerr.Invalid, "the body could not be read").WithParam("body")
	}
	return b, nil
}

// requestFor turns a client body of format from into the body and path
// for an upstream of format to, with model set and, for a chat-completions
// upstream asked to stream, usage requested in the stream. The body is one
// parse accepted (a JSON object, checked), so the same format needs no
// second check.
func requestFor(body []byte, from, to Format, model string, stream bool) ([]byte, string, error) {
	if from != to {
		var err error
		if body, err = translateRequest(body, from, to, model); err != nil {
			return nil, "", err
		}
	}
	// The edits in one pass, on the client's body or the translation.
	if out, ok := sameFormat(body, to, model, stream); ok {
		return out, to.spec().path, nil
	}
	return editRequest(body, to, to, model, stream)
}

// translateRequest is a body of format from in format to, for model.
func translateRequest(body []byte, from, to Format, model string) ([]byte, error) {
	t, err := translatorFor(from, to)
	if err != nil {
		return nil, err
	}
	return t.request(body, model)
}

// editRequest is requestFor by translation and edits, one after the
// other (sameFormat does the edits in one pass where it can).
func editRequest(body []byte, from, to Format, model string, stream bool) ([]byte, string, error) {
	var out []byte
	var err error
	if from == to {
		out, err = sjson.SetBytes(body, "model", model)
	} else {
		out, err = translateRequest(body, from, to, model)
	}
	if err != nil {
		return nil, "", err
	}
	if out, err = sjson.DeleteBytes(out, "second_opinion"); err != nil {
		return nil, "", err
	}
	if out, err = boundOutput(out, to); err != nil {
		return nil, "", err
	}
	spec := to.spec()
	if spec.streamUsage && stream {
		if out, err = sjson.SetBytes(out, "stream_options.include_usage", true); err != nil {
			return nil, "", err
		}
	}
	if spec.unstored {
		if out, err = sjson.SetBytes(out, "store", false); err != nil {
			return nil, "", err
		}
	}
	return out, spec.path, nil
}

// sameFormat is requestFor's body where the formats agree, edited in
// place in one pass over the client's top level (a checked body: one value
// a key), with the same edits as the general path: model set,
// second_opinion dropped, an output limit sent as null dropped and the
// default added when none is left, store false where the format's
// providers keep answers, and usage asked for in a stream whose format
// reports it only when asked. Everything else stays
// as the client wrote it, byte for byte; added members go last. ok is
// false where it leaves the body to the general path: a streamed call
// whose stream_options the client set, or a body that is not an object.
func sameFormat(body []byte, f Format, model string, stream bool) (out []byte, ok bool) {
	root := jsonbody.Parse(body)
	if !root.IsObject() {
		return nil, false
	}
	// Each member's key start and value end; value set for the model.
	type member struct {
		key, value, end int
		drop, model     bool
	}
	var members []member
	spec := f.spec()
	limits, usage := spec.outputLimit, spec.streamUsage && stream
	ok, named, bounded := true, false, false
	root.ForEach(func(k, v gjson.Result) bool {
		m := member{key: k.Index, value: v.Index, end: v.Index + len(v.Raw)}
		switch {
		case k.Str == "model":
			m.model, named = true, true
		case k.Str == "second_opinion", spec.unstored && k.Str == "store":
			m.drop = true
		case usage && k.Str == "stream_options":
			ok = false
			return false
		case slices.Contains(limits, k.Str):
			m.drop, bounded = v.Type == gjson.Null, bounded || v.Type != gjson.Null
		}
		members = append(members, m)
		return true
	})
	if !ok {
		return nil, false
	}
	// The text before the first member ("{"), between two (one comma), and
	// after the last (up to and past "}"), all as written; gjson's
	// offsets are the body's.
	brace := bytes.LastIndexByte(body, '}')
	out = make([]byte, 0, len(body)+len(model)+64)
	tail := root.Index + 1
	if len(members) > 0 {
		tail = members[len(members)-1].end
		out = append(out, body[:members[0].key]...)
	} else {
		out = append(out, body[:tail]...)
	}
	written := false
	for i, m := range members {
		if m.drop {
			continue
		}
		if written {
			out = append(out, body[members[i-1].end:m.key]...)
		}
		written = true
		if m.model {
			out = jsonbody.AppendString(append(out, body[m.key:m.value]...), model)
			continue
		}
		out = append(out, body[m.key:m.end]...)
	}
	out = append(out, body[tail:brace]...)
	add := func(key, value string) {
		if written {
			out = append(out, ',')
		}
		written = true
		out = append(append(append(append(out, '"'), key...), '"', ':'), value...)
	}
	if !named {
		add("model", string(jsonbody.AppendString(nil, model)))
	}
	if !bounded {
		add(limits[0], strconv.Itoa(lanes.DefaultMaxTokens))
	}
	if usage {
		add("stream_options", `{"include_usage":true}`)
	}
	if spec.unstored {
		add("store", "false")
	}
	return append(out, body[brace:]...), true
}

// boundOutput sets the upstream's output limit to lanes.DefaultMaxTokens
// when the request has none, so that the reservation (which assumes that
// limit) is an upper bound of what the call can cost. A limit sent as null
// is none (providers read it as absent): it is dropped and replaced.
func boundOutput(body []byte, f Format) ([]byte, error) {
	bounded, limits := false, f.spec().outputLimit
	for _, field := range limits {
		switch v := gjson.GetBytes(body, field); {
		case v.Type == gjson.Null && v.Exists():
			var err error
			if body, err = sjson.DeleteBytes(body, field); err != nil {
				return nil, err
			}
		case v.Exists():
			bounded = true
		}
	}
	if bounded {
		return body, nil
	}
	return sjson.SetBytes(body, limits[0], lanes.DefaultMaxTokens)
}

// responseFor turns an upstream answer of format from into the client's
// format to, reporting model.
func responseFor(body []byte, from, to Format, model string) ([]byte, error) {
	if from == to {
		return body, nil
	}
	t, err := translatorFor(to, from)
	if err != nil {
		return nil, err
	}
	return t.response(body, model)
}

package chat

import (
	"io"
	"net/http"
	"slices"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
	"github.com/caddy-gw/caddy-gw/internal/lanes"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/tokens"
	"github.com/caddy-gw/caddy-gw/internal/translate"
	"github.com/caddy-gw/caddy-gw/internal/upstream"
)

// perMessageTokens is added per message by the local count, for the role
// and the separators a chat template adds around it.
const perMessageTokens = 4

// CountTokens serves POST {alt}/v1/messages/count_tokens: asked of the
// routed model's provider when it speaks the messages format, counted
// locally with the o200k tokenizer otherwise. Never streams, never billed.
// Counting costs CPU by the byte, so the body's length is taken from the
// key's CountBytes budget before any of it is read as JSON (429 beyond
// it), and a body larger than the whole budget is refused 413.
func (h *Handler) CountTokens(c *pipeline.Call) error {
	body, err := readBody(c, h.countBodyLimit())
	if err != nil {
		return err
	}
	if h.CountBytes.Limit > 0 {
		if err := c.TakeKey(h.CountBytes, int64(len(body))); err != nil {
			return err
		}
	}
	root := gjson.ParseBytes(body)
	if jsonbody.Check(body) != nil || !root.IsObject() {
		return invalid("body", "the body must be a JSON object")
	}
	if !root.Get("messages").IsArray() {
		return invalid("messages", "messages must be an array of messages")
	}
	model := root.Get("model").String()
	rt, err := h.Picker.Pick(model, parseNeedsLoose(body))
	if err != nil {
		return err
	}
	if err := c.AllowModel(rt.Requested); err != nil {
		return err
	}
	m := rt.Candidates[0]
	p := c.Gateway.Catalog.Providers[m.Provider]
	var n int
	if rc := reachOf(p, m.ID); rc.native != nil && rc.counts() {
		// A cloud counts the prompts of some of its models only: for the
		// others, or when it cannot answer, the gateway counts.
		if n, err = h.countNative(c, p, m, rc, body, Messages); err != nil {
			n, err = countLocal(messagesMembers, root)
		}
	} else if rc.counts() {
		var betas *callBetas
		if betas, err = h.betas().forCall(c.R.Header); err != nil {
			return err
		}
		n, err = h.countUpstream(c, p, m, root, betas.names)
	} else {
		n, err = countLocal(messagesMembers, root)
	}
	if err != nil {
		return err
	}
	return pipeline.WriteJSON(c.W, http.StatusOK, map[string]int{"input_tokens": n})
}

// countBodyLimit is the largest count_tokens body: MaxBody, or the whole
// CountBytes budget when that is smaller (a larger body could never be
// counted).
func (h *Handler) countBodyLimit() int64 {
	if l := h.CountBytes.Limit; l > 0 {
		return min(l, MaxBody)
	}
	return MaxBody
}

// looseFormat is the format a count_tokens body is read in for routing:
// one whose reading requires no output limit (the body has no max_tokens).
const looseFormat = ChatCompletions

// parseNeedsLoose reads what routing needs from a count_tokens body, which
// has no max_tokens.
func parseNeedsLoose(body []byte) lanes.Needs {
	if req, err := parse(body, looseFormat); err == nil {
		return req.needs
	}
	return lanes.Needs{}
}

func setRaw(b []byte, path, raw string) ([]byte, error) {
	return sjson.SetRawBytes(b, path, []byte(raw))
}

// countUpstream asks m's provider to count the prompt of root (a body of
// the provider's format), with the call's checked betas: the members of
// root its format's table says the count endpoint takes, and the model.
func (h *Handler) countUpstream(c *pipeline.Call, p *catalog.Provider, m *catalog.Model, root gjson.Result, betas []string) (int, error) {
	out := []byte(`{}`)
	table := reachOf(p, m.ID).format.spec().billing
	var err error
	root.ForEach(func(k, v gjson.Result) bool {
		if table.rule(k.Str).countable {
			out, err = setRaw(out, k.Str, v.Raw)
		}
		return err == nil
	})
	if err != nil {
		return 0, gwerr.New(gwerr.Invalid, "the body could not be read").WithParam("body")
	}
	if out, err = translate.SetModel(out, m.ID); err != nil {
		return 0, err
	}
	resp, err := h.Upstream.Do(c.R.Context(), upstream.Request{Provider: p, Path: upstream.PathCountTokens, Body: out, Client: c.R, Betas: betas})
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponse))
	n := gjson.GetBytes(b, "input_tokens")
	if err != nil || n.Type != gjson.Number {
		return 0, gwerr.New(gwerr.Upstream, "%s did not count the tokens", m.ID)
	}
	return int(n.Int()), nil
}

// countNative asks m's cloud API to count the prompt of body, a client
// body of format from, made the API's request.
func (h *Handler) countNative(c *pipeline.Call, p *catalog.Provider, m *catalog.Model, rc reach, body []byte, from Format) (int, error) {
	req, _, err := rc.requestFor(body, from, p, m.ID, false)
	if err == nil {
		req, err = rc.native.count.body(req, m.ID)
	}
	if err != nil {
		return 0, gwerr.New(gwerr.Invalid, "the prompt cannot be counted by %s: %v", m.ID, err)
	}
	resp, err := h.Upstream.Do(c.R.Context(), upstream.Request{Provider: p, Path: rc.native.count.path(p, m.ID), Body: req, Client: c.R})
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponse))
	var n int64
	if err == nil {
		n, err = rc.native.count.read(b)
	}
	if err != nil || n <= 0 {
		return 0, gwerr.New(gwerr.Upstream, "%s did not count the tokens", m.ID)
	}
	return int(n), nil
}

// promptTokens counts a client body of format f's prompt locally.
func promptTokens(f Format, body []byte) int {
	return f.spec().promptTokens(gjson.ParseBytes(body))
}

// countLocalPrompt is countLocal's count of a body with messages (0 when
// the tokenizer is unavailable).
func countLocalPrompt(t memberTable, root gjson.Result) int {
	n, _ := countLocal(t, root)
	return n
}

// countLocal counts a body with messages with the o200k tokenizer: the
// text of its system prompt and messages, plus perMessageTokens per
// message, and the JSON of every other member its format's table t bills
// as prompt (tool and function definitions, tool choice, output schemas).
func countLocal(t memberTable, root gjson.Result) (int, error) {
	if err := tokens.Load(); err != nil {
		return 0, gwerr.New(gwerr.Internal, "tokenizer unavailable: %v", err)
	}
	total := 0
	count := func(s string) { total += tokens.Count(s) }
	count(text(root.Get("system")))
	for _, m := range root.Get("messages").Array() {
		total += perMessageTokens
		count(text(m.Get("content")))
		m.Get("content").ForEach(func(_, part gjson.Result) bool {
			switch part.Get("type").String() {
			case "tool_use":
				count(part.Get("name").String() + part.Get("input").Raw)
			case "tool_result":
				count(text(part.Get("content")))
			}
			return true
		})
	}
	return total + countOthers(t, root, "system", "messages"), nil
}

// countOthers counts with the o200k tokenizer the JSON of the members of
// root that its format's table t bills as prompt (a prediction, billed as
// output when unused, is not), but those named in done (counted their own
// way).
func countOthers(t memberTable, root gjson.Result, done ...string) int {
	n := 0
	root.ForEach(func(k, v gjson.Result) bool {
		if t.rule(k.Str).billed == asPrompt && !slices.Contains(done, k.Str) {
			n += tokens.Count(v.Raw)
		}
		return true
	})
	return n
}

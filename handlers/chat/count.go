package chat

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"
	"github.com/tiktoken-go/tokenizer"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
	"github.com/caddy-gw/caddy-gw/internal/lanes"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
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
	if upstreamFormat(p).spec().counts {
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
	c.W.Header().Set("Content-Type", "application/json")
	c.W.WriteHeader(http.StatusOK)
	return json.NewEncoder(c.W).Encode(map[string]int{"input_tokens": n})
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
	table := upstreamFormat(p).spec().billing
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

// encoding is one tokenizer, loaded on first use.
type encoding struct {
	name  tokenizer.Encoding
	once  sync.Once
	codec tokenizer.Codec
	err   error
}

// The tokenizers the gateway counts with: o200k (the chat models'), and
// cl100k (OpenAI's embedding models').
var (
	o200k  = &encoding{name: tokenizer.O200kBase}
	cl100k = &encoding{name: tokenizer.Cl100kBase}
)

// get returns the tokenizer, loading it on first use.
func (e *encoding) get() (tokenizer.Codec, error) {
	e.once.Do(func() { e.codec, e.err = tokenizer.Get(e.name) })
	return e.codec, e.err
}

// count counts s chunk by chunk (CountChunk); ok is false when the
// tokenizer is unavailable.
func (e *encoding) count(s string) (total int, ok bool) {
	codec, err := e.get()
	if err != nil {
		return 0, false
	}
	for len(s) > 0 {
		cut := chunkEnd(s)
		n, _ := codec.Count(s[:cut])
		total += n
		s = s[cut:]
	}
	return total, true
}

// CountChunk is the most bytes the tokenizer reads at once. Its merging of
// one unbroken run of letters costs more than linear time in the run's
// length, so a longer text is counted chunk by chunk, cut before a space
// (where the tokenizer starts a new word anyway) or, in a run with none,
// at a character boundary: a client's 32 MiB word costs what 32 MiB of
// prose does.
const CountChunk = 512

// TextTokens counts s with the o200k tokenizer and with the cl100k one
// and gives the larger count, for the endpoints that reserve by a text's
// tokens whatever the model counts with; ok is false when either
// tokenizer is unavailable.
func TextTokens(s string) (n int, ok bool) {
	a, okA := o200k.count(s)
	b, okB := cl100k.count(s)
	return max(a, b), okA && okB
}

// countTokens counts s with the o200k tokenizer (0 when it is unavailable).
func countTokens(s string) int {
	n, _ := o200k.count(s)
	return n
}

// chunkEnd is where the first chunk of s ends: all of s when it fits in
// CountChunk, else before the last space within the chunk, else at the
// last character boundary within it.
func chunkEnd(s string) int {
	if len(s) <= CountChunk {
		return len(s)
	}
	if i := strings.LastIndexByte(s[:CountChunk], ' '); i > 0 {
		return i
	}
	i := CountChunk
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	if i == 0 {
		return CountChunk
	}
	return i
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
	if _, err := o200k.get(); err != nil {
		return 0, gwerr.New(gwerr.Internal, "tokenizer unavailable: %v", err)
	}
	total := 0
	count := func(s string) { total += countTokens(s) }
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
			n += countTokens(v.Raw)
		}
		return true
	})
	return n
}

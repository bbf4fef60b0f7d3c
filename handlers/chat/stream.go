package chat

import (
	"io"
	"net/http"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
	"github.com/caddy-gw/caddy-gw/internal/sse"
	"github.com/caddy-gw/caddy-gw/internal/translate"
	"github.com/caddy-gw/caddy-gw/internal/upstream"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// CostField is added to the final usage block of a stream: the cost, as
// a decimal string of US dollars exactly as charged (streams carry no
// X-Gw-Cost-Usd header).
const CostField = "cost_usd"

// stream relays an upstream stream of format from to the client, event by
// event. Until the first client event is ready nothing is written, so a
// failure up to then can still be escalated; after it, failures become an
// error event in the client's format and the call is not billed.
func (cl *call) stream(r io.Reader, m *catalog.Model, from Format, escalated bool) error {
	tr := streamFor(from, cl.format, m.ID)
	if a, ok := tr.(translate.PromptAnnouncer); ok {
		// The client's format reports input tokens before the provider's
		// usage arrives: it gets the gateway's own count of the prompt.
		a.AnnouncePrompt(int64(promptTokens(cl.format, cl.body)))
	}
	rd := sse.NewReader(r)
	var first []sse.Event
	for len(first) == 0 {
		ev, err := rd.Next()
		if err == io.EOF {
			first = tr.Close()
			if len(first) == 0 {
				// After the request's own stop sequences an empty answer is
				// not the model's failure: not retried elsewhere.
				return &upstream.Error{Err: gwerr.New(gwerr.Upstream, "%s gave an empty answer", m.ID), Retryable: !cl.req.stops}
			}
			break
		}
		if err != nil {
			return &upstream.Error{Err: gwerr.New(gwerr.Upstream, "the stream of %s broke off", m.ID), Retryable: true}
		}
		out, err := tr.Event(ev)
		if err != nil {
			return &upstream.Error{Err: gwerr.New(gwerr.Upstream, "the stream of %s could not be read: %v", m.ID, err), Retryable: true}
		}
		for _, o := range out {
			if isError(cl.format, o) {
				// The provider's words stay out (they may name the
				// operator's organisation and its limits).
				return &upstream.Error{Err: gwerr.New(gwerr.Upstream, "%s failed before its answer started", m.ID), Retryable: true}
			}
		}
		first = out
	}

	cl.committed.Store(true)
	h := cl.W.Header()
	h.Set(HeaderAlias, cl.route.Requested)
	sse.StartStream(cl.W)
	cl.W.WriteHeader(http.StatusOK)
	w := sse.NewWriter(cl.W)
	s := &relay{call: cl, m: m, tr: tr, w: w, escalated: escalated}
	// Events are queued as they are read and flushed together when the
	// upstream has sent nothing more yet: none waits for the next.
	rd.OnWait(s.flush)
	defer s.flush()
	if !s.write(first) {
		return nil
	}
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			s.fail("the upstream stream broke off")
			return nil
		}
		out, err := tr.Event(ev)
		if err != nil {
			s.fail("the upstream stream could not be read")
			return nil
		}
		if !s.write(out) {
			return nil
		}
	}
	if !tr.Done() {
		// The upstream ended without its terminal event: the answer may be
		// cut short, so it is a failed call, not a finished one.
		s.fail("the upstream ended the stream early")
		return nil
	}
	if !s.write(tr.Close()) {
		return nil
	}
	if !s.settled {
		s.settle(tr.Usage())
	}
	if cl.format == ChatCompletions && !s.sawDone && !s.gone {
		_ = w.WriteDone()
	}
	cl.h.Router.Health.OK(m.ID)
	return nil
}

// relay writes client events, settling at the final usage block.
type relay struct {
	*call
	m         *catalog.Model
	tr        translate.Stream
	w         *sse.Writer
	escalated bool
	settled   bool
	failed    bool
	sawDone   bool
	gone      bool // the client stopped reading
	// delivered counts the output tokens relayed so far (text, reasoning
	// and tool-call arguments, with the o200k tokenizer): what a stream
	// that fails is billed for when its provider reported no output. The
	// text is counted only when that happens, or a piece of
	// uncountedLimit at a time: undelivered holds what is not counted yet.
	delivered   int64
	undelivered []byte
	// seq is the sequence_number after the last event sent on a responses
	// stream: an event the gateway adds continues the numbering.
	seq int64
}

// write sends evs; false when the stream has ended (an error event went
// out, or the client is gone).
func (s *relay) write(evs []sse.Event) bool {
	for i, ev := range evs {
		if isError(s.format, ev) {
			// The error and what the translator sent after it (the
			// terminal event: [DONE], response.failed) end the stream,
			// in the gateway's words, not the provider's.
			s.failed = true
			s.billDelivered()
			for _, rest := range evs[i:] {
				_ = s.w.Write(scrubError(s.format, rest))
			}
			return false
		}
		if sse.IsDone(ev) {
			s.sawDone = true
		}
		if path, ok := finalUsagePath(s.format, ev); ok && !s.settled {
			_, cost, ok := s.settle(s.tr.Usage())
			if !ok {
				return false
			}
			if data, err := sjson.SetBytes(ev.Data, path+"."+CostField, cost.String()); err == nil {
				ev.Data = data
			}
		} else if at, ok := usageLacking(s.format, ev); ok && !s.settled {
			// The provider's final event carries no usage: the gateway's
			// count and its cost take its place, so the client still
			// gets its receipt.
			u, cost, ok := s.settle(s.tr.Usage())
			if !ok {
				return false
			}
			block := usageBlock(s.format, u, cost)
			if at == "" {
				if !s.gone && s.w.Queue(sse.Event{Data: usageChunk(s.m.ID, block)}) != nil {
					s.gone = true
				}
			} else if data, err := sjson.SetRawBytes(ev.Data, at, block); err == nil {
				ev.Data = data
			}
		}
		if s.undelivered = appendDelta(s.undelivered, s.format, ev); len(s.undelivered) >= uncountedLimit {
			s.countDelivered()
		}
		if s.format == Responses {
			if n := gjson.GetBytes(ev.Data, "sequence_number"); n.Type == gjson.Number {
				s.seq = n.Int() + 1
			}
		}
		if s.gone {
			continue
		}
		if err := s.w.Queue(ev); err != nil {
			// The client left; read on to the end so the answer it asked
			// for is billed (see call.committed).
			s.gone = true
		}
	}
	return true
}

// flush sends the queued events to the client.
func (s *relay) flush() {
	if !s.gone && s.w.Flush() != nil {
		s.gone = true
	}
}

// uncountedLimit bounds the delivered text a stream keeps uncounted.
const uncountedLimit = 256 << 10

// countDelivered adds the uncounted delivered text to delivered (what was
// queued goes out first: counting takes a while).
func (s *relay) countDelivered() {
	if len(s.undelivered) > 0 {
		s.flush()
		s.delivered += int64(countTokens(string(s.undelivered)))
		s.undelivered = s.undelivered[:0]
	}
}

// billDelivered charges a stream that failed for what it delivered: the
// usage the provider reported so far (none when it cannot be right), with
// the delivered output counted where it reported less (and the prompt
// counted locally where it reported none, as settle does). Nothing
// delivered, nothing billed.
func (s *relay) billDelivered() {
	s.countDelivered()
	if s.settled || s.delivered == 0 {
		return
	}
	u := s.tr.Usage()
	if !u.Valid() {
		u = translate.Usage{}
	}
	u.Output = max(u.Output, s.delivered)
	s.settle(u)
}

// appendDelta appends the generated text an event of format f carries
// (text, reasoning, refusal and tool-call deltas) to b.
func appendDelta(b []byte, f Format, ev sse.Event) []byte {
	// The event's data is read in place (jsonbody.String): the text is
	// copied into b before anything else happens to it.
	data := jsonbody.String(ev.Data)
	switch f {
	case Messages:
		if ev.Event != "content_block_delta" {
			return b
		}
		d := gjson.Get(data, "delta")
		b = append(b, d.Get("text").String()...)
		b = append(b, d.Get("partial_json").String()...)
		return append(b, d.Get("thinking").String()...)
	case Responses:
		if strings.HasSuffix(gjson.Get(data, "type").String(), ".delta") {
			return append(b, gjson.Get(data, "delta").String()...)
		}
		return b
	}
	if sse.IsDone(ev) {
		return b
	}
	gjson.Get(data, "choices").ForEach(func(_, c gjson.Result) bool {
		d := c.Get("delta")
		b = append(b, d.Get("content").String()...)
		b = append(b, d.Get("reasoning_content").String()...)
		b = append(b, d.Get("refusal").String()...)
		d.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
			b = append(b, tc.Get("function.name").String()...)
			b = append(b, tc.Get("function.arguments").String()...)
			b = append(b, tc.Get("custom.name").String()...)
			b = append(b, tc.Get("custom.input").String()...)
			return true
		})
		return true
	})
	return b
}

// settle charges the stream's usage (with the gateway's own count where
// the provider reported none: see billable); on usage that cannot be
// right, or a store failure, the client gets an error event instead of
// the usage block.
func (s *relay) settle(u translate.Usage) (translate.Usage, pricing.Money, bool) {
	// What was queued goes out before the wait for the charge's sync.
	s.flush()
	if !u.Valid() {
		// The stream fails; what it delivered is billed by the
		// gateway's own count (billDelivered).
		s.fail("the upstream reported usage that cannot be right")
		return u, 0, false
	}
	s.settled = true
	u = s.billable(s.m, u, func() int64 {
		s.countDelivered()
		return s.delivered
	})
	cost, _ := s.cost(s.m, u, s.escalated)
	if _, err := s.SettleTokens(u.Input, u.Output, s.m.ID, cost); err != nil {
		s.fail(gwerr.As(err).Message)
		return u, 0, false
	}
	s.record(s.m, s.escalated, cost)
	return u, cost, true
}

// fail ends the stream with an error event in the client's format: the
// translator's while its stream is open (it numbers its events), else the
// gateway's own, numbered after the last event sent (a pass-through
// stream, or a translated one that failed at its final event, e.g. when
// settling failed). What was delivered before the failure is billed
// (billDelivered).
func (s *relay) fail(msg string) {
	if s.failed {
		return
	}
	s.failed = true
	s.billDelivered()
	evs := translate.Fail(s.tr, "api_error", "upstream_error", msg)
	if len(evs) == 0 {
		evs = []sse.Event{errorEvent(s.format, msg, s.seq)}
		if s.format == ChatCompletions {
			evs = append(evs, sse.Event{Data: []byte("[DONE]")})
		}
	}
	for _, ev := range evs {
		_ = s.w.Write(ev)
	}
}

// errorEvent is the gateway's stream error in format f; seq numbers it on
// a responses stream.
func errorEvent(f Format, msg string, seq int64) sse.Event {
	switch f {
	case Messages:
		return translate.MessagesErrorEvent("api_error", msg)
	case Responses:
		return translate.ResponsesErrorEventAt("server_error", msg, seq)
	}
	return translate.ChatErrorEvent("api_error", "upstream_error", msg)
}

// isError reports an error event of format f.
func isError(f Format, ev sse.Event) bool {
	switch f {
	case Messages:
		return ev.Event == "error"
	case Responses:
		t := gjson.GetBytes(ev.Data, "type").String()
		return ev.Event == "error" || t == "error" || t == "response.failed"
	}
	return !sse.IsDone(ev) && mayHold(jsonbody.String(ev.Data), "error") && gjson.GetBytes(ev.Data, "error").Exists()
}

// ProviderFailedMessage replaces a provider's own message in an error
// event it sent mid-stream: its words may name the operator's organisation,
// account or limits; the event keeps its type and code.
const ProviderFailedMessage = "the provider failed while answering; retry"

// scrubError puts ProviderFailedMessage in place of every message an
// error event of format f carries; other events pass unchanged.
func scrubError(f Format, ev sse.Event) sse.Event {
	if !isError(f, ev) {
		return ev
	}
	data := ev.Data
	for _, p := range []string{"error.message", "message", "response.error.message"} {
		if v := gjson.GetBytes(data, p); v.Exists() && v.Type != gjson.Null {
			if b, err := sjson.SetBytes(data, p, ProviderFailedMessage); err == nil {
				data = b
			}
		}
	}
	ev.Data = data
	return ev
}

// usageLacking finds the final event of format f when it carries no
// usage, and where a usage object goes in it ("": a chat-completions
// stream's [DONE], before which a usage chunk of its own goes).
func usageLacking(f Format, ev sse.Event) (string, bool) {
	switch f {
	case Messages:
		return "usage", ev.Event == "message_delta" && !gjson.GetBytes(ev.Data, "usage").IsObject()
	case Responses:
		return "response.usage", responsesFinal[gjson.GetBytes(ev.Data, "type").String()] && !gjson.GetBytes(ev.Data, "response.usage").IsObject()
	}
	return "", sse.IsDone(ev)
}

// usageBlock is a usage object of format f for u, with the cost charged.
func usageBlock(f Format, u translate.Usage, cost pricing.Money) []byte {
	b := []byte(`{}`)
	set := func(path string, v any) { b, _ = sjson.SetBytes(b, path, v) }
	switch f {
	case Messages:
		set("input_tokens", u.Uncached())
		set("cache_creation_input_tokens", u.CacheWrite)
		set("cache_read_input_tokens", u.CachedInput)
		set("output_tokens", u.Output)
	case Responses:
		set("input_tokens", u.Input)
		set("input_tokens_details.cached_tokens", u.CachedInput)
		set("output_tokens", u.Output)
		set("total_tokens", u.Input+u.Output)
	default:
		set("prompt_tokens", u.Input)
		set("prompt_tokens_details.cached_tokens", u.CachedInput)
		set("completion_tokens", u.Output)
		set("total_tokens", u.Input+u.Output)
	}
	set(CostField, cost.String())
	return b
}

// usageChunk is a chat-completions chunk of model that carries only usage.
func usageChunk(model string, usage []byte) []byte {
	b, _ := sjson.SetRawBytes([]byte(`{"object":"chat.completion.chunk","choices":[]}`), "usage", usage)
	b, _ = sjson.SetBytes(b, "model", model)
	return b
}

// finalUsagePath finds the event of format f that carries the final usage,
// and the JSON path of its usage object.
func finalUsagePath(f Format, ev sse.Event) (string, bool) {
	switch f {
	case Messages:
		return "usage", ev.Event == "message_delta" && gjson.GetBytes(ev.Data, "usage").IsObject()
	case Responses:
		return "response.usage", responsesFinal[gjson.GetBytes(ev.Data, "type").String()]
	}
	return "usage", !sse.IsDone(ev) && mayHold(jsonbody.String(ev.Data), "usage") && gjson.GetBytes(ev.Data, "usage").IsObject()
}

// responsesFinal are the responses stream's terminal events that carry the
// usage of a finished answer: complete, or cut short by its output limit.
var responsesFinal = map[string]bool{"response.completed": true, "response.incomplete": true}

// streamFor returns the translator from an upstream format to the client's.
func streamFor(from, to Format, model string) translate.Stream {
	switch {
	case from == to:
		return &passthrough{format: from}
	case from == Messages && to == ChatCompletions:
		return translate.NewMessagesToChat(model)
	case from == ChatCompletions && to == Messages:
		return translate.NewChatToMessages(model)
	case from == ChatCompletions && to == Responses:
		return translate.NewChatToResponses(model)
	default: // Messages → Responses
		return translate.Chain(translate.NewMessagesToChat(model), translate.NewChatToResponses(model))
	}
}

// passthrough relays a same-format stream unchanged, reading its usage.
type passthrough struct {
	format Format
	usage  translate.Usage
	done   bool
}

func (p *passthrough) Event(ev sse.Event) ([]sse.Event, error) {
	switch p.format {
	case ChatCompletions:
		if sse.IsDone(ev) {
			p.done = true
		} else if mayHold(jsonbody.String(ev.Data), "usage") && gjson.GetBytes(ev.Data, "usage").IsObject() {
			p.usage = translate.ChatUsage(ev.Data)
		}
	case Messages:
		switch ev.Event {
		case "message_start":
			p.usage = translate.MessagesUsage([]byte(gjson.GetBytes(ev.Data, "message").Raw))
		case "message_delta":
			// message_delta's usage is cumulative; input counts may be
			// absent from it.
			u := translate.MessagesUsage(ev.Data)
			p.usage.Output = u.Output
			if u.Input > 0 {
				p.usage.Input, p.usage.CachedInput, p.usage.CacheWrite = u.Input, u.CachedInput, u.CacheWrite
			}
		case "message_stop":
			p.done = true
		}
	case Responses:
		if responsesFinal[gjson.GetBytes(ev.Data, "type").String()] {
			p.usage = translate.ResponsesUsage([]byte(gjson.GetBytes(ev.Data, "response").Raw))
			p.done = true
		}
	}
	return []sse.Event{ev}, nil
}

func (p *passthrough) Close() []sse.Event     { return nil }
func (p *passthrough) Usage() translate.Usage { return p.usage }
func (p *passthrough) Done() bool             { return p.done }

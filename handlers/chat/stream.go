package chat

import (
	"io"
	"net/http"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/sse"
	"github.com/caddy-gw/caddy-gw/internal/tokens"
	"github.com/caddy-gw/caddy-gw/internal/translate"
	"github.com/caddy-gw/caddy-gw/internal/upstream"
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
				return errEmpty(m, !cl.req.stops)
			}
			break
		}
		if err != nil {
			return readFailed(m, "stream", err)
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
	cl.WriteReceipt(pipeline.Bill{Receipt: pipeline.ChatStreamReceipt, Model: m.ID, Alias: cl.route.Requested})
	sse.StartStream(cl.W)
	cl.W.WriteHeader(http.StatusOK)
	w := sse.NewWriter(cl.W)
	s := &relay{call: cl, m: m, tr: tr, w: w, escalated: escalated, body: r}
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
			s.broken("the upstream stream broke off")
			return nil
		}
		out, err := tr.Event(ev)
		if err != nil {
			s.broken("the upstream stream could not be read")
			return nil
		}
		if !s.write(out) {
			return nil
		}
	}
	if !tr.Done() {
		// The upstream ended without its terminal event: the answer may be
		// cut short, so it is a failed call, not a finished one.
		s.broken("the upstream ended the stream early")
		return nil
	}
	if !s.write(tr.Close()) {
		return nil
	}
	if !s.settled {
		s.settle(tr.Usage())
	}
	if cl.format.spec().endsWithDone && !s.sawDone && !s.gone {
		_ = w.WriteDone()
	}
	cl.h.Picker.Health.OK(m.ID)
	return nil
}

// relay writes client events, settling at the final usage block.
type relay struct {
	*call
	m         *catalog.Model
	tr        translate.Stream
	w         *sse.Writer
	escalated bool
	// body is the provider's answer, told when the caller paid for it
	// whole (upstream.Paid).
	body    io.Reader
	settled bool
	failed  bool
	sawDone bool
	gone    bool // the client stopped reading
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
	spec := s.format.spec()
	for i, ev := range evs {
		if spec.isError(ev) {
			// The error and what the translator sent after it (the
			// terminal event: [DONE], response.failed) end the stream,
			// in the gateway's words, not the provider's.
			s.failed, s.broke = true, true
			s.billDelivered()
			for _, rest := range evs[i:] {
				_ = s.w.Write(scrubError(s.format, rest))
			}
			return false
		}
		if sse.IsDone(ev) {
			s.sawDone = true
		}
		if path, ok := spec.finalUsage(ev); ok && !s.settled {
			_, bill, ok := s.settle(s.tr.Usage())
			if !ok {
				return false
			}
			if data, err := sjson.SetBytes(ev.Data, path+"."+CostField, bill.CostUSD()); err == nil {
				ev.Data = data
			}
		} else if at, ok := spec.usageLacking(ev); ok && !s.settled {
			// The provider's final event carries no usage: the gateway's
			// count and its cost take its place, so the client still
			// gets its receipt.
			u, bill, ok := s.settle(s.tr.Usage())
			if !ok {
				return false
			}
			block := usageBlock(s.format, u, &bill)
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
		if spec.sequenced {
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
		s.delivered += int64(tokens.Count(string(s.undelivered)))
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
	return f.spec().appendDelta(b, jsonbody.String(ev.Data), ev)
}

// settle charges the stream's usage (with the gateway's own count where
// the provider reported none: see billable) and returns the bill charged,
// whose cost the stream's usage block shows; on usage that cannot be
// right, or a store failure, the client gets an error event instead of
// the usage block.
func (s *relay) settle(u translate.Usage) (translate.Usage, pipeline.Bill, bool) {
	// What was queued goes out before the wait for the charge's sync.
	s.flush()
	if !u.Valid() {
		// The stream fails; what it delivered is billed by the
		// gateway's own count (billDelivered).
		s.broken("the upstream reported usage that cannot be right")
		return u, pipeline.Bill{}, false
	}
	s.settled = true
	u = s.billable(s.m, u, func() int64 {
		s.countDelivered()
		return s.delivered
	})
	bill := s.priced(s.m, u, s.escalated)
	var err error
	if bill.Cost, err = s.Charge(bill); err != nil {
		s.fail(gwerr.As(err).Message)
		return u, pipeline.Bill{}, false
	}
	if !s.failed {
		// The whole answer's usage, not the part a failed stream
		// delivered (billDelivered): a failure after is no unpaid attempt.
		upstream.Paid(s.body)
	}
	s.record(s.m, s.escalated, bill.Cost)
	return u, bill, true
}

// fail ends the stream with an error event in the client's format: the
// translator's while its stream is open (it numbers its events), else the
// gateway's own, numbered after the last event sent (a pass-through
// stream, or a translated one that failed at its final event, e.g. when
// settling failed). What was delivered before the failure is billed
// (billDelivered).
// broken fails the stream for a fault of the provider's answer (msg),
// which counts as a failed upstream attempt.
func (s *relay) broken(msg string) {
	s.broke = true
	s.fail(msg)
}

func (s *relay) fail(msg string) {
	if s.failed {
		return
	}
	s.failed = true
	s.billDelivered()
	evs := translate.Fail(s.tr, "api_error", "upstream_error", msg)
	if len(evs) == 0 {
		spec := s.format.spec()
		evs = []sse.Event{spec.errorEvent(msg, s.seq)}
		if spec.endsWithDone {
			evs = append(evs, sse.Event{Data: []byte("[DONE]")})
		}
	}
	for _, ev := range evs {
		_ = s.w.Write(ev)
	}
}

// isError reports an error event of format f.
func isError(f Format, ev sse.Event) bool { return f.spec().isError(ev) }

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

// usageBlock is a usage object of format f for u, with the cost charged
// by bill.
func usageBlock(f Format, u translate.Usage, bill *pipeline.Bill) []byte {
	b, _ := sjson.SetBytes(f.spec().usageBlock(u), CostField, bill.CostUSD())
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
func finalUsagePath(f Format, ev sse.Event) (string, bool) { return f.spec().finalUsage(ev) }

// streamFor returns the translator from an upstream format to the
// client's (a pair of formats that has none is never routed: see
// translators).
func streamFor(from, to Format, model string) translate.Stream {
	if from == to {
		return &passthrough{format: from}
	}
	t, _ := translatorFor(to, from)
	return t.stream(model)
}

// passthrough relays a same-format stream unchanged, reading its usage.
type passthrough struct {
	format Format
	usage  translate.Usage
	done   bool
}

func (p *passthrough) Event(ev sse.Event) ([]sse.Event, error) {
	if p.format.spec().watch(ev, &p.usage) {
		p.done = true
	}
	return []sse.Event{ev}, nil
}

func (p *passthrough) Close() []sse.Event     { return nil }
func (p *passthrough) Usage() translate.Usage { return p.usage }
func (p *passthrough) Done() bool             { return p.done }

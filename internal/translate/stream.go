package translate

import (
	"errors"

	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
	"github.com/caddy-gw/caddy-gw/internal/sse"
	"github.com/tidwall/gjson"
)

// Stream translates one upstream event stream into the client's format, event
// by event. It keeps state and serves one response; it is not safe for
// concurrent use.
//
// The caller feeds every upstream event to Event and writes what comes back,
// in order, flushing as it goes. At upstream EOF it calls Close once and
// writes what that returns. Done tells whether the client's stream already got
// its terminal event: if it is still false at upstream EOF the upstream ended
// early, and the caller chooses between Close (a normal ending) and Fail (an
// error ending).
//
// Every Stream of this package writes complete client streams: a chat client
// stream ends with a "data: [DONE]" event produced by the Stream itself (the
// caller never writes [DONE] for a translated stream), a messages client
// stream with message_stop, a responses client stream with response.completed
// (or response.incomplete). Messages and responses events are named (the
// "event:" line), chat events are data-only.
type Stream interface {
	// Event translates one upstream event into zero or more client events.
	// An error means the upstream event could not be read (not JSON); the
	// Stream's state is unchanged and the caller may skip the event or end
	// the stream with Fail.
	Event(ev sse.Event) ([]sse.Event, error)
	// Close returns the events that end the client's stream (for example
	// message_stop, or the responses completed event) if the upstream did
	// not already produce them; call once at upstream EOF.
	Close() []sse.Event
	// Usage is the usage seen so far (final after Close).
	Usage() Usage
	// Done reports whether the client stream's terminal event was already
	// produced.
	Done() bool
}

// ErrBadEvent is returned by Stream.Event for an upstream event whose data is
// not JSON.
var ErrBadEvent = errors.New("translate: upstream event data is not JSON")

// failer is implemented by every Stream of this package.
type failer interface {
	fail(typ, code, message string) []sse.Event
}

// Fail returns the events that end the client's stream of s with an error,
// in the client's format, numbered in sequence for a responses client: for
// chat an error chunk and [DONE], for messages an error event, for responses
// an error event and response.failed. typ is the error type (chat and
// messages; "api_error" when empty), code the error code (chat and
// responses; typ when empty for responses). It returns nil when s is done or
// is not a Stream of this package; s is done afterwards.
func Fail(s Stream, typ, code, message string) []sse.Event {
	if f, ok := s.(failer); ok && !s.Done() {
		return f.fail(typ, code, message)
	}
	return nil
}

// ChatErrorEvent is a chat-completions-style stream error:
// data: {"error":{"message":..,"type":..,"param":null,"code":..}}. An empty
// code is null.
func ChatErrorEvent(typ, code, message string) sse.Event {
	e := set(obj(), "message", message)
	e = set(e, "type", typ)
	e = setRaw(e, "param", "null")
	if code == "" {
		e = setRaw(e, "code", "null")
	} else {
		e = set(e, "code", code)
	}
	return sse.Event{Data: setRawB(obj(), "error", e)}
}

// MessagesErrorEvent is a messages-style stream error: event: error, data:
// {"type":"error","error":{"type":..,"message":..}}.
func MessagesErrorEvent(typ, message string) sse.Event {
	b := set(obj(), "type", "error")
	b = set(b, "error.type", typ)
	b = set(b, "error.message", message)
	return sse.Event{Event: "error", Data: b}
}

// ResponsesErrorEvent is a responses-style stream error: event: error, data:
// {"type":"error","code":..,"message":..,"param":null,"sequence_number":0}
// (an empty code is null). The sequence number is 0: use Fail on a
// translating Stream to get the number that follows its last event.
func ResponsesErrorEvent(code, message string) sse.Event {
	return responsesError(code, message, 0)
}

// ResponsesErrorEventAt is ResponsesErrorEvent numbered seq: an event the
// gateway adds to a responses stream continues its sequence_number.
func ResponsesErrorEventAt(code, message string, seq int64) sse.Event {
	return responsesError(code, message, seq)
}

// PromptAnnouncer is a stream translator whose output format reports the
// prompt's size before the provider does (messages' message_start): it is
// told the gateway's own count.
type PromptAnnouncer interface {
	AnnouncePrompt(tokens int64)
}

func responsesError(code, message string, seq int64) sse.Event {
	b := set(obj(), "type", "error")
	b = set(b, "sequence_number", seq)
	if code == "" {
		b = setRaw(b, "code", "null")
	} else {
		b = set(b, "code", code)
	}
	b = set(b, "message", message)
	b = setRaw(b, "param", "null")
	// The same fields again under "error": the API has been seen sending
	// them nested, and clients such as openai-go report a stream error only
	// for data with a top-level "error".
	e := setRaw(set(obj(), "message", message), "code", gjsonRaw(b, "code"))
	b = setRawB(b, "error", e)
	return sse.Event{Event: "error", Data: b}
}

func gjsonRaw(b []byte, path string) string { return gjson.GetBytes(b, path).Raw }

// messagesErrorType maps a chat error (type, code) to a messages error type.
func messagesErrorType(typ, code string) string {
	switch {
	case typ == "invalid_request_error", typ == "authentication_error", typ == "permission_error",
		typ == "not_found_error", typ == "rate_limit_error", typ == "overloaded_error", typ == "api_error":
		return typ
	case code == "rate_limit_exceeded", typ == "rate_limit_exceeded", typ == "tokens":
		return "rate_limit_error"
	}
	return "api_error"
}

// chatError reads a chat error chunk's error: type, code and message.
func chatError(e gjson.Result) (typ, code, message string) {
	if e.Type == gjson.String {
		return "api_error", "", e.String()
	}
	message = e.Get("message").String()
	if message == "" {
		message = e.Raw
	}
	return e.Get("type").String(), e.Get("code").String(), message
}

// chatChunkClient is the client side of a Stream over an upstream chat
// stream (chatToMessages, chatToResponses); chatChunkEvent reads the chunks
// and calls it with their pieces, in order.
type chatChunkClient interface {
	Stream
	// end ends the client stream normally (at [DONE]).
	end() []sse.Event
	// chunkError ends it with the error of an error chunk.
	chunkError(e gjson.Result) []sse.Event
	// chunkUsage takes a chunk's usage object; it comes before start.
	chunkUsage(u gjson.Result)
	// start begins the client stream once, at the first chunk.
	start(id string, out []sse.Event) []sse.Event
	// text adds a content or refusal delta.
	text(t string, out []sse.Event) []sse.Event
	// toolCall adds a tool call delta; key tells the calls apart (see
	// chatToolKeys) and fn is the delta's "function".
	toolCall(key int64, id string, fn gjson.Result, out []sse.Event) []sse.Event
	// finishReason takes the first choice's finish_reason.
	finishReason(f string, out []sse.Event) []sse.Event
}

// chatChunkEvent translates one upstream chat event for c. Only the first
// choice is followed.
func chatChunkEvent(c chatChunkClient, keys *chatToolKeys, ev sse.Event) ([]sse.Event, error) {
	if c.Done() {
		return nil, nil
	}
	if sse.IsDone(ev) {
		return c.end(), nil
	}
	if !jsonbody.Valid(ev.Data) {
		return nil, ErrBadEvent
	}
	d := gjson.ParseBytes(ev.Data)
	if e := d.Get("error"); e.Exists() {
		return c.chunkError(e), nil
	}
	if u := d.Get("usage"); u.IsObject() {
		c.chunkUsage(u)
	}
	out := c.start(d.Get("id").String(), nil)
	choice := d.Get("choices.0")
	if ci := choice.Get("index"); ci.Exists() && ci.Int() != 0 {
		return out, nil
	}
	delta := choice.Get("delta")
	for _, k := range []string{"content", "refusal"} {
		if t := delta.Get(k); t.Type == gjson.String && t.String() != "" {
			out = c.text(t.String(), out)
		}
	}
	delta.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		id := tc.Get("id").String()
		out = c.toolCall(keys.key(tc.Get("index"), id), id, tc.Get("function"), out)
		return true
	})
	if f := choice.Get("finish_reason"); f.Type == gjson.String && f.String() != "" {
		out = c.finishReason(f.String(), out)
	}
	return out, nil
}

// chatToolKeys tells the tool calls of a chat stream apart. A delta's index
// is the key; a delta without one continues the last call, unless it brings
// a new id after an earlier call: then it starts the next.
type chatToolKeys struct {
	last   int64
	lastID string
	any    bool // a call was seen
}

func (k *chatToolKeys) key(index gjson.Result, id string) int64 {
	switch {
	case index.Type == gjson.Number:
		k.last = index.Int()
	case id != "" && id != k.lastID && k.any:
		k.last++
	}
	if id != "" {
		k.lastID = id
	}
	k.any = true
	return k.last
}

// Chain feeds a's output to b: for a responses client over a messages
// upstream, Chain(NewMessagesToChat(model), NewChatToResponses(model)).
// Usage is a's (the upstream's own count), Done is b's.
func Chain(a, b Stream) Stream { return &chain{a: a, b: b} }

type chain struct{ a, b Stream }

func (c *chain) Event(ev sse.Event) ([]sse.Event, error) {
	mid, err := c.a.Event(ev)
	if err != nil {
		return nil, err
	}
	return c.feed(mid)
}

func (c *chain) feed(mid []sse.Event) ([]sse.Event, error) {
	var out []sse.Event
	for _, m := range mid {
		evs, err := c.b.Event(m)
		if err != nil {
			return out, err
		}
		out = append(out, evs...)
	}
	return out, nil
}

func (c *chain) Close() []sse.Event {
	out, _ := c.feed(c.a.Close())
	return append(out, c.b.Close()...)
}

func (c *chain) Usage() Usage { return c.a.Usage() }
func (c *chain) Done() bool   { return c.b.Done() }

func (c *chain) fail(typ, code, message string) []sse.Event {
	return Fail(c.b, typ, code, message)
}

// named returns an event named like its data's type, as messages-style and
// responses-style streams are sent.
func named(data []byte) sse.Event {
	return sse.Event{Event: gjson.GetBytes(data, "type").String(), Data: data}
}

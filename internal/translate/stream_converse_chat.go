package translate

import (
	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/awsstream"
	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
	"github.com/caddy-gw/caddy-gw/internal/sse"
)

// NewConverseToChat translates a ConverseStream answer, read as events by
// awsstream.Reader (the event's name is the frame's event type, its data
// the frame's JSON), into chat chunks reporting model. The chunks are
// data-only events: a first chunk with the assistant role, content deltas
// for text deltas, a tool call for each toolUse block (its id and name at
// contentBlockStart, its input pieces as the arguments pieces,
// unchanged), the finish chunk at messageStop (see converseFinish); the
// metadata event, Converse's last, brings the usage and ends the stream
// with a usage chunk (empty choices, as with
// stream_options.include_usage: the gateway always sends it) and
// [DONE]. Reasoning deltas and unknown events are skipped. An
// awsstream.ErrorEvent (an exception the stream reports) becomes a chat
// error chunk followed by [DONE]; its type is the chat error type of the
// exception (throttlingException → rate_limit_error,
// serviceUnavailableException → overloaded_error, validationException →
// invalid_request_error, others api_error).
func NewConverseToChat(model string) Stream {
	return &converseToChat{model: model, created: now().Unix(), tools: map[int64]int{}}
}

type converseToChat struct {
	model    string
	id       string
	created  int64
	started  bool
	tools    map[int64]int // Converse block index → chat tool index
	nextTool int
	finish   string
	finished bool // finish chunk sent
	usage    Usage
	done     bool
}

func (c *converseToChat) Usage() Usage { return c.usage }
func (c *converseToChat) Done() bool   { return c.done }

// chunk renders a chat chunk with one choice.
func (c *converseToChat) chunk(delta []byte, finish string) sse.Event {
	ch := newObject().val("index", 0).raw("delta", delta).rawS("logprobs", "null")
	if finish == "" {
		ch = ch.rawS("finish_reason", "null")
	} else {
		ch = ch.val("finish_reason", finish)
	}
	return sse.Event{Data: c.head().raw("choices", rawArray([][]byte{ch.done()})).done()}
}

func (c *converseToChat) head() object {
	if c.id == "" {
		c.id = newID("chatcmpl-")
	}
	return newObject().val("id", c.id).val("object", "chat.completion.chunk").val("created", c.created).val("model", c.model)
}

// start returns the first chunk (the assistant role) once.
func (c *converseToChat) start() []sse.Event {
	if c.started {
		return nil
	}
	c.started = true
	return []sse.Event{c.chunk([]byte(`{"role":"assistant","content":""}`), "")}
}

func (c *converseToChat) Event(ev sse.Event) ([]sse.Event, error) {
	if c.done {
		return nil, nil
	}
	if !jsonbody.Valid(ev.Data) {
		return nil, ErrBadEvent
	}
	d := gjson.ParseBytes(ev.Data)
	switch ev.Event {
	case "messageStart":
		return c.start(), nil
	case "contentBlockStart":
		use := d.Get("start.toolUse")
		if !use.IsObject() {
			return nil, nil
		}
		ti := c.nextTool
		c.nextTool++
		c.tools[d.Get("contentBlockIndex").Int()] = ti
		tc := newObject().val("index", ti).val("id", use.Get("toolUseId").String()).val("type", "function").
			raw("function", newObject().val("name", use.Get("name").String()).val("arguments", "").done()).done()
		return append(c.start(), c.chunk(newObject().raw("tool_calls", rawArray([][]byte{tc})).done(), "")), nil
	case "contentBlockDelta":
		return c.delta(d), nil
	case "messageStop":
		c.finish = converseFinish(d.Get("stopReason").String())
		if c.finished {
			return nil, nil
		}
		c.finished = true
		return append(c.start(), c.chunk(obj(), c.finish)), nil
	case "metadata":
		if u := d.Get("usage"); u.IsObject() {
			c.usage = ConverseUsageOf(u)
		}
		return c.end(), nil
	case awsstream.ErrorEvent:
		msg := d.Get("message").String()
		if msg == "" {
			msg = "upstream stream error"
		}
		return c.fail(converseErrorType(d.Get("type").String()), "", msg), nil
	}
	// contentBlockStop and unknown events.
	return nil, nil
}

// delta translates a contentBlockDelta: text, or a tool call's input.
func (c *converseToChat) delta(d gjson.Result) []sse.Event {
	delta := d.Get("delta")
	if t := delta.Get("text"); t.Type == gjson.String {
		if t.String() == "" {
			return nil
		}
		return append(c.start(), c.chunk(newObject().val("content", t.String()).done(), ""))
	}
	in := delta.Get("toolUse.input")
	ti, ok := c.tools[d.Get("contentBlockIndex").Int()]
	if in.Type != gjson.String || in.String() == "" || !ok {
		return nil // reasoning, or a piece of no known call
	}
	tc := newObject().val("index", ti).raw("function", newObject().val("arguments", in.String()).done()).done()
	return append(c.start(), c.chunk(newObject().raw("tool_calls", rawArray([][]byte{tc})).done(), ""))
}

// converseErrorType is the chat error type of an exception of a
// ConverseStream.
func converseErrorType(exception string) string {
	switch exception {
	case "throttlingException":
		return "rate_limit_error"
	case "serviceUnavailableException":
		return "overloaded_error"
	case "validationException":
		return "invalid_request_error"
	}
	return "api_error"
}

// end closes the client stream: the finish chunk if none yet, the usage
// chunk, [DONE].
func (c *converseToChat) end() []sse.Event {
	out := c.start()
	if !c.finished {
		c.finished = true
		if c.finish == "" {
			c.finish = "stop"
		}
		out = append(out, c.chunk(obj(), c.finish))
	}
	u := c.head().rawS("choices", "[]").raw("usage", chatUsageRaw(c.usage)).done()
	out = append(out, sse.Event{Data: u}, sse.Event{Data: []byte("[DONE]")})
	c.done = true
	return out
}

func (c *converseToChat) Close() []sse.Event {
	if c.done {
		return nil
	}
	return c.end()
}

func (c *converseToChat) fail(typ, code, message string) []sse.Event {
	if typ == "" {
		typ = "api_error"
	}
	c.done = true
	return []sse.Event{ChatErrorEvent(typ, code, message), {Data: []byte("[DONE]")}}
}

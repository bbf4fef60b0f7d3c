package translate

import (
	"github.com/caddy-gw/caddy-gw/internal/jsonbody"
	"github.com/caddy-gw/caddy-gw/internal/sse"
	"github.com/tidwall/gjson"
)

// NewMessagesToChat translates an upstream messages stream into chat chunks
// reporting model. The chunks are data-only events; the stream ends with a
// usage chunk (empty choices, as with stream_options.include_usage: the
// gateway always sends it) and a final Event whose Data is "[DONE]", which
// the Stream produces itself. Text deltas become content deltas, each
// tool_use block a tool call (its input_json_delta pieces the arguments
// pieces, unchanged), message_delta the finish chunk; ping, thinking and
// server-tool blocks are skipped; an error event becomes a chat error chunk
// followed by [DONE].
func NewMessagesToChat(model string) Stream {
	return &messagesToChat{model: model, created: now().Unix(), blocks: map[int64]int{}}
}

type messagesToChat struct {
	model    string
	id       string
	created  int64
	started  bool
	blocks   map[int64]int // messages block index → chat tool index (-1: text)
	nextTool int
	finish   string
	finished bool // finish chunk sent
	in, out  int64
	cr, cw   int64
	done     bool
}

func (m *messagesToChat) Usage() Usage {
	return Usage{Input: m.in + m.cr + m.cw, Output: m.out, CachedInput: m.cr, CacheWrite: m.cw}
}

func (m *messagesToChat) Done() bool { return m.done }

// chunk renders a chat chunk with one choice.
func (m *messagesToChat) chunk(delta []byte, finish string) sse.Event {
	c := set(obj(), "index", 0)
	c = setRawB(c, "delta", delta)
	c = setRaw(c, "logprobs", "null")
	if finish == "" {
		c = setRaw(c, "finish_reason", "null")
	} else {
		c = set(c, "finish_reason", finish)
	}
	return sse.Event{Data: setRawB(m.head(), "choices", rawArray([][]byte{c}))}
}

func (m *messagesToChat) head() []byte {
	if m.id == "" {
		m.id = newID("chatcmpl-")
	}
	b := set(obj(), "id", m.id)
	b = set(b, "object", "chat.completion.chunk")
	b = set(b, "created", m.created)
	return set(b, "model", m.model)
}

// start returns the first chunk (the assistant role) once.
func (m *messagesToChat) start() []sse.Event {
	if m.started {
		return nil
	}
	m.started = true
	return []sse.Event{m.chunk([]byte(`{"role":"assistant","content":""}`), "")}
}

func (m *messagesToChat) Event(ev sse.Event) ([]sse.Event, error) {
	if m.done {
		return nil, nil
	}
	if !jsonbody.Valid(ev.Data) {
		return nil, ErrBadEvent
	}
	d := gjson.ParseBytes(ev.Data)
	typ := d.Get("type").String()
	if typ == "" {
		typ = ev.Event
	}
	switch typ {
	case "message_start":
		msg := d.Get("message")
		if !m.started {
			if id := msg.Get("id").String(); id != "" {
				m.id = swapID(id, "chatcmpl-")
			}
		}
		m.usage(msg.Get("usage"))
		return m.start(), nil
	case "content_block_start":
		out := m.start()
		idx := d.Get("index").Int()
		cb := d.Get("content_block")
		switch cb.Get("type").String() {
		case "text":
			m.blocks[idx] = -1
			if t := cb.Get("text").String(); t != "" {
				out = append(out, m.chunk(set(obj(), "content", t), ""))
			}
		case "tool_use":
			ti := m.nextTool
			m.nextTool++
			m.blocks[idx] = ti
			tc := set(obj(), "index", ti)
			tc = set(tc, "id", cb.Get("id").String())
			tc = set(tc, "type", "function")
			tc = set(tc, "function.name", cb.Get("name").String())
			args := ""
			if in := cb.Get("input"); in.IsObject() && len(in.Map()) > 0 {
				args = argumentsOf(in)
			}
			tc = set(tc, "function.arguments", args)
			out = append(out, m.chunk(setRawB(obj(), "tool_calls", rawArray([][]byte{tc})), ""))
		}
		return out, nil
	case "content_block_delta":
		delta := d.Get("delta")
		switch delta.Get("type").String() {
		case "text_delta":
			t := delta.Get("text").String()
			if t == "" {
				return nil, nil
			}
			return append(m.start(), m.chunk(set(obj(), "content", t), "")), nil
		case "input_json_delta":
			ti, ok := m.blocks[d.Get("index").Int()]
			p := delta.Get("partial_json").String()
			if !ok || ti < 0 || p == "" {
				return nil, nil
			}
			tc := set(obj(), "index", ti)
			tc = set(tc, "function.arguments", p)
			return append(m.start(), m.chunk(setRawB(obj(), "tool_calls", rawArray([][]byte{tc})), "")), nil
		}
		return nil, nil
	case "message_delta":
		m.usage(d.Get("usage"))
		if sr := d.Get("delta.stop_reason"); sr.Type == gjson.String {
			m.finish = chatFinish(sr.String())
			if !m.finished {
				m.finished = true
				return append(m.start(), m.chunk(obj(), m.finish)), nil
			}
		}
		return nil, nil
	case "message_stop":
		return m.end(), nil
	case "error":
		e := d.Get("error")
		msg := e.Get("message").String()
		if msg == "" {
			msg = "upstream stream error"
		}
		return m.fail(e.Get("type").String(), "", msg), nil
	}
	// ping, content_block_stop and unknown events.
	return nil, nil
}

// usage takes the counts present in a messages usage object (message_start,
// or message_delta whose counts are cumulative totals).
func (m *messagesToChat) usage(u gjson.Result) {
	if !u.IsObject() {
		return
	}
	if v := u.Get("input_tokens"); v.Type == gjson.Number {
		m.in = v.Int()
	}
	if v := u.Get("output_tokens"); v.Type == gjson.Number {
		m.out = v.Int()
	}
	if v := u.Get("cache_read_input_tokens"); v.Type == gjson.Number {
		m.cr = v.Int()
	}
	if v := u.Get("cache_creation_input_tokens"); v.Type == gjson.Number {
		m.cw = v.Int()
	}
}

// end closes the client stream: finish chunk if none yet, usage chunk,
// [DONE].
func (m *messagesToChat) end() []sse.Event {
	out := m.start()
	if !m.finished {
		m.finished = true
		if m.finish == "" {
			m.finish = "stop"
		}
		out = append(out, m.chunk(obj(), m.finish))
	}
	u := setRaw(m.head(), "choices", "[]")
	u = setRawB(u, "usage", chatUsageRaw(m.Usage()))
	out = append(out, sse.Event{Data: u}, sse.Event{Data: []byte("[DONE]")})
	m.done = true
	return out
}

func (m *messagesToChat) Close() []sse.Event {
	if m.done {
		return nil
	}
	return m.end()
}

func (m *messagesToChat) fail(typ, code, message string) []sse.Event {
	if typ == "" {
		typ = "api_error"
	}
	m.done = true
	return []sse.Event{ChatErrorEvent(typ, code, message), {Data: []byte("[DONE]")}}
}

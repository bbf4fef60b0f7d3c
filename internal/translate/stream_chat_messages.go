package translate

import (
	"github.com/caddy-gw/caddy-gw/internal/sse"
	"github.com/tidwall/gjson"
)

// NewChatToMessages translates an upstream chat stream into named messages
// events reporting model: message_start at the first chunk, a text block for
// content (and refusal) deltas, a tool_use block for each new tool call (its
// arguments pieces become input_json_delta pieces, unchanged), and at
// [DONE] (or Close) the last content_block_stop, message_delta (stop_reason
// and the usage) and message_stop. Chat sends usage last, so message_start
// reports 0 input tokens and message_delta the full usage (input_tokens,
// cache_read_input_tokens, cache_creation_input_tokens, output_tokens), which
// messages clients take as the final count. An error chunk becomes an error
// event, which ends the stream. Only the first choice is followed.
func NewChatToMessages(model string) Stream {
	return &chatToMessages{model: model, cur: -1, tools: map[int64]int{}}
}

const (
	blockText = iota + 1
	blockTool
)

type chatToMessages struct {
	model     string
	id        string
	started   bool
	cur       int // open block index, -1 when none
	curKind   int
	nextBlock int
	tools     map[int64]int // chat tool index → block index
	lastKey   int64
	lastID    string
	anyTool   bool
	finish    string
	usage     Usage
	done      bool
}

func (c *chatToMessages) Usage() Usage { return c.usage }
func (c *chatToMessages) Done() bool   { return c.done }

func (c *chatToMessages) start(id string, out []sse.Event) []sse.Event {
	if c.started {
		return out
	}
	c.started = true
	c.id = swapID(id, "msg_")
	msg := set(obj(), "id", c.id)
	msg = set(msg, "type", "message")
	msg = set(msg, "role", "assistant")
	msg = set(msg, "model", c.model)
	msg = setRaw(msg, "content", "[]")
	msg = setRaw(msg, "stop_reason", "null")
	msg = setRaw(msg, "stop_sequence", "null")
	msg = setRawB(msg, "usage", messagesUsageRaw(c.usage))
	b := set(obj(), "type", "message_start")
	return append(out, named(setRawB(b, "message", msg)))
}

// closeBlock ends the open block.
func (c *chatToMessages) closeBlock(out []sse.Event) []sse.Event {
	if c.cur < 0 {
		return out
	}
	b := set(obj(), "type", "content_block_stop")
	out = append(out, named(set(b, "index", c.cur)))
	c.cur, c.curKind = -1, 0
	return out
}

// openBlock ends the open block and starts a new one.
func (c *chatToMessages) openBlock(kind int, block []byte, out []sse.Event) ([]sse.Event, int) {
	out = c.closeBlock(out)
	idx := c.nextBlock
	c.nextBlock++
	c.cur, c.curKind = idx, kind
	b := set(obj(), "type", "content_block_start")
	b = set(b, "index", idx)
	return append(out, named(setRawB(b, "content_block", block))), idx
}

func (c *chatToMessages) text(t string, out []sse.Event) []sse.Event {
	if c.curKind != blockText {
		out, _ = c.openBlock(blockText, []byte(`{"type":"text","text":""}`), out)
	}
	b := set(obj(), "type", "content_block_delta")
	b = set(b, "index", c.cur)
	b = set(b, "delta.type", "text_delta")
	return append(out, named(set(b, "delta.text", t)))
}

func (c *chatToMessages) Event(ev sse.Event) ([]sse.Event, error) {
	if c.done {
		return nil, nil
	}
	if sse.IsDone(ev) {
		return c.end(), nil
	}
	if !gjson.ValidBytes(ev.Data) {
		return nil, ErrBadEvent
	}
	d := gjson.ParseBytes(ev.Data)
	if e := d.Get("error"); e.Exists() {
		typ, code, msg := chatError(e)
		return c.fail(messagesErrorType(typ, code), "", msg), nil
	}
	if u := d.Get("usage"); u.IsObject() {
		c.usage = chatUsageOf(u)
	}
	out := c.start(d.Get("id").String(), nil)
	choice := d.Get("choices.0")
	if ci := choice.Get("index"); ci.Exists() && ci.Int() != 0 {
		return out, nil
	}
	delta := choice.Get("delta")
	if t := delta.Get("content"); t.Type == gjson.String && t.String() != "" {
		out = c.text(t.String(), out)
	}
	if t := delta.Get("refusal"); t.Type == gjson.String && t.String() != "" {
		out = c.text(t.String(), out)
	}
	delta.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
		id := tc.Get("id").String()
		var key int64
		switch i := tc.Get("index"); {
		case i.Type == gjson.Number:
			key = i.Int()
		case id != "" && id != c.lastID && c.anyTool:
			key = c.lastKey + 1
		default:
			key = c.lastKey
		}
		c.lastKey = key
		if id != "" {
			c.lastID = id
		}
		fn := tc.Get("function")
		idx, ok := c.tools[key]
		if !ok {
			block := set(obj(), "type", "tool_use")
			block = set(block, "id", toolID(id))
			block = set(block, "name", fn.Get("name").String())
			block = setRaw(block, "input", "{}")
			out, idx = c.openBlock(blockTool, block, out)
			c.tools[key] = idx
			c.anyTool = true
		}
		if args := fn.Get("arguments").String(); args != "" {
			b := set(obj(), "type", "content_block_delta")
			b = set(b, "index", idx)
			b = set(b, "delta.type", "input_json_delta")
			out = append(out, named(set(b, "delta.partial_json", args)))
		}
		return true
	})
	if f := choice.Get("finish_reason"); f.Type == gjson.String && f.String() != "" {
		c.finish = f.String()
		out = c.closeBlock(out)
	}
	return out, nil
}

// end closes the client stream: the open block, message_delta, message_stop.
func (c *chatToMessages) end() []sse.Event {
	out := c.start("", nil)
	out = c.closeBlock(out)
	stop := messagesStop(c.finish)
	if c.anyTool && stop == "end_turn" {
		stop = "tool_use"
	}
	b := set(obj(), "type", "message_delta")
	b = set(b, "delta.stop_reason", stop)
	b = setRaw(b, "delta.stop_sequence", "null")
	b = setRawB(b, "usage", messagesUsageRaw(c.usage))
	out = append(out, named(b), named([]byte(`{"type":"message_stop"}`)))
	c.done = true
	return out
}

func (c *chatToMessages) Close() []sse.Event {
	if c.done {
		return nil
	}
	return c.end()
}

func (c *chatToMessages) fail(typ, _, message string) []sse.Event {
	if typ == "" {
		typ = "api_error"
	}
	c.done = true
	return []sse.Event{MessagesErrorEvent(typ, message)}
}

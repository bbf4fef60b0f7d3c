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
// reports the gateway's own count of the prompt (AnnouncePrompt; clients
// such as LangChain read input tokens only there) and message_delta the
// provider's exact usage (input_tokens, cache_read_input_tokens,
// cache_creation_input_tokens, output_tokens), which messages clients take as
// the final count. An error chunk becomes an error
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
	tools     map[int64]int // chat tool key → block index
	keys      chatToolKeys
	finish    string
	usage     Usage
	done      bool
	// announced is the prompt count message_start reports.
	announced int64
}

// AnnouncePrompt sets the input token count message_start reports: the
// gateway's estimate of the prompt, before the provider's usage arrives.
func (c *chatToMessages) AnnouncePrompt(tokens int64) { c.announced = tokens }

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
	msg = setRawB(msg, "usage", messagesUsageRaw(Usage{Input: c.announced}))
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
	return chatChunkEvent(c, &c.keys, ev)
}

func (c *chatToMessages) chunkError(e gjson.Result) []sse.Event {
	typ, code, msg := chatError(e)
	return c.fail(messagesErrorType(typ, code), "", msg)
}

func (c *chatToMessages) chunkUsage(u gjson.Result) { c.usage = ChatUsageOf(u) }

// toolCall opens a tool_use block for a new call; its arguments pieces
// become input_json_delta pieces.
func (c *chatToMessages) toolCall(key int64, id string, fn gjson.Result, out []sse.Event) []sse.Event {
	idx, ok := c.tools[key]
	if !ok {
		out, idx = c.openBlock(blockTool, toolUseBlock(id, fn.Get("name").String(), ""), out)
		c.tools[key] = idx
	}
	if args := fn.Get("arguments").String(); args != "" {
		b := set(obj(), "type", "content_block_delta")
		b = set(b, "index", idx)
		b = set(b, "delta.type", "input_json_delta")
		out = append(out, named(set(b, "delta.partial_json", args)))
	}
	return out
}

func (c *chatToMessages) finishReason(f string, out []sse.Event) []sse.Event {
	c.finish = f
	return c.closeBlock(out)
}

// end closes the client stream: the open block, message_delta, message_stop.
func (c *chatToMessages) end() []sse.Event {
	out := c.start("", nil)
	out = c.closeBlock(out)
	stop := messagesStop(c.finish)
	if len(c.tools) > 0 && stop == "end_turn" {
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

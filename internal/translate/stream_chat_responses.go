package translate

import (
	"strings"

	"github.com/caddy-gw/caddy-gw/internal/sse"
	"github.com/tidwall/gjson"
)

// NewChatToResponses translates an upstream chat stream into named responses
// events reporting model, each with its sequence_number (from 0):
// response.created and response.in_progress at the first chunk; for text,
// a message item (response.output_item.added, response.content_part.added,
// response.output_text.delta...); for each tool call, a function_call item
// (response.output_item.added, response.function_call_arguments.delta
// pieces, unchanged); an item is finished (output_text.done,
// content_part.done / function_call_arguments.done, output_item.done) when
// the next one starts or at the end; at [DONE] (or Close)
// response.completed, or response.incomplete when the upstream stopped for
// length or content filtering, carrying the whole response and its usage. An
// error chunk becomes an error event followed by response.failed. Only the
// first choice is followed.
func NewChatToResponses(model string) Stream {
	return &chatToResponses{model: model, created: now().Unix(), tools: map[int64]*respItem{}}
}

type respItem struct {
	fn     bool
	id     string
	index  int
	text   strings.Builder // message text or function arguments
	callID string
	name   string
	closed bool
}

type chatToResponses struct {
	model     string
	id        string
	created   int64
	seq       int64
	started   bool
	items     []*respItem
	cur       *respItem
	tools     map[int64]*respItem // chat tool key → item
	keys      chatToolKeys
	finish    string
	usage     Usage
	reasoning int64
	done      bool
}

func (c *chatToResponses) Usage() Usage { return c.usage }
func (c *chatToResponses) Done() bool   { return c.done }

// emit numbers and names one event; b must be an object whose first field
// is "type".
func (c *chatToResponses) emit(out []sse.Event, b []byte) []sse.Event {
	b = set(b, "sequence_number", c.seq)
	c.seq++
	return append(out, named(b))
}

func (c *chatToResponses) response(status string, output [][]byte, usage []byte, incomplete, errRaw string) []byte {
	return responseObject(c.id, c.created, c.model, status, output, usage, incomplete, errRaw)
}

func (c *chatToResponses) start(id string, out []sse.Event) []sse.Event {
	if c.started {
		return out
	}
	c.started = true
	c.id = swapID(id, "resp_")
	resp := c.response("in_progress", nil, nil, "null", "null")
	out = c.emit(out, setRawB(set(obj(), "type", "response.created"), "response", resp))
	return c.emit(out, setRawB(set(obj(), "type", "response.in_progress"), "response", resp))
}

// itemJSON renders an item in its current state.
func (c *chatToResponses) itemJSON(it *respItem, status string) []byte {
	if it.fn {
		return functionCallItem(it.id, status, it.callID, it.name, it.text.String())
	}
	var content [][]byte
	if status != "in_progress" {
		content = [][]byte{outputTextPart(it.text.String())}
	}
	return messageItem(it.id, status, content)
}

func (c *chatToResponses) openItem(it *respItem, out []sse.Event) []sse.Event {
	out = c.closeItem(out)
	it.index = len(c.items)
	c.items = append(c.items, it)
	c.cur = it
	b := set(obj(), "type", "response.output_item.added")
	b = set(b, "output_index", it.index)
	out = c.emit(out, setRawB(b, "item", c.itemJSON(it, "in_progress")))
	if !it.fn {
		b = set(obj(), "type", "response.content_part.added")
		b = set(b, "item_id", it.id)
		b = set(b, "output_index", it.index)
		b = set(b, "content_index", 0)
		out = c.emit(out, setRawB(b, "part", outputTextPart("")))
	}
	return out
}

// itemStatus is the status of finished items.
func (c *chatToResponses) itemStatus() string {
	if st, _ := responsesStatus(c.finish); st == "incomplete" {
		return "incomplete"
	}
	return "completed"
}

// closeItem finishes the open item.
func (c *chatToResponses) closeItem(out []sse.Event) []sse.Event {
	it := c.cur
	if it == nil {
		return out
	}
	c.cur = nil
	it.closed = true
	if it.fn {
		b := set(obj(), "type", "response.function_call_arguments.done")
		b = set(b, "item_id", it.id)
		b = set(b, "output_index", it.index)
		b = set(b, "name", it.name)
		out = c.emit(out, set(b, "arguments", it.text.String()))
	} else {
		text := it.text.String()
		b := set(obj(), "type", "response.output_text.done")
		b = set(b, "item_id", it.id)
		b = set(b, "output_index", it.index)
		b = set(b, "content_index", 0)
		b = set(b, "text", text)
		out = c.emit(out, setRaw(b, "logprobs", "[]"))
		b = set(obj(), "type", "response.content_part.done")
		b = set(b, "item_id", it.id)
		b = set(b, "output_index", it.index)
		b = set(b, "content_index", 0)
		out = c.emit(out, setRawB(b, "part", outputTextPart(text)))
	}
	b := set(obj(), "type", "response.output_item.done")
	b = set(b, "output_index", it.index)
	status := "completed"
	if !it.fn {
		status = c.itemStatus()
	}
	return c.emit(out, setRawB(b, "item", c.itemJSON(it, status)))
}

func (c *chatToResponses) text(t string, out []sse.Event) []sse.Event {
	if c.cur == nil || c.cur.fn {
		out = c.openItem(&respItem{id: newID("msg_")}, out)
	}
	c.cur.text.WriteString(t)
	b := set(obj(), "type", "response.output_text.delta")
	b = set(b, "item_id", c.cur.id)
	b = set(b, "output_index", c.cur.index)
	b = set(b, "content_index", 0)
	b = set(b, "delta", t)
	return c.emit(out, setRaw(b, "logprobs", "[]"))
}

func (c *chatToResponses) Event(ev sse.Event) ([]sse.Event, error) {
	return chatChunkEvent(c, &c.keys, ev)
}

func (c *chatToResponses) chunkError(e gjson.Result) []sse.Event {
	typ, code, msg := chatError(e)
	return c.fail(typ, code, msg)
}

func (c *chatToResponses) chunkUsage(u gjson.Result) {
	c.usage = ChatUsageOf(u)
	c.reasoning = u.Get("completion_tokens_details.reasoning_tokens").Int()
}

// toolCall opens a function_call item for a new call and adds its
// arguments pieces.
func (c *chatToResponses) toolCall(key int64, id string, fn gjson.Result, out []sse.Event) []sse.Event {
	it, ok := c.tools[key]
	if !ok {
		if id == "" {
			id = newID("call_")
		}
		it = &respItem{fn: true, id: newID("fc_"), callID: id, name: fn.Get("name").String()}
		c.tools[key] = it
		out = c.openItem(it, out)
	}
	if args := fn.Get("arguments").String(); args != "" {
		it.text.WriteString(args)
		b := set(obj(), "type", "response.function_call_arguments.delta")
		b = set(b, "item_id", it.id)
		b = set(b, "output_index", it.index)
		out = c.emit(out, set(b, "delta", args))
	}
	return out
}

func (c *chatToResponses) finishReason(f string, out []sse.Event) []sse.Event {
	c.finish = f
	return out
}

// end closes the open item and sends response.completed (or
// response.incomplete).
func (c *chatToResponses) end() []sse.Event {
	out := c.start("", nil)
	out = c.closeItem(out)
	status, incomplete := responsesStatus(c.finish)
	output := make([][]byte, len(c.items))
	for i, it := range c.items {
		st := "completed"
		if !it.fn {
			st = c.itemStatus()
		}
		output[i] = c.itemJSON(it, st)
	}
	resp := c.response(status, output, responsesUsageRaw(c.usage, c.reasoning), incomplete, "null")
	typ := "response.completed"
	if status == "incomplete" {
		typ = "response.incomplete"
	}
	out = c.emit(out, setRawB(set(obj(), "type", typ), "response", resp))
	c.done = true
	return out
}

func (c *chatToResponses) Close() []sse.Event {
	if c.done {
		return nil
	}
	return c.end()
}

func (c *chatToResponses) fail(typ, code, message string) []sse.Event {
	if code == "" {
		code = typ
	}
	if code == "" {
		code = "api_error"
	}
	out := c.emit(nil, responsesError(code, message, 0).Data)
	if c.started {
		e := set(obj(), "code", code)
		e = set(e, "message", message)
		output := make([][]byte, len(c.items))
		for i, it := range c.items {
			output[i] = c.itemJSON(it, "incomplete")
		}
		resp := c.response("failed", output, responsesUsageRaw(c.usage, c.reasoning), "null", string(e))
		out = c.emit(out, setRawB(set(obj(), "type", "response.failed"), "response", resp))
	}
	c.done = true
	return out
}

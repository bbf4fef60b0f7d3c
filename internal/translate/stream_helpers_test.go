package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/sse"
	"github.com/tidwall/gjson"
)

// events parses an SSE stream fixture.
func events(t testing.TB, stream string) []sse.Event {
	t.Helper()
	r := sse.NewReader(strings.NewReader(stream))
	var out []sse.Event
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
}

// run feeds every event to s, then closes it.
func run(t testing.TB, s Stream, in []sse.Event) []sse.Event {
	t.Helper()
	var out []sse.Event
	for _, ev := range in {
		evs, err := s.Event(ev)
		if err != nil {
			t.Fatalf("Event(%s %s): %v", ev.Event, ev.Data, err)
		}
		out = append(out, evs...)
	}
	return append(out, s.Close()...)
}

// chatCall is a tool call as a chat client accumulates it.
type chatCall struct{ ID, Name, Args string }

// chatResult is what a chat client accumulates from a chunk stream.
type chatResult struct {
	ID, Role, Text, Finish string
	Calls                  []chatCall
	Usage                  Usage
	UsageChunks            int
	Done                   bool
	Errors                 []string
}

// accumulateChat folds chat chunks like an SDK's accumulator, checking that
// nothing follows [DONE] and that every chunk is data-only JSON.
func accumulateChat(t testing.TB, evs []sse.Event) chatResult {
	t.Helper()
	var r chatResult
	for i, ev := range evs {
		if r.Done {
			t.Fatalf("event after [DONE]: %s", ev.Data)
		}
		if ev.Event != "" {
			t.Fatalf("chat event %d is named %q", i, ev.Event)
		}
		if sse.IsDone(ev) {
			r.Done = true
			continue
		}
		if !json.Valid(ev.Data) {
			t.Fatalf("chunk %d is not JSON: %s", i, ev.Data)
		}
		d := gjson.ParseBytes(ev.Data)
		if e := d.Get("error"); e.Exists() {
			r.Errors = append(r.Errors, e.Raw)
			continue
		}
		if d.Get("object").String() != "chat.completion.chunk" {
			t.Fatalf("chunk %d object = %q", i, d.Get("object").String())
		}
		if r.ID == "" {
			r.ID = d.Get("id").String()
		} else if r.ID != d.Get("id").String() {
			t.Fatalf("chunk ids differ: %s vs %s", r.ID, d.Get("id").String())
		}
		if u := d.Get("usage"); u.IsObject() {
			r.Usage = ChatUsageOf(u)
			r.UsageChunks++
			if n := len(d.Get("choices").Array()); n != 0 {
				t.Fatalf("usage chunk has %d choices", n)
			}
		}
		ch := d.Get("choices.0")
		if !ch.Exists() {
			continue
		}
		delta := ch.Get("delta")
		if role := delta.Get("role").String(); role != "" {
			r.Role = role
		}
		r.Text += delta.Get("content").String()
		delta.Get("tool_calls").ForEach(func(_, tc gjson.Result) bool {
			i := int(tc.Get("index").Int())
			for len(r.Calls) <= i {
				r.Calls = append(r.Calls, chatCall{})
			}
			c := &r.Calls[i]
			if id := tc.Get("id").String(); id != "" {
				c.ID = id
			}
			if n := tc.Get("function.name").String(); n != "" {
				c.Name = n
			}
			c.Args += tc.Get("function.arguments").String()
			return true
		})
		if f := ch.Get("finish_reason"); f.Type == gjson.String {
			if r.Finish != "" {
				t.Fatalf("second finish_reason %q", f.String())
			}
			r.Finish = f.String()
		}
	}
	return r
}

// msgBlock is one content block as a messages client accumulates it.
type msgBlock struct {
	Type, Text, ID, Name, Input string
	Stopped                     bool
}

type messagesResult struct {
	ID, StopReason string
	Blocks         []msgBlock
	Usage          Usage
	Started        bool
	Stopped        bool
	Errors         []string
}

// accumulateMessages folds messages events like the official SDK does,
// checking the rules it enforces: every event named after its data's type,
// message_start first, blocks started in index order, deltas to started
// blocks, nothing after message_stop or error.
func accumulateMessages(t testing.TB, evs []sse.Event) messagesResult {
	t.Helper()
	var r messagesResult
	var usage gjson.Result
	var inTokens, cr, cw, out int64
	for i, ev := range evs {
		if r.Stopped || len(r.Errors) > 0 {
			t.Fatalf("event after the end: %s %s", ev.Event, ev.Data)
		}
		if !json.Valid(ev.Data) {
			t.Fatalf("event %d is not JSON: %s", i, ev.Data)
		}
		d := gjson.ParseBytes(ev.Data)
		typ := d.Get("type").String()
		if ev.Event != typ {
			t.Fatalf("event %d named %q carries type %q", i, ev.Event, typ)
		}
		if typ != "message_start" && typ != "error" && !r.Started {
			t.Fatalf("%s before message_start", typ)
		}
		switch typ {
		case "message_start":
			if r.Started {
				t.Fatal("second message_start")
			}
			r.Started = true
			r.ID = d.Get("message.id").String()
			usage = d.Get("message.usage")
			inTokens, cr, cw, out = usage.Get("input_tokens").Int(), usage.Get("cache_read_input_tokens").Int(), usage.Get("cache_creation_input_tokens").Int(), usage.Get("output_tokens").Int()
		case "content_block_start":
			if idx := int(d.Get("index").Int()); idx != len(r.Blocks) {
				t.Fatalf("block %d started, expected %d", idx, len(r.Blocks))
			}
			cb := d.Get("content_block")
			b := msgBlock{Type: cb.Get("type").String(), Text: cb.Get("text").String(), ID: cb.Get("id").String(), Name: cb.Get("name").String()}
			if b.Type == "tool_use" && cb.Get("input").Raw != "{}" {
				t.Fatalf("tool_use starts with input %s", cb.Get("input").Raw)
			}
			r.Blocks = append(r.Blocks, b)
		case "content_block_delta":
			idx := int(d.Get("index").Int())
			if idx >= len(r.Blocks) {
				t.Fatalf("delta for block %d of %d", idx, len(r.Blocks))
			}
			b := &r.Blocks[idx]
			switch d.Get("delta.type").String() {
			case "text_delta":
				b.Text += d.Get("delta.text").String()
			case "input_json_delta":
				b.Input += d.Get("delta.partial_json").String()
			}
		case "content_block_stop":
			idx := int(d.Get("index").Int())
			if idx >= len(r.Blocks) || r.Blocks[idx].Stopped {
				t.Fatalf("bad content_block_stop %d", idx)
			}
			r.Blocks[idx].Stopped = true
		case "message_delta":
			r.StopReason = d.Get("delta.stop_reason").String()
			u := d.Get("usage")
			out = u.Get("output_tokens").Int()
			if v := u.Get("input_tokens"); v.Exists() {
				inTokens = v.Int()
			}
			if v := u.Get("cache_read_input_tokens"); v.Exists() {
				cr = v.Int()
			}
			if v := u.Get("cache_creation_input_tokens"); v.Exists() {
				cw = v.Int()
			}
		case "message_stop":
			r.Stopped = true
			for _, b := range r.Blocks {
				if !b.Stopped {
					t.Fatalf("block %+v never stopped", b)
				}
			}
		case "error":
			r.Errors = append(r.Errors, d.Get("error").Raw)
		case "ping":
		default:
			t.Fatalf("unexpected event %q", typ)
		}
	}
	r.Usage = Usage{Input: inTokens + cr + cw, Output: out, CachedInput: cr, CacheWrite: cw}
	return r
}

// respItemResult is one output item as a responses client accumulates it.
type respItemResult struct {
	Type, ID, Text, CallID, Name, Args, Status string
}

type responsesResult struct {
	ID       string
	Types    []string
	Items    []respItemResult
	Final    gjson.Result
	Terminal string
	Errors   []string
}

// accumulateResponses folds responses events, checking names, sequence
// numbers (0, 1, 2, ...) and that output items and deltas agree.
func accumulateResponses(t testing.TB, evs []sse.Event) responsesResult {
	t.Helper()
	var r responsesResult
	for i, ev := range evs {
		if r.Terminal != "" {
			t.Fatalf("event after %s: %s", r.Terminal, ev.Data)
		}
		if !json.Valid(ev.Data) {
			t.Fatalf("event %d is not JSON: %s", i, ev.Data)
		}
		d := gjson.ParseBytes(ev.Data)
		typ := d.Get("type").String()
		if ev.Event != typ {
			t.Fatalf("event %d named %q carries type %q", i, ev.Event, typ)
		}
		if seq := d.Get("sequence_number"); seq.Type != gjson.Number || seq.Int() != int64(i) {
			t.Fatalf("event %d (%s) has sequence_number %s", i, typ, seq.Raw)
		}
		r.Types = append(r.Types, typ)
		item := func() *respItemResult {
			idx := int(d.Get("output_index").Int())
			if idx >= len(r.Items) {
				t.Fatalf("%s for output %d of %d", typ, idx, len(r.Items))
			}
			it := &r.Items[idx]
			if id := d.Get("item_id"); id.Exists() && id.String() != it.ID {
				t.Fatalf("%s item_id %s, want %s", typ, id.String(), it.ID)
			}
			return it
		}
		switch typ {
		case "response.created", "response.in_progress":
			r.ID = d.Get("response.id").String()
			if st := d.Get("response.status").String(); st != "in_progress" {
				t.Fatalf("%s status %q", typ, st)
			}
		case "response.output_item.added":
			if idx := int(d.Get("output_index").Int()); idx != len(r.Items) {
				t.Fatalf("item added at %d, expected %d", idx, len(r.Items))
			}
			it := d.Get("item")
			r.Items = append(r.Items, respItemResult{Type: it.Get("type").String(), ID: it.Get("id").String(), CallID: it.Get("call_id").String(), Name: it.Get("name").String(), Status: it.Get("status").String()})
		case "response.content_part.added", "response.content_part.done":
			item()
		case "response.output_text.delta":
			item().Text += d.Get("delta").String()
		case "response.output_text.done":
			if it := item(); d.Get("text").String() != it.Text {
				t.Fatalf("output_text.done text %q, deltas gave %q", d.Get("text").String(), it.Text)
			}
		case "response.function_call_arguments.delta":
			item().Args += d.Get("delta").String()
		case "response.function_call_arguments.done":
			if it := item(); d.Get("arguments").String() != it.Args {
				t.Fatalf("arguments.done %q, deltas gave %q", d.Get("arguments").String(), it.Args)
			}
		case "response.output_item.done":
			it := item()
			it.Status = d.Get("item.status").String()
			if it.Type == "function_call" && d.Get("item.arguments").String() != it.Args {
				t.Fatalf("item.done arguments %q, deltas gave %q", d.Get("item.arguments").String(), it.Args)
			}
		case "response.completed", "response.incomplete", "response.failed":
			r.Terminal = typ
			r.Final = d.Get("response")
			if r.Final.Get("id").String() != r.ID {
				t.Fatalf("final id %s, created %s", r.Final.Get("id").String(), r.ID)
			}
		case "error":
			r.Errors = append(r.Errors, string(ev.Data))
		default:
			t.Fatalf("unexpected event %q", typ)
		}
	}
	return r
}

// splitRunes cuts s into pieces of at most n runes.
func splitRunes(s string, n int) []string {
	var out []string
	rs := []rune(s)
	for len(rs) > 0 {
		k := min(n, len(rs))
		out = append(out, string(rs[:k]))
		rs = rs[k:]
	}
	return out
}

// sseText renders events as a stream.
func sseText(evs ...string) string {
	var b bytes.Buffer
	for _, e := range evs {
		b.WriteString(e)
		b.WriteString("\n\n")
	}
	return b.String()
}

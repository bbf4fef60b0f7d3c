package translate

import (
	"fmt"
	"strings"
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/sse"
	"github.com/tidwall/gjson"
)

// Tool arguments with escapes, unicode and nesting, to be cut into pieces.
const (
	weatherArgs = `{"city": "São Paulo", "unit": "c", "note": "say \"hi\"\n\tthen\\stop", "days": [1, 2, {"x": null}]}`
	timeArgs    = `{"tz":"Europe/Paris","emoji":"🌧️"}`
)

// messagesStream renders an upstream messages stream: text, then two tool
// calls whose arguments come in pieces of n runes.
func messagesStream(n int, stop string) string {
	var evs []string
	add := func(name string, data any) {
		evs = append(evs, "event: "+name+"\ndata: "+mustJSON(data))
	}
	add("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_01ABC", "type": "message", "role": "assistant", "content": []any{}, "model": "claude-sonnet-4-5",
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 25, "cache_creation_input_tokens": 10, "cache_read_input_tokens": 100, "output_tokens": 1},
	}})
	add("ping", map[string]any{"type": "ping"})
	add("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
	for _, p := range []string{"Checking ", "both <cities> & times."} {
		add("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": p}})
	}
	add("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	for i, tool := range []struct{ id, name, args string }{{"toolu_01A", "get_weather", weatherArgs}, {"toolu_01B", "get_time", timeArgs}} {
		idx := i + 1
		add("content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{"type": "tool_use", "id": tool.id, "name": tool.name, "input": map[string]any{}}})
		add("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": ""}})
		for _, p := range splitRunes(tool.args, n) {
			add("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": p}})
		}
		add("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
	}
	add("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"type": "message_delta", "stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 87}})
	add("message_stop", map[string]any{"type": "message_stop"})
	return sseText(evs...)
}

// chatStream renders an upstream chat stream with the same content: text,
// then two tool calls whose arguments come in pieces of n runes, the finish
// chunk and the usage chunk.
func chatStream(n int, finish string) string {
	var evs []string
	chunk := func(delta any, finish any) {
		evs = append(evs, "data: "+mustJSON(map[string]any{
			"id": "chatcmpl-XYZ", "object": "chat.completion.chunk", "created": 1741569952, "model": "gpt-4o-2024-08-06",
			"system_fingerprint": "fp_1", "choices": []any{map[string]any{"index": 0, "delta": delta, "logprobs": nil, "finish_reason": finish}},
			"usage": nil,
		}))
	}
	chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil)
	for _, p := range []string{"Checking ", "both <cities> & times."} {
		chunk(map[string]any{"content": p}, nil)
	}
	for i, tool := range []struct{ id, name, args string }{{"call_1", "get_weather", weatherArgs}, {"call_2", "get_time", timeArgs}} {
		chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": tool.id, "type": "function", "function": map[string]any{"name": tool.name, "arguments": ""}}}}, nil)
		for _, p := range splitRunes(tool.args, n) {
			chunk(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": p}}}}, nil)
		}
	}
	chunk(map[string]any{}, finish)
	evs = append(evs, "data: "+mustJSON(map[string]any{
		"id": "chatcmpl-XYZ", "object": "chat.completion.chunk", "created": 1741569952, "model": "gpt-4o-2024-08-06", "choices": []any{},
		"usage": map[string]any{"prompt_tokens": 135, "completion_tokens": 87, "total_tokens": 222,
			"prompt_tokens_details": map[string]any{"cached_tokens": 100, "audio_tokens": 0}, "completion_tokens_details": map[string]any{"reasoning_tokens": 5}},
	}))
	evs = append(evs, "data: [DONE]")
	return sseText(evs...)
}

func TestMessagesToChatStream(t *testing.T) {
	for _, n := range []int{1, 3, 1000} {
		t.Run(fmt.Sprintf("pieces of %d", n), func(t *testing.T) {
			s := NewMessagesToChat("gw-auto")
			out := run(t, s, events(t, messagesStream(n, "tool_use")))
			r := accumulateChat(t, out)
			if r.ID != "chatcmpl-01ABC" || r.Role != "assistant" || r.Text != "Checking both <cities> & times." || r.Finish != "tool_calls" || !r.Done {
				t.Fatalf("got %+v", r)
			}
			want := []chatCall{{"toolu_01A", "get_weather", weatherArgs}, {"toolu_01B", "get_time", timeArgs}}
			if fmt.Sprint(r.Calls) != fmt.Sprint(want) {
				t.Fatalf("calls %q\nwant %q", r.Calls, want)
			}
			wantUsage := Usage{Input: 135, Output: 87, CachedInput: 100, CacheWrite: 10}
			if r.Usage != wantUsage || r.UsageChunks != 1 || s.Usage() != wantUsage {
				t.Fatalf("usage %+v (%d chunks), stream %+v", r.Usage, r.UsageChunks, s.Usage())
			}
			if !s.Done() || len(s.Close()) != 0 {
				t.Fatal("not done, or Close added events")
			}
			if m := field(out[0].Data, "model").String(); m != "gw-auto" {
				t.Fatalf("model %q", m)
			}
			if last := out[len(out)-1]; string(last.Data) != "[DONE]" {
				t.Fatalf("last event %q", last.Data)
			}
		})
	}
}

func TestChatToMessagesStream(t *testing.T) {
	for _, n := range []int{1, 4, 1000} {
		t.Run(fmt.Sprintf("pieces of %d", n), func(t *testing.T) {
			s := NewChatToMessages("gw-auto")
			s.(PromptAnnouncer).AnnouncePrompt(131)
			out := run(t, s, events(t, chatStream(n, "tool_calls")))
			r := accumulateMessages(t, out)
			// message_start announces the gateway's count of the prompt
			// (clients such as LangChain read input tokens only there);
			// message_delta keeps the provider's exact usage.
			if got := field(out[0].Data, "message.usage").Raw; got != `{"input_tokens":131,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":0}` {
				t.Fatalf("message_start usage %s", got)
			}
			if r.ID != "msg_XYZ" || r.StopReason != "tool_use" || !r.Stopped {
				t.Fatalf("got %+v", r)
			}
			want := []msgBlock{
				{Type: "text", Text: "Checking both <cities> & times.", Stopped: true},
				{Type: "tool_use", ID: "call_1", Name: "get_weather", Input: weatherArgs, Stopped: true},
				{Type: "tool_use", ID: "call_2", Name: "get_time", Input: timeArgs, Stopped: true},
			}
			if fmt.Sprint(r.Blocks) != fmt.Sprint(want) {
				t.Fatalf("blocks %+v\nwant %+v", r.Blocks, want)
			}
			wantUsage := Usage{Input: 135, Output: 87, CachedInput: 100}
			if r.Usage != wantUsage || s.Usage() != wantUsage {
				t.Fatalf("usage %+v, stream %+v", r.Usage, s.Usage())
			}
			if field(out[0].Data, "message.model").String() != "gw-auto" {
				t.Fatalf("message_start %s", out[0].Data)
			}
			// message_delta carries the whole usage, with input counted apart.
			md := out[len(out)-2].Data
			jsonEqual(t, []byte(field(md, "usage").Raw), `{"input_tokens":35,"cache_creation_input_tokens":0,"cache_read_input_tokens":100,"output_tokens":87}`)
			if !s.Done() || len(s.Close()) != 0 {
				t.Fatal("not done, or Close added events")
			}
		})
	}
}

func TestChatToResponsesStream(t *testing.T) {
	for _, n := range []int{1, 5, 1000} {
		t.Run(fmt.Sprintf("pieces of %d", n), func(t *testing.T) {
			s := NewChatToResponses("gw-auto")
			out := run(t, s, events(t, chatStream(n, "tool_calls")))
			r := accumulateResponses(t, out)
			checkResponsesResult(t, r, "resp_XYZ", Usage{Input: 135, Output: 87, CachedInput: 100})
			if got := field([]byte(r.Final.Raw), "usage.output_tokens_details.reasoning_tokens").Int(); got != 5 {
				t.Errorf("reasoning tokens %d", got)
			}
			if !s.Done() || len(s.Close()) != 0 {
				t.Fatal("not done, or Close added events")
			}
		})
	}
}

// checkResponsesResult checks a responses stream carrying the fixtures'
// content.
func checkResponsesResult(t *testing.T, r responsesResult, id string, usage Usage) {
	t.Helper()
	if r.ID != id || r.Terminal != "response.completed" {
		t.Fatalf("id %q, terminal %q", r.ID, r.Terminal)
	}
	wantTypes := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added"}
	if strings.Join(r.Types[:4], " ") != strings.Join(wantTypes, " ") {
		t.Fatalf("first events %q", r.Types[:4])
	}
	if len(r.Items) != 3 {
		t.Fatalf("items %+v", r.Items)
	}
	if it := r.Items[0]; it.Type != "message" || it.Text != "Checking both <cities> & times." || it.Status != "completed" {
		t.Fatalf("message item %+v", it)
	}
	for i, want := range []struct{ name, args string }{{"get_weather", weatherArgs}, {"get_time", timeArgs}} {
		it := r.Items[i+1]
		if it.Type != "function_call" || it.Name != want.name || it.Args != want.args || it.CallID == "" || it.Status != "completed" {
			t.Fatalf("function item %+v", it)
		}
	}
	final := []byte(r.Final.Raw)
	if st := field(final, "status").String(); st != "completed" {
		t.Fatalf("status %q", st)
	}
	if got := field(final, "output.0.content.0.text").String(); got != r.Items[0].Text {
		t.Fatalf("final text %q", got)
	}
	if got := field(final, "output.2.arguments").String(); got != timeArgs {
		t.Fatalf("final arguments %q", got)
	}
	if got := ResponsesUsage(final); got != usage {
		t.Fatalf("usage %+v, want %+v", got, usage)
	}
}

// A responses client on a messages upstream.
func TestChainMessagesToResponses(t *testing.T) {
	s := Chain(NewMessagesToChat("gw-auto"), NewChatToResponses("gw-auto"))
	out := run(t, s, events(t, messagesStream(2, "tool_use")))
	r := accumulateResponses(t, out)
	checkResponsesResult(t, r, "resp_01ABC", Usage{Input: 135, Output: 87, CachedInput: 100, CacheWrite: 10})
	if r.Items[1].CallID != "toolu_01A" {
		t.Errorf("call id %q", r.Items[1].CallID)
	}
	if u := s.Usage(); u != (Usage{Input: 135, Output: 87, CachedInput: 100, CacheWrite: 10}) {
		t.Errorf("chain usage %+v", u)
	}
	if !s.Done() || len(s.Close()) != 0 {
		t.Error("chain not done")
	}
}

func TestStreamStopReasons(t *testing.T) {
	for stop, finish := range map[string]string{
		"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls",
		"refusal": "content_filter", "pause_turn": "stop", "model_context_window_exceeded": "length",
	} {
		r := accumulateChat(t, run(t, NewMessagesToChat("m"), events(t, messagesStream(10, stop))))
		if r.Finish != finish {
			t.Errorf("messages %q → chat %q, want %q", stop, r.Finish, finish)
		}
	}
	for finish, stop := range map[string]string{
		"stop":   "tool_use", // the fixture has tool calls
		"length": "max_tokens", "tool_calls": "tool_use", "content_filter": "refusal",
	} {
		r := accumulateMessages(t, run(t, NewChatToMessages("m"), events(t, chatStream(10, finish))))
		if r.StopReason != stop {
			t.Errorf("chat %q → messages %q, want %q", finish, r.StopReason, stop)
		}
	}
	textOnly := sseText(
		`data: {"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}`,
		`data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		`data: [DONE]`)
	if r := accumulateMessages(t, run(t, NewChatToMessages("m"), events(t, textOnly))); r.StopReason != "end_turn" || r.Blocks[0].Text != "Hi" {
		t.Errorf("text only: %+v", r)
	}
	for finish, want := range map[string][2]string{
		"length":         {"response.incomplete", "max_output_tokens"},
		"content_filter": {"response.incomplete", "content_filter"},
		"stop":           {"response.completed", ""},
	} {
		r := accumulateResponses(t, run(t, NewChatToResponses("m"), events(t, chatStream(10, finish))))
		if r.Terminal != want[0] || r.Final.Get("incomplete_details.reason").String() != want[1] {
			t.Errorf("chat %q → %s %s", finish, r.Terminal, r.Final.Get("incomplete_details").Raw)
		}
		if finish == "length" && (r.Final.Get("status").String() != "incomplete" || r.Items[0].Status != "completed") {
			// The message item closed before the finish was known stays completed.
			t.Errorf("length: status %s, item %s", r.Final.Get("status").String(), r.Items[0].Status)
		}
	}
}

// Text and tool calls interleaved, and a chat upstream that sends several
// tool calls in one chunk.
func TestStreamInterleaved(t *testing.T) {
	chat := sseText(
		`data: {"id":"c1","choices":[{"index":0,"delta":{"role":"assistant","content":"First."},"finish_reason":null}]}`,
		`data: {"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"a","arguments":"{\"x\""}},{"index":1,"id":"call_b","type":"function","function":{"name":"b","arguments":"{}"}}]},"finish_reason":null}]}`,
		`data: {"id":"c1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":":1}"}}]},"finish_reason":null}]}`,
		`data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Then."},"finish_reason":null}]}`,
		`data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}`,
		`data: [DONE]`)
	r := accumulateMessages(t, run(t, NewChatToMessages("m"), events(t, chat)))
	want := []msgBlock{
		{Type: "text", Text: "First.", Stopped: true},
		{Type: "tool_use", ID: "call_a", Name: "a", Input: `{"x":1}`, Stopped: true},
		{Type: "tool_use", ID: "call_b", Name: "b", Input: `{}`, Stopped: true},
		{Type: "text", Text: "Then.", Stopped: true},
	}
	if fmt.Sprint(r.Blocks) != fmt.Sprint(want) {
		t.Fatalf("blocks %+v\nwant %+v", r.Blocks, want)
	}
	rr := accumulateResponses(t, run(t, NewChatToResponses("m"), events(t, chat)))
	if len(rr.Items) != 4 || rr.Items[1].Args != `{"x":1}` || rr.Items[3].Text != "Then." {
		t.Fatalf("responses items %+v", rr.Items)
	}

	msgs := sseText(
		`event: message_start`+"\n"+`data: {"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":3,"output_tokens":0}}}`,
		`event: content_block_start`+"\n"+`data: {"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}`,
		`event: content_block_delta`+"\n"+`data: {"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}`,
		`event: content_block_stop`+"\n"+`data: {"type":"content_block_stop","index":0}`,
		`event: content_block_start`+"\n"+`data: {"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_x","name":"x","input":{}}}`,
		`event: content_block_delta`+"\n"+`data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"q\":"}}`,
		`event: content_block_delta`+"\n"+`data: {"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"2}"}}`,
		`event: content_block_stop`+"\n"+`data: {"type":"content_block_stop","index":1}`,
		`event: content_block_start`+"\n"+`data: {"type":"content_block_start","index":2,"content_block":{"type":"text","text":"Done"}}`,
		`event: content_block_delta`+"\n"+`data: {"type":"content_block_delta","index":2,"delta":{"type":"text_delta","text":"!"}}`,
		`event: content_block_stop`+"\n"+`data: {"type":"content_block_stop","index":2}`,
		`event: message_delta`+"\n"+`data: {"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9}}`,
		`event: message_stop`+"\n"+`data: {"type":"message_stop"}`)
	cr := accumulateChat(t, run(t, NewMessagesToChat("m"), events(t, msgs)))
	if cr.Text != "Done!" || len(cr.Calls) != 1 || cr.Calls[0] != (chatCall{"toolu_x", "x", `{"q":2}`}) || cr.Finish != "stop" {
		t.Fatalf("chat %+v", cr)
	}
}

// Several upstream chat tool calls without an index (some compatible
// servers) are told apart by their ids.
func TestChatToolCallsWithoutIndex(t *testing.T) {
	chat := sseText(
		`data: {"id":"c","choices":[{"delta":{"tool_calls":[{"id":"a","function":{"name":"fa","arguments":"{\"a\":"}}]}}]}`,
		`data: {"id":"c","choices":[{"delta":{"tool_calls":[{"function":{"arguments":"1}"}}]}}]}`,
		`data: {"id":"c","choices":[{"delta":{"tool_calls":[{"id":"b","function":{"name":"fb","arguments":"{}"}}]}}]}`,
		`data: {"id":"c","choices":[{"delta":{},"finish_reason":"tool_calls"}]}`)
	r := accumulateMessages(t, run(t, NewChatToMessages("m"), events(t, chat)))
	if len(r.Blocks) != 2 || r.Blocks[0].Input != `{"a":1}` || r.Blocks[1].Name != "fb" || r.Blocks[1].Input != "{}" {
		t.Fatalf("blocks %+v", r.Blocks)
	}
}

func TestStreamUpstreamErrors(t *testing.T) {
	msgs := sseText(
		`event: message_start`+"\n"+`data: {"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":3,"output_tokens":1}}}`,
		`event: content_block_start`+"\n"+`data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`event: content_block_delta`+"\n"+`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}`,
		`event: error`+"\n"+`data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
		`event: content_block_delta`+"\n"+`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"ignored"}}`)
	s := NewMessagesToChat("m")
	out := run(t, s, events(t, msgs))
	r := accumulateChat(t, out)
	if r.Text != "Hel" || len(r.Errors) != 1 || !r.Done || !s.Done() {
		t.Fatalf("got %+v", r)
	}
	jsonEqual(t, []byte(r.Errors[0]), `{"message":"Overloaded","type":"overloaded_error","param":null,"code":null}`)

	chat := sseText(
		`data: {"id":"c1","choices":[{"index":0,"delta":{"content":"Hel"},"finish_reason":null}]}`,
		`data: {"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded","param":null}}`,
		`data: [DONE]`)
	cs := NewChatToMessages("m")
	mr := accumulateMessages(t, run(t, cs, events(t, chat)))
	if len(mr.Errors) != 1 || mr.Stopped || !cs.Done() {
		t.Fatalf("got %+v", mr)
	}
	jsonEqual(t, []byte(mr.Errors[0]), `{"type":"rate_limit_error","message":"Rate limit reached"}`)

	rs := NewChatToResponses("m")
	rr := accumulateResponses(t, run(t, rs, events(t, chat)))
	if len(rr.Errors) != 1 || rr.Terminal != "response.failed" || !rs.Done() {
		t.Fatalf("got %+v", rr)
	}
	if code := field([]byte(rr.Errors[0]), "code").String(); code != "rate_limit_exceeded" {
		t.Fatalf("error %s", rr.Errors[0])
	}
	if st := rr.Final.Get("status").String(); st != "failed" || rr.Final.Get("error.message").String() != "Rate limit reached" {
		t.Fatalf("failed response %s", rr.Final.Raw)
	}

	// Through a chain, a messages upstream error reaches the responses client.
	ch := Chain(NewMessagesToChat("m"), NewChatToResponses("m"))
	cr := accumulateResponses(t, run(t, ch, events(t, msgs)))
	if len(cr.Errors) != 1 || cr.Terminal != "response.failed" || !ch.Done() {
		t.Fatalf("chain got %+v", cr)
	}
}

func TestStreamBadEvent(t *testing.T) {
	for name, s := range map[string]Stream{"m2c": NewMessagesToChat("m"), "c2m": NewChatToMessages("m"), "c2r": NewChatToResponses("m"),
		"chain": Chain(NewMessagesToChat("m"), NewChatToResponses("m"))} {
		out, err := s.Event(sse.Event{Data: []byte("{not json")})
		if err != ErrBadEvent || len(out) != 0 || s.Done() {
			t.Errorf("%s: %v %q", name, err, out)
		}
	}
}

// An upstream that ends without its terminal event: Close ends the client
// stream normally.
func TestStreamClose(t *testing.T) {
	msgs := sseText(
		`event: message_start`+"\n"+`data: {"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":3,"output_tokens":1}}}`,
		`event: content_block_start`+"\n"+`data: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`event: content_block_delta`+"\n"+`data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"cut"}}`)
	s := NewMessagesToChat("m")
	for _, ev := range events(t, msgs) {
		if _, err := s.Event(ev); err != nil {
			t.Fatal(err)
		}
	}
	if s.Done() {
		t.Fatal("done before Close")
	}
	closing := s.Close()
	if len(closing) != 3 || field(closing[0].Data, "choices.0.finish_reason").String() != "stop" || string(closing[2].Data) != "[DONE]" {
		t.Fatalf("Close %q", closing)
	}
	if !s.Done() || s.Close() != nil {
		t.Fatal("second Close")
	}

	// Nothing at all from the upstream still gives a well-formed stream.
	accumulateMessages(t, NewChatToMessages("m").Close())
	accumulateChat(t, NewMessagesToChat("m").Close())
	rr := accumulateResponses(t, NewChatToResponses("m").Close())
	if rr.Terminal != "response.completed" {
		t.Fatalf("empty responses stream: %+v", rr)
	}

	// A chat upstream without [DONE] (usage chunk last).
	chat := sseText(
		`data: {"id":"c1","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":"length"}]}`,
		`data: {"id":"c1","choices":[],"usage":{"prompt_tokens":4,"completion_tokens":1}}`)
	cs := NewChatToMessages("m")
	r := accumulateMessages(t, run(t, cs, events(t, chat)))
	if !r.Stopped || r.StopReason != "max_tokens" || r.Usage != (Usage{Input: 4, Output: 1}) {
		t.Fatalf("got %+v", r)
	}
}

func TestFail(t *testing.T) {
	chat := events(t, chatStream(100, "stop"))[:3]

	s := NewMessagesToChat("m")
	out := Fail(s, "api_error", "upstream_incomplete", "the upstream stopped")
	if len(out) != 2 || !s.Done() || Fail(s, "x", "y", "z") != nil {
		t.Fatalf("chat Fail %q", out)
	}
	jsonEqual(t, out[0].Data, `{"error":{"message":"the upstream stopped","type":"api_error","param":null,"code":"upstream_incomplete"}}`)
	if string(out[1].Data) != "[DONE]" {
		t.Fatalf("chat Fail end %q", out[1].Data)
	}

	cm := NewChatToMessages("m")
	var evs []sse.Event
	for _, ev := range chat {
		o, _ := cm.Event(ev)
		evs = append(evs, o...)
	}
	evs = append(evs, Fail(cm, "", "", "cut")...)
	r := accumulateMessages(t, evs)
	if len(r.Errors) != 1 || !cm.Done() {
		t.Fatalf("messages Fail %+v", r)
	}
	jsonEqual(t, []byte(r.Errors[0]), `{"type":"api_error","message":"cut"}`)

	cr := NewChatToResponses("m")
	evs = nil
	for _, ev := range chat {
		o, _ := cr.Event(ev)
		evs = append(evs, o...)
	}
	evs = append(evs, Fail(cr, "server_error", "", "cut")...)
	rr := accumulateResponses(t, evs) // checks the sequence numbers
	if len(rr.Errors) != 1 || rr.Terminal != "response.failed" || field([]byte(rr.Errors[0]), "code").String() != "server_error" {
		t.Fatalf("responses Fail %+v", rr)
	}
	ch := Chain(NewMessagesToChat("m"), NewChatToResponses("m"))
	if out := Fail(ch, "", "c", "m"); len(out) != 1 || out[0].Event != "error" || !ch.Done() {
		t.Fatalf("chain Fail %q", out)
	}
}

func TestErrorEvents(t *testing.T) {
	e := ChatErrorEvent("server_error", "", "boom")
	if e.Event != "" {
		t.Errorf("chat error named %q", e.Event)
	}
	jsonEqual(t, e.Data, `{"error":{"message":"boom","type":"server_error","param":null,"code":null}}`)
	e = MessagesErrorEvent("overloaded_error", "Overloaded")
	if e.Event != "error" {
		t.Errorf("messages error named %q", e.Event)
	}
	jsonEqual(t, e.Data, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
	e = ResponsesErrorEvent("rate_limit_exceeded", "slow down")
	if e.Event != "error" {
		t.Errorf("responses error named %q", e.Event)
	}
	jsonEqual(t, e.Data, `{"type":"error","code":"rate_limit_exceeded","message":"slow down","param":null,"sequence_number":0,
		"error":{"message":"slow down","code":"rate_limit_exceeded"}}`)
	jsonEqual(t, ResponsesErrorEvent("", "x").Data, `{"type":"error","code":null,"message":"x","param":null,"sequence_number":0,"error":{"message":"x","code":null}}`)
}

// Every messages event is named, as the official SDKs require.
func TestMessagesEventsNamed(t *testing.T) {
	for _, ev := range run(t, NewChatToMessages("m"), events(t, chatStream(3, "stop"))) {
		if ev.Event == "" || ev.Event != gjson.GetBytes(ev.Data, "type").String() {
			t.Fatalf("event %q carries %s", ev.Event, ev.Data)
		}
	}
}

package translate

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/sse"
	"github.com/tidwall/gjson"
)

// checkRequest checks a translated request: valid JSON with the model set
// and the given array, and the reverse translation accepting it.
func checkRequest(t *testing.T, out []byte, array string, back func([]byte, string) ([]byte, error)) {
	t.Helper()
	if !json.Valid(out) {
		t.Fatalf("output is not JSON: %s", out)
	}
	if m := gjson.GetBytes(out, "model"); m.String() != "m" {
		t.Fatalf("model = %s", m.Raw)
	}
	if !gjson.GetBytes(out, array).IsArray() {
		t.Fatalf("%s is not an array: %s", array, out)
	}
	again, err := back(out, "m2")
	if err != nil {
		t.Fatalf("the translation of our own output failed: %v\n%s", err, out)
	}
	if !json.Valid(again) {
		t.Fatalf("second translation is not JSON: %s", again)
	}
}

func FuzzChatToMessagesRequest(f *testing.F) {
	for _, s := range []string{chatRequestFixture, `{"messages":[]}`, `{"messages":[{"role":"tool","tool_call_id":"a:b","content":[{"type":"text","text":"x"}]},{"role":"user","content":"y"}],"stop":"s","temperature":3}`,
		`{"messages":[{"role":"assistant","tool_calls":[{"function":{"arguments":"[1"}}]}],"response_format":{"type":"json_schema","json_schema":{"schema":{}}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := ChatToMessagesRequest(body, "m")
		if err != nil {
			return
		}
		checkRequest(t, out, "messages", MessagesToChatRequest)
		if mt := gjson.GetBytes(out, "max_tokens"); mt.Type != gjson.Number {
			t.Fatalf("max_tokens = %s", mt.Raw)
		}
	})
}

func FuzzMessagesToChatRequest(f *testing.F) {
	for _, s := range []string{messagesRequestFixture, messagesFromChatFixture, `{"messages":[]}`, `{"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"x","content":[{"type":"image","source":{"type":"base64","data":"AA=="}}]}]}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := MessagesToChatRequest(body, "m")
		if err != nil {
			return
		}
		checkRequest(t, out, "messages", ChatToMessagesRequest)
	})
}

func FuzzResponsesToChatRequest(f *testing.F) {
	for _, s := range []string{responsesRequestFixture, `{"input":"hi"}`, `{"input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_image","image_url":"x"}]}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := ResponsesToChatRequest(body, "m")
		if err != nil {
			return
		}
		checkRequest(t, out, "messages", ChatToMessagesRequest)
	})
}

// fuzzEvents reads at most 1000 events from arbitrary bytes.
func fuzzEvents(in []byte) []sse.Event {
	r := sse.NewReader(bytes.NewReader(in))
	var evs []sse.Event
	for len(evs) < 1000 {
		ev, err := r.Next()
		if err != nil {
			break
		}
		evs = append(evs, ev)
	}
	return evs
}

// fuzzRun feeds events to s (skipping unreadable ones, as a caller may),
// closes it, and checks the Stream's own promises.
func fuzzRun(t *testing.T, s Stream, evs []sse.Event) []sse.Event {
	t.Helper()
	var out []sse.Event
	for _, ev := range evs {
		wasDone := s.Done()
		o, err := s.Event(ev)
		if err != nil && len(o) != 0 {
			t.Fatalf("events with an error: %q", o)
		}
		if wasDone && len(o) != 0 {
			t.Fatalf("events after the end: %q", o)
		}
		out = append(out, o...)
	}
	out = append(out, s.Close()...)
	if !s.Done() {
		t.Fatal("not done after Close")
	}
	if c := s.Close(); c != nil {
		t.Fatalf("second Close gave %q", c)
	}
	for _, ev := range out {
		if !json.Valid(ev.Data) && !sse.IsDone(ev) {
			t.Fatalf("event data is not JSON: %q", ev.Data)
		}
	}
	return out
}

func FuzzStreamMessagesToChat(f *testing.F) {
	f.Add([]byte(messagesStream(20, "tool_use")))
	f.Add([]byte(messagesStream(1000, "max_tokens")))
	f.Add([]byte("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"x\"}}\n\n"))
	f.Add([]byte("data: {\"type\":\"content_block_delta\",\"index\":7,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\"}}\n\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"refusal\"}}\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		out := fuzzRun(t, NewMessagesToChat("m"), fuzzEvents(in))
		r := accumulateChat(t, out) // data-only, [DONE] last, one finish, usage chunk without choices
		if !r.Done {
			t.Fatal("no [DONE]")
		}
	})
}

func FuzzStreamChatToMessages(f *testing.F) {
	f.Add([]byte(chatStream(20, "tool_calls")))
	f.Add([]byte(chatStream(1000, "length")))
	f.Add([]byte("data: {\"error\":{\"message\":\"x\",\"type\":\"server_error\"}}\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"a\",\"function\":{\"arguments\":\"{\"}},{\"index\":3,\"function\":{\"name\":\"n\"}}],\"content\":\"t\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		out := fuzzRun(t, NewChatToMessages("m"), fuzzEvents(in))
		r := accumulateMessages(t, out) // named events, block order, message_start first, nothing after the end
		if !r.Stopped && len(r.Errors) == 0 {
			t.Fatal("neither message_stop nor error")
		}
	})
}

func FuzzStreamChatToResponses(f *testing.F) {
	f.Add([]byte(chatStream(20, "tool_calls")))
	f.Add([]byte(chatStream(1000, "content_filter")))
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\ndata: {\"error\":\"boom\"}\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		out := fuzzRun(t, NewChatToResponses("m"), fuzzEvents(in))
		r := accumulateResponses(t, out) // named events, sequence numbers, items agree with deltas
		if r.Terminal == "" && len(r.Errors) == 0 {
			t.Fatal("neither a terminal event nor an error")
		}
	})
}

// FuzzUsageLikePaths holds the one-pass usage readers to what a path
// lookup of each count reads, on any JSON.
func FuzzUsageLikePaths(f *testing.F) {
	for _, s := range []string{
		`{"prompt_tokens":7,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":3,"cache_write_tokens":1}}`,
		`{"prompt_tokens":7,"prompt_tokens":9,"prompt_tokens_details":{"cached_tokens":"4"},"prompt_tokens_details":{"cached_tokens":5}}`,
		`{"input_tokens":4,"output_tokens":5,"cache_read_input_tokens":2,"cache_creation_input_tokens":1,"input_tokens_details":{"cached_tokens":2}}`,
		`[1,2]`, `{"input_tokens":1.5e3}`, `{"input_tokens":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		u := gjson.ParseBytes(b)
		n := func(path string) int64 { return u.Get(path).Int() }
		if got, want := ChatUsageOf(u), (Usage{Input: n("prompt_tokens"), Output: n("completion_tokens"),
			CachedInput: n("prompt_tokens_details.cached_tokens"), CacheWrite: n("prompt_tokens_details.cache_write_tokens")}); got != want {
			t.Fatalf("chat usage of %s: %+v, paths read %+v", b, got, want)
		}
		if got, want := ResponsesUsageOf(u), (Usage{Input: n("input_tokens"), Output: n("output_tokens"),
			CachedInput: n("input_tokens_details.cached_tokens"), CacheWrite: n("input_tokens_details.cache_write_tokens")}); got != want {
			t.Fatalf("responses usage of %s: %+v, paths read %+v", b, got, want)
		}
		read, write := n("cache_read_input_tokens"), n("cache_creation_input_tokens")
		if got, want := MessagesUsageOf(u), (Usage{Input: n("input_tokens") + read + write, Output: n("output_tokens"),
			CachedInput: read, CacheWrite: write}); got != want {
			t.Fatalf("messages usage of %s: %+v, paths read %+v", b, got, want)
		}
	})
}

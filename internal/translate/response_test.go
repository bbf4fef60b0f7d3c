package translate

import (
	"strings"
	"testing"
)

const messagesResponseFixture = `{
  "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
  "type": "message",
  "role": "assistant",
  "model": "claude-sonnet-4-5-20250929",
  "content": [
    {"type": "thinking", "thinking": "hmm", "signature": "s"},
    {"type": "text", "text": "I'll check "},
    {"type": "text", "text": "the weather."},
    {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather", "input": {"location": "San Francisco, CA", "unit": "celsius"}}
  ],
  "stop_reason": "tool_use",
  "stop_sequence": null,
  "usage": {"input_tokens": 50, "cache_creation_input_tokens": 20, "cache_read_input_tokens": 1000, "output_tokens": 73, "service_tier": "standard"}
}`

func TestMessagesToChatResponse(t *testing.T) {
	got, err := MessagesToChatResponse([]byte(messagesResponseFixture), "gw-auto")
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, got, `{
	  "id": "chatcmpl-01XFDUDYJgAACzvnptvVoYEL",
	  "object": "chat.completion",
	  "created": 1700000000,
	  "model": "gw-auto",
	  "choices": [{
	    "index": 0,
	    "message": {"role": "assistant", "content": "I'll check the weather.", "refusal": null, "tool_calls": [
	      {"id": "toolu_01A09q90qw90lq917835lq9", "type": "function", "function": {"name": "get_weather", "arguments": "{\"location\": \"San Francisco, CA\", \"unit\": \"celsius\"}"}}
	    ]},
	    "logprobs": null,
	    "finish_reason": "tool_calls"
	  }],
	  "usage": {"prompt_tokens": 1070, "completion_tokens": 73, "total_tokens": 1143,
	    "prompt_tokens_details": {"cached_tokens": 1000, "cache_write_tokens": 20}}
	}`)
}

func TestStopReasons(t *testing.T) {
	for stop, finish := range map[string]string{
		"end_turn": "stop", "stop_sequence": "stop", "pause_turn": "stop", "max_tokens": "length",
		"model_context_window_exceeded": "length", "tool_use": "tool_calls", "refusal": "content_filter", "": "stop",
	} {
		body := `{"id":"msg_1","type":"message","content":[{"type":"text","text":"x"}],"stop_reason":` + mustJSON(stop) + `,"usage":{"input_tokens":1,"output_tokens":1}}`
		got, err := MessagesToChatResponse([]byte(body), "m")
		if err != nil {
			t.Fatal(err)
		}
		if f := field(got, "choices.0.finish_reason").String(); f != finish {
			t.Errorf("stop_reason %q → %q, want %q", stop, f, finish)
		}
	}
	for finish, stop := range map[string]string{
		"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "function_call": "tool_use",
		"content_filter": "refusal", "": "end_turn",
	} {
		f := "null"
		if finish != "" {
			f = mustJSON(finish)
		}
		body := `{"id":"chatcmpl-1","choices":[{"index":0,"message":{"role":"assistant","content":"x"},"finish_reason":` + f + `}]}`
		got, err := ChatToMessagesResponse([]byte(body), "m")
		if err != nil {
			t.Fatal(err)
		}
		if s := field(got, "stop_reason").String(); s != stop {
			t.Errorf("finish_reason %q → %q, want %q", finish, s, stop)
		}
	}
	// Tool calls reported with "stop" (some upstreams) are still tool_use.
	body := `{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"stop"}]}`
	got, err := ChatToMessagesResponse([]byte(body), "m")
	if err != nil {
		t.Fatal(err)
	}
	if s := field(got, "stop_reason").String(); s != "tool_use" {
		t.Errorf("stop with tool calls → %q", s)
	}
}

const chatResponseFixture = `{
  "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
  "object": "chat.completion",
  "created": 1741569952,
  "model": "gpt-4.1-2025-04-14",
  "choices": [{
    "index": 0,
    "message": {"role": "assistant", "content": "Let me look.", "refusal": null, "annotations": [],
      "tool_calls": [
        {"id": "call_12345xyz", "type": "function", "function": {"name": "get_weather", "arguments": "{\"location\":\"Paris, France\"}"}},
        {"id": "call_67890abc", "type": "function", "function": {"name": "get_time", "arguments": "{\"tz\":"}}
      ]},
    "logprobs": null,
    "finish_reason": "tool_calls"
  }],
  "usage": {"prompt_tokens": 1200, "completion_tokens": 40, "total_tokens": 1240,
    "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 12, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}},
  "service_tier": "default"
}`

func TestChatToMessagesResponse(t *testing.T) {
	got, err := ChatToMessagesResponse([]byte(chatResponseFixture), "gw-auto")
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, got, `{
	  "id": "msg_B9MBs8CjcvOU2jLn4n570S5qMJKcT",
	  "type": "message",
	  "role": "assistant",
	  "model": "gw-auto",
	  "content": [
	    {"type": "text", "text": "Let me look."},
	    {"type": "tool_use", "id": "call_12345xyz", "name": "get_weather", "input": {"location": "Paris, France"}},
	    {"type": "tool_use", "id": "call_67890abc", "name": "get_time", "input": {"_raw_arguments": "{\"tz\":"}}
	  ],
	  "stop_reason": "tool_use",
	  "stop_sequence": null,
	  "usage": {"input_tokens": 176, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 1024, "output_tokens": 40}
	}`)
	// And back: the same text, tool calls (arguments byte for byte, the
	// invalid ones restored), finish reason and usage.
	back, err := MessagesToChatResponse(got, "gw-auto")
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, []byte(field(back, "choices.0.message").Raw), `{"role": "assistant", "content": "Let me look.", "refusal": null, "tool_calls": [
	  {"id": "call_12345xyz", "type": "function", "function": {"name": "get_weather", "arguments": "{\"location\":\"Paris, France\"}"}},
	  {"id": "call_67890abc", "type": "function", "function": {"name": "get_time", "arguments": "{\"tz\":"}}]}`)
	if f := field(back, "choices.0.finish_reason").String(); f != "tool_calls" {
		t.Errorf("finish_reason %q", f)
	}
	if u, want := ChatUsage(back), ChatUsage([]byte(chatResponseFixture)); u != want {
		t.Errorf("usage %+v, want %+v", u, want)
	}
}

func TestChatToResponsesResponse(t *testing.T) {
	got, err := ChatToResponsesResponse([]byte(chatResponseFixture), "gw-auto")
	if err != nil {
		t.Fatal(err)
	}
	if id := field(got, "id").String(); id != "resp_B9MBs8CjcvOU2jLn4n570S5qMJKcT" {
		t.Errorf("id %q", id)
	}
	for path, want := range map[string]string{
		"object": `"response"`, "created_at": "1741569952", "status": `"completed"`, "model": `"gw-auto"`,
		"error": "null", "incomplete_details": "null", "output.#": "3",
		"output.0.type": `"message"`, "output.0.role": `"assistant"`, "output.0.status": `"completed"`,
		"output.0.content": `[{"type":"output_text","text":"Let me look.","annotations":[],"logprobs":[]}]`,
		"output.1.type":    `"function_call"`, "output.1.call_id": `"call_12345xyz"`, "output.1.name": `"get_weather"`,
		"output.1.arguments": `"{\"location\":\"Paris, France\"}"`, "output.1.status": `"completed"`,
		"output.2.arguments": `"{\"tz\":"`,
		"usage":              `{"input_tokens":1200,"input_tokens_details":{"cached_tokens":1024},"output_tokens":40,"output_tokens_details":{"reasoning_tokens":12},"total_tokens":1240}`,
	} {
		r := field(got, path)
		if !r.Exists() {
			t.Errorf("%s missing", path)
			continue
		}
		jsonEqual(t, []byte(r.Raw), want)
	}
	if !strings.HasPrefix(field(got, "output.0.id").String(), "msg_") || !strings.HasPrefix(field(got, "output.1.id").String(), "fc_") {
		t.Errorf("item ids: %s", field(got, "output.#.id").Raw)
	}
	if u := ResponsesUsage(got); u != (Usage{Input: 1200, Output: 40, CachedInput: 1024}) {
		t.Errorf("ResponsesUsage %+v", u)
	}

	for finish, want := range map[string][2]string{
		"length":         {"incomplete", `{"reason":"max_output_tokens"}`},
		"content_filter": {"incomplete", `{"reason":"content_filter"}`},
		"stop":           {"completed", "null"},
	} {
		body := `{"id":"chatcmpl-9","created":5,"choices":[{"message":{"role":"assistant","content":"cut"},"finish_reason":"` + finish + `"}],"usage":{"prompt_tokens":3,"completion_tokens":4}}`
		got, err := ChatToResponsesResponse([]byte(body), "m")
		if err != nil {
			t.Fatal(err)
		}
		if s := field(got, "status").String(); s != want[0] {
			t.Errorf("%s: status %q", finish, s)
		}
		jsonEqual(t, []byte(field(got, "incomplete_details").Raw), want[1])
	}
}

func TestResponsesErrorsOnErrorBodies(t *testing.T) {
	if _, err := MessagesToChatResponse([]byte(`{"type":"error","error":{"type":"overloaded_error","message":"x"}}`), "m"); err == nil {
		t.Error("messages error body translated")
	}
	if _, err := ChatToMessagesResponse([]byte(`{"error":{"message":"x"}}`), "m"); err == nil {
		t.Error("chat error body translated")
	}
	if _, err := ChatToResponsesResponse([]byte(`{"error":{"message":"x"}}`), "m"); err == nil {
		t.Error("chat error body translated")
	}
	for _, fn := range []func([]byte, string) ([]byte, error){MessagesToChatResponse, ChatToMessagesResponse, ChatToResponsesResponse} {
		if _, err := fn([]byte(`{"id":`), "m"); err == nil {
			t.Error("invalid JSON translated")
		}
	}
}

func TestResponseIDs(t *testing.T) {
	got, err := ChatToMessagesResponse([]byte(`{"choices":[{"message":{"content":"x"},"finish_reason":"stop"}]}`), "m")
	if err != nil {
		t.Fatal(err)
	}
	if id := field(got, "id").String(); !strings.HasPrefix(id, "msg_") || len(id) != 28 {
		t.Errorf("generated id %q", id)
	}
	got, err = MessagesToChatResponse([]byte(`{"content":[]}`), "m")
	if err != nil {
		t.Fatal(err)
	}
	if id := field(got, "id").String(); !strings.HasPrefix(id, "chatcmpl-") {
		t.Errorf("generated id %q", id)
	}
	if c := field(got, "choices.0.message.content").Raw; c != `""` {
		t.Errorf("empty content %s", c)
	}
	for in, want := range map[string]string{"msg_abc": "chatcmpl-abc", "chatcmpl-abc": "chatcmpl-abc", "resp_x": "chatcmpl-x", "odd": "chatcmpl-odd", "msg_": "chatcmpl-msg_"} {
		if got := swapID(in, "chatcmpl-"); got != want {
			t.Errorf("swapID(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestUsage(t *testing.T) {
	tests := []struct {
		name string
		fn   func([]byte) Usage
		in   string
		want Usage
	}{
		{"chat", ChatUsage, `{"usage":{"prompt_tokens":1200,"completion_tokens":40,"prompt_tokens_details":{"cached_tokens":1024,"cache_write_tokens":100}}}`, Usage{1200, 40, 1024, 100}},
		{"chat none", ChatUsage, `{"usage":null}`, Usage{}},
		{"messages", MessagesUsage, `{"usage":{"input_tokens":50,"cache_creation_input_tokens":20,"cache_read_input_tokens":1000,"output_tokens":73}}`, Usage{1070, 73, 1000, 20}},
		{"message_start", MessagesUsage, `{"type":"message_start","message":{"usage":{"input_tokens":5,"cache_read_input_tokens":7,"output_tokens":1}}}`, Usage{12, 1, 7, 0}},
		{"responses", ResponsesUsage, `{"usage":{"input_tokens":300,"input_tokens_details":{"cached_tokens":256},"output_tokens":9}}`, Usage{300, 9, 256, 0}},
		{"response.completed", ResponsesUsage, `{"type":"response.completed","response":{"usage":{"input_tokens":3,"output_tokens":4,"input_tokens_details":{"cached_tokens":1,"cache_write_tokens":2}}}}`, Usage{3, 4, 1, 2}},
		{"garbage", ChatUsage, `not json`, Usage{}},
	}
	for _, tc := range tests {
		if got := tc.fn([]byte(tc.in)); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	if u := (Usage{Input: 10, CachedInput: 8, CacheWrite: 5}); u.Uncached() != 0 {
		t.Errorf("Uncached below zero: %d", u.Uncached())
	}
	// A messages usage read and rendered back is the same.
	u := Usage{Input: 1070, Output: 73, CachedInput: 1000, CacheWrite: 20}
	if got := MessagesUsageOf(field(messagesUsageRaw(u), "@this")); got != u {
		t.Errorf("messages usage round trip %+v", got)
	}
	if got := ChatUsageOf(field(chatUsageRaw(u), "@this")); got != u {
		t.Errorf("chat usage round trip %+v", got)
	}
}

func TestSetModel(t *testing.T) {
	in := `{ "model" : "gw-auto",
  "messages": [{"role":"user","content":"hi","model":"not-this"}],
  "x_unknown": {"keep": [1, 2.50, "s"]},   "stream":true }`
	got, err := SetModel([]byte(in), "gpt-4o")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(in, `"gw-auto"`, `"gpt-4o"`, 1)
	if string(got) != want {
		t.Fatalf("SetModel changed more than the model:\n got %s\nwant %s", got, want)
	}
	got, err = SetModel([]byte(`{"messages":[]}`), "m")
	if err != nil || field(got, "model").String() != "m" || field(got, "messages").Raw != "[]" {
		t.Fatalf("SetModel without model: %s %v", got, err)
	}
	for _, bad := range []string{``, `[]`, `{"model":`, `"s"`} {
		if _, err := SetModel([]byte(bad), "m"); err == nil {
			t.Errorf("SetModel(%q): no error", bad)
		}
	}
}

func TestUsageValid(t *testing.T) {
	for _, tc := range []struct {
		u    Usage
		want bool
	}{
		{Usage{Input: 10, Output: 5, CachedInput: 4, CacheWrite: 6}, true},
		{Usage{}, true},
		{Usage{Input: -1}, false},
		{Usage{Input: 10, Output: -5}, false},
		{Usage{Input: 10, CachedInput: 11}, false},
		{Usage{Output: MaxUsageTokens + 1}, false},
		{Usage{Input: 10, CacheWrite: -20}, false},
	} {
		if got := tc.u.Valid(); got != tc.want {
			t.Errorf("%+v.Valid() = %v", tc.u, got)
		}
	}
}

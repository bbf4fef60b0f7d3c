package translate

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/awsstream"
	"github.com/caddy-gw/caddy-gw/internal/sse"
)

// Base64 data whose first bytes are a PNG's, a JPEG's and a GIF's.
const (
	pngData  = "iVBORw0KGgoAAAANSUhEUg=="
	jpegData = "/9j/4AAQSkZJRgABAQ=="
	gifData  = "R0lGODlhAQABAAAAACw="
)

func TestChatToConverseRequest(t *testing.T) {
	in := `{"model":"gw-auto","stream":true,"n":1,"user":"u-1","parallel_tool_calls":false,"seed":7,
	"messages":[
	 {"role":"system","content":"You are terse."},
	 {"role":"developer","content":[{"type":"text","text":"Long rules","cache_control":{"type":"ephemeral"}},{"type":"text","text":""}]},
	 {"role":"user","content":[{"type":"text","text":"What is in these?"},
	   {"type":"image_url","image_url":{"url":"data:image/jpeg;base64,` + pngData + `","detail":"high"},"cache_control":{"type":"ephemeral"}},
	   {"type":"image_url","image_url":"data:image/gif;base64,` + gifData + `"},
	   {"type":"file","file":{"filename":"Q3 report.final.pdf","file_data":"data:application/pdf;base64,JVBERi0xLjQK"}},
	   {"type":"file","file":{"filename":"Q3 report.final.txt","file_data":"data:text/plain;charset=utf-8;base64,aGk="}},
	   {"type":"text","text":""}]},
	 {"role":"user","content":"And the weather?"},
	 {"role":"assistant","content":"Checking.","tool_calls":[
	   {"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
	   {"id":"call:2","type":"function","function":{"name":"get_time","arguments":"not json"}}]},
	 {"role":"tool","tool_call_id":"call_1","content":"18C"},
	 {"role":"tool","tool_call_id":"call:2","content":[{"type":"text","text":"12:00"}]},
	 {"role":"tool","tool_call_id":"call_3","content":""},
	 {"role":"user","content":"Thanks"},
	 {"role":"assistant","content":[{"type":"text","text":"You're welcome."}]},
	 {"role":"assistant","content":null,"refusal":"No more."},
	 {"role":"assistant","content":""},
	 {"role":"user","content":"Bye"}],
	"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather now","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}},
	 {"type":"function","function":{"name":"get_time","description":"","parameters":{"properties":{}}}},
	 {"type":"web_search"}],
	"tool_choice":"required",
	"max_completion_tokens":300,"max_tokens":100,"temperature":1.5,"top_p":0.9,"stop":["END","",".."],
	"response_format":{"type":"json_object"}}`
	out, err := ChatToConverseRequest([]byte(in), "bedrock-model")
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, out, `{
	"messages":[
	 {"role":"user","content":[{"text":"What is in these?"},
	   {"image":{"format":"png","source":{"bytes":"`+pngData+`"}}},{"cachePoint":{"type":"default"}},
	   {"image":{"format":"gif","source":{"bytes":"`+gifData+`"}}},
	   {"document":{"format":"pdf","name":"Q3 report final","source":{"bytes":"JVBERi0xLjQK"}}},
	   {"document":{"format":"txt","name":"Q3 report final (2)","source":{"bytes":"aGk="}}},
	   {"text":"And the weather?"}]},
	 {"role":"assistant","content":[{"text":"Checking."},
	   {"toolUse":{"toolUseId":"call_1","name":"get_weather","input":{"city":"Paris"}}},
	   {"toolUse":{"toolUseId":"call_2","name":"get_time","input":{"_raw_arguments":"not json"}}}]},
	 {"role":"user","content":[{"toolResult":{"toolUseId":"call_1","content":[{"text":"18C"}]}},
	   {"toolResult":{"toolUseId":"call_2","content":[{"text":"12:00"}]}},
	   {"toolResult":{"toolUseId":"call_3","content":[]}},{"text":"Thanks"}]},
	 {"role":"assistant","content":[{"text":"You're welcome."},{"text":"No more."}]},
	 {"role":"user","content":[{"text":"Bye"}]}],
	"system":[{"text":"You are terse."},{"text":"Long rules"},{"cachePoint":{"type":"default"}},{"text":`+mustJSON(JSONInstruction)+`}],
	"inferenceConfig":{"maxTokens":300,"temperature":1,"topP":0.9,"stopSequences":["END",".."]},
	"toolConfig":{"tools":[
	  {"toolSpec":{"name":"get_weather","description":"Weather now","inputSchema":{"json":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}},
	  {"toolSpec":{"name":"get_time","inputSchema":{"json":{"properties":{},"type":"object"}}}}],
	 "toolChoice":{"any":{}}}}`)
	// The messages come first, the model nowhere.
	if !strings.HasPrefix(string(out), `{"messages":`) || strings.Contains(string(out), "bedrock-model") {
		t.Fatalf("out: %s", out)
	}
}

func TestChatToConverseRequestSmall(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"only a user", `{"messages":[{"role":"user","content":"hi"}]}`, `{"messages":[{"role":"user","content":[{"text":"hi"}]}]}`},
		{"no messages", `{"messages":[]}`, `{"messages":[]}`},
		{"max_tokens, temperature below 0, one stop", `{"messages":[],"max_tokens":9,"temperature":-1,"stop":"x"}`,
			`{"messages":[],"inferenceConfig":{"maxTokens":9,"temperature":0,"stopSequences":["x"]}}`},
		{"json_schema", `{"messages":[],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object"}}}}`,
			`{"messages":[],"system":[{"text":` + mustJSON(JSONInstruction+" It must conform to this JSON schema:\n{\"type\":\"object\"}") + `}]}`},
		{"jpeg by its declared type when its bytes say nothing", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/JPG;base64,AAAA"}}]}]}`,
			`{"messages":[{"role":"user","content":[{"image":{"format":"jpeg","source":{"bytes":"AAAA"}}}]}]}`},
		{"jpeg and webp by their bytes", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:;base64,` + jpegData + `"}},{"type":"image_url","image_url":{"url":"data:image/png;base64,UklGRiQAAABXRUJQVlA4"}}]}]}`,
			`{"messages":[{"role":"user","content":[{"image":{"format":"jpeg","source":{"bytes":"` + jpegData + `"}}},{"image":{"format":"webp","source":{"bytes":"UklGRiQAAABXRUJQVlA4"}}}]}]}`},
		{"a percent-encoded text file, a bare base64 PDF, names", `{"messages":[{"role":"user","content":[{"type":"file","file":{"filename":"a  b\u00e9!.md","file_data":"data:text/markdown,%23%20T"}},{"type":"file","file":{"file_data":"JVBE"}},{"type":"file","file":{"filename":"...","file_data":"data:text/x-python;base64,eA=="}}]}]}`,
			`{"messages":[{"role":"user","content":[{"document":{"format":"md","name":"a b","source":{"bytes":"IyBU"}}},{"document":{"format":"pdf","name":"document","source":{"bytes":"JVBE"}}},{"document":{"format":"txt","name":"document (2)","source":{"bytes":"eA=="}}}]}]}`},
		{"a tool result with an image", `{"messages":[{"role":"tool","tool_call_id":"c","content":[{"type":"text","text":"see"},{"type":"image_url","image_url":{"url":"data:image/png;base64,` + pngData + `"},"cache_control":{"type":"ephemeral"}}]}],"tools":[{"type":"function","function":{"name":"f"}}]}`,
			`{"messages":[{"role":"user","content":[{"toolResult":{"toolUseId":"c","content":[{"text":"see"},{"image":{"format":"png","source":{"bytes":"` + pngData + `"}}}]}}]}],"toolConfig":{"tools":[{"toolSpec":{"name":"f","inputSchema":{"json":{"type":"object","properties":{}}}}}]}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := ChatToConverseRequest([]byte(tc.in), "m")
			if err != nil {
				t.Fatal(err)
			}
			jsonEqual(t, out, tc.want)
		})
	}
}

// TestChatToConverseToolChoice covers what Converse lacks (tool_choice
// none) and requires (tools whenever the conversation holds tool calls).
func TestChatToConverseToolChoice(t *testing.T) {
	const history = `{"role":"user","content":"q"},{"role":"assistant","tool_calls":[{"id":"c1","function":{"name":"get_weather","arguments":"{}"}},{"id":"c2","function":{"name":"get_weather","arguments":""}},{"id":"c3","function":{"name":"get_time","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"x"}`
	const tools = `[{"type":"function","function":{"name":"get_weather"}},{"type":"function","function":{"name":"get_time"}}]`
	const specs = `[{"toolSpec":{"name":"get_weather","inputSchema":{"json":{"type":"object","properties":{}}}}},{"toolSpec":{"name":"get_time","inputSchema":{"json":{"type":"object","properties":{}}}}}]`
	for _, tc := range []struct{ name, messages, tools, choice, want string }{
		{"none without tool calls", `{"role":"user","content":"q"}`, tools, `"none"`, ``},
		{"none with tool calls", history, tools, `"none"`, `{"tools":` + specs + `}`},
		{"auto", `{"role":"user","content":"q"}`, tools, `"auto"`, `{"tools":` + specs + `,"toolChoice":{"auto":{}}}`},
		{"a named function", `{"role":"user","content":"q"}`, tools, `{"type":"function","function":{"name":"get_time"}}`, `{"tools":` + specs + `,"toolChoice":{"tool":{"name":"get_time"}}}`},
		{"no choice", `{"role":"user","content":"q"}`, tools, `null`, `{"tools":` + specs + `}`},
		{"tool calls without tools", history, `null`, `null`, `{"tools":` + specs + `}`},
		{"a choice without tools", `{"role":"user","content":"q"}`, `[]`, `"required"`, ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := ChatToConverseRequest([]byte(`{"messages":[`+tc.messages+`],"tools":`+tc.tools+`,"tool_choice":`+tc.choice+`}`), "m")
			if err != nil {
				t.Fatal(err)
			}
			got := field(out, "toolConfig")
			if tc.want == "" {
				if got.Exists() {
					t.Fatalf("toolConfig %s", got.Raw)
				}
				return
			}
			jsonEqual(t, []byte(got.Raw), tc.want)
		})
	}
}

func TestChatToConverseRefuses(t *testing.T) {
	for _, tc := range []struct{ name, in, param, message string }{
		{"not JSON", `{`, "", "body is not valid JSON"},
		{"messages not an array", `{"messages":{}}`, "messages", "must be an array"},
		{"an image by URL", `{"messages":[{"role":"user","content":"hi"},{"role":"user","content":[{"type":"text","text":"x"},{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]}`,
			"messages[1].content[1]", "is an image by URL; Bedrock takes images as data: send it as a data: URL"},
		{"a BMP image", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/bmp;base64,Qk0="}}]}]}`,
			"messages[0].content[0]", "is an image Bedrock does not take: PNG, JPEG, GIF and WebP are taken"},
		{"a file by id", `{"messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-1"}}]}]}`,
			"messages[0].content[0]", "is a file without its data (by id, or empty); Bedrock takes files as data: send file_data"},
		{"a zip file", `{"messages":[{"role":"user","content":[{"type":"file","file":{"file_data":"data:application/zip;base64,UEs="}}]}]}`,
			"messages[0].content[0]", "is a file Bedrock's Converse API does not take here: PDF and text files are taken"},
		{"audio", `{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AA==","format":"wav"}}]}]}`,
			"messages[0].content[0]", "is audio, which Bedrock's Converse API does not take here"},
		{"an image by URL in a tool result", `{"messages":[{"role":"tool","tool_call_id":"c","content":[{"type":"image_url","image_url":{"url":"http://x/y.png"}}]}]}`,
			"messages[0].content[0]", "is an image by URL; Bedrock takes images as data: send it as a data: URL"},
		{"an image by URL from the assistant", `{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":[{"type":"image_url","image_url":{"url":"http://x/y.png"}}]}]}`,
			"messages[1].content[0]", "is an image by URL; Bedrock takes images as data: send it as a data: URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := ChatToConverseRequest([]byte(tc.in), "m")
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Param != tc.param || fe.Message != tc.message || out != nil {
				t.Fatalf("got %s, %#v", out, err)
			}
		})
	}
}

func TestConverseToolID(t *testing.T) {
	long := strings.Repeat("x", 60) + "-call:42"
	got := converseToolID(long)
	if len(got) != MaxConverseToolID || !strings.HasPrefix(got, strings.Repeat("x", 47)+"_") || got != converseToolID(long) {
		t.Fatalf("converseToolID(%q) = %q", long, got)
	}
	if other := converseToolID(strings.Repeat("x", 60) + "-call:43"); other == got {
		t.Fatal("two long ids share one short id")
	}
	if got := converseToolID("call:1"); got != "call_1" {
		t.Fatalf("short id %q", got)
	}
}

func TestConversePath(t *testing.T) {
	for _, tc := range []struct {
		model  string
		stream bool
		want   string
	}{
		{"anthropic.claude-3-5-haiku-20241022-v1:0", false, "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse"},
		{"us.amazon.nova-pro-v1:0", true, "/model/us.amazon.nova-pro-v1%3A0/converse-stream"},
		{"arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.meta.llama3-3-70b-instruct-v1:0", false,
			"/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2Fus.meta.llama3-3-70b-instruct-v1%3A0/converse"},
		{"a b~é", false, "/model/a%20b~%C3%A9/converse"},
	} {
		if got := ConversePath(tc.model, tc.stream); got != tc.want {
			t.Errorf("ConversePath(%q, %v) = %s, want %s", tc.model, tc.stream, got, tc.want)
		}
	}
}

// withID is a chat body whose generated id is replaced by a fixed one,
// after checking its form.
func withID(t *testing.T, b []byte) []byte {
	t.Helper()
	id := field(b, "id").String()
	if !strings.HasPrefix(id, "chatcmpl-") || len(id) != len("chatcmpl-")+24 {
		t.Fatalf("id %q", id)
	}
	return []byte(strings.Replace(string(b), id, "chatcmpl-X", 1))
}

func TestConverseToChatResponse(t *testing.T) {
	in := `{"output":{"message":{"role":"assistant","content":[
	  {"reasoningContent":{"reasoningText":{"text":"hmm","signature":"sig"}}},
	  {"text":"Paris is "},{"text":"sunny."},
	  {"toolUse":{"toolUseId":"tooluse_abc","name":"get_weather","input":{"city":"Paris"}}},
	  {"toolUse":{"toolUseId":"tooluse_def","name":"get_time","input":{"_raw_arguments":"now"}}}]}},
	 "stopReason":"tool_use",
	 "usage":{"inputTokens":25,"outputTokens":87,"totalTokens":222,"cacheReadInputTokens":100,"cacheWriteInputTokens":10},
	 "metrics":{"latencyMs":321}}`
	out, err := ConverseToChatResponse([]byte(in), "gw-auto")
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, withID(t, out), `{"id":"chatcmpl-X","object":"chat.completion","created":1700000000,"model":"gw-auto",
	 "choices":[{"index":0,"message":{"role":"assistant","content":"Paris is sunny.","refusal":null,"tool_calls":[
	   {"id":"tooluse_abc","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},
	   {"id":"tooluse_def","type":"function","function":{"name":"get_time","arguments":"now"}}]},
	  "logprobs":null,"finish_reason":"tool_calls"}],
	 "usage":{"prompt_tokens":135,"completion_tokens":87,"total_tokens":222,"prompt_tokens_details":{"cached_tokens":100,"cache_write_tokens":10}}}`)
	if u := ConverseUsage([]byte(in)); u != (Usage{Input: 135, Output: 87, CachedInput: 100, CacheWrite: 10}) || !u.Valid() {
		t.Fatalf("usage %+v", u)
	}

	only := `{"output":{"message":{"role":"assistant","content":[{"toolUse":{"toolUseId":"t","name":"f","input":{}}}]}},"stopReason":"tool_use","usage":{"inputTokens":3,"outputTokens":4,"totalTokens":7}}`
	out, err = ConverseToChatResponse([]byte(only), "m")
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, withID(t, out), `{"id":"chatcmpl-X","object":"chat.completion","created":1700000000,"model":"m",
	 "choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":null,"tool_calls":[{"id":"t","type":"function","function":{"name":"f","arguments":"{}"}}]},
	  "logprobs":null,"finish_reason":"tool_calls"}],
	 "usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7,"prompt_tokens_details":{"cached_tokens":0}}}`)
}

func TestConverseStopReasons(t *testing.T) {
	for stop, want := range map[string]string{
		"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "model_context_window_exceeded": "length",
		"tool_use": "tool_calls", "guardrail_intervened": "content_filter", "content_filtered": "content_filter",
		"malformed_model_output": "stop", "malformed_tool_use": "stop", "": "stop",
	} {
		out, err := ConverseToChatResponse([]byte(`{"output":{"message":{"role":"assistant","content":[{"text":"x"}]}},"stopReason":"`+stop+`"}`), "m")
		if err != nil {
			t.Fatal(err)
		}
		if got := field(out, "choices.0.finish_reason").String(); got != want {
			t.Errorf("%q → %q, want %q", stop, got, want)
		}
		ev := []sse.Event{{Event: "messageStart", Data: []byte(`{"role":"assistant"}`)}, {Event: "messageStop", Data: []byte(`{"stopReason":"` + stop + `"}`)},
			{Event: "metadata", Data: []byte(`{}`)}}
		if r := accumulateChat(t, run(t, NewConverseToChat("m"), ev)); r.Finish != want {
			t.Errorf("stream %q → %q, want %q", stop, r.Finish, want)
		}
	}
}

func TestConverseToChatResponseRefuses(t *testing.T) {
	for _, in := range []string{`{"message":"The security token included in the request is invalid."}`, `[]`, `{`, `{"output":"x"}`} {
		if out, err := ConverseToChatResponse([]byte(in), "m"); err == nil {
			t.Errorf("%s → %s", in, out)
		}
	}
}

// converseStream is a ConverseStream answer as awsstream.Reader yields
// it: reasoning, text, then two tool calls whose input comes in pieces
// of n runes; every payload has the padding member "p" the service adds.
func converseStream(n int, stop string) []sse.Event {
	var evs []sse.Event
	add := func(name, data string) {
		evs = append(evs, sse.Event{Event: name, Data: []byte(data[:len(data)-1] + `,"p":"abcdefghij"}`)})
	}
	add("messageStart", `{"role":"assistant"}`)
	add("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"Let me think."}}}`)
	add("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"reasoningContent":{"signature":"sig"}}}`)
	add("contentBlockStop", `{"contentBlockIndex":0}`)
	for _, p := range []string{"Checking ", "", "both <cities> & times."} {
		add("contentBlockDelta", `{"contentBlockIndex":1,"delta":{"text":`+mustJSON(p)+`}}`)
	}
	add("contentBlockStop", `{"contentBlockIndex":1}`)
	for i, tool := range []struct{ id, name, args string }{{"tooluse_A", "get_weather", weatherArgs}, {"tooluse_B", "get_time", timeArgs}} {
		idx := i + 2
		add("contentBlockStart", fmt.Sprintf(`{"contentBlockIndex":%d,"start":{"toolUse":{"toolUseId":%q,"name":%q}}}`, idx, tool.id, tool.name))
		for _, p := range splitRunes(tool.args, n) {
			add("contentBlockDelta", fmt.Sprintf(`{"contentBlockIndex":%d,"delta":{"toolUse":{"input":%s}}}`, idx, mustJSON(p)))
		}
		add("contentBlockStop", fmt.Sprintf(`{"contentBlockIndex":%d}`, idx))
	}
	add("messageStop", `{"stopReason":"`+stop+`"}`)
	add("metadata", `{"usage":{"inputTokens":25,"outputTokens":87,"totalTokens":222,"cacheReadInputTokens":100,"cacheWriteInputTokens":10},"metrics":{"latencyMs":812}}`)
	return evs
}

func TestConverseToChatStream(t *testing.T) {
	for _, n := range []int{1, 3, 1000} {
		t.Run(fmt.Sprintf("pieces of %d", n), func(t *testing.T) {
			s := NewConverseToChat("gw-auto")
			out := run(t, s, converseStream(n, "tool_use"))
			r := accumulateChat(t, out)
			if r.Role != "assistant" || r.Text != "Checking both <cities> & times." || r.Finish != "tool_calls" || !r.Done {
				t.Fatalf("got %+v", r)
			}
			want := []chatCall{{"tooluse_A", "get_weather", weatherArgs}, {"tooluse_B", "get_time", timeArgs}}
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
		})
	}
}

// TestConverseToChatStreamChunks holds a short stream's chunks to their
// exact JSON.
func TestConverseToChatStreamChunks(t *testing.T) {
	s := NewConverseToChat("gw-auto")
	out := run(t, s, []sse.Event{
		{Event: "messageStart", Data: []byte(`{"p":"abc","role":"assistant"}`)},
		{Event: "contentBlockDelta", Data: []byte(`{"contentBlockIndex":0,"delta":{"text":"Hi"},"p":"ab"}`)},
		{Event: "contentBlockStop", Data: []byte(`{"contentBlockIndex":0}`)},
		{Event: "messageStop", Data: []byte(`{"stopReason":"max_tokens"}`)},
		{Event: "metadata", Data: []byte(`{"usage":{"inputTokens":5,"outputTokens":1,"totalTokens":6},"metrics":{"latencyMs":100}}`)},
	})
	id := field(out[0].Data, "id").String()
	head := `"id":"` + id + `","object":"chat.completion.chunk","created":1700000000,"model":"gw-auto"`
	want := []string{
		`{` + head + `,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
		`{` + head + `,"choices":[{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}]}`,
		`{` + head + `,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"length"}]}`,
		`{` + head + `,"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6,"prompt_tokens_details":{"cached_tokens":0}}}`,
		`[DONE]`,
	}
	if len(out) != len(want) {
		t.Fatalf("%d events: %q", len(out), out)
	}
	for i := range want {
		if string(out[i].Data) != want[i] || out[i].Event != "" {
			t.Fatalf("event %d\n got %s %s\nwant %s", i, out[i].Event, out[i].Data, want[i])
		}
	}
}

func TestConverseToChatStreamErrors(t *testing.T) {
	start := []sse.Event{{Event: "messageStart", Data: []byte(`{"role":"assistant"}`)}, {Event: "contentBlockDelta", Data: []byte(`{"contentBlockIndex":0,"delta":{"text":"Hi"}}`)}}
	for exception, typ := range map[string]string{
		"throttlingException": "rate_limit_error", "serviceUnavailableException": "overloaded_error", "validationException": "invalid_request_error",
		"modelStreamErrorException": "api_error", "internalServerException": "api_error", "": "api_error",
	} {
		s := NewConverseToChat("m")
		out := run(t, s, append(start, sse.Event{Event: awsstream.ErrorEvent, Data: []byte(`{"type":"` + exception + `","message":"slow down"}`)},
			sse.Event{Event: "contentBlockDelta", Data: []byte(`{"contentBlockIndex":0,"delta":{"text":"late"}}`)}))
		if len(out) != 4 || string(out[2].Data) != `{"error":{"message":"slow down","type":"`+typ+`","param":null,"code":null}}` || !sse.IsDone(out[3]) || !s.Done() {
			t.Fatalf("%s: %q", exception, out)
		}
	}
	s := NewConverseToChat("m")
	out := run(t, s, []sse.Event{{Event: awsstream.ErrorEvent, Data: []byte(`{"type":"x"}`)}})
	if len(out) != 2 || field(out[0].Data, "error.message").String() != "upstream stream error" {
		t.Fatalf("%q", out)
	}

	s = NewConverseToChat("m")
	if evs, err := s.Event(sse.Event{Event: "contentBlockDelta", Data: []byte(`{"delta":`)}); err != ErrBadEvent || evs != nil {
		t.Fatalf("bad event: %q, %v", evs, err)
	}
	if _, err := s.Event(start[0]); err != nil {
		t.Fatal(err)
	}
	out = Fail(s, "", "", "the upstream ended the stream early")
	if len(out) != 2 || string(out[0].Data) != `{"error":{"message":"the upstream ended the stream early","type":"api_error","param":null,"code":null}}` || !s.Done() {
		t.Fatalf("Fail: %q", out)
	}
	if Fail(s, "", "", "again") != nil {
		t.Fatal("Fail after the end")
	}
}

// TestConverseToChatStreamClose ends a stream that lost its metadata
// event: not done until Close, which ends it with the usage seen (none).
func TestConverseToChatStreamClose(t *testing.T) {
	s := NewConverseToChat("m")
	evs := converseStream(1000, "end_turn")
	var out []sse.Event
	for _, ev := range evs[:len(evs)-1] {
		o, err := s.Event(ev)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o...)
	}
	if s.Done() {
		t.Fatal("done before metadata")
	}
	out = append(out, s.Close()...)
	r := accumulateChat(t, out)
	if !r.Done || r.Finish != "stop" || r.Usage != (Usage{}) || r.UsageChunks != 1 {
		t.Fatalf("%+v", r)
	}
	if s.Close() != nil {
		t.Fatal("second Close")
	}
}

// TestConverseChains carries a ConverseStream to messages and responses
// clients through chat.
func TestConverseChains(t *testing.T) {
	r := accumulateMessages(t, run(t, Chain(NewConverseToChat("m"), NewChatToMessages("m")), converseStream(3, "tool_use")))
	if !r.Stopped || r.StopReason != "tool_use" || len(r.Blocks) != 3 || r.Blocks[0].Text != "Checking both <cities> & times." ||
		r.Blocks[2].Name != "get_time" || r.Blocks[2].Input != timeArgs {
		t.Fatalf("messages %+v", r)
	}
	rr := accumulateResponses(t, run(t, Chain(NewConverseToChat("m"), NewChatToResponses("m")), converseStream(3, "max_tokens")))
	if rr.Terminal != "response.incomplete" {
		t.Fatalf("responses %+v", rr)
	}
}

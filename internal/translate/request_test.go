package translate

import (
	"errors"
	"strings"
	"testing"
)

const chatRequestFixture = `{
  "model": "gw-auto",
  "messages": [
    {"role": "system", "content": "You are terse."},
    {"role": "developer", "content": [{"type": "text", "text": "Use metric units."}]},
    {"role": "user", "content": [
      {"type": "text", "text": "What is in this picture, and what's the weather in Paris?"},
      {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQSkZJRg==", "detail": "high"}},
      {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
    ]},
    {"role": "assistant", "content": "Let me check.", "tool_calls": [
      {"id": "call_abc", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\",\"unit\":\"c\"}"}},
      {"id": "call_def", "type": "function", "function": {"name": "get_time", "arguments": "{\"tz\":\"Europe/Paris\"}"}}
    ]},
    {"role": "tool", "tool_call_id": "call_abc", "content": "18C, cloudy"},
    {"role": "tool", "tool_call_id": "call_def", "content": [{"type": "text", "text": "14:05"}]},
    {"role": "user", "content": "Thanks. Summarize."}
  ],
  "tools": [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}}}
  ],
  "tool_choice": "auto",
  "parallel_tool_calls": false,
  "temperature": 0.2,
  "top_p": 0.9,
  "stop": ["END"],
  "max_completion_tokens": 512,
  "stream": true,
  "stream_options": {"include_usage": true},
  "user": "user-42",
  "seed": 7,
  "n": 1,
  "logprobs": false
}`

const messagesFromChatFixture = `{
  "model": "claude-x",
  "max_tokens": 512,
  "system": [{"type": "text", "text": "You are terse."}, {"type": "text", "text": "Use metric units."}],
  "messages": [
    {"role": "user", "content": [
      {"type": "text", "text": "What is in this picture, and what's the weather in Paris?"},
      {"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/4AAQSkZJRg=="}},
      {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.png"}}
    ]},
    {"role": "assistant", "content": [
      {"type": "text", "text": "Let me check."},
      {"type": "tool_use", "id": "call_abc", "name": "get_weather", "input": {"city": "Paris", "unit": "c"}},
      {"type": "tool_use", "id": "call_def", "name": "get_time", "input": {"tz": "Europe/Paris"}}
    ]},
    {"role": "user", "content": [
      {"type": "tool_result", "tool_use_id": "call_abc", "content": "18C, cloudy"},
      {"type": "tool_result", "tool_use_id": "call_def", "content": [{"type": "text", "text": "14:05"}]},
      {"type": "text", "text": "Thanks. Summarize."}
    ]}
  ],
  "tools": [
    {"name": "get_weather", "description": "Weather for a city",
      "input_schema": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}},
    {"name": "get_time", "input_schema": {"type": "object", "properties": {"tz": {"type": "string"}}}}
  ],
  "tool_choice": {"type": "auto", "disable_parallel_tool_use": true},
  "stop_sequences": ["END"],
  "temperature": 0.2,
  "top_p": 0.9,
  "stream": true,
  "metadata": {"user_id": "user-42"}
}`

func TestChatToMessagesRequestFixture(t *testing.T) {
	got, err := ChatToMessagesRequest([]byte(chatRequestFixture), "claude-x")
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, got, messagesFromChatFixture)
}

// chat → messages → chat keeps the meaning: same turns, texts, images, tool
// calls with byte-identical arguments, tool results, tools and settings.
func TestChatMessagesChatRoundTrip(t *testing.T) {
	m, err := ChatToMessagesRequest([]byte(chatRequestFixture), "claude-x")
	if err != nil {
		t.Fatal(err)
	}
	back, err := MessagesToChatRequest(m, "gpt-x")
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, back, `{
	  "model": "gpt-x",
	  "messages": [
	    {"role": "system", "content": "You are terse.\n\nUse metric units."},
	    {"role": "user", "content": [
	      {"type": "text", "text": "What is in this picture, and what's the weather in Paris?"},
	      {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/4AAQSkZJRg=="}},
	      {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
	    ]},
	    {"role": "assistant", "content": "Let me check.", "tool_calls": [
	      {"id": "call_abc", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\",\"unit\":\"c\"}"}},
	      {"id": "call_def", "type": "function", "function": {"name": "get_time", "arguments": "{\"tz\":\"Europe/Paris\"}"}}
	    ]},
	    {"role": "tool", "tool_call_id": "call_abc", "content": "18C, cloudy"},
	    {"role": "tool", "tool_call_id": "call_def", "content": [{"type": "text", "text": "14:05"}]},
	    {"role": "user", "content": [{"type": "text", "text": "Thanks. Summarize."}]}
	  ],
	  "max_completion_tokens": 512,
	  "tools": [
	    {"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
	      "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}},
	    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}}}}
	  ],
	  "tool_choice": "auto",
	  "parallel_tool_calls": false,
	  "stop": ["END"],
	  "temperature": 0.2,
	  "top_p": 0.9,
	  "user": "user-42",
	  "stream": true,
	  "stream_options": {"include_usage": true}
	}`)
}

func TestChatToMessagesRequestCases(t *testing.T) {
	tests := []struct {
		name string
		in   string
		path string // field of the output to check
		want string // its JSON
	}{
		{"default max_tokens", `{"messages":[{"role":"user","content":"hi"}]}`, "max_tokens", "4096"},
		{"max_tokens kept", `{"max_tokens":77,"messages":[]}`, "max_tokens", "77"},
		{"max_completion_tokens wins", `{"max_tokens":77,"max_completion_tokens":99,"messages":[]}`, "max_tokens", "99"},
		{"plain user string", `{"messages":[{"role":"user","content":"hi"}]}`, "messages", `[{"role":"user","content":"hi"}]`},
		{"single system is a string", `{"messages":[{"role":"system","content":"be kind"},{"role":"user","content":"hi"}]}`, "system", `"be kind"`},
		{"system with cache_control stays a block", `{"messages":[{"role":"system","content":[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}]}]}`, "system", `[{"type":"text","text":"s","cache_control":{"type":"ephemeral"}}]`},
		{"no system", `{"messages":[{"role":"user","content":"hi"}]}`, "system", ``},
		{"temperature clamped", `{"temperature":1.7,"messages":[]}`, "temperature", "1"},
		{"temperature kept", `{"temperature":0.55,"messages":[]}`, "temperature", "0.55"},
		{"stop string", `{"stop":"###","messages":[]}`, "stop_sequences", `["###"]`},
		{"stop empty dropped", `{"stop":["", "x"],"messages":[]}`, "stop_sequences", `["x"]`},
		{"stop null", `{"stop":null,"messages":[]}`, "stop_sequences", ``},
		{"stream false", `{"stream":false,"messages":[]}`, "stream", `false`},
		{"tool_choice none", `{"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none","messages":[]}`, "tool_choice", `{"type":"none"}`},
		{"tool_choice required", `{"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required","messages":[]}`, "tool_choice", `{"type":"any"}`},
		{"tool_choice named", `{"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}},"messages":[]}`, "tool_choice", `{"type":"tool","name":"f"}`},
		{"tool_choice named, no parallel", `{"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":false,"messages":[]}`, "tool_choice", `{"type":"tool","name":"f","disable_parallel_tool_use":true}`},
		{"tool_choice without tools dropped", `{"tool_choice":"required","messages":[]}`, "tool_choice", ``},
		{"tool without parameters", `{"tools":[{"type":"function","function":{"name":"f"}}],"messages":[]}`, "tools", `[{"name":"f","input_schema":{"type":"object","properties":{}}}]`},
		{"tool schema without type", `{"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],"messages":[]}`, "tools", `[{"name":"f","input_schema":{"type":"object"}}]`},
		{"non-function tool dropped", `{"tools":[{"type":"custom","custom":{"name":"g"}}],"messages":[]}`, "tools", ``},
		{"invalid arguments kept as string", `{"messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":"}}]}]}`,
			"messages.0.content.0.input", `{"_raw_arguments":"{\"a\":"}`},
		{"array arguments kept as string", `{"messages":[{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"[1,2]"}}]}]}`,
			"messages.0.content.0.input", `{"_raw_arguments":"[1,2]"}`},
		{"empty arguments", `{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":""}}]}]}`,
			"messages.0.content", `[{"type":"tool_use","id":"c1","name":"f","input":{}}]`},
		{"tool ids sanitised alike", `{"messages":[{"role":"assistant","tool_calls":[{"id":"call:1.x","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call:1.x","content":"ok"}]}`,
			"messages.#.content.0.tool_use_id|@flatten", `["call_1_x"]`},
		{"tool id sanitised in tool_use", `{"messages":[{"role":"assistant","tool_calls":[{"id":"call:1.x","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`,
			"messages.0.content.0.id", `"call_1_x"`},
		{"pdf file part", `{"messages":[{"role":"user","content":[{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,JVBERi0="}}]}]}`,
			"messages.0.content", `[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0="},"title":"a.pdf"}]`},
		{"audio part dropped, empty message dropped", `{"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"x","format":"wav"}}]},{"role":"user","content":"hi"}]}`,
			"messages", `[{"role":"user","content":"hi"}]`},
		{"empty assistant dropped", `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":""},{"role":"user","content":"b"}]}`,
			"messages.#.role", `["user","user"]`},
		{"non-base64 data url", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/svg+xml,%3Csvg%2F%3E"}}]}]}`,
			"messages.0.content.0.source", `{"type":"base64","media_type":"image/svg+xml","data":"PHN2Zy8+"}`},
		{"image_url as a bare string", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":"https://x/y.png"}]}]}`,
			"messages.0.content.0.source", `{"type":"url","url":"https://x/y.png"}`},
		{"assistant refusal", `{"messages":[{"role":"assistant","content":null,"refusal":"I can't."}]}`,
			"messages.0.content", `[{"type":"text","text":"I can't."}]`},
		{"user name dropped", `{"user":"","messages":[{"role":"user","name":"bob","content":"hi"}]}`, "metadata", ``},
		{"json_object mode", `{"response_format":{"type":"json_object"},"messages":[{"role":"system","content":"S"}]}`,
			"system", `[{"type":"text","text":"S"},{"type":"text","text":"` + JSONInstruction + `"}]`},
		{"text mode ignored", `{"response_format":{"type":"text"},"messages":[]}`, "system", ``},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ChatToMessagesRequest([]byte(tc.in), "m")
			if err != nil {
				t.Fatal(err)
			}
			r := field(got, tc.path)
			if tc.want == "" {
				if r.Exists() {
					t.Fatalf("%s = %s, want absent\n%s", tc.path, r.Raw, got)
				}
				return
			}
			if !r.Exists() {
				t.Fatalf("%s missing in %s", tc.path, got)
			}
			jsonEqual(t, []byte(r.Raw), tc.want)
		})
	}
}

func TestChatToMessagesJSONSchema(t *testing.T) {
	in := `{"response_format":{"type":"json_schema","json_schema":{"name":"w","schema":{"type":"object","properties":{"t":{"type":"number"}}}}},"messages":[{"role":"user","content":"hi"}]}`
	got, err := ChatToMessagesRequest([]byte(in), "m")
	if err != nil {
		t.Fatal(err)
	}
	sys := field(got, "system").String()
	if !strings.HasPrefix(sys, JSONInstruction) || !strings.Contains(sys, `{"type":"object","properties":{"t":{"type":"number"}}}`) {
		t.Fatalf("system = %q", sys)
	}
}

func TestRequestErrors(t *testing.T) {
	fns := map[string]func([]byte, string) ([]byte, error){
		"ChatToMessages": ChatToMessagesRequest, "MessagesToChat": MessagesToChatRequest, "ResponsesToChat": ResponsesToChatRequest,
	}
	for name, fn := range fns {
		for _, in := range []string{``, `{`, `[]`, `"x"`, `{"a":1}{}`} {
			if _, err := fn([]byte(in), "m"); err == nil {
				t.Errorf("%s(%q): no error", name, in)
			}
		}
	}
	var fe *FieldError
	if _, err := ChatToMessagesRequest([]byte(`{"messages":"hi"}`), "m"); !errors.As(err, &fe) || fe.Param != "messages" {
		t.Errorf("messages not an array: %v", err)
	}
	if _, err := MessagesToChatRequest([]byte(`{}`), "m"); !errors.As(err, &fe) || fe.Param != "messages" {
		t.Errorf("messages missing: %v", err)
	}
	if _, err := ResponsesToChatRequest([]byte(`{"input":"x","previous_response_id":"resp_1"}`), "m"); !errors.As(err, &fe) || fe.Param != "previous_response_id" {
		t.Errorf("previous_response_id: %v", err)
	}
	if _, err := ResponsesToChatRequest([]byte(`{"input":"x","conversation":"conv_1"}`), "m"); !errors.As(err, &fe) || fe.Param != "conversation" {
		t.Errorf("conversation: %v", err)
	}
	if _, err := ResponsesToChatRequest([]byte(`{"input":5}`), "m"); !errors.As(err, &fe) || fe.Param != "input" {
		t.Errorf("input: %v", err)
	}
	if _, err := ResponsesToChatRequest([]byte(`{"input":"x","previous_response_id":null}`), "m"); err != nil {
		t.Errorf("null previous_response_id: %v", err)
	}
}

const messagesRequestFixture = `{
  "model": "claude-sonnet-4-5",
  "max_tokens": 1024,
  "system": [{"type": "text", "text": "You are a weather bot.", "cache_control": {"type": "ephemeral"}}, {"type": "text", "text": "Be brief."}],
  "messages": [
    {"role": "user", "content": [
      {"type": "text", "text": "Weather in Oslo? See the map."},
      {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
      {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}, "title": "forecast.pdf"}
    ]},
    {"role": "assistant", "content": [
      {"type": "thinking", "thinking": "need the tool", "signature": "sig"},
      {"type": "text", "text": "Looking it up."},
      {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Oslo"}},
      {"type": "tool_use", "id": "toolu_02", "name": "raw", "input": {"_raw_arguments": "not json"}}
    ]},
    {"role": "user", "content": [
      {"type": "tool_result", "tool_use_id": "toolu_01", "content": [{"type": "text", "text": "-3C"}, {"type": "image", "source": {"type": "url", "url": "https://example.com/radar.png"}}]},
      {"type": "tool_result", "tool_use_id": "toolu_02", "content": "failed", "is_error": true},
      {"type": "text", "text": "And tomorrow?"}
    ]}
  ],
  "tools": [
    {"name": "get_weather", "description": "Weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}},
    {"type": "custom", "name": "raw", "input_schema": {"type": "object"}},
    {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
  ],
  "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
  "stop_sequences": ["a", "b", "c", "d", "e"],
  "temperature": 0.5,
  "top_p": 0.8,
  "top_k": 40,
  "metadata": {"user_id": "u-1"},
  "thinking": {"type": "enabled", "budget_tokens": 2048},
  "output_config": {"format": {"type": "json_schema", "schema": {"type": "object"}}},
  "stream": true
}`

func TestMessagesToChatRequestFixture(t *testing.T) {
	got, err := MessagesToChatRequest([]byte(messagesRequestFixture), "gpt-4o")
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, got, `{
	  "model": "gpt-4o",
	  "messages": [
	    {"role": "system", "content": "You are a weather bot.\n\nBe brief."},
	    {"role": "user", "content": [
	      {"type": "text", "text": "Weather in Oslo? See the map."},
	      {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
	      {"type": "file", "file": {"filename": "forecast.pdf", "file_data": "data:application/pdf;base64,JVBERi0="}}
	    ]},
	    {"role": "assistant", "content": "Looking it up.", "tool_calls": [
	      {"id": "toolu_01", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}},
	      {"id": "toolu_02", "type": "function", "function": {"name": "raw", "arguments": "not json"}}
	    ]},
	    {"role": "tool", "tool_call_id": "toolu_01", "content": [{"type": "text", "text": "-3C"}]},
	    {"role": "tool", "tool_call_id": "toolu_02", "content": "failed"},
	    {"role": "user", "content": [
	      {"type": "image_url", "image_url": {"url": "https://example.com/radar.png"}},
	      {"type": "text", "text": "And tomorrow?"}
	    ]}
	  ],
	  "max_completion_tokens": 1024,
	  "tools": [
	    {"type": "function", "function": {"name": "get_weather", "description": "Weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
	    {"type": "function", "function": {"name": "raw", "parameters": {"type": "object"}}}
	  ],
	  "tool_choice": "required",
	  "parallel_tool_calls": false,
	  "stop": ["a", "b", "c", "d"],
	  "temperature": 0.5,
	  "top_p": 0.8,
	  "user": "u-1",
	  "response_format": {"type": "json_schema", "json_schema": {"name": "output", "schema": {"type": "object"}}},
	  "stream": true,
	  "stream_options": {"include_usage": true}
	}`)
}

func TestMessagesToChatRequestCases(t *testing.T) {
	tests := []struct{ name, in, path, want string }{
		{"system string", `{"system":"S","messages":[]}`, "messages", `[{"role":"system","content":"S"}]`},
		{"no max_tokens", `{"messages":[]}`, "max_completion_tokens", ``},
		{"tool_choice auto", `{"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"auto"},"messages":[]}`, "tool_choice", `"auto"`},
		{"tool_choice none", `{"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"none"},"messages":[]}`, "tool_choice", `"none"`},
		{"tool_choice tool", `{"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"tool","name":"f"},"messages":[]}`, "tool_choice", `{"type":"function","function":{"name":"f"}}`},
		{"no tools no choice", `{"tool_choice":{"type":"any"},"messages":[]}`, "tool_choice", ``},
		{"string contents", `{"messages":[{"role":"user","content":"q"},{"role":"assistant","content":"a"}]}`, "messages", `[{"role":"user","content":"q"},{"role":"assistant","content":"a"}]`},
		{"tool only assistant", `{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{}}]}]}`,
			"messages.0", `{"role":"assistant","content":null,"tool_calls":[{"id":"t","type":"function","function":{"name":"f","arguments":"{}"}}]}`},
		{"stream false", `{"stream":false,"messages":[]}`, "stream_options", ``},
		{"beta output_format", `{"output_format":{"type":"json_schema","schema":{"type":"object"}},"messages":[]}`, "response_format.type", `"json_schema"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := MessagesToChatRequest([]byte(tc.in), "m")
			if err != nil {
				t.Fatal(err)
			}
			r := field(got, tc.path)
			if tc.want == "" {
				if r.Exists() {
					t.Fatalf("%s = %s, want absent", tc.path, r.Raw)
				}
				return
			}
			jsonEqual(t, []byte(r.Raw), tc.want)
		})
	}
}

// messages → chat → messages keeps the meaning of a request.
func TestMessagesChatMessagesRoundTrip(t *testing.T) {
	in := `{"model":"c","max_tokens":300,"system":"Sys","messages":[
	  {"role":"user","content":"Weather?"},
	  {"role":"assistant","content":[{"type":"text","text":"Checking."},{"type":"tool_use","id":"toolu_1","name":"w","input":{"c":"Rome","n":[1,2]}}]},
	  {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"sunny"}]}],
	  "tools":[{"name":"w","input_schema":{"type":"object","properties":{"c":{"type":"string"}}}}],
	  "tool_choice":{"type":"tool","name":"w"},"stop_sequences":["Z"],"temperature":0.3}`
	chat, err := MessagesToChatRequest([]byte(in), "g")
	if err != nil {
		t.Fatal(err)
	}
	back, err := ChatToMessagesRequest(chat, "c")
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, back, `{"model":"c","max_tokens":300,"system":"Sys","messages":[
	  {"role":"user","content":"Weather?"},
	  {"role":"assistant","content":[{"type":"text","text":"Checking."},{"type":"tool_use","id":"toolu_1","name":"w","input":{"c":"Rome","n":[1,2]}}]},
	  {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"sunny"}]}],
	  "tools":[{"name":"w","input_schema":{"type":"object","properties":{"c":{"type":"string"}}}}],
	  "tool_choice":{"type":"tool","name":"w"},"stop_sequences":["Z"],"temperature":0.3}`)
}

const responsesRequestFixture = `{
  "model": "gw-auto",
  "instructions": "You are a travel agent.",
  "input": [
    {"role": "developer", "content": "Prices in EUR."},
    {"type": "message", "role": "user", "content": [
      {"type": "input_text", "text": "Book me a flight; here is my passport."},
      {"type": "input_image", "image_url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"},
      {"type": "input_image", "file_id": "file-123"}
    ]},
    {"type": "reasoning", "id": "rs_1", "summary": []},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Searching.", "annotations": []}]},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "search_flights", "arguments": "{\"to\":\"LIS\"}"},
    {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "get_price", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "[{\"flight\":\"TP1\"}]"},
    {"type": "function_call_output", "call_id": "call_2", "output": [{"type": "input_text", "text": "120"}, {"type": "input_image", "image_url": "https://example.com/seat.png"}]},
    {"role": "user", "content": "Book TP1."}
  ],
  "tools": [
    {"type": "function", "name": "search_flights", "description": "Search", "parameters": {"type": "object", "properties": {"to": {"type": "string"}}}, "strict": true},
    {"type": "function", "name": "get_price", "parameters": {"type": "object", "properties": {}}},
    {"type": "web_search"}
  ],
  "tool_choice": {"type": "function", "name": "search_flights"},
  "parallel_tool_calls": true,
  "max_output_tokens": 800,
  "temperature": 0.7,
  "text": {"format": {"type": "json_schema", "name": "booking", "schema": {"type": "object"}, "strict": true}},
  "reasoning": {"effort": "low"},
  "store": true,
  "user": "u-9",
  "stream": true
}`

func TestResponsesToChatRequestFixture(t *testing.T) {
	got, err := ResponsesToChatRequest([]byte(responsesRequestFixture), "gpt-4o")
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, got, `{
	  "model": "gpt-4o",
	  "messages": [
	    {"role": "system", "content": "You are a travel agent."},
	    {"role": "developer", "content": "Prices in EUR."},
	    {"role": "user", "content": [
	      {"type": "text", "text": "Book me a flight; here is my passport."},
	      {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"}}
	    ]},
	    {"role": "assistant", "content": "Searching.", "tool_calls": [
	      {"id": "call_1", "type": "function", "function": {"name": "search_flights", "arguments": "{\"to\":\"LIS\"}"}},
	      {"id": "call_2", "type": "function", "function": {"name": "get_price", "arguments": "{}"}}
	    ]},
	    {"role": "tool", "tool_call_id": "call_1", "content": "[{\"flight\":\"TP1\"}]"},
	    {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "120"}]},
	    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://example.com/seat.png"}}]},
	    {"role": "user", "content": "Book TP1."}
	  ],
	  "max_completion_tokens": 800,
	  "tools": [
	    {"type": "function", "function": {"name": "search_flights", "description": "Search", "parameters": {"type": "object", "properties": {"to": {"type": "string"}}}, "strict": true}},
	    {"type": "function", "function": {"name": "get_price", "parameters": {"type": "object", "properties": {}}}}
	  ],
	  "tool_choice": {"type": "function", "function": {"name": "search_flights"}},
	  "parallel_tool_calls": true,
	  "temperature": 0.7,
	  "user": "u-9",
	  "response_format": {"type": "json_schema", "json_schema": {"name": "booking", "schema": {"type": "object"}, "strict": true}},
	  "stream": true,
	  "stream_options": {"include_usage": true}
	}`)
}

func TestResponsesToChatRequestCases(t *testing.T) {
	tests := []struct{ name, in, path, want string }{
		{"string input", `{"input":"hi","instructions":"be nice"}`, "messages", `[{"role":"system","content":"be nice"},{"role":"user","content":"hi"}]`},
		{"json_object", `{"input":"hi","text":{"format":{"type":"json_object"}}}`, "response_format", `{"type":"json_object"}`},
		{"text format", `{"input":"hi","text":{"format":{"type":"text"}}}`, "response_format", ``},
		{"tool_choice required", `{"input":"hi","tools":[{"type":"function","name":"f"}],"tool_choice":"required"}`, "tool_choice", `"required"`},
		{"built-in tools only", `{"input":"hi","tools":[{"type":"file_search"}],"tool_choice":"required"}`, "tools", ``},
		{"lone function call", `{"input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"ok"}]}`,
			"messages", `[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"ok"}]`},
		{"system role kept", `{"input":[{"role":"system","content":[{"type":"input_text","text":"S"}]}]}`, "messages", `[{"role":"system","content":[{"type":"text","text":"S"}]}]`},
		{"input_file", `{"input":[{"role":"user","content":[{"type":"input_file","filename":"a.pdf","file_data":"data:application/pdf;base64,JVBERi0="}]}]}`,
			"messages.0.content", `[{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBERi0=","filename":"a.pdf"}}]`},
		{"no stream", `{"input":"hi"}`, "stream", ``},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResponsesToChatRequest([]byte(tc.in), "m")
			if err != nil {
				t.Fatal(err)
			}
			r := field(got, tc.path)
			if tc.want == "" {
				if r.Exists() {
					t.Fatalf("%s = %s, want absent", tc.path, r.Raw)
				}
				return
			}
			jsonEqual(t, []byte(r.Raw), tc.want)
		})
	}
}

// A responses client on a messages upstream: responses → chat → messages.
func TestResponsesToMessagesRequest(t *testing.T) {
	chat, err := ResponsesToChatRequest([]byte(responsesRequestFixture), "x")
	if err != nil {
		t.Fatal(err)
	}
	m, err := ChatToMessagesRequest(chat, "claude-x")
	if err != nil {
		t.Fatal(err)
	}
	if got := field(m, "max_tokens").Int(); got != 800 {
		t.Errorf("max_tokens = %d", got)
	}
	if got := field(m, "system").Raw; !strings.Contains(got, "travel agent") || !strings.Contains(got, "Prices in EUR.") || !strings.Contains(got, JSONInstruction) {
		t.Errorf("system = %s", got)
	}
	jsonEqual(t, []byte(field(m, "messages.1.content").Raw), `[
	  {"type": "text", "text": "Searching."},
	  {"type": "tool_use", "id": "call_1", "name": "search_flights", "input": {"to": "LIS"}},
	  {"type": "tool_use", "id": "call_2", "name": "get_price", "input": {}}]`)
	jsonEqual(t, []byte(field(m, "messages.2.content").Raw), `[
	  {"type": "tool_result", "tool_use_id": "call_1", "content": "[{\"flight\":\"TP1\"}]"},
	  {"type": "tool_result", "tool_use_id": "call_2", "content": [{"type": "text", "text": "120"}]},
	  {"type": "image", "source": {"type": "url", "url": "https://example.com/seat.png"}},
	  {"type": "text", "text": "Book TP1."}]`)
	jsonEqual(t, []byte(field(m, "tool_choice").Raw), `{"type":"tool","name":"search_flights"}`)
}

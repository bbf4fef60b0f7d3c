package translate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// FuzzChatToConverseRequest holds any translated request to what
// Converse requires: user and assistant turns alternating, none empty, no
// empty text, tool use ids it accepts, tools whenever a tool is called,
// a temperature in its range.
func FuzzChatToConverseRequest(f *testing.F) {
	for _, s := range []string{chatRequestFixture, `{"messages":[]}`,
		`{"messages":[{"role":"tool","tool_call_id":"a:b","content":[{"type":"text","text":"x"}]},{"role":"user","content":"y"},{"role":"user","content":"z"}],"stop":"s","temperature":3}`,
		`{"messages":[{"role":"assistant","tool_calls":[{"id":"` + strings.Repeat("é", 70) + `","function":{"name":"f","arguments":"[1"}}]}],"tool_choice":"none","response_format":{"type":"json_schema","json_schema":{"schema":{}}}}`,
		`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,` + pngData + `"},"cache_control":{}},{"type":"file","file":{"filename":"a.pdf","file_data":"data:application/pdf;base64,JVBE"}}]}],"tools":[{"function":{"name":"f","parameters":{"properties":{}}}}],"tool_choice":{"function":{"name":"f"}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := ChatToConverseRequest(body, "m")
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("not JSON: %s", out)
		}
		r := gjson.ParseBytes(out)
		if !r.Get("messages").IsArray() {
			t.Fatalf("messages: %s", out)
		}
		calls := false
		last := ""
		r.Get("messages").ForEach(func(_, m gjson.Result) bool {
			role := m.Get("role").String()
			if role != "user" && role != "assistant" || role == last || len(m.Get("content").Array()) == 0 {
				t.Fatalf("turn %s after %q in %s", m.Raw, last, out)
			}
			last = role
			m.Get("content").ForEach(func(_, b gjson.Result) bool {
				for _, id := range []gjson.Result{b.Get("toolUse.toolUseId"), b.Get("toolResult.toolUseId")} {
					if id.Exists() && (len(id.String()) > MaxConverseToolID || id.String() == "" || strings.Trim(id.String(), idChars+"_-") != "") {
						t.Fatalf("tool use id %q", id.String())
					}
				}
				if b.Get("text").Exists() && b.Get("text").String() == "" {
					t.Fatalf("empty text in %s", out)
				}
				if b.Get("toolUse.name").String() != "" {
					calls = true
				}
				return true
			})
			return true
		})
		if calls && len(r.Get("toolConfig.tools").Array()) == 0 {
			t.Fatalf("tool calls without tools: %s", out)
		}
		if tp := r.Get("inferenceConfig.temperature"); tp.Exists() && (tp.Float() < 0 || tp.Float() > 1) {
			t.Fatalf("temperature %s", tp.Raw)
		}
	})
}

// FuzzConverseToChatResponse holds a translated answer to valid JSON
// carrying the answer's own usage.
func FuzzConverseToChatResponse(f *testing.F) {
	for _, s := range []string{
		`{"output":{"message":{"role":"assistant","content":[{"text":"x"},{"toolUse":{"toolUseId":"t","name":"f","input":{"_raw_arguments":"y"}}}]}},"stopReason":"tool_use","usage":{"inputTokens":1,"outputTokens":2,"cacheReadInputTokens":3,"cacheWriteInputTokens":4}}`,
		`{"output":{}}`, `{"message":"x"}`, `{"output":{"message":{"content":[{"reasoningContent":{}}]}},"usage":{"inputTokens":"7"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := ConverseToChatResponse(body, "m")
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("not JSON: %s", out)
		}
		if got, want := ChatUsage(out), ConverseUsage(body); got != want {
			t.Fatalf("usage %+v, answer's %+v", got, want)
		}
	})
}

// FuzzStreamConverseToChat feeds any events (named as ConverseStream's,
// read from server-sent events for the fuzzer's ease) to the translator:
// the chat stream it writes is well formed and always ends with [DONE].
func FuzzStreamConverseToChat(f *testing.F) {
	var b strings.Builder
	for _, ev := range converseStream(7, "tool_use") {
		b.WriteString("event: " + ev.Event + "\ndata: " + string(ev.Data) + "\n\n")
	}
	f.Add([]byte(b.String()))
	f.Add([]byte("event: messageStart\ndata: {}\n\nevent: error\ndata: {\"type\":\"throttlingException\",\"message\":\"m\"}\n\n"))
	f.Add([]byte("event: contentBlockDelta\ndata: {\"contentBlockIndex\":9,\"delta\":{\"toolUse\":{\"input\":\"{\"}}}\n\nevent: messageStop\ndata: {\"stopReason\":\"guardrail_intervened\"}\n\nevent: messageStop\ndata: {}\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		out := fuzzRun(t, NewConverseToChat("m"), fuzzEvents(in))
		if r := accumulateChat(t, out); !r.Done {
			t.Fatal("no [DONE]")
		}
	})
}

package translate

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/sse"
)

// callIDs matches the random part of the tool call ids made from Gemini
// function calls.
var callIDs = regexp.MustCompile(`call_[A-Za-z0-9]{24}`)

// stableIDs replaces the random part of every such id with X, keeping
// what follows it (the thought signature).
func stableIDs(b []byte) []byte { return callIDs.ReplaceAll(b, []byte("call_X")) }

func TestChatToGeminiRequestFixture(t *testing.T) {
	got, err := ChatToGeminiRequest([]byte(chatRequestFixture), "gemini-2.5-flash")
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, got, `{
	  "contents": [
	    {"role": "user", "parts": [
	      {"text": "What is in this picture, and what's the weather in Paris?"},
	      {"inlineData": {"mimeType": "image/jpeg", "data": "/9j/4AAQSkZJRg=="}},
	      {"fileData": {"mimeType": "image/png", "fileUri": "https://example.com/cat.png"}}
	    ]},
	    {"role": "model", "parts": [
	      {"text": "Let me check."},
	      {"functionCall": {"name": "get_weather", "args": {"city":"Paris","unit":"c"}}, "thoughtSignature": "skip_thought_signature_validator"},
	      {"functionCall": {"name": "get_time", "args": {"tz":"Europe/Paris"}}}
	    ]},
	    {"role": "user", "parts": [
	      {"functionResponse": {"name": "get_weather", "response": {"content": "18C, cloudy"}}},
	      {"functionResponse": {"name": "get_time", "response": {"content": "14:05"}}},
	      {"text": "Thanks. Summarize."}
	    ]}
	  ],
	  "systemInstruction": {"parts": [{"text": "You are terse."}, {"text": "Use metric units."}]},
	  "tools": [{"functionDeclarations": [
	    {"name": "get_weather", "description": "Weather for a city", "parameters": {"type": "OBJECT",
	      "properties": {"city": {"type": "STRING"}, "unit": {"type": "STRING", "enum": ["c", "f"]}}, "required": ["city"]}},
	    {"name": "get_time", "parameters": {"type": "OBJECT", "properties": {"tz": {"type": "STRING"}}}}
	  ]}],
	  "toolConfig": {"functionCallingConfig": {"mode": "AUTO"}},
	  "generationConfig": {"stopSequences": ["END"], "maxOutputTokens": 512, "temperature": 0.2, "topP": 0.9, "seed": 7}
	}`)
}

// geminiRequestCase is a chat request and the Gemini members it becomes.
type geminiRequestCase struct {
	name string
	in   string
	want map[string]string // path → JSON
}

func TestChatToGeminiRequestCases(t *testing.T) {
	user := `{"role":"user","content":"hi"}`
	// A tool call whose id carries the signature "c2lnbg==" ("sign").
	signed := "call_abcdefghijklmnopqrstuvwx" + geminiSignatureMark + "c2lnbg"
	for _, c := range []geminiRequestCase{
		{"string contents and max_tokens", `{"messages":[` + user + `],"max_tokens":9,"stop":"x","top_k":3}`, map[string]string{
			"contents":          `[{"role":"user","parts":[{"text":"hi"}]}]`,
			"generationConfig":  `{"stopSequences":["x"],"maxOutputTokens":9,"topK":3}`,
			"systemInstruction": ``, "tools": ``, "toolConfig": ``,
		}},
		{"max_completion_tokens wins, empty stops dropped, nothing else", `{"messages":[` + user + `],"max_tokens":9,"max_completion_tokens":5,"stop":["","y"],"n":1,"user":"u","logprobs":true,"presence_penalty":1,"stream":true}`, map[string]string{
			"generationConfig": `{"stopSequences":["y"],"maxOutputTokens":5}`,
		}},
		{"no generation settings", `{"messages":[` + user + `]}`, map[string]string{"generationConfig": ``}},
		{"same roles share a turn, empty texts dropped", `{"messages":[{"role":"user","content":"a"},{"role":"user","content":[{"type":"text","text":""},{"type":"text","text":"b"}]},{"role":"assistant","content":""},{"role":"assistant","content":[{"type":"text","text":"c"},{"type":"refusal","refusal":"d"}]},{"role":"assistant","content":null,"refusal":"no"}]}`, map[string]string{
			"contents": `[{"role":"user","parts":[{"text":"a"},{"text":"b"}]},{"role":"model","parts":[{"text":"c"},{"text":"d"},{"text":"no"}]}]`,
		}},
		{"images: sniffed type, https with extension", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:;base64,iVBORw0KGgoAAAANSUhEUg=="}},{"type":"image_url","image_url":"https://x.test/a/B.JPG?size=2"},{"type":"input_audio","input_audio":{"data":"UklGRg==","format":"wav"}},{"type":"input_audio","input_audio":{"data":"SUQzBAAAAAAAAA=="}},{"type":"file","file":{"file_data":"data:application/pdf;base64,JVBERi0=","filename":"a.pdf"}},{"type":"video_url","video_url":{"url":"v"}}]}]}`, map[string]string{
			"contents": `[{"role":"user","parts":[{"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgoAAAANSUhEUg=="}},{"fileData":{"mimeType":"image/jpeg","fileUri":"https://x.test/a/B.JPG?size=2"}},{"inlineData":{"mimeType":"audio/wav","data":"UklGRg=="}},{"inlineData":{"mimeType":"audio/mpeg","data":"SUQzBAAAAAAAAA=="}},{"inlineData":{"mimeType":"application/pdf","data":"JVBERi0="}}]}]`,
		}},
		{"tool output: object kept, text wrapped, images follow; signature restored", `{"messages":[` + user + `,{"role":"assistant","tool_calls":[{"id":"` + signed + `","type":"function","function":{"name":"f","arguments":"[1]"}},{"id":"c2","type":"function","function":{"name":"g","arguments":""}}]},{"role":"tool","tool_call_id":"` + signed + `","content":" {\"ok\":true} "},{"role":"tool","tool_call_id":"c2","content":[{"type":"text","text":"done"},{"type":"image_url","image_url":{"url":"data:image/gif;base64,R0lGOD=="}}]}]}`, map[string]string{
			"contents": `[{"role":"user","parts":[{"text":"hi"}]},
			  {"role":"model","parts":[{"functionCall":{"name":"f","args":{"_raw_arguments":"[1]"}},"thoughtSignature":"c2lnbg=="},{"functionCall":{"name":"g","args":{}}}]},
			  {"role":"user","parts":[{"functionResponse":{"name":"f","response":{"ok":true}}},{"functionResponse":{"name":"g","response":{"content":"done"}}},{"inlineData":{"mimeType":"image/gif","data":"R0lGOD=="}}]}]`,
		}},
		{"tool choices", `{"messages":[` + user + `],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`, map[string]string{
			"tools":      `[{"functionDeclarations":[{"name":"f"}]}]`,
			"toolConfig": `{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["f"]}}`,
		}},
		{"required", `{"messages":[` + user + `],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required"}`, map[string]string{
			"toolConfig": `{"functionCallingConfig":{"mode":"ANY"}}`,
		}},
		{"none", `{"messages":[` + user + `],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}`, map[string]string{
			"toolConfig": `{"functionCallingConfig":{"mode":"NONE"}}`,
		}},
		{"tool choice without tools, other tools dropped", `{"messages":[` + user + `],"tools":[{"type":"custom","custom":{"name":"x"}},{"type":"function","function":{}}],"tool_choice":"required"}`, map[string]string{
			"tools": ``, "toolConfig": ``,
		}},
		{"schemas: subset, nullable, oneOf, formats, dropped keywords", `{"messages":[` + user + `],"tools":[{"type":"function","function":{"name":"f","strict":true,"parameters":{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","additionalProperties":false,"properties":{"a":{"type":["string","null"],"format":"email","maxLength":5},"b":{"type":"integer","format":"int64","minimum":1,"exclusiveMaximum":9},"c":{"oneOf":[{"type":"string","const":"x"},{"type":"null"},{"type":"array","items":{"type":"number","format":"float"},"minItems":1}]},"d":{"enum":["p",null],"description":"d"}},"required":["a"]}}}]}`, map[string]string{
			"tools": `[{"functionDeclarations":[{"name":"f","parameters":{"type":"OBJECT","properties":{
			  "a":{"type":"STRING","nullable":true,"maxLength":5},
			  "b":{"type":"INTEGER","format":"int64","minimum":1},
			  "c":{"nullable":true,"anyOf":[{"type":"STRING","enum":["x"]},{"type":"ARRAY","items":{"type":"NUMBER","format":"float"},"minItems":1}]},
			  "d":{"type":"STRING","nullable":true,"enum":["p"],"description":"d"}},"required":["a"]}}]}]`,
		}},
		{"schemas the subset cannot say go whole; no parameters", `{"messages":[` + user + `],"tools":[{"type":"function","function":{"name":"r","parameters":{"type":"object","properties":{"n":{"$ref":"#/$defs/n"}},"$defs":{"n":{"type":"string"}}}}},{"type":"function","function":{"name":"m","parameters":{"type":"object","properties":{"tags":{"type":"object","additionalProperties":{"type":"string"}}}}}},{"type":"function","function":{"name":"e","parameters":{"type":"object","properties":{"k":{"enum":[1,2]}}}}},{"type":"function","function":{"name":"none","parameters":{"type":"object","properties":{}}}},{"type":"function","function":{"name":"open","parameters":{"type":"object","additionalProperties":true}}}]}`, map[string]string{
			"tools": `[{"functionDeclarations":[
			  {"name":"r","parametersJsonSchema":{"type":"object","properties":{"n":{"$ref":"#/$defs/n"}},"$defs":{"n":{"type":"string"}}}},
			  {"name":"m","parametersJsonSchema":{"type":"object","properties":{"tags":{"type":"object","additionalProperties":{"type":"string"}}}}},
			  {"name":"e","parametersJsonSchema":{"type":"object","properties":{"k":{"enum":[1,2]}}}},
			  {"name":"none"},
			  {"name":"open","parametersJsonSchema":{"type":"object","additionalProperties":true}}]}]`,
		}},
		{"json_object and reasoning", `{"messages":[` + user + `],"response_format":{"type":"json_object"},"reasoning_effort":"low"}`, map[string]string{
			"generationConfig": `{"responseMimeType":"application/json","thinkingConfig":{"thinkingBudget":1024}}`,
		}},
		{"json_schema and no thinking; required names that are no property dropped", `{"messages":[` + user + `],"response_format":{"type":"json_schema","json_schema":{"name":"o","strict":true,"schema":{"type":"object","properties":{"x":{"type":"boolean"}},"required":["x","gone"],"additionalProperties":false}}},"reasoning_effort":"none"}`, map[string]string{
			"generationConfig": `{"responseMimeType":"application/json","responseSchema":{"type":"OBJECT","properties":{"x":{"type":"BOOLEAN"}},"required":["x"]},"thinkingConfig":{"thinkingBudget":0}}`,
		}},
		{"json_schema Gemini's Schema cannot say; unknown effort", `{"messages":[` + user + `],"response_format":{"type":"json_schema","json_schema":{"name":"o","schema":{"type":"object","properties":{"x":{"allOf":[{"type":"string"}]}}}}},"reasoning_effort":"turbo"}`, map[string]string{
			"generationConfig": `{"responseMimeType":"application/json","responseJsonSchema":{"type":"object","properties":{"x":{"allOf":[{"type":"string"}]}}}}`,
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ChatToGeminiRequest([]byte(c.in), "gemini-2.5-flash")
			if err != nil {
				t.Fatal(err)
			}
			for path, want := range c.want {
				r := field(got, path)
				if want == "" {
					if r.Exists() {
						t.Errorf("%s = %s, want none", path, r.Raw)
					}
					continue
				}
				if !r.Exists() {
					t.Fatalf("%s missing in %s", path, got)
				}
				jsonEqual(t, []byte(r.Raw), want)
			}
		})
	}
}

func TestChatToGeminiRequestRefusals(t *testing.T) {
	user := `{"role":"user","content":"hi"}`
	for _, c := range []struct{ name, in, param string }{
		{"not JSON", `{`, ""},
		{"no messages", `{"model":"x"}`, "messages"},
		{"nothing to send", `{"messages":[{"role":"system","content":"s"},{"role":"user","content":""}]}`, "messages"},
		{"n above 1", `{"messages":[` + user + `],"n":2}`, "n"},
		{"image URL without a type", `{"messages":[` + user + `,{"role":"user","content":[{"type":"text","text":"x"},{"type":"image_url","image_url":{"url":"https://x.test/img?id=3"}}]}]}`, "messages[1].content[1].image_url.url"},
		{"image URL not http", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"ftp://x.test/a.png"}}]}]}`, "messages[0].content[0].image_url.url"},
		{"empty image", `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,"}}]}]}`, "messages[0].content[0].image_url.url"},
		{"empty file", `{"messages":[{"role":"user","content":[{"type":"file","file":{"file_data":"data:,"}}]}]}`, "messages[0].content[0].file.file_data"},
		{"file kept elsewhere", `{"messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-1"}}]}]}`, "messages[0].content[0].file.file_id"},
		{"file data not a data URL", `{"messages":[{"role":"user","content":[{"type":"file","file":{"file_data":"JVBERi0="}}]}]}`, "messages[0].content[0].file.file_data"},
		{"tool call without a name", `{"messages":[` + user + `,{"role":"assistant","tool_calls":[{"id":"a","function":{"name":"f"}},{"id":"b","function":{"arguments":"{}"}}]}]}`, "messages[1].tool_calls[1].function.name"},
		{"tool result of no call", `{"messages":[` + user + `,{"role":"tool","tool_call_id":"c9","content":"x"}]}`, "messages[1].tool_call_id"},
		{"image in a tool result", `{"messages":[` + user + `,{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f"}}]},{"role":"tool","tool_call_id":"c","content":[{"type":"image_url","image_url":{"url":"https://x.test/p"}}]}]}`, "messages[2].content[0].image_url.url"},
	} {
		_, err := ChatToGeminiRequest([]byte(c.in), "gemini-2.5-flash")
		var fe *FieldError
		if !errors.As(err, &fe) {
			t.Errorf("%s: err = %v, want a FieldError", c.name, err)
			continue
		}
		if fe.Param != c.param {
			t.Errorf("%s: param %q, want %q (%v)", c.name, fe.Param, c.param, err)
		}
	}
}

func TestGeminiCallIDs(t *testing.T) {
	id := geminiCallID("AAEC/w==") // bytes 0 1 2 255: + and / in base64url are - and _
	if !strings.HasPrefix(id, "call_") || !strings.HasSuffix(id, geminiSignatureMark+"AAEC_w") {
		t.Fatalf("id %q", id)
	}
	if toolID(id) != id {
		t.Errorf("id %q is changed by the messages translation", id)
	}
	if sig := geminiSignature(id); sig != "AAEC/w==" {
		t.Errorf("signature %q", sig)
	}
	for _, id := range []string{"call_1", "", "x" + geminiSignatureMark, "x" + geminiSignatureMark + "!!"} {
		if sig := geminiSignature(id); sig != "" {
			t.Errorf("%q carries %q", id, sig)
		}
	}
	if id := geminiCallID("not base64!"); strings.Contains(id, geminiSignatureMark) {
		t.Errorf("id %q", id)
	}
}

const geminiResponseFixture = `{
  "candidates": [{
    "content": {"role": "model", "parts": [
      {"text": "Let me think about the weather.", "thought": true},
      {"text": "I'll check "},
      {"text": "both."},
      {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}, "thoughtSignature": "c2lnbg=="},
      {"functionCall": {"name": "get_time", "args": {}}}
    ]},
    "finishReason": "STOP",
    "index": 0,
    "safetyRatings": [{"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"}]
  }],
  "usageMetadata": {"promptTokenCount": 1200, "candidatesTokenCount": 40, "totalTokenCount": 1362,
    "cachedContentTokenCount": 1024, "thoughtsTokenCount": 100, "toolUsePromptTokenCount": 22,
    "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 1200}]},
  "modelVersion": "gemini-2.5-flash",
  "responseId": "XyZ123abc"
}`

func TestGeminiToChatResponse(t *testing.T) {
	got, err := GeminiToChatResponse([]byte(geminiResponseFixture), "gw-auto")
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, stableIDs(got), `{
	  "id": "chatcmpl-XyZ123abc",
	  "object": "chat.completion",
	  "created": 1700000000,
	  "model": "gw-auto",
	  "choices": [{
	    "index": 0,
	    "message": {"role": "assistant", "content": "I'll check both.", "refusal": null, "tool_calls": [
	      {"id": "call_X_sig_c2lnbg", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
	      {"id": "call_X", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
	    ]},
	    "logprobs": null,
	    "finish_reason": "tool_calls"
	  }],
	  "usage": {"prompt_tokens": 1222, "completion_tokens": 140, "total_tokens": 1362,
	    "prompt_tokens_details": {"cached_tokens": 1024}, "completion_tokens_details": {"reasoning_tokens": 100}}
	}`)
	want := Usage{Input: 1222, Output: 140, CachedInput: 1024}
	if u := GeminiUsage([]byte(geminiResponseFixture)); u != want {
		t.Errorf("GeminiUsage %+v, want %+v", u, want)
	}
	if u := ChatUsage(got); u != want {
		t.Errorf("the chat usage reads %+v, want %+v", u, want)
	}

	// The calls go back to Gemini with their signature.
	req := `{"messages":[{"role":"user","content":"x"},` + string(field(got, "choices.0.message").Raw) + `]}`
	back, err := ChatToGeminiRequest([]byte(req), "m")
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, []byte(field(back, "contents.1").Raw), `{"role":"model","parts":[{"text":"I'll check both."},
	  {"functionCall":{"name":"get_weather","args":{"city": "Paris"}},"thoughtSignature":"c2lnbg=="},{"functionCall":{"name":"get_time","args":{}}}]}`)
}

func TestGeminiToChatResponseFinish(t *testing.T) {
	for _, c := range []struct{ body, finish, content string }{
		{`{"candidates":[{"content":{"parts":[{"text":"x"}]},"finishReason":"STOP"}]}`, "stop", `"x"`},
		{`{"candidates":[{"content":{"parts":[{"text":"x"}]},"finishReason":"MAX_TOKENS"}]}`, "length", `"x"`},
		{`{"candidates":[{"content":{"role":"model"},"finishReason":"MAX_TOKENS"}]}`, "length", `""`},
		{`{"candidates":[{"finishReason":"SAFETY"}]}`, "content_filter", `""`},
		{`{"candidates":[{"finishReason":"RECITATION"}]}`, "content_filter", `""`},
		{`{"candidates":[{"finishReason":"BLOCKLIST"}]}`, "content_filter", `""`},
		{`{"candidates":[{"finishReason":"PROHIBITED_CONTENT"}]}`, "content_filter", `""`},
		{`{"candidates":[{"finishReason":"SPII"}]}`, "content_filter", `""`},
		{`{"candidates":[{"finishReason":"MALFORMED_FUNCTION_CALL"}]}`, "stop", `""`},
		{`{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f"}}]},"finishReason":"MAX_TOKENS"}]}`, "length", `null`},
		{`{"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"},"usageMetadata":{"promptTokenCount":8,"totalTokenCount":8}}`, "content_filter", `""`},
	} {
		got, err := GeminiToChatResponse([]byte(c.body), "m")
		if err != nil {
			t.Fatal(err)
		}
		if f := field(got, "choices.0.finish_reason").String(); f != c.finish {
			t.Errorf("%s: finish %q, want %q", c.body, f, c.finish)
		}
		jsonEqual(t, []byte(field(got, "choices.0.message.content").Raw), c.content)
		if !strings.HasPrefix(field(got, "id").String(), "chatcmpl-") {
			t.Errorf("id %s", field(got, "id").Raw)
		}
	}
	for _, body := range []string{`{"error":{"code":429,"message":"x","status":"RESOURCE_EXHAUSTED"}}`, `[]`, `{`} {
		if _, err := GeminiToChatResponse([]byte(body), "m"); err == nil {
			t.Errorf("%s translated", body)
		}
	}
}

func TestGeminiCount(t *testing.T) {
	gen, err := ChatToGeminiRequest([]byte(`{"messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}],"max_tokens":3}`), "gemini-2.5-pro")
	if err != nil {
		t.Fatal(err)
	}
	got, err := GeminiCountRequest(gen, "gemini-2.5-pro")
	if err != nil {
		t.Fatal(err)
	}
	jsonEqual(t, got, `{"generateContentRequest":{"model":"models/gemini-2.5-pro","contents":[{"role":"user","parts":[{"text":"hi"}]}],
	  "systemInstruction":{"parts":[{"text":"s"}]},"generationConfig":{"maxOutputTokens":3}}}`)
	for body, want := range map[string]int64{`{"totalTokens": 31, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 31}]}`: 31, `{}`: 0} {
		if n, err := GeminiCountTokens([]byte(body)); err != nil || n != want {
			t.Errorf("%s: %d, %v", body, n, err)
		}
	}
	for _, body := range []string{`{"error":{"code":400}}`, `{"totalTokens":"x"}`, `[1]`} {
		if _, err := GeminiCountTokens([]byte(body)); err == nil {
			t.Errorf("%s read as a count", body)
		}
	}
	if p := GeminiPath("gemini-2.5-flash", GeminiStreamMethod); p != "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse" {
		t.Errorf("path %q", p)
	}
}

func TestReadGeminiError(t *testing.T) {
	for _, c := range []struct {
		body  string
		want  GeminiError
		setup bool
	}{
		{`{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID","domain":"googleapis.com","metadata":{"service":"generativelanguage.googleapis.com"}},{"@type":"type.googleapis.com/google.rpc.LocalizedMessage","locale":"en-US","message":"API key not valid. Please pass a valid API key."}]}}`,
			GeminiError{Code: 400, Status: "INVALID_ARGUMENT", Message: "API key not valid. Please pass a valid API key.", Reason: "API_KEY_INVALID"}, true},
		{`[{"error":{"code":429,"message":"You exceeded your current quota, please check your plan and billing details.","status":"RESOURCE_EXHAUSTED"}}]`,
			GeminiError{Code: 429, Status: "RESOURCE_EXHAUSTED", Message: "You exceeded your current quota, please check your plan and billing details."}, false},
		{`{"error":{"code":400,"message":"* GenerateContentRequest.contents: contents is not specified\n","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":[{"field":"contents","description":"contents is not specified"}]}]}}`,
			GeminiError{Code: 400, Status: "INVALID_ARGUMENT", Message: "* GenerateContentRequest.contents: contents is not specified\n", Field: "contents"}, false},
		{`{"error":{"code":403,"message":"Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.","status":"PERMISSION_DENIED"}}`,
			GeminiError{Code: 403, Status: "PERMISSION_DENIED", Message: "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API."}, true},
		{`{"error":{"code":400,"message":"User location is not supported for the API use.","status":"FAILED_PRECONDITION"}}`,
			GeminiError{Code: 400, Status: "FAILED_PRECONDITION", Message: "User location is not supported for the API use."}, true},
	} {
		got, ok := ReadGeminiError([]byte(c.body))
		if !ok || got != c.want {
			t.Errorf("%s:\n got %+v %v\nwant %+v", c.body, got, ok, c.want)
		}
		if got.Setup() != c.setup {
			t.Errorf("%s: Setup %v", c.body, got.Setup())
		}
	}
	for _, body := range []string{`{}`, `{"error":"x"}`, `nope`, `[]`} {
		if _, ok := ReadGeminiError([]byte(body)); ok {
			t.Errorf("%s read as an error", body)
		}
	}
}

// geminiStream renders an upstream Gemini stream (alt=sse): a thought, two
// text pieces, two function calls in one chunk, then the finish with the
// final usage; every chunk carries the usage so far.
func geminiStream(finish string) string {
	chunk := func(parts any, finish string, usage map[string]any) string {
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
		if finish != "" {
			cand["finishReason"] = finish
		}
		return "data: " + mustJSON(map[string]any{"candidates": []any{cand}, "usageMetadata": usage, "modelVersion": "gemini-2.5-flash", "responseId": "R1d"})
	}
	early := map[string]any{"promptTokenCount": 135, "cachedContentTokenCount": 100, "totalTokenCount": 135}
	return sseText(
		chunk([]any{map[string]any{"text": "Planning.", "thought": true}}, "", early),
		chunk([]any{map[string]any{"text": "Checking "}}, "", early),
		chunk([]any{map[string]any{"text": "both <cities> & times."}}, "", early),
		chunk([]any{
			map[string]any{"functionCall": map[string]any{"name": "get_weather", "args": map[string]any{"city": "São Paulo"}}, "thoughtSignature": "c2lnbg=="},
			map[string]any{"functionCall": map[string]any{"name": "get_time", "args": map[string]any{"tz": "Europe/Paris"}}},
		}, "", early),
		chunk([]any{map[string]any{"text": ""}}, finish, map[string]any{"promptTokenCount": 135, "cachedContentTokenCount": 100,
			"candidatesTokenCount": 80, "thoughtsTokenCount": 7, "totalTokenCount": 222}),
	)
}

func TestGeminiToChatStream(t *testing.T) {
	s := NewGeminiToChat("gw-auto")
	out := run(t, s, events(t, geminiStream("STOP")))
	var got []string
	for _, ev := range out {
		got = append(got, string(stableIDs(ev.Data)))
	}
	head := `{"id":"chatcmpl-R1d","object":"chat.completion.chunk","created":1700000000,"model":"gw-auto",`
	want := []string{
		head + `"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`,
		head + `"choices":[{"index":0,"delta":{"content":"Checking "},"logprobs":null,"finish_reason":null}]}`,
		head + `"choices":[{"index":0,"delta":{"content":"both <cities> & times."},"logprobs":null,"finish_reason":null}]}`,
		head + `"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_X_sig_c2lnbg","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"São Paulo\"}"}}]},"logprobs":null,"finish_reason":null}]}`,
		head + `"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_X","type":"function","function":{"name":"get_time","arguments":"{\"tz\":\"Europe/Paris\"}"}}]},"logprobs":null,"finish_reason":null}]}`,
		head + `"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}]}`,
		head + `"choices":[],"usage":{"prompt_tokens":135,"completion_tokens":87,"total_tokens":222,"prompt_tokens_details":{"cached_tokens":100},"completion_tokens_details":{"reasoning_tokens":7}}}`,
		`[DONE]`,
	}
	if len(got) != len(want) || got[len(got)-1] != "[DONE]" {
		t.Fatalf("chunks\n got: %s\nwant: %s", strings.Join(got, "\n      "), strings.Join(want, "\n      "))
	}
	for i := range len(want) - 1 {
		jsonEqual(t, []byte(got[i]), want[i])
	}
	if !s.Done() {
		t.Error("not done")
	}
	if u := s.Usage(); u != (Usage{Input: 135, Output: 87, CachedInput: 100}) {
		t.Errorf("usage %+v", u)
	}
	r := accumulateChat(t, out)
	if r.Usage != s.Usage() || r.Text != "Checking both <cities> & times." || len(r.Calls) != 2 {
		t.Errorf("accumulated %+v", r)
	}
}

func TestGeminiToChatStreamEnds(t *testing.T) {
	finishOf := func(in string) (chatResult, Stream) {
		s := NewGeminiToChat("m")
		var out []sse.Event
		for _, ev := range events(t, in) {
			evs, err := s.Event(ev)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, evs...)
		}
		if !s.Done() {
			t.Fatalf("%s: not done at its end", in)
		}
		if c := s.Close(); c != nil {
			t.Fatalf("Close after the end: %q", c)
		}
		r := accumulateChat(t, out)
		if !r.Done {
			t.Fatalf("%s: no [DONE]", in)
		}
		return r, s
	}
	for _, c := range []struct{ reason, finish string }{{"STOP", "tool_calls"}, {"MAX_TOKENS", "length"}, {"SAFETY", "content_filter"}} {
		if r, _ := finishOf(geminiStream(c.reason)); r.Finish != c.finish {
			t.Errorf("%s → %s, want %s", c.reason, r.Finish, c.finish)
		}
	}

	// Upstream ended without finishReason: not done; Close ends it.
	s := NewGeminiToChat("m")
	for _, ev := range events(t, sseText(`data: {"candidates":[{"content":{"parts":[{"text":"cut"}]}}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":1}}`)) {
		if _, err := s.Event(ev); err != nil {
			t.Fatal(err)
		}
	}
	if s.Done() {
		t.Fatal("done without a finishReason")
	}
	r := accumulateChat(t, s.Close())
	if r.Finish != "stop" || !r.Done || r.Usage != (Usage{Input: 3, Output: 1}) {
		t.Errorf("closed: %+v", r)
	}

	// A blocked prompt.
	r, s2 := finishOf(sseText(`data: {"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":9,"totalTokenCount":9}}`))
	if r.Finish != "content_filter" || r.Text != "" || !s2.Done() || r.Usage != (Usage{Input: 9}) {
		t.Errorf("blocked: %+v", r)
	}

	// An error in the stream.
	r, _ = finishOf(sseText(`data: {"candidates":[{"content":{"parts":[{"text":"a"}]}}]}`,
		`data: {"error":{"code":503,"message":"The model is overloaded. Please try again later.","status":"UNAVAILABLE"}}`))
	if len(r.Errors) != 1 || r.Finish != "" {
		t.Fatalf("error: %+v", r)
	}
	jsonEqual(t, []byte(r.Errors[0]), `{"message":"The model is overloaded. Please try again later.","type":"overloaded_error","param":null,"code":"UNAVAILABLE"}`)

	// Not JSON.
	if _, err := NewGeminiToChat("m").Event(sse.Event{Data: []byte("{")}); !errors.Is(err, ErrBadEvent) {
		t.Errorf("err %v", err)
	}
}

func TestChainGeminiToResponses(t *testing.T) {
	s := Chain(NewGeminiToChat("gw-auto"), NewChatToResponses("gw-auto"))
	r := accumulateResponses(t, run(t, s, events(t, geminiStream("STOP"))))
	if r.Terminal != "response.completed" {
		t.Fatalf("terminal %q", r.Terminal)
	}
	if got := r.Final.Get("usage.output_tokens_details.reasoning_tokens").Int(); got != 7 {
		t.Errorf("reasoning tokens %d in %s", got, r.Final)
	}
}

// TestGeminiBareErrorObject: the API ends a failing stream with a bare
// JSON error object (no "data:"); the event reader sees no event in it,
// so the stream is not done and the caller fails it.
func TestGeminiBareErrorObject(t *testing.T) {
	in := "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"Okay\"}],\"role\":\"model\"}}],\"usageMetadata\":{\"promptTokenCount\":2304,\"totalTokenCount\":2304}}\r\n\r\n" +
		"{\n  \"error\": {\n    \"code\": 503,\n    \"message\": \"The model is overloaded. Please try again later.\",\n    \"status\": \"UNAVAILABLE\"\n  }\n}\n"
	s := NewGeminiToChat("m")
	evs := events(t, in)
	if len(evs) != 1 {
		t.Fatalf("%d events", len(evs))
	}
	out, err := s.Event(evs[0])
	if err != nil || len(out) != 2 || s.Done() {
		t.Fatalf("%d events, done %v, %v", len(out), s.Done(), err)
	}
	r := accumulateChat(t, append(out, Fail(s, "api_error", "upstream_error", "the provider failed")...))
	if len(r.Errors) != 1 || r.Text != "Okay" || !r.Done {
		t.Errorf("%+v", r)
	}
}

package translate

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/tidwall/gjson"
)

// geminiPartData are the members of which a Gemini part holds exactly one.
var geminiPartData = []string{"text", "inlineData", "fileData", "functionCall", "functionResponse"}

// checkGeminiRequest checks a translated request as the API would: JSON,
// contents of user and model turns with parts each holding one datum,
// function responses with a name and an object, and a count request made
// of it.
func checkGeminiRequest(t *testing.T, out []byte) {
	t.Helper()
	if !json.Valid(out) {
		t.Fatalf("output is not JSON: %s", out)
	}
	contents := gjson.GetBytes(out, "contents")
	if !contents.IsArray() || len(contents.Array()) == 0 {
		t.Fatalf("contents: %s", out)
	}
	contents.ForEach(func(_, c gjson.Result) bool {
		if r := c.Get("role").String(); r != "user" && r != "model" {
			t.Fatalf("role %q in %s", r, out)
		}
		parts := c.Get("parts").Array()
		if len(parts) == 0 {
			t.Fatalf("a turn without parts: %s", out)
		}
		for _, p := range parts {
			n := 0
			for _, k := range geminiPartData {
				if p.Get(k).Exists() {
					n++
				}
			}
			if n != 1 {
				t.Fatalf("part %s holds %d data", p.Raw, n)
			}
			if fr := p.Get("functionResponse"); fr.Exists() && (!fr.Get("response").IsObject() || fr.Get("name").Type != gjson.String) {
				t.Fatalf("function response %s", fr.Raw)
			}
			if fc := p.Get("functionCall"); fc.Exists() && !fc.Get("args").IsObject() {
				t.Fatalf("function call %s", fc.Raw)
			}
		}
		return true
	})
	if _, err := GeminiCountRequest(out, "m"); err != nil {
		t.Fatalf("count request of %s: %v", out, err)
	}
}

func FuzzChatToGeminiRequest(f *testing.F) {
	for _, s := range []string{chatRequestFixture, `{"messages":[{"role":"user","content":"x"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:,a%20b"}},{"type":"input_audio","input_audio":{"data":"AA==","format":"mp3"}}]},{"role":"assistant","tool_calls":[{"id":"c_sig_AA","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"c_sig_AA","content":"{\"x\":[1]}"}],"n":1,"stop":"s"}`,
		`{"messages":[{"role":"developer","content":[{"type":"text","text":"d"}]},{"role":"user","content":"u"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":["object","null"],"properties":{"a":{"anyOf":[{"$ref":"#/x"}]}}}}}],"tool_choice":{"type":"function","function":{"name":"f"}},"response_format":{"type":"json_schema","json_schema":{"schema":{"type":"array","items":{"enum":["a",null]}}}},"reasoning_effort":"high"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := ChatToGeminiRequest(body, "m")
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a FieldError", err)
			}
			return
		}
		checkGeminiRequest(t, out)
	})
}

func FuzzGeminiSchema(f *testing.F) {
	for _, s := range []string{`{"type":"object","properties":{"a":{"type":["string","null"],"format":"date-time"}},"required":["a"]}`,
		`{"anyOf":[{"type":"null"},{"type":"integer","minimum":1}]}`, `{"type":"array","items":[{"type":"string"}]}`,
		`{"enum":["a",null,"b"],"const":"a"}`, `{"properties":{"x":{"oneOf":[{"type":"boolean"}],"anyOf":[{"type":"string"}]}}}`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		out, ok := geminiSchema(gjson.ParseBytes(b), 0)
		if !ok {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("schema of %s is not JSON: %s", b, out)
		}
		r := gjson.ParseBytes(out)
		if t2 := r.Get("type"); t2.Exists() && geminiFormats[t2.String()] == nil && t2.String() != "BOOLEAN" && t2.String() != "ARRAY" && t2.String() != "OBJECT" {
			t.Fatalf("type %s in %s", t2.Raw, out)
		}
		if !r.Get("type").Exists() && !r.Get("anyOf").Exists() {
			t.Fatalf("neither type nor anyOf: %s", out)
		}
	})
}

// geminiStreamSeed is a short Gemini stream with a call and a finish.
const geminiStreamSeed = "data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"a\"},{\"functionCall\":{\"name\":\"f\",\"args\":{\"x\":1}},\"thoughtSignature\":\"AA==\"}]},\"finishReason\":\"STOP\"}],\"usageMetadata\":{\"promptTokenCount\":3,\"candidatesTokenCount\":2,\"thoughtsTokenCount\":1}}\r\n\r\n"

func FuzzGeminiToChat(f *testing.F) {
	f.Add([]byte(geminiStream("STOP")))
	f.Add([]byte(geminiStream("MAX_TOKENS")))
	f.Add([]byte(geminiStreamSeed))
	f.Add([]byte("data: {\"promptFeedback\":{\"blockReason\":\"SAFETY\"}}\n\n"))
	f.Add([]byte("data: {\"candidates\":[{\"content\":{\"parts\":[{\"text\":\"x\"}]}}]}\n\n{\n  \"error\": {\n    \"code\": 503,\n    \"status\": \"UNAVAILABLE\"\n  }\n}\n"))
	f.Add([]byte("data: {\"error\":{\"code\":429,\"message\":\"m\",\"status\":\"RESOURCE_EXHAUSTED\"}}\n\n"))
	f.Add([]byte("data: {\"candidates\":[{\"index\":1,\"content\":{\"parts\":[{\"text\":\"t\",\"thought\":true}]}}]}\n\ndata: [DONE]\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		s := NewGeminiToChat("m")
		out := fuzzRun(t, s, fuzzEvents(in))
		r := accumulateChat(t, out) // data-only, [DONE] last, one finish, usage chunk without choices
		if !r.Done {
			t.Fatal("no [DONE]")
		}
		if len(r.Errors) == 0 && (r.Finish == "" || r.UsageChunks != 1 || r.Usage != s.Usage()) {
			t.Fatalf("finish %q, %d usage chunks, usage %+v of %+v", r.Finish, r.UsageChunks, r.Usage, s.Usage())
		}
	})
}

func FuzzGeminiToChatResponse(f *testing.F) {
	for _, s := range []string{geminiResponseFixture, `{"promptFeedback":{"blockReason":"OTHER"}}`, `{"candidates":[{"content":{"parts":[{"functionCall":{"name":"f","args":"x"}}]}}]}`, `{}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := GeminiToChatResponse(body, "m")
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("not JSON: %s", out)
		}
		if u := ChatUsage(out); u != GeminiUsage(body) {
			t.Fatalf("chat usage %+v, Gemini's %+v", u, GeminiUsage(body))
		}
		if _, err := ChatToMessagesResponse(out, "m"); err != nil {
			t.Fatalf("the messages translation refused %s: %v", out, err)
		}
	})
}

// FuzzGeminiUsageLikePaths holds the one-pass usage reader to what a
// path lookup of each count reads.
func FuzzGeminiUsageLikePaths(f *testing.F) {
	f.Add([]byte(`{"promptTokenCount":7,"candidatesTokenCount":2,"cachedContentTokenCount":3,"thoughtsTokenCount":4,"toolUsePromptTokenCount":1}`))
	f.Add([]byte(`{"promptTokenCount":7,"promptTokenCount":9,"thoughtsTokenCount":"4"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		u := gjson.ParseBytes(b)
		n := func(path string) int64 { return u.Get(path).Int() }
		want := Usage{Input: n("promptTokenCount") + n("toolUsePromptTokenCount"), CachedInput: n("cachedContentTokenCount"),
			Output: n("candidatesTokenCount") + n("thoughtsTokenCount")}
		if got := GeminiUsageOf(u); got != want {
			t.Fatalf("usage of %s: %+v, paths read %+v", b, got, want)
		}
		if got := GeminiReasoningTokens(u); got != n("thoughtsTokenCount") {
			t.Fatalf("reasoning of %s: %d", b, got)
		}
	})
}

func FuzzReadGeminiError(f *testing.F) {
	f.Add([]byte(`{"error":{"code":400,"message":"m","status":"INVALID_ARGUMENT","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"API_KEY_INVALID"}]}}`))
	f.Add([]byte(`[{"error":{"code":429}}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, ok := ReadGeminiError(b)
		if !ok && e != (GeminiError{}) {
			t.Fatalf("not an error, yet %+v", e)
		}
		_ = e.Setup()
	})
}

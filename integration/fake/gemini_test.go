package fake_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"google.golang.org/genai"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/internal/sse"
	"github.com/caddy-gw/caddy-gw/internal/translate"
)

const geminiKey = "AIza-test-gemini"

// geminiClient is the official SDK pointed at u, with no retries.
func geminiClient(t *testing.T, u *fake.Upstream, key string) *genai.Client {
	t.Helper()
	for _, v := range []string{"GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GOOGLE_GENAI_USE_VERTEXAI"} {
		t.Setenv(v, "")
	}
	c, err := genai.NewClient(t.Context(), &genai.ClientConfig{APIKey: key, Backend: genai.BackendGeminiAPI,
		HTTPOptions: genai.HTTPOptions{BaseURL: u.URL + "/", APIVersion: "v1beta"}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func geminiHeaders() map[string]string { return map[string]string{"x-goog-api-key": geminiKey} }

// geminiConfig asks for thoughts and declares the two tools of twoTools.
func geminiConfig() *genai.GenerateContentConfig {
	obj := func(prop string) *genai.Schema {
		return &genai.Schema{Type: genai.TypeObject, Properties: map[string]*genai.Schema{prop: {Type: genai.TypeString}}}
	}
	return &genai.GenerateContentConfig{
		SystemInstruction: genai.NewContentFromText("be brief", genai.RoleUser),
		Tools: []*genai.Tool{{FunctionDeclarations: []*genai.FunctionDeclaration{
			{Name: "get_weather", Description: "Weather of a city", Parameters: obj("city")},
			{Name: "get_time", Parameters: obj("tz")},
		}}},
		ThinkingConfig:  &genai.ThinkingConfig{IncludeThoughts: true},
		MaxOutputTokens: 100,
	}
}

func TestGeminiGenerateContent(t *testing.T) {
	u := fake.NewGemini()
	defer u.Close()
	u.APIKey = geminiKey
	u.SetThoughts(5)
	u.Push(fake.Script{Text: "Checking.", ToolCalls: twoTools, Usage: fake.Usage{Input: 30, Output: 12, CachedInput: 10, CacheWrite: 99}})

	c := geminiClient(t, u, geminiKey)
	resp, err := c.Models.GenerateContent(t.Context(), "gemini-2.5-flash", genai.Text("What is the weather in Paris?"), geminiConfig())
	if err != nil {
		t.Fatal(err)
	}
	cand := resp.Candidates[0]
	if cand.FinishReason != genai.FinishReasonStop || cand.Content.Role != genai.RoleModel || len(cand.Content.Parts) != 4 {
		t.Fatalf("candidate %+v", cand)
	}
	if p := cand.Content.Parts[0]; !p.Thought || p.Text == "" {
		t.Errorf("first part is not a thought: %+v", p)
	}
	if p := cand.Content.Parts[1]; p.Text != "Checking." || p.Thought {
		t.Errorf("text part %+v", p)
	}
	calls := resp.FunctionCalls()
	if len(calls) != 2 || calls[0].Name != "get_weather" || calls[0].Args["city"] != "Paris" || calls[1].Args["note"] != "héllo ✓" {
		t.Fatalf("calls %+v", calls)
	}
	if sig := string(cand.Content.Parts[2].ThoughtSignature); sig != "fake-thought:get_weather" || cand.Content.Parts[3].ThoughtSignature != nil {
		t.Errorf("signatures %q, %q", sig, cand.Content.Parts[3].ThoughtSignature)
	}
	if got, want := *resp.UsageMetadata, (genai.GenerateContentResponseUsageMetadata{PromptTokenCount: 30, CachedContentTokenCount: 10,
		CandidatesTokenCount: 7, ThoughtsTokenCount: 5, TotalTokenCount: 42,
		PromptTokensDetails: []*genai.ModalityTokenCount{{Modality: genai.MediaModalityText, TokenCount: 30}}}); got.PromptTokenCount != want.PromptTokenCount ||
		got.CachedContentTokenCount != want.CachedContentTokenCount || got.CandidatesTokenCount != want.CandidatesTokenCount ||
		got.ThoughtsTokenCount != want.ThoughtsTokenCount || got.TotalTokenCount != want.TotalTokenCount {
		t.Errorf("usage %+v, want %+v", got, want)
	}
	if resp.ModelVersion != "gemini-2.5-flash" || resp.ResponseID == "" {
		t.Errorf("model %q id %q", resp.ModelVersion, resp.ResponseID)
	}
	reqs := u.Requests()
	if len(reqs) != 1 || reqs[0].Path != "/v1beta/models/gemini-2.5-flash:generateContent" || reqs[0].Header.Get("x-goog-api-key") != geminiKey {
		t.Fatalf("requests %+v", reqs)
	}
	body := reqs[0].JSON()
	if _, ok := body["systemInstruction"]; !ok {
		t.Errorf("the SDK's request %s", reqs[0].Body)
	}

	// The next turn sends the calls back with their signatures and the
	// results: a Gemini 3 model accepts it.
	u.Push(fake.Script{Text: "Sunny, 14:05.", Usage: fake.Usage{Input: 50, Output: 6}})
	history := append(genai.Text("What is the weather in Paris?"), cand.Content,
		genai.NewContentFromParts([]*genai.Part{
			genai.NewPartFromFunctionResponse("get_weather", map[string]any{"sky": "sunny"}),
			genai.NewPartFromFunctionResponse("get_time", map[string]any{"time": "14:05"}),
		}, genai.RoleUser))
	resp, err = c.Models.GenerateContent(t.Context(), "gemini-3-flash-preview", history, geminiConfig())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text() != "Sunny, 14:05." || resp.UsageMetadata.CandidatesTokenCount != 1 || resp.UsageMetadata.ThoughtsTokenCount != 5 {
		t.Errorf("second answer %q %+v", resp.Text(), resp.UsageMetadata)
	}

	// Without the signature a Gemini 3 model refuses; a 2.5 model does not.
	cand.Content.Parts[2].ThoughtSignature = nil
	_, err = c.Models.GenerateContent(t.Context(), "gemini-3-flash-preview", history, geminiConfig())
	var apiErr genai.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != http.StatusBadRequest || apiErr.Status != "INVALID_ARGUMENT" ||
		!strings.HasPrefix(apiErr.Message, "Function call is missing a thought_signature") {
		t.Errorf("without a signature: %v", err)
	}
	if _, err = c.Models.GenerateContent(t.Context(), "gemini-2.5-flash", history, geminiConfig()); err != nil {
		t.Errorf("2.5 without a signature: %v", err)
	}
	cand.Content.Parts[2].ThoughtSignature = []byte("not ours")
	if _, err = c.Models.GenerateContent(t.Context(), "gemini-3-pro-preview", history, nil); !errors.As(err, &apiErr) || apiErr.Message != "Corrupted thought signature." {
		t.Errorf("a foreign signature: %v", err)
	}
}

func TestGeminiStream(t *testing.T) {
	u := fake.NewGemini()
	defer u.Close()
	u.SetThoughts(2)
	u.Push(fake.Script{Text: "Hello there, Paris!", Chunks: 3, ToolCalls: twoTools[:1], Usage: fake.Usage{Input: 20, Output: 9, CachedInput: 4}})

	c := geminiClient(t, u, geminiKey)
	var text strings.Builder
	var thoughts, chunks int
	var calls []*genai.FunctionCall
	var last *genai.GenerateContentResponse
	for resp, err := range c.Models.GenerateContentStream(t.Context(), "gemini-2.5-pro", genai.Text("hi"), geminiConfig()) {
		if err != nil {
			t.Fatal(err)
		}
		chunks++
		last = resp
		for _, p := range resp.Candidates[0].Content.Parts {
			switch {
			case p.Thought:
				thoughts++
			case p.FunctionCall != nil:
				calls = append(calls, p.FunctionCall)
			default:
				text.WriteString(p.Text)
			}
		}
		if resp.UsageMetadata.PromptTokenCount != 20 || resp.UsageMetadata.CachedContentTokenCount != 4 {
			t.Errorf("chunk %d usage %+v", chunks, resp.UsageMetadata)
		}
	}
	// A thought, three pieces of text, the call, the finish.
	if chunks != 6 || thoughts != 1 || text.String() != "Hello there, Paris!" || len(calls) != 1 || calls[0].Name != "get_weather" {
		t.Fatalf("%d chunks, %d thoughts, text %q, calls %+v", chunks, thoughts, text.String(), calls)
	}
	if last.Candidates[0].FinishReason != genai.FinishReasonStop || last.UsageMetadata.CandidatesTokenCount != 7 ||
		last.UsageMetadata.ThoughtsTokenCount != 2 || last.UsageMetadata.TotalTokenCount != 29 {
		t.Errorf("last chunk %+v %+v", last.Candidates[0], last.UsageMetadata)
	}
	if r := u.Requests()[0]; r.Path != "/v1beta/models/gemini-2.5-pro:streamGenerateContent" || r.Query != "alt=sse" {
		t.Errorf("request %s?%s", r.Path, r.Query)
	}
}

func TestGeminiStreamWire(t *testing.T) {
	u := fake.NewGemini()
	defer u.Close()
	u.Push(fake.Script{Text: "ab", Chunks: 2, Usage: fake.Usage{Input: 3, Output: 2}, Finish: "MAX_TOKENS"})
	resp, body := post(t, u.URL+"/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", geminiHeaders(),
		`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if !strings.HasSuffix(string(body), "}\r\n\r\n") || strings.Count(string(body), "data: ") != 3 {
		t.Fatalf("body %q", body)
	}
	evs := parseSSE(t, []byte(strings.ReplaceAll(string(body), "\r\n", "\n")))
	id := decode(t, evs[0].Data)["responseId"]
	for i, want := range []string{
		`{"candidates":[{"content":{"parts":[{"text":"a"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":3,"totalTokenCount":3,"promptTokensDetails":[{"modality":"TEXT","tokenCount":3}]},"modelVersion":"gemini-2.5-flash","responseId":"ID"}`,
		`{"candidates":[{"content":{"parts":[{"text":"b"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":3,"totalTokenCount":3,"promptTokensDetails":[{"modality":"TEXT","tokenCount":3}]},"modelVersion":"gemini-2.5-flash","responseId":"ID"}`,
		`{"candidates":[{"content":{"parts":[{"text":""}],"role":"model"},"finishReason":"MAX_TOKENS","index":0}],"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":2,"totalTokenCount":5,"promptTokensDetails":[{"modality":"TEXT","tokenCount":3}]},"modelVersion":"gemini-2.5-flash","responseId":"ID"}`,
	} {
		if !sameJSON(t, evs[i].Data, strings.Replace(want, `"ID"`, `"`+id.(string)+`"`, 1)) {
			t.Errorf("event %d: %s", i, evs[i].Data)
		}
	}

	// Without alt=sse the fake refuses (the API would send a JSON array).
	resp, body = post(t, u.URL+"/v1beta/models/gemini-2.5-flash:streamGenerateContent", geminiHeaders(),
		`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
	if resp.StatusCode != http.StatusBadRequest || !sameJSON(t, string(body), `{"error":{"code":400,"message":"the fake streams only with alt=sse","status":"INVALID_ARGUMENT"}}`) {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
}

func TestGeminiGateAndMidStreamError(t *testing.T) {
	u := fake.NewGemini()
	defer u.Close()
	gate := make(chan struct{})
	u.Push(fake.Script{Text: "abcdef", Gate: gate, Usage: fake.Usage{Input: 3, Output: 4}})
	c := geminiClient(t, u, geminiKey)
	var text string
	n := 0
	for resp, err := range c.Models.GenerateContentStream(t.Context(), "gemini-2.5-flash", genai.Text("hi"), nil) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 1 {
			if resp.Text() != "ab" {
				t.Fatalf("before the gate %q", resp.Text())
			}
			close(gate)
		}
		text += resp.Text()
	}
	if text != "abcdef" || n != 4 {
		t.Errorf("after the gate: %q in %d chunks", text, n)
	}

	u.Push(fake.Script{Text: "partial answer", MidStreamError: true})
	text, n = "", 0
	var streamErr error
	for resp, err := range c.Models.GenerateContentStream(t.Context(), "gemini-2.5-flash", genai.Text("hi"), nil) {
		if err != nil {
			streamErr = err
			break
		}
		n++
		text += resp.Text()
	}
	var apiErr genai.APIError
	if !errors.As(streamErr, &apiErr) || apiErr.Code != http.StatusServiceUnavailable || apiErr.Status != "UNAVAILABLE" ||
		apiErr.Message != "The model is overloaded. Please try again later." {
		t.Fatalf("stream error %v", streamErr)
	}
	if n != 1 || text != "parti" {
		t.Errorf("before the error: %q in %d chunks", text, n)
	}
}

func TestGeminiCountTokens(t *testing.T) {
	u := fake.NewGemini()
	defer u.Close()
	c := geminiClient(t, u, geminiKey)
	resp, err := c.Models.CountTokens(t.Context(), "gemini-2.5-flash", genai.Text("How many tokens are in this sentence?"), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := u.Requests()[0]
	if r.Path != "/v1beta/models/gemini-2.5-flash:countTokens" || int(resp.TotalTokens) != fake.GeminiCountTokens(r.Body) || resp.TotalTokens != 11 {
		t.Errorf("%s: %d tokens, the fake counts %d", r.Path, resp.TotalTokens, fake.GeminiCountTokens(r.Body))
	}

	// A whole generateContent request counts its system instruction and
	// tools too, and names its model.
	gen := `{"model":"models/gemini-2.5-flash","contents":[{"role":"user","parts":[{"text":"hi"}]}],"systemInstruction":{"parts":[{"text":"be brief and kind"}]},"generationConfig":{"maxOutputTokens":5}}`
	resp2, body := post(t, u.URL+"/v1beta/models/gemini-2.5-flash:countTokens", geminiHeaders(), `{"generateContentRequest":`+gen+`}`)
	if resp2.StatusCode != http.StatusOK || !sameJSON(t, string(body), `{"totalTokens":6,"promptTokensDetails":[{"modality":"TEXT","tokenCount":6}]}`) {
		t.Errorf("%d %s", resp2.StatusCode, body)
	}
	for _, c := range []struct{ body, msg string }{
		{`{"contents":[{"parts":[{"text":"x"}]}],"generateContentRequest":` + gen + `}`, "* CountTokensRequest: contents and generate_content_request cannot both be set\n"},
		{`{"generateContentRequest":{"contents":[{"parts":[{"text":"x"}]}]}}`, "* GenerateContentRequest.model: unexpected model name format\n"},
		{`{"contents":[]}`, "* CountTokensRequest.contents: contents is not specified\n"},
		{`{"contents":[{"parts":[{"text":"x"}]}],"model":"m"}`, `Invalid JSON payload received. Unknown name "model": Cannot find field.`},
	} {
		resp, body := post(t, u.URL+"/v1beta/models/gemini-2.5-flash:countTokens", geminiHeaders(), c.body)
		if resp.StatusCode != http.StatusBadRequest || decode(t, string(body))["error"].(map[string]any)["message"] != c.msg {
			t.Errorf("%s: %d %s", c.body, resp.StatusCode, body)
		}
	}
	u.CountStatus = http.StatusTooManyRequests
	_, err = c.Models.CountTokens(t.Context(), "gemini-2.5-flash", genai.Text("x"), nil)
	var apiErr genai.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != http.StatusTooManyRequests || apiErr.Status != "RESOURCE_EXHAUSTED" {
		t.Errorf("count error %v", err)
	}
}

func TestGeminiErrors(t *testing.T) {
	u := fake.NewGemini()
	defer u.Close()
	u.APIKey = geminiKey
	c := geminiClient(t, u, geminiKey)
	for _, s := range []struct {
		script         fake.Script
		status         int
		gstatus, msg   string
		reasonInDetail string
	}{
		{fake.Script{Status: 429}, 429, "RESOURCE_EXHAUSTED", "You exceeded your current quota, please check your plan and billing details.", ""},
		{fake.Script{Status: 503}, 503, "UNAVAILABLE", "The model is overloaded. Please try again later.", ""},
		{fake.Script{Status: 500}, 500, "INTERNAL", "An internal error has occurred. Please retry or report in https://developers.generativeai.google/guide/troubleshooting", ""},
		{fake.Script{Status: 400, ErrorType: "FAILED_PRECONDITION", ErrorMessage: "User location is not supported for the API use."}, 400, "FAILED_PRECONDITION", "User location is not supported for the API use.", ""},
		{fake.Script{Status: 403, ErrorCode: "SERVICE_DISABLED", ErrorMessage: "Generative Language API has not been used in project 1 before or it is disabled."}, 403, "PERMISSION_DENIED", "Generative Language API has not been used in project 1 before or it is disabled.", "SERVICE_DISABLED"},
	} {
		u.Push(s.script)
		_, err := c.Models.GenerateContent(t.Context(), "gemini-2.5-flash", genai.Text("hi"), nil)
		var apiErr genai.APIError
		if !errors.As(err, &apiErr) || apiErr.Code != s.status || apiErr.Status != s.gstatus || apiErr.Message != s.msg {
			t.Errorf("%d: %v", s.status, err)
			continue
		}
		if s.reasonInDetail != "" && (len(apiErr.Details) != 1 || apiErr.Details[0]["reason"] != s.reasonInDetail) {
			t.Errorf("details %+v", apiErr.Details)
		}
	}
	if u.Pending() != 0 {
		t.Errorf("%d scripts left", u.Pending())
	}

	// Keys.
	_, err := geminiClient(t, u, "AIza-wrong").Models.GenerateContent(t.Context(), "gemini-2.5-flash", genai.Text("hi"), nil)
	var apiErr genai.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != 400 || apiErr.Message != "API key not valid. Please pass a valid API key." ||
		len(apiErr.Details) != 1 || apiErr.Details[0]["reason"] != "API_KEY_INVALID" {
		t.Errorf("wrong key: %v", err)
	}
	resp, body := post(t, u.URL+"/v1beta/models/gemini-2.5-flash:generateContent?key="+geminiKey, nil, `{"contents":[{"parts":[{"text":"hi"}]}]}`)
	if resp.StatusCode != http.StatusForbidden || decode(t, string(body))["error"].(map[string]any)["status"] != "PERMISSION_DENIED" {
		t.Errorf("key in the query: %d %s", resp.StatusCode, body)
	}
	for _, path := range []string{"/v1/models/gemini-2.5-flash:generateContent", "/v1beta/models/gemini-2.5-flash:embedContent", "/v1beta/models/gemini-2.5-flash"} {
		if resp, _ := post(t, u.URL+path, geminiHeaders(), `{}`); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d", path, resp.StatusCode)
		}
	}
}

func TestGeminiValidation(t *testing.T) {
	u := fake.NewGemini()
	defer u.Close()
	user := `{"role":"user","parts":[{"text":"hi"}]}`
	for _, c := range []struct{ body, msg string }{
		{`[]`, "Invalid JSON payload received. The body is not a JSON object."},
		{`{"model":"gemini-2.5-flash","messages":[]}`, `Invalid JSON payload received. Unknown name "messages": Cannot find field.`},
		{`{"contents":[` + user + `],"stream":true}`, `Invalid JSON payload received. Unknown name "stream": Cannot find field.`},
		{`{"contents":[` + user + `],"generationConfig":{"max_tokens":5}}`, `Invalid JSON payload received. Unknown name "max_tokens" at 'generation_config': Cannot find field.`},
		{`{"contents":[]}`, "* GenerateContentRequest.contents: contents is not specified\n"},
		{`{"contents":[{"role":"assistant","parts":[{"text":"x"}]}]}`, "Please use a valid role: user, model."},
		{`{"contents":[{"role":"user","parts":[]}]}`, "* GenerateContentRequest.contents[0].parts: contents.parts must not be empty.\n"},
		{`{"contents":[{"role":"user","parts":[{"text":"a","inlineData":{"mimeType":"image/png","data":"AA=="}}]}]}`, "* GenerateContentRequest.contents[0].parts[0].data: required oneof field 'data' must have one initialized field\n"},
		{`{"contents":[{"role":"user","parts":[{"image_url":"x"}]}]}`, `Invalid JSON payload received. Unknown name "image_url" at 'contents[0].parts[0]': Cannot find field.`},
		{`{"contents":[` + user + `,{"role":"user","parts":[{"functionResponse":{"response":{}}}]}]}`, "* GenerateContentRequest.contents[1].parts[0].function_response.name: Name cannot be empty.\n"},
		{`{"contents":[` + user + `,{"role":"user","parts":[{"functionResponse":{"name":"f","response":"ok"}}]}]}`, "Invalid value at 'contents[1].parts[0].function_response.response' (type.googleapis.com/google.protobuf.Struct), ok"},
		{`{"contents":[{"role":"model","parts":[{"functionCall":{"name":"f","args":[1]}}]}]}`, "Invalid value at 'contents[0].parts[0].function_call.args' (type.googleapis.com/google.protobuf.Struct), [1]"},
		{`{"contents":[{"role":"user","parts":[{"inlineData":{"data":"AA=="}}]}]}`, "* GenerateContentRequest.contents[0].parts[0].inline_data.mime_type: mime_type must be specified\n"},
		{`{"contents":[` + user + `],"tools":[{"functionDeclarations":[{"name":"f","parameters":{"type":"OBJECT","properties":{}}}]}]}`, "* GenerateContentRequest.tools[0].function_declarations[0].parameters.properties: should be non-empty for OBJECT type\n"},
		{`{"contents":[` + user + `],"tools":[{"functionDeclarations":[{"name":"f","parameters":{"type":"OBJECT","properties":{"a":{"type":"STRING"}}},"parametersJsonSchema":{}}]}]}`, "* GenerateContentRequest.tools[0].function_declarations[0]: parameters and parameters_json_schema cannot both be set.\n"},
		{`{"contents":[` + user + `],"toolConfig":{"functionCallingConfig":{"mode":"AUTO","allowedFunctionNames":["f"]}}}`, "* GenerateContentRequest.tool_config.function_calling_config.allowed_function_names: allowed_function_names should only be set when the Mode is ANY.\n"},
		{`{"contents":[` + user + `],"generationConfig":{"responseSchema":{"type":"STRING"}}}`, "* GenerateContentRequest.generation_config.response_mime_type: a response schema needs response_mime_type application/json\n"},
		{`{"contents":[` + user + `],"systemInstruction":{"parts":[]}}`, "* GenerateContentRequest.system_instruction.parts: contents.parts must not be empty.\n"},
	} {
		resp, body := post(t, u.URL+"/v1beta/models/gemini-2.5-flash:generateContent", geminiHeaders(), c.body)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: %d %s", c.body, resp.StatusCode, body)
			continue
		}
		if e := decode(t, string(body))["error"].(map[string]any); e["message"] != c.msg || e["status"] != "INVALID_ARGUMENT" || e["code"] != 400.0 {
			t.Errorf("%s:\n got %v\nwant %q", c.body, e, c.msg)
		}
	}
	if n := len(u.Requests()); n != 18 || u.Pending() != 0 {
		t.Errorf("%d requests recorded", n)
	}

	// snake_case members are the API's too; the skip signature passes on
	// a Gemini 3 model.
	u.Push(fake.Script{Text: "ok", NoUsage: true})
	resp, body := post(t, u.URL+"/v1beta/models/gemini-3-pro-preview:generateContent", geminiHeaders(),
		`{"contents":[`+user+`,{"role":"model","parts":[{"function_call":{"name":"f","args":{}},"thought_signature":"skip_thought_signature_validator"}]},{"role":"user","parts":[{"function_response":{"name":"f","response":{"ok":1}}}]}],"system_instruction":{"parts":[{"text":"s"}]},"generation_config":{"max_output_tokens":5}}`)
	if resp.StatusCode != http.StatusOK || decode(t, string(body))["usageMetadata"] != nil {
		t.Errorf("%d %s", resp.StatusCode, body)
	}
}

// TestGeminiTranslations sends the gateway's translations of chat requests
// to the fake and reads its answers back through them: the fake accepts
// every request (a Gemini 3 model included, whose function calls must come
// back signed), and the chat answers carry the script's text, calls and
// usage.
func TestGeminiTranslations(t *testing.T) {
	u := fake.NewGemini()
	defer u.Close()
	u.SetThoughts(3)
	const model = "gemini-3-pro-preview"
	generate := func(chat string, stream bool) []byte {
		t.Helper()
		body, err := translate.ChatToGeminiRequest([]byte(chat), model)
		if err != nil {
			t.Fatal(err)
		}
		method := translate.GeminiGenerateMethod
		if stream {
			method = translate.GeminiStreamMethod
		}
		resp, out := post(t, u.URL+translate.GeminiPath(model, method), geminiHeaders(), string(body))
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%d %s\nfor %s", resp.StatusCode, out, body)
		}
		return out
	}
	tools := `"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":["string","null"]}},"required":["city"],"additionalProperties":false}}},` +
		`{"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"tz":{"type":"string","format":"tz"},"format":{"enum":["12h","24h"]},"note":{"type":"string"}}}}}],"tool_choice":"auto"`
	first := `{"model":"gw-auto","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"Weather and time in Paris?"},{"type":"image_url","image_url":{"url":"https://x.test/paris.webp"}}]}],` + tools + `,"max_completion_tokens":50,"reasoning_effort":"low"}`

	u.Push(fake.Script{Text: "Checking.", ToolCalls: twoTools, Usage: fake.Usage{Input: 40, Output: 13, CachedInput: 8}})
	answer, err := translate.GeminiToChatResponse(generate(first, false), "gw-auto")
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Choices []struct {
			Message      json.RawMessage `json:"message"`
			FinishReason string          `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(answer, &got); err != nil || got.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("%s (%v)", answer, err)
	}
	if u := translate.ChatUsage(answer); u != (translate.Usage{Input: 40, Output: 13, CachedInput: 8}) {
		t.Errorf("usage %+v", u)
	}
	msg := decode(t, string(got.Choices[0].Message))
	calls := msg["tool_calls"].([]any)
	if msg["content"] != "Checking." || len(calls) != 2 {
		t.Fatalf("message %s", got.Choices[0].Message)
	}
	id := func(i int) string { return calls[i].(map[string]any)["id"].(string) }

	// The next turn: the calls come back (signed), with their results.
	second := strings.Replace(first, `]}],`, `]},`+string(got.Choices[0].Message)+
		`,{"role":"tool","tool_call_id":"`+id(0)+`","content":"{\"sky\":\"clear\"}"},{"role":"tool","tool_call_id":"`+id(1)+`","content":"14:05"}],`, 1)
	u.Push(fake.Script{Text: "Clear, 14:05.", Chunks: 4, Usage: fake.Usage{Input: 90, Output: 7, CachedInput: 40}})
	s := translate.NewGeminiToChat("gw-auto")
	rd := sse.NewReader(bytes.NewReader(generate(second, true)))
	var text strings.Builder
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		out, err := s.Event(ev)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out {
			text.WriteString(gjson.GetBytes(o.Data, "choices.0.delta.content").String())
		}
	}
	if !s.Done() || s.Usage() != (translate.Usage{Input: 90, Output: 7, CachedInput: 40}) || text.String() != "Clear, 14:05." {
		t.Errorf("stream: done %v usage %+v text %q", s.Done(), s.Usage(), text.String())
	}
	sent := u.Requests()[1].Body
	if sig := gjson.GetBytes(sent, "contents.1.parts.1.thoughtSignature").String(); sig != fake.GeminiThoughtSignature("get_weather") ||
		gjson.GetBytes(sent, "contents.#").Int() != 3 || !gjson.GetBytes(sent, "generationConfig.thinkingConfig").Exists() {
		t.Errorf("second request %s", sent)
	}
}

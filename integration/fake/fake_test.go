package fake_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

const (
	openAIKey    = "sk-test-openai"
	anthropicKey = "sk-ant-test"
)

func openAIClient(u *fake.Upstream) openai.Client {
	return openai.NewClient(option.WithBaseURL(u.URL), option.WithAPIKey(openAIKey), option.WithMaxRetries(0))
}

func anthropicClient(u *fake.Upstream) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(u.URL), aoption.WithAPIKey(anthropicKey), aoption.WithMaxRetries(0))
}

func chatParams(model string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("be brief"), openai.UserMessage("hi")},
	}
}

func messageParams(model string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     model,
		MaxTokens: 256,
		System:    []anthropic.TextBlockParam{{Text: "be brief"}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is the weather in Paris?"))},
	}
}

var twoTools = []fake.ToolCall{
	{ID: "call_weather1", Name: "get_weather", Arguments: `{"city":"Paris","unit":"celsius"}`},
	{ID: "call_time2", Name: "get_time", Arguments: `{"tz":"Europe/Paris","format":"24h","note":"héllo ✓"}`},
}

// rawEvent is one server-sent event as it was on the wire.
type rawEvent struct {
	Name string
	Data string
}

// post sends a raw JSON request and returns the response with its body read.
func post(t *testing.T, url string, header map[string]string, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func parseSSE(t *testing.T, body []byte) []rawEvent {
	t.Helper()
	var out []rawEvent
	sc := bufio.NewScanner(bytes.NewReader(body))
	var cur rawEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.Data != "" || cur.Name != "" {
				out = append(out, cur)
			}
			cur = rawEvent{}
		case strings.HasPrefix(line, "event: "):
			cur.Name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.Data = strings.TrimPrefix(line, "data: ")
		default:
			t.Fatalf("unexpected SSE line %q", line)
		}
	}
	if cur.Data != "" || cur.Name != "" {
		t.Fatalf("stream ended inside an event: %+v", cur)
	}
	return out
}

func openAIHeaders() map[string]string {
	return map[string]string{"Authorization": "Bearer " + openAIKey}
}

func anthropicHeaders() map[string]string {
	return map[string]string{"x-api-key": anthropicKey, "anthropic-version": "2023-06-01"}
}

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("decode %q: %v", s, err)
	}
	return m
}

// ---------- OpenAI chat completions ----------

func TestOpenAIChatText(t *testing.T) {
	u := fake.NewOpenAI()
	defer u.Close()
	u.Push(fake.Script{Text: "Bonjour!", Usage: fake.Usage{Input: 11, Output: 7, CachedInput: 5}})

	client := openAIClient(u)
	got, err := client.Chat.Completions.New(t.Context(), chatParams("gpt-test-1"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got.ID, "chatcmpl-") || got.Object != "chat.completion" || got.Created == 0 {
		t.Errorf("id/object/created = %q %q %d", got.ID, got.Object, got.Created)
	}
	if got.Model != "gpt-test-1" {
		t.Errorf("model = %q, want the request's", got.Model)
	}
	if len(got.Choices) != 1 || got.Choices[0].Message.Content != "Bonjour!" || got.Choices[0].FinishReason != "stop" {
		t.Fatalf("choices = %+v", got.Choices)
	}
	if got.Choices[0].Message.Role != "assistant" || len(got.Choices[0].Message.ToolCalls) != 0 {
		t.Errorf("message = %+v", got.Choices[0].Message)
	}
	us := got.Usage
	if us.PromptTokens != 11 || us.CompletionTokens != 7 || us.TotalTokens != 18 || us.PromptTokensDetails.CachedTokens != 5 {
		t.Errorf("usage = %+v", us)
	}

	reqs := u.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests recorded", len(reqs))
	}
	r := reqs[0]
	if r.Method != http.MethodPost || r.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer "+openAIKey {
		t.Errorf("request = %s %s auth %q", r.Method, r.Path, r.Header.Get("Authorization"))
	}
	if m := r.JSON(); m["model"] != "gpt-test-1" || len(m["messages"].([]any)) != 2 {
		t.Errorf("body = %s", r.Body)
	}
}

func TestOpenAIChatToolCalls(t *testing.T) {
	u := fake.NewOpenAI()
	defer u.Close()
	u.Push(fake.Script{Text: "Let me check.", ToolCalls: twoTools, Usage: fake.Usage{Input: 30, Output: 20}})
	u.Push(fake.Script{ToolCalls: []fake.ToolCall{{Name: "noargs"}}})

	client := openAIClient(u)
	got, err := client.Chat.Completions.New(t.Context(), chatParams("gpt-4o"))
	if err != nil {
		t.Fatal(err)
	}
	c := got.Choices[0]
	if c.FinishReason != "tool_calls" || c.Message.Content != "Let me check." {
		t.Errorf("finish %q content %q", c.FinishReason, c.Message.Content)
	}
	if len(c.Message.ToolCalls) != 2 {
		t.Fatalf("tool calls = %+v", c.Message.ToolCalls)
	}
	for i, tc := range c.Message.ToolCalls {
		want := twoTools[i]
		if tc.ID != want.ID || tc.Type != "function" || tc.Function.Name != want.Name || tc.Function.Arguments != want.Arguments {
			t.Errorf("tool call %d = %+v, want %+v", i, tc, want)
		}
	}

	got, err = client.Chat.Completions.New(t.Context(), chatParams("gpt-4o"))
	if err != nil {
		t.Fatal(err)
	}
	tc := got.Choices[0].Message.ToolCalls[0]
	if !strings.HasPrefix(tc.ID, "call_") || tc.Function.Arguments != "{}" || got.Choices[0].Message.JSON.Content.Raw() != "null" {
		t.Errorf("generated call = %+v, content raw %s", tc, got.Choices[0].Message.JSON.Content.Raw())
	}
}

func TestOpenAIChatStreamToolCallsAndUsage(t *testing.T) {
	u := fake.NewOpenAI()
	defer u.Close()
	u.Push(fake.Script{Text: "Checking the weather…", ToolCalls: twoTools, Chunks: 4,
		Usage: fake.Usage{Input: 40, Output: 25, CachedInput: 32}})

	client := openAIClient(u)
	params := chatParams("gpt-stream")
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(t.Context(), params)
	acc := openai.ChatCompletionAccumulator{}
	var chunks []openai.ChatCompletionChunk
	for stream.Next() {
		c := stream.Current()
		if !acc.AddChunk(c) {
			t.Fatalf("accumulator refused chunk %s", c.RawJSON())
		}
		chunks = append(chunks, c)
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}

	if acc.Model != "gpt-stream" || !strings.HasPrefix(acc.ID, "chatcmpl-") {
		t.Errorf("id %q model %q", acc.ID, acc.Model)
	}
	choice := acc.Choices[0]
	if choice.Message.Content != "Checking the weather…" || choice.FinishReason != "tool_calls" {
		t.Errorf("content %q finish %q", choice.Message.Content, choice.FinishReason)
	}
	if len(choice.Message.ToolCalls) != 2 {
		t.Fatalf("tool calls = %+v", choice.Message.ToolCalls)
	}
	for i, tc := range choice.Message.ToolCalls {
		want := twoTools[i]
		if tc.ID != want.ID || tc.Function.Name != want.Name || tc.Function.Arguments != want.Arguments {
			t.Errorf("tool call %d = id %q name %q args %q, want %+v", i, tc.ID, tc.Function.Name, tc.Function.Arguments, want)
		}
	}
	if acc.Usage.PromptTokens != 40 || acc.Usage.CompletionTokens != 25 || acc.Usage.TotalTokens != 65 ||
		acc.Usage.PromptTokensDetails.CachedTokens != 32 {
		t.Errorf("usage = %+v", acc.Usage)
	}

	// Wire shape: text in 4 pieces; per tool call, the first delta carries
	// id, type, name and the first piece, later ones only index + arguments.
	textPieces := 0
	perTool := map[int64][]openai.ChatCompletionChunkChoiceDeltaToolCall{}
	for _, c := range chunks[:len(chunks)-1] {
		if len(c.Choices) != 1 {
			t.Fatalf("chunk before the last has %d choices: %s", len(c.Choices), c.RawJSON())
		}
		if !strings.Contains(c.RawJSON(), `"usage":null`) {
			t.Errorf("with include_usage every other chunk has usage null: %s", c.RawJSON())
		}
		d := c.Choices[0].Delta
		if d.Content != "" {
			textPieces++
		}
		for _, tc := range d.ToolCalls {
			perTool[tc.Index] = append(perTool[tc.Index], tc)
		}
	}
	if textPieces != 4 {
		t.Errorf("text came in %d pieces, want 4", textPieces)
	}
	for i, deltas := range perTool {
		if len(deltas) != 4 {
			t.Errorf("tool %d came in %d deltas, want 4", i, len(deltas))
		}
		for j, d := range deltas {
			hasHead := d.ID != "" || d.Type != "" || d.Function.Name != ""
			if j == 0 && (d.ID != twoTools[i].ID || d.Type != "function" || d.Function.Name != twoTools[i].Name || d.Function.Arguments == "") {
				t.Errorf("tool %d first delta = %s", i, d.RawJSON())
			}
			if j > 0 && hasHead {
				t.Errorf("tool %d later delta carries more than index+arguments: %s", i, d.RawJSON())
			}
		}
	}
	last := chunks[len(chunks)-1]
	if len(last.Choices) != 0 || last.Usage.PromptTokens != 40 || !strings.Contains(last.RawJSON(), `"choices":[]`) {
		t.Errorf("usage chunk = %s", last.RawJSON())
	}
	if fin := chunks[len(chunks)-2]; fin.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("finish chunk = %s", fin.RawJSON())
	}
}

func TestOpenAIChatStreamWire(t *testing.T) {
	u := fake.NewOpenAI()
	defer u.Close()
	u.Push(fake.Script{Text: "abc", Usage: fake.Usage{Input: 3, Output: 2}},
		fake.Script{Text: "abc", Usage: fake.Usage{Input: 3, Output: 2}, Finish: "length"})

	// Without stream_options: no usage anywhere, data-only events, [DONE] last.
	resp, body := post(t, u.URL+"/chat/completions", openAIHeaders(),
		`{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d content-type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	evs := parseSSE(t, body)
	if evs[len(evs)-1].Data != "[DONE]" {
		t.Errorf("last event = %+v", evs[len(evs)-1])
	}
	var text strings.Builder
	for _, e := range evs {
		if e.Name != "" {
			t.Errorf("chat completions events are data-only, got event %q", e.Name)
		}
		if e.Data == "[DONE]" {
			continue
		}
		m := decode(t, e.Data)
		if _, ok := m["usage"]; ok {
			t.Errorf("usage present without include_usage: %s", e.Data)
		}
		if m["object"] != "chat.completion.chunk" || m["model"] != "m" {
			t.Errorf("chunk = %s", e.Data)
		}
		choices := m["choices"].([]any)
		if len(choices) == 0 {
			t.Errorf("chunk without choices and without include_usage: %s", e.Data)
			continue
		}
		if c, _ := choices[0].(map[string]any)["delta"].(map[string]any)["content"].(string); c != "" {
			text.WriteString(c)
		}
	}
	if text.String() != "abc" {
		t.Errorf("text = %q", text.String())
	}
	first := decode(t, evs[0].Data)["choices"].([]any)[0].(map[string]any)["delta"].(map[string]any)
	if first["role"] != "assistant" {
		t.Errorf("first delta = %v", first)
	}

	// An explicit finish reason passes through verbatim.
	_, body = post(t, u.URL+"/chat/completions", openAIHeaders(),
		`{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	evs = parseSSE(t, body)
	fin := decode(t, evs[len(evs)-2].Data)["choices"].([]any)[0].(map[string]any)
	if fin["finish_reason"] != "length" {
		t.Errorf("finish chunk = %s", evs[len(evs)-2].Data)
	}
}

func TestOpenAIChatGate(t *testing.T) {
	u := fake.NewOpenAI()
	defer u.Close()
	gate := make(chan struct{})
	u.Push(fake.Script{Text: "one two three", Gate: gate})

	client := openAIClient(u)
	stream := client.Chat.Completions.NewStreaming(t.Context(), chatParams("gpt-4o"))
	acc := openai.ChatCompletionAccumulator{}
	gotFirst := false
	for stream.Next() {
		acc.AddChunk(stream.Current())
		if acc.Choices[0].Message.Content != "" {
			gotFirst = true
			break
		}
	}
	if !gotFirst {
		t.Fatalf("no content before the gate opened: %v", stream.Err())
	}
	// The first content arrived while the upstream is still held at the gate.
	if acc.Choices[0].Message.Content != "one t" || acc.Choices[0].FinishReason != "" {
		t.Errorf("before the gate: content %q finish %q", acc.Choices[0].Message.Content, acc.Choices[0].FinishReason)
	}
	close(gate)
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content != "one two three" || acc.Choices[0].FinishReason != "stop" {
		t.Errorf("after the gate: content %q finish %q", acc.Choices[0].Message.Content, acc.Choices[0].FinishReason)
	}
}

func TestOpenAIChatMidStreamError(t *testing.T) {
	u := fake.NewOpenAI()
	defer u.Close()
	u.Push(fake.Script{Text: "partial answer", MidStreamError: true})

	client := openAIClient(u)
	stream := client.Chat.Completions.NewStreaming(t.Context(), chatParams("gpt-4o"))
	acc := openai.ChatCompletionAccumulator{}
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	err := stream.Err()
	if err == nil {
		t.Fatal("no stream error")
	}
	if !strings.Contains(err.Error(), "server_error") {
		t.Errorf("stream error = %v", err)
	}
	if acc.Choices[0].Message.Content != "parti" {
		t.Errorf("content before the error = %q", acc.Choices[0].Message.Content)
	}

	// On the wire: the error is a data-only {"error":{...}} event and there is
	// no [DONE].
	u.Push(fake.Script{Text: "partial answer", MidStreamError: true, ErrorType: "rate_limit_exceeded", ErrorMessage: "slow down"})
	_, body := post(t, u.URL+"/chat/completions", openAIHeaders(),
		`{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	evs := parseSSE(t, body)
	last := evs[len(evs)-1]
	e := decode(t, last.Data)["error"].(map[string]any)
	if last.Name != "" || e["message"] != "slow down" || e["type"] != "rate_limit_exceeded" {
		t.Errorf("error event = %+v", last)
	}
	for _, k := range []string{"param", "code"} {
		if _, ok := e[k]; !ok {
			t.Errorf("error object lacks %q: %s", k, last.Data)
		}
	}
}

func TestOpenAIErrorStatuses(t *testing.T) {
	u := fake.NewOpenAI()
	defer u.Close()
	client := openAIClient(u)
	cases := []struct {
		status   int
		typ      string
		code     string
		errType  string
		wantType string
	}{
		{400, "", "", "", "invalid_request_error"},
		{401, "", "invalid_api_key", "", "invalid_request_error"},
		{404, "", "model_not_found", "", "invalid_request_error"},
		{429, "", "rate_limit_exceeded", "", "requests"},
		{429, "insufficient_quota", "insufficient_quota", "insufficient_quota", "insufficient_quota"},
		{500, "", "", "", "server_error"},
		{503, "", "", "", "server_error"},
	}
	for _, c := range cases {
		t.Run(fmt.Sprint(c.status, c.errType), func(t *testing.T) {
			u.Push(fake.Script{Status: c.status, ErrorType: c.errType})
			_, err := client.Chat.Completions.New(t.Context(), chatParams("gpt-4o"))
			var apiErr *openai.Error
			if !errors.As(err, &apiErr) {
				t.Fatalf("err = %v", err)
			}
			if apiErr.StatusCode != c.status || apiErr.Type != c.wantType || apiErr.Code != c.code || apiErr.Message == "" {
				t.Errorf("error = status %d type %q code %q msg %q", apiErr.StatusCode, apiErr.Type, apiErr.Code, apiErr.Message)
			}
			for _, k := range []string{"message", "type", "param", "code"} {
				if !strings.Contains(apiErr.RawJSON(), `"`+k+`"`) {
					t.Errorf("error body lacks %q: %s", k, apiErr.RawJSON())
				}
			}
		})
	}

	// Responses endpoint, same shape.
	u.Push(fake.Script{Status: 429, Header: http.Header{"Retry-After": {"7"}}})
	_, err := client.Responses.New(t.Context(), responses.ResponseNewParams{Model: "gpt-4o",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 || apiErr.Response.Header.Get("Retry-After") != "7" {
		t.Errorf("responses 429 = %v", err)
	}
}

func TestOpenAIValidation(t *testing.T) {
	u := fake.NewOpenAI()
	defer u.Close()
	u.APIKey = openAIKey
	u.Push(fake.Script{Text: "kept"})
	cases := []struct {
		name   string
		header map[string]string
		path   string
		body   string
		status int
		param  string
	}{
		{"no auth", map[string]string{}, "/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, 401, ""},
		{"wrong key", map[string]string{"Authorization": "Bearer sk-other"}, "/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, 401, ""},
		{"not json", openAIHeaders(), "/chat/completions", `{"model":`, 400, ""},
		{"no model", openAIHeaders(), "/chat/completions", `{"messages":[{"role":"user","content":"x"}]}`, 400, "model"},
		{"no messages", openAIHeaders(), "/chat/completions", `{"model":"m"}`, 400, "messages"},
		{"messages not array", openAIHeaders(), "/chat/completions", `{"model":"m","messages":"hi"}`, 400, "messages"},
		{"empty messages", openAIHeaders(), "/chat/completions", `{"model":"m","messages":[]}`, 400, "messages"},
		{"bad role", openAIHeaders(), "/chat/completions", `{"model":"m","messages":[{"role":"human","content":"x"}]}`, 400, "messages[0].role"},
		{"stream_options without stream", openAIHeaders(), "/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}],"stream_options":{"include_usage":true}}`, 400, "stream_options"},
		{"responses without model", openAIHeaders(), "/responses", `{"input":"hi"}`, 400, "model"},
		{"embeddings without model", openAIHeaders(), "/embeddings", `{"input":"hi"}`, 400, "model"},
		{"embeddings with empty input", openAIHeaders(), "/embeddings", `{"model":"m","input":[]}`, 400, "input"},
		{"unknown path", openAIHeaders(), "/completions", `{}`, 404, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := post(t, u.URL+c.path, c.header, c.body)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, body)
			}
			e, ok := decode(t, string(body))["error"].(map[string]any)
			if !ok || e["message"] == "" || e["type"] != "invalid_request_error" {
				t.Fatalf("body = %s", body)
			}
			if p, _ := e["param"].(string); p != c.param {
				t.Errorf("param = %v, want %q", e["param"], c.param)
			}
		})
	}
	if u.Pending() != 1 {
		t.Errorf("refused requests took a script: %d pending", u.Pending())
	}
	if n := len(u.Requests()); n != len(cases) {
		t.Errorf("%d requests recorded, want %d", n, len(cases))
	}
}

func TestOpenAIModels(t *testing.T) {
	u := fake.NewOpenAI()
	defer u.Close()
	u.Models = []string{"gpt-a", "gpt-b"}
	client := openAIClient(u)
	page, err := client.Models.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 2 || page.Data[0].ID != "gpt-a" || page.Data[1].ID != "gpt-b" || page.Data[0].Object != "model" {
		t.Errorf("models = %+v", page.Data)
	}
	m, err := client.Models.Get(t.Context(), "gpt-b")
	if err != nil || m.ID != "gpt-b" {
		t.Errorf("get = %+v, %v", m, err)
	}
	_, err = client.Models.Get(t.Context(), "nope")
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Errorf("missing model = %v", err)
	}
}

// ---------- OpenAI Responses ----------

func responsesParams(model string) responses.ResponseNewParams {
	return responses.ResponseNewParams{
		Model:        model,
		Instructions: openai.String("be brief"),
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("What is the weather?")},
	}
}

func TestOpenAIResponses(t *testing.T) {
	u := fake.NewOpenAI()
	defer u.Close()
	u.Push(fake.Script{Text: "Looking it up.", ToolCalls: twoTools, Usage: fake.Usage{Input: 50, Output: 12, CachedInput: 20}})

	client := openAIClient(u)
	resp, err := client.Responses.New(t.Context(), responsesParams("gpt-resp"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.ID, "resp_") || resp.Object != "response" || resp.CreatedAt == 0 || resp.Model != "gpt-resp" {
		t.Errorf("id %q object %q created %v model %q", resp.ID, resp.Object, resp.CreatedAt, resp.Model)
	}
	if resp.Status != "completed" || resp.OutputText() != "Looking it up." || resp.Instructions.OfString != "be brief" {
		t.Errorf("status %q text %q instructions %+v", resp.Status, resp.OutputText(), resp.Instructions)
	}
	if len(resp.Output) != 3 {
		t.Fatalf("output = %+v", resp.Output)
	}
	msg := resp.Output[0].AsMessage()
	if msg.Type != "message" || msg.Role != "assistant" || !strings.HasPrefix(msg.ID, "msg_") || msg.Content[0].Type != "output_text" {
		t.Errorf("message item = %s", resp.Output[0].RawJSON())
	}
	for i, want := range twoTools {
		fc := resp.Output[i+1].AsFunctionCall()
		if fc.Type != "function_call" || fc.CallID != want.ID || fc.Name != want.Name || fc.Arguments != want.Arguments || !strings.HasPrefix(fc.ID, "fc_") {
			t.Errorf("function call %d = %s", i, resp.Output[i+1].RawJSON())
		}
	}
	us := resp.Usage
	if us.InputTokens != 50 || us.OutputTokens != 12 || us.TotalTokens != 62 || us.InputTokensDetails.CachedTokens != 20 {
		t.Errorf("usage = %+v", us)
	}
	if r := u.Requests()[0]; r.Path != "/v1/responses" {
		t.Errorf("path = %s", r.Path)
	}
}

func TestOpenAIResponsesStream(t *testing.T) {
	u := fake.NewOpenAI()
	defer u.Close()
	u.Push(fake.Script{Text: "Looking it up.", ToolCalls: twoTools, Usage: fake.Usage{Input: 50, Output: 12, CachedInput: 20}})

	client := openAIClient(u)
	stream := client.Responses.NewStreaming(t.Context(), responsesParams("gpt-resp"))
	var types []string
	var text strings.Builder
	args := map[string]*strings.Builder{}
	var final responses.Response
	seq := int64(0)
	for stream.Next() {
		ev := stream.Current()
		if ev.SequenceNumber != seq {
			t.Errorf("event %s has sequence_number %d, want %d", ev.Type, ev.SequenceNumber, seq)
		}
		seq++
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.function_call_arguments.delta":
			if args[ev.ItemID] == nil {
				args[ev.ItemID] = &strings.Builder{}
			}
			args[ev.ItemID].WriteString(ev.Delta)
		case "response.function_call_arguments.done":
			if args[ev.ItemID].String() != ev.Arguments {
				t.Errorf("deltas %q != done arguments %q", args[ev.ItemID].String(), ev.Arguments)
			}
		case "response.output_text.done":
			if ev.Text != text.String() {
				t.Errorf("done text %q != deltas %q", ev.Text, text.String())
			}
		case "response.created", "response.in_progress":
			if ev.Response.Status != "in_progress" || ev.Response.Model != "gpt-resp" {
				t.Errorf("%s response = %s", ev.Type, ev.RawJSON())
			}
		case "response.completed":
			final = ev.Response
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != "Looking it up." {
		t.Errorf("text = %q", text.String())
	}
	wantHead := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added", "response.output_text.delta"}
	if strings.Join(types[:5], ",") != strings.Join(wantHead, ",") || types[len(types)-1] != "response.completed" {
		t.Errorf("event order = %v", types)
	}
	for _, want := range []string{"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.function_call_arguments.done"} {
		if !contains(types, want) {
			t.Errorf("no %s event in %v", want, types)
		}
	}
	if final.Status != "completed" || final.OutputText() != "Looking it up." || final.Usage.InputTokensDetails.CachedTokens != 20 || final.Usage.OutputTokens != 12 {
		t.Errorf("completed response = %+v", final)
	}
	for i, want := range twoTools {
		fc := final.Output[i+1].AsFunctionCall()
		if fc.CallID != want.ID || fc.Name != want.Name || fc.Arguments != want.Arguments || args[fc.ID].String() != want.Arguments {
			t.Errorf("function call %d = %s (streamed %q)", i, final.Output[i+1].RawJSON(), args[fc.ID])
		}
	}
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

func TestOpenAIResponsesGateMidStreamAndIncomplete(t *testing.T) {
	u := fake.NewOpenAI()
	defer u.Close()
	client := openAIClient(u)

	gate := make(chan struct{})
	u.Push(fake.Script{Text: "abcdef", Gate: gate})
	stream := client.Responses.NewStreaming(t.Context(), responsesParams("gpt-4o"))
	var text strings.Builder
	for stream.Next() {
		if ev := stream.Current(); ev.Type == "response.output_text.delta" {
			text.WriteString(ev.Delta)
			break
		}
	}
	if text.String() != "ab" {
		t.Fatalf("before the gate: %q (%v)", text.String(), stream.Err())
	}
	close(gate)
	completed := false
	for stream.Next() {
		ev := stream.Current()
		if ev.Type == "response.output_text.delta" {
			text.WriteString(ev.Delta)
		}
		completed = completed || ev.Type == "response.completed"
	}
	if stream.Err() != nil || !completed || text.String() != "abcdef" {
		t.Errorf("after the gate: %q completed %v err %v", text.String(), completed, stream.Err())
	}

	u.Push(fake.Script{Text: "abcdef", MidStreamError: true})
	stream = client.Responses.NewStreaming(t.Context(), responsesParams("gpt-4o"))
	n := 0
	for stream.Next() {
		n++
		if stream.Current().Type == "response.completed" {
			t.Error("completed despite the mid-stream error")
		}
	}
	if err := stream.Err(); err == nil || n != 5 {
		t.Errorf("mid-stream error: %d events, err %v", n, err)
	}

	u.Push(fake.Script{Text: "truncated", Finish: "length"}, fake.Script{Text: "truncated", Finish: "length"})
	resp, err := client.Responses.New(t.Context(), responsesParams("gpt-4o"))
	if err != nil || resp.Status != "incomplete" || resp.IncompleteDetails.Reason != "max_output_tokens" {
		t.Errorf("incomplete = %+v, %v", resp, err)
	}
	stream = client.Responses.NewStreaming(t.Context(), responsesParams("gpt-4o"))
	var last string
	for stream.Next() {
		last = stream.Current().Type
	}
	if stream.Err() != nil || last != "response.incomplete" {
		t.Errorf("incomplete stream ends with %q, %v", last, stream.Err())
	}
}

func TestOpenAIResponsesWire(t *testing.T) {
	u := fake.NewOpenAI()
	defer u.Close()
	u.Push(fake.Script{Text: "hi there", MidStreamError: true, ErrorMessage: "boom"})
	_, body := post(t, u.URL+"/responses", openAIHeaders(), `{"model":"m","input":"x","stream":true}`)
	evs := parseSSE(t, body)
	for i, e := range evs {
		m := decode(t, e.Data)
		if e.Name == "" || e.Name != m["type"] {
			t.Errorf("event %d: name %q type %v", i, e.Name, m["type"])
		}
		if m["sequence_number"] != float64(i) {
			t.Errorf("event %d: sequence_number %v", i, m["sequence_number"])
		}
	}
	last := evs[len(evs)-1]
	m := decode(t, last.Data)
	if last.Name != "error" || m["message"] != "boom" || m["code"] != "server_error" || m["error"].(map[string]any)["message"] != "boom" {
		t.Errorf("error event = %+v", last)
	}
}

// ---------- Anthropic ----------

func TestAnthropicMessage(t *testing.T) {
	u := fake.NewAnthropic()
	defer u.Close()
	u.Push(fake.Script{Text: "Let me check.", ToolCalls: twoTools, Usage: fake.Usage{Input: 21, Output: 9, CachedInput: 100, CacheWrite: 7}})
	u.Push(fake.Script{Text: "cut", Finish: "max_tokens"})

	client := anthropicClient(u)
	msg, err := client.Messages.New(t.Context(), messageParams("claude-test-1"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(msg.ID, "msg_") || msg.Type != "message" || msg.Role != "assistant" || msg.Model != "claude-test-1" {
		t.Errorf("message = id %q type %q role %q model %q", msg.ID, msg.Type, msg.Role, msg.Model)
	}
	if msg.StopReason != anthropic.StopReasonToolUse || len(msg.Content) != 3 {
		t.Fatalf("stop %q content %+v", msg.StopReason, msg.Content)
	}
	if msg.Content[0].Type != "text" || msg.Content[0].Text != "Let me check." {
		t.Errorf("text block = %s", msg.Content[0].RawJSON())
	}
	for i, want := range twoTools {
		b := msg.Content[i+1]
		if b.Type != "tool_use" || b.ID != want.ID || b.Name != want.Name || !sameJSON(t, string(b.Input), want.Arguments) {
			t.Errorf("tool block %d = %s", i, b.RawJSON())
		}
	}
	us := msg.Usage
	if us.InputTokens != 21 || us.OutputTokens != 9 || us.CacheReadInputTokens != 100 || us.CacheCreationInputTokens != 7 {
		t.Errorf("usage = %+v", us)
	}

	msg, err = client.Messages.New(t.Context(), messageParams("claude-test-1"))
	if err != nil || msg.StopReason != anthropic.StopReasonMaxTokens {
		t.Errorf("explicit stop reason = %+v, %v", msg, err)
	}

	r := u.Requests()[0]
	if r.Path != "/v1/messages" || r.Header.Get("x-api-key") != anthropicKey || r.Header.Get("anthropic-version") == "" {
		t.Errorf("request = %s headers %v", r.Path, r.Header)
	}
}

func sameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

func TestAnthropicStream(t *testing.T) {
	u := fake.NewAnthropic()
	defer u.Close()
	u.Push(fake.Script{Text: "Checking the weather…", ToolCalls: twoTools, Chunks: 5,
		Usage: fake.Usage{Input: 44, Output: 31, CachedInput: 300}})

	client := anthropicClient(u)
	stream := client.Messages.NewStreaming(t.Context(), messageParams("claude-stream"))
	var msg anthropic.Message
	var types []string
	deltas := map[int64]int{}
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		if ev.Type == "content_block_delta" {
			deltas[ev.Index]++
		}
		if ev.Type == "message_start" && (ev.Message.Usage.InputTokens != 44 || ev.Message.Usage.CacheReadInputTokens != 300) {
			t.Errorf("message_start usage = %+v", ev.Message.Usage)
		}
		if err := msg.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if msg.Model != "claude-stream" || !strings.HasPrefix(msg.ID, "msg_") || msg.StopReason != anthropic.StopReasonToolUse {
		t.Errorf("message = id %q model %q stop %q", msg.ID, msg.Model, msg.StopReason)
	}
	if len(msg.Content) != 3 || msg.Content[0].Text != "Checking the weather…" {
		t.Fatalf("content = %+v", msg.Content)
	}
	for i, want := range twoTools {
		b := msg.Content[i+1]
		if b.Type != "tool_use" || b.ID != want.ID || b.Name != want.Name || string(b.Input) != want.Arguments {
			t.Errorf("tool block %d = id %q name %q input %s", i, b.ID, b.Name, b.Input)
		}
	}
	if msg.Usage.InputTokens != 44 || msg.Usage.OutputTokens != 31 || msg.Usage.CacheReadInputTokens != 300 {
		t.Errorf("usage = %+v", msg.Usage)
	}
	for i := range int64(3) {
		if deltas[i] != 5 {
			t.Errorf("block %d came in %d deltas, want 5", i, deltas[i])
		}
	}
	if types[0] != "message_start" || types[1] != "content_block_start" || types[len(types)-2] != "message_delta" || types[len(types)-1] != "message_stop" {
		t.Errorf("event order = %v", types)
	}
}

func TestAnthropicStreamWire(t *testing.T) {
	u := fake.NewAnthropic()
	defer u.Close()
	u.Push(fake.Script{ToolCalls: []fake.ToolCall{{ID: "toolu_x", Name: "f", Arguments: `{"a":1}`}}, Usage: fake.Usage{Input: 5, Output: 8}})
	resp, body := post(t, u.URL+"/v1/messages", anthropicHeaders(),
		`{"model":"claude-x","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") || resp.Header.Get("request-id") == "" {
		t.Fatalf("status %d headers %v", resp.StatusCode, resp.Header)
	}
	evs := parseSSE(t, body)
	var names []string
	var partial strings.Builder
	for _, e := range evs {
		m := decode(t, e.Data)
		if e.Name != m["type"] {
			t.Errorf("event name %q but type %v", e.Name, m["type"])
		}
		names = append(names, e.Name)
		if e.Name == "content_block_delta" {
			d := m["delta"].(map[string]any)
			if d["type"] != "input_json_delta" {
				t.Errorf("delta = %v", d)
			}
			partial.WriteString(d["partial_json"].(string))
		}
	}
	want := "message_start,content_block_start,ping,content_block_delta,content_block_delta,content_block_delta,content_block_stop,message_delta,message_stop"
	if strings.Join(names, ",") != want {
		t.Errorf("events = %v", names)
	}
	if partial.String() != `{"a":1}` {
		t.Errorf("partial_json = %q", partial.String())
	}
	start := decode(t, evs[1].Data)["content_block"].(map[string]any)
	if start["type"] != "tool_use" || start["id"] != "toolu_x" || start["name"] != "f" || len(start["input"].(map[string]any)) != 0 {
		t.Errorf("content_block_start = %s", evs[1].Data)
	}
	md := decode(t, evs[len(evs)-2].Data)
	if md["delta"].(map[string]any)["stop_reason"] != "tool_use" || md["usage"].(map[string]any)["output_tokens"] != float64(8) {
		t.Errorf("message_delta = %s", evs[len(evs)-2].Data)
	}
	ms := decode(t, evs[0].Data)["message"].(map[string]any)
	if ms["usage"].(map[string]any)["input_tokens"] != float64(5) || ms["model"] != "claude-x" || len(ms["content"].([]any)) != 0 {
		t.Errorf("message_start = %s", evs[0].Data)
	}
}

func TestAnthropicGate(t *testing.T) {
	u := fake.NewAnthropic()
	defer u.Close()
	gate := make(chan struct{})
	u.Push(fake.Script{Text: "abcdef", Gate: gate, Usage: fake.Usage{Input: 3, Output: 4}})

	client := anthropicClient(u)
	stream := client.Messages.NewStreaming(t.Context(), messageParams("claude"))
	var msg anthropic.Message
	for stream.Next() {
		ev := stream.Current()
		if err := msg.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
		if ev.Type == "content_block_delta" {
			break
		}
	}
	if len(msg.Content) != 1 || msg.Content[0].Text != "ab" || msg.StopReason != "" {
		t.Fatalf("before the gate: %+v (%v)", msg.Content, stream.Err())
	}
	close(gate)
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if stream.Err() != nil || msg.Content[0].Text != "abcdef" || msg.StopReason != anthropic.StopReasonEndTurn || msg.Usage.OutputTokens != 4 {
		t.Errorf("after the gate: %+v stop %q err %v", msg.Content, msg.StopReason, stream.Err())
	}
}

func TestAnthropicMidStreamError(t *testing.T) {
	u := fake.NewAnthropic()
	defer u.Close()
	u.Push(fake.Script{Text: "partial answer", MidStreamError: true})

	client := anthropicClient(u)
	stream := client.Messages.NewStreaming(t.Context(), messageParams("claude"))
	var msg anthropic.Message
	for stream.Next() {
		msg.Accumulate(stream.Current())
	}
	var aerr *anthropic.Error
	if !errors.As(stream.Err(), &aerr) || aerr.Type() != "overloaded_error" {
		t.Fatalf("stream error = %v", stream.Err())
	}
	if msg.Content[0].Text != "parti" {
		t.Errorf("content before the error = %q", msg.Content[0].Text)
	}

	u.Push(fake.Script{Text: "partial answer", MidStreamError: true})
	_, body := post(t, u.URL+"/v1/messages", anthropicHeaders(),
		`{"model":"c","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	evs := parseSSE(t, body)
	last := evs[len(evs)-1]
	if last.Name != "error" || !sameJSON(t, last.Data, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`) {
		t.Errorf("error event = %+v", last)
	}
}

func TestAnthropicErrorStatuses(t *testing.T) {
	u := fake.NewAnthropic()
	defer u.Close()
	client := anthropicClient(u)
	for _, c := range []struct {
		status  int
		errType string
		want    string
	}{
		{400, "", "invalid_request_error"},
		{401, "", "authentication_error"},
		{403, "", "permission_error"},
		{404, "", "not_found_error"},
		{413, "", "request_too_large"},
		{429, "", "rate_limit_error"},
		{500, "", "api_error"},
		{529, "", "overloaded_error"},
		{503, "overloaded_error", "overloaded_error"},
	} {
		t.Run(fmt.Sprint(c.status), func(t *testing.T) {
			u.Push(fake.Script{Status: c.status, ErrorType: c.errType})
			_, err := client.Messages.New(t.Context(), messageParams("claude"))
			var aerr *anthropic.Error
			if !errors.As(err, &aerr) {
				t.Fatalf("err = %v", err)
			}
			if aerr.StatusCode != c.status || string(aerr.Type()) != c.want || aerr.RequestID == "" {
				t.Errorf("error = status %d type %q request id %q", aerr.StatusCode, aerr.Type(), aerr.RequestID)
			}
			var body struct {
				Type  string `json:"type"`
				Error struct {
					Type    string `json:"type"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if json.Unmarshal([]byte(aerr.RawJSON()), &body) != nil || body.Type != "error" || body.Error.Message == "" {
				t.Errorf("body = %s", aerr.RawJSON())
			}
		})
	}
	// Streaming requests get the same status before any event.
	u.Push(fake.Script{Status: 529})
	stream := client.Messages.NewStreaming(t.Context(), messageParams("claude"))
	for stream.Next() {
		t.Error("event despite the error status")
	}
	var aerr *anthropic.Error
	if !errors.As(stream.Err(), &aerr) || aerr.StatusCode != 529 {
		t.Errorf("stream status error = %v", stream.Err())
	}
}

func TestAnthropicValidation(t *testing.T) {
	u := fake.NewAnthropic()
	defer u.Close()
	u.Push(fake.Script{Text: "kept"})
	ok := `{"model":"c","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`
	cases := []struct {
		name   string
		header map[string]string
		path   string
		body   string
		status int
		typ    string
	}{
		{"no key", map[string]string{"anthropic-version": "2023-06-01"}, "/v1/messages", ok, 401, "authentication_error"},
		{"no version", map[string]string{"x-api-key": "k"}, "/v1/messages", ok, 400, "invalid_request_error"},
		{"bad version", map[string]string{"x-api-key": "k", "anthropic-version": "2023-06-01, 2023-06-01"}, "/v1/messages", ok, 400, "invalid_request_error"},
		{"no max_tokens", anthropicHeaders(), "/v1/messages", `{"model":"c","messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error"},
		{"no messages", anthropicHeaders(), "/v1/messages", `{"model":"c","max_tokens":10}`, 400, "invalid_request_error"},
		{"no model", anthropicHeaders(), "/v1/messages", `{"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error"},
		{"system role", anthropicHeaders(), "/v1/messages", `{"model":"c","max_tokens":10,"messages":[{"role":"system","content":"x"},{"role":"user","content":"hi"}]}`, 400, "invalid_request_error"},
		{"tool role", anthropicHeaders(), "/v1/messages", `{"model":"c","max_tokens":10,"messages":[{"role":"user","content":"hi"},{"role":"tool","content":"x"}]}`, 400, "invalid_request_error"},
		{"count without messages", anthropicHeaders(), "/v1/messages/count_tokens", `{"model":"c"}`, 400, "invalid_request_error"},
		{"count with max_tokens", anthropicHeaders(), "/v1/messages/count_tokens", `{"model":"c","max_tokens":10,"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error"},
		{"unknown path", anthropicHeaders(), "/v1/complete", `{}`, 404, "not_found_error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := post(t, u.URL+c.path, c.header, c.body)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, body)
			}
			m := decode(t, string(body))
			e, _ := m["error"].(map[string]any)
			if m["type"] != "error" || e["type"] != c.typ || e["message"] == "" {
				t.Errorf("body = %s", body)
			}
		})
	}
	if u.Pending() != 1 {
		t.Errorf("refused requests took a script: %d pending", u.Pending())
	}

	u.APIKey = "sk-right"
	resp, body := post(t, u.URL+"/v1/messages", anthropicHeaders(), ok)
	if resp.StatusCode != 401 || !strings.Contains(string(body), "authentication_error") {
		t.Errorf("wrong key: %d %s", resp.StatusCode, body)
	}
}

func TestAnthropicCountTokens(t *testing.T) {
	u := fake.NewAnthropic()
	defer u.Close()
	u.Push(fake.Script{Text: "not used by count_tokens"})
	client := anthropicClient(u)
	got, err := client.Messages.CountTokens(t.Context(), anthropic.MessageCountTokensParams{
		Model:    "claude-test",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("How many tokens is this sentence, roughly?"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := u.Requests()[0]
	if r.Path != "/v1/messages/count_tokens" {
		t.Errorf("path = %s", r.Path)
	}
	if want := fake.CountTokens(r.Body); got.InputTokens != int64(want) || want < 10 {
		t.Errorf("input_tokens = %d, want %d", got.InputTokens, want)
	}
	if u.Pending() != 1 {
		t.Error("count_tokens took a script")
	}
	if n := fake.CountTokens([]byte(`{"system":"abcd","messages":[{"role":"user","content":"abcde"}]}`)); n != 4 {
		// "abcd" 4 + "user" 4 + "abcde" 5 = 13 runes → 4 tokens
		t.Errorf("CountTokens = %d, want 4", n)
	}
	// The output format's schema is billed as prompt, and counted.
	if n := fake.CountTokens([]byte(`{"messages":[],"output_format":{"schema":{"description":"abcdefgh"}},"output_config":{"format":{"schema":{"title":"abcdefgh"}}},"model":"not counted"}`)); n != 4 {
		// "abcdefgh" 8 + "abcdefgh" 8 = 16 runes → 4 tokens; the model is not counted
		t.Errorf("CountTokens = %d, want 4", n)
	}
}

// ---------- shared machinery ----------

func TestQueueDefaultAndConcurrentRecording(t *testing.T) {
	u := fake.NewOpenAI()
	defer u.Close()
	u.Default = fake.Script{Text: "default"}
	u.Push(fake.Script{Text: "first"}, fake.Script{Text: "second"})
	client := openAIClient(u)
	for _, want := range []string{"first", "second", "default", "default"} {
		got, err := client.Chat.Completions.New(t.Context(), chatParams("m"))
		if err != nil || got.Choices[0].Message.Content != want {
			t.Fatalf("got %+v, %v; want %q", got, err, want)
		}
	}

	u.Reset()
	const n = 16
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := chatParams(fmt.Sprintf("m-%d", i))
			if got, err := client.Chat.Completions.New(t.Context(), p); err != nil || got.Model != p.Model {
				t.Errorf("request %d: %v", i, err)
			}
			_ = u.Requests()
		}()
	}
	wg.Wait()
	reqs := u.Requests()
	if len(reqs) != n {
		t.Fatalf("%d requests recorded, want %d", len(reqs), n)
	}
	seen := map[any]bool{}
	for _, r := range reqs {
		seen[r.JSON()["model"]] = true
	}
	if len(seen) != n {
		t.Errorf("bodies recorded: %v", seen)
	}
	// Requests returns copies.
	reqs[0].Body[0] = 'X'
	reqs[0].Header.Set("Authorization", "changed")
	if again := u.Requests()[0]; again.Body[0] == 'X' || again.Header.Get("Authorization") == "changed" {
		t.Error("Requests shares memory with the recorder")
	}
}

func TestDelayAndCloseWhileGated(t *testing.T) {
	u := fake.NewOpenAI()
	u.Push(fake.Script{Text: "late", Delay: time.Minute})
	client := openAIClient(u)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := client.Chat.Completions.New(ctx, chatParams("m")); err == nil {
		t.Error("a delayed answer beat the client's time-out")
	}

	gate := make(chan struct{}) // never closed
	u.Push(fake.Script{Text: "held forever", Gate: gate})
	stream := client.Chat.Completions.NewStreaming(t.Context(), chatParams("m"))
	for stream.Next() {
		if c := stream.Current(); len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
			break
		}
	}
	done := make(chan struct{})
	go func() {
		u.Close() // must not hang on the gated handler
		close(done)
	}()
	for stream.Next() {
	}
	<-done
	if stream.Err() == nil {
		t.Error("the stream of a closed upstream ended cleanly")
	}
}

func TestSplitPieces(t *testing.T) {
	u := fake.NewOpenAI()
	defer u.Close()
	u.Push(
		fake.Script{Text: "héllo wörld ✓", Chunks: 3},
		fake.Script{Text: "ab", Chunks: 3},
		fake.Script{Text: "abcdefgh"}, // default 3
	)
	for _, want := range []struct {
		text   string
		pieces int
	}{{"héllo wörld ✓", 3}, {"ab", 2}, {"abcdefgh", 3}} {
		_, body := post(t, u.URL+"/chat/completions", openAIHeaders(),
			`{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`)
		var got []string
		for _, e := range parseSSE(t, body) {
			if e.Data == "[DONE]" {
				continue
			}
			ch := decode(t, e.Data)["choices"].([]any)[0].(map[string]any)
			if c, _ := ch["delta"].(map[string]any)["content"].(string); c != "" {
				got = append(got, c)
			}
		}
		if strings.Join(got, "") != want.text || len(got) != want.pieces {
			t.Errorf("pieces of %q = %q, want %d", want.text, got, want.pieces)
		}
	}
}

// TestChoose: a script Choose picks from the body answers its request
// ahead of the queue; a body it declines takes the queue, then Default.
func TestChoose(t *testing.T) {
	for _, up := range []*fake.Upstream{fake.NewOpenAI(), fake.NewAnthropic()} {
		defer up.Close()
		up.Choose = func(body []byte) (fake.Script, bool) {
			if bytes.Contains(body, []byte("tagged")) {
				return fake.Script{Text: "chosen", Usage: fake.Usage{Input: 3, Output: 4}}, true
			}
			return fake.Script{}, false
		}
		up.Push(fake.Script{Text: "queued", Usage: fake.Usage{Input: 1, Output: 1}})
		var texts []string
		for _, prompt := range []string{"tagged", "plain", "tagged", "plain"} {
			if strings.HasSuffix(up.URL, "/v1") {
				_, b := post(t, up.URL+"/chat/completions", openAIHeaders(),
					`{"model":"gpt-4o","messages":[{"role":"user","content":"`+prompt+`"}]}`)
				texts = append(texts, decode(t, string(b))["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)["content"].(string))
			} else {
				_, b := post(t, up.URL+"/v1/messages", anthropicHeaders(),
					`{"model":"claude-sonnet-4-5","max_tokens":10,"messages":[{"role":"user","content":"`+prompt+`"}]}`)
				texts = append(texts, decode(t, string(b))["content"].([]any)[0].(map[string]any)["text"].(string))
			}
		}
		want := []string{"chosen", "queued", "chosen", fake.DefaultScript().Text}
		if strings.Join(texts, "|") != strings.Join(want, "|") {
			t.Errorf("%s: answers %q, want %q", up.URL, texts, want)
		}
	}
}

// The account errors reach the official SDKs exactly as the providers
// send them (openai-go's RawJSON is the error object).
func TestAccountErrors(t *testing.T) {
	oa := fake.NewOpenAI()
	defer oa.Close()
	for _, c := range []struct {
		s    fake.Script
		body string
	}{
		{fake.OpenAIInsufficientQuota(), `{"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}`},
		{fake.OpenAIBillingHardLimit(), `{"message":"Billing hard limit has been reached","type":"invalid_request_error","param":null,"code":"billing_hard_limit_reached"}`},
		{fake.OpenAIBillingNotActive(), `{"message":"Your account is not active, please check your billing details on our website.","type":"billing_not_active","param":null,"code":"billing_not_active"}`},
	} {
		oa.Push(c.s)
		client := openAIClient(oa)
		_, err := client.Chat.Completions.New(t.Context(), chatParams("gpt-4o"))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != c.s.Status || apiErr.RawJSON() != c.body {
			t.Errorf("%v: %s, want %d %s", err, apiErr.RawJSON(), c.s.Status, c.body)
		}
	}

	an := fake.NewAnthropic()
	defer an.Close()
	for _, c := range []struct {
		s           fake.Script
		status      int
		typ, prefix string
	}{
		{fake.AnthropicCreditTooLow(), 400, "invalid_request_error", "Your credit balance is too low to access the Anthropic API."},
		{fake.AnthropicUsageLimit(), 400, "invalid_request_error", "You have reached your specified API usage limits."},
		{fake.AnthropicBillingError(), 402, "billing_error", "There is an issue with your billing"},
	} {
		an.Push(c.s)
		client := anthropicClient(an)
		_, err := client.Messages.New(t.Context(), messageParams("claude"))
		var aerr *anthropic.Error
		if !errors.As(err, &aerr) || aerr.StatusCode != c.status || string(aerr.Type()) != c.typ ||
			!strings.Contains(aerr.RawJSON(), `"message":"`+c.prefix) {
			t.Errorf("%v: %s, want %d %s %q…", err, aerr.RawJSON(), c.status, c.typ, c.prefix)
		}
	}
	an.CountError = fake.AnthropicCreditTooLow()
	client := anthropicClient(an)
	_, err := client.Messages.CountTokens(t.Context(), anthropic.MessageCountTokensParams{Model: "claude",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	var aerr *anthropic.Error
	if !errors.As(err, &aerr) || aerr.StatusCode != 400 || !strings.Contains(aerr.RawJSON(), "credit balance is too low") {
		t.Errorf("count_tokens: %v", err)
	}
}

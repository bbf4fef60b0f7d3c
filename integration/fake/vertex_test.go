package fake_test

import (
	"os"
	"strings"
	"testing"

	"cloud.google.com/go/auth/credentials"
	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/anthropics/anthropic-sdk-go/vertex"
	"golang.org/x/oauth2/google"
	"google.golang.org/genai"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

const (
	vertexProject  = "fake-project"
	vertexLocation = "us-east5"
	cloudPlatform  = "https://www.googleapis.com/auth/cloud-platform"
)

// vertexGenAI is the official Gemini SDK on its Vertex AI backend,
// signed in with the key file u wrote and pointed at u.
func vertexGenAI(t *testing.T, u *fake.Upstream) *genai.Client {
	t.Helper()
	for _, v := range []string{"GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_VERTEX_BASE_URL", "GOOGLE_CLOUD_PROJECT",
		"GOOGLE_CLOUD_LOCATION", "GOOGLE_GENAI_USE_VERTEXAI", "GOOGLE_APPLICATION_CREDENTIALS"} {
		t.Setenv(v, "")
	}
	creds, err := credentials.NewCredentialsFromFile(credentials.ServiceAccount, u.KeyFile(t.TempDir()),
		&credentials.DetectOptions{Scopes: []string{cloudPlatform}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := genai.NewClient(t.Context(), &genai.ClientConfig{Backend: genai.BackendVertexAI,
		Project: vertexProject, Location: vertexLocation, Credentials: creds,
		HTTPOptions: genai.HTTPOptions{BaseURL: u.URL + "/"}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// vertexAnthropic is the official Anthropic SDK on Vertex AI, signed in
// with the key file u wrote and pointed at u.
func vertexAnthropic(t *testing.T, u *fake.Upstream) anthropic.Client {
	t.Helper()
	b, err := os.ReadFile(u.KeyFile(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	creds, err := google.CredentialsFromJSONWithType(t.Context(), b, google.ServiceAccount, cloudPlatform)
	if err != nil {
		t.Fatal(err)
	}
	return anthropic.NewClient(vertex.WithCredentials(t.Context(), vertexLocation, vertexProject, creds),
		aoption.WithBaseURL(u.URL), aoption.WithMaxRetries(0))
}

// checkVertexCalls asserts the fake issued one token, answered every
// model call and that each carried that token.
func checkVertexCalls(t *testing.T, u *fake.Upstream, paths ...string) []fake.Request {
	t.Helper()
	if u.Tokens() != 1 {
		t.Errorf("the fake issued %d tokens, want 1", u.Tokens())
	}
	var calls []fake.Request
	for _, r := range u.Requests() {
		if r.Path == "/token" {
			if r.Method != "POST" || r.Header.Get("Authorization") != "" {
				t.Errorf("token request %s with Authorization %q", r.Method, r.Header.Get("Authorization"))
			}
			continue
		}
		calls = append(calls, r)
	}
	if len(calls) != len(paths) {
		t.Fatalf("%d model calls, want %d", len(calls), len(paths))
	}
	for i, r := range calls {
		if r.Path != paths[i] || r.Header.Get("Authorization") != "Bearer ya29.fake-1" {
			t.Errorf("call %d: %s %s with Authorization %q", i, r.Method, r.Path, r.Header.Get("Authorization"))
		}
	}
	return calls
}

func TestVertexGenAISDK(t *testing.T) {
	u := fake.NewVertex()
	defer u.Close()
	u.Push(fake.Script{Text: "Checking.", ToolCalls: twoTools, Usage: fake.Usage{Input: 30, Output: 12}},
		fake.Script{Text: "Sunny in Paris.", Chunks: 3, Usage: fake.Usage{Input: 8, Output: 5}})
	c := vertexGenAI(t, u)

	resp, err := c.Models.GenerateContent(t.Context(), "gemini-2.5-flash", genai.Text("What is the weather in Paris?"), geminiConfig())
	if err != nil {
		t.Fatal(err)
	}
	calls := resp.FunctionCalls()
	if text := resp.Candidates[0].Content.Parts[0].Text; text != "Checking." || len(calls) != 2 || calls[0].Name != "get_weather" || calls[1].Args["note"] != "héllo ✓" {
		t.Errorf("text %q calls %+v", text, calls)
	}
	if um := resp.UsageMetadata; um.PromptTokenCount != 30 || um.CandidatesTokenCount != 12 {
		t.Errorf("usage %+v", um)
	}

	var text strings.Builder
	var chunks int
	var last *genai.GenerateContentResponse
	for resp, err := range c.Models.GenerateContentStream(t.Context(), "gemini-2.5-pro", genai.Text("hi"), nil) {
		if err != nil {
			t.Fatal(err)
		}
		chunks++
		text.WriteString(resp.Text())
		last = resp
	}
	if text.String() != "Sunny in Paris." || chunks < 3 || last.Candidates[0].FinishReason != genai.FinishReasonStop ||
		last.UsageMetadata.PromptTokenCount != 8 || last.UsageMetadata.CandidatesTokenCount != 5 {
		t.Errorf("stream: %d chunks, text %q, last %+v", chunks, text.String(), last)
	}

	count, err := c.Models.CountTokens(t.Context(), "gemini-2.5-flash", genai.Text("How many tokens are in this sentence?"), nil)
	if err != nil {
		t.Fatal(err)
	}
	base := "/v1beta1/projects/" + vertexProject + "/locations/" + vertexLocation + "/publishers/google/models/"
	reqs := checkVertexCalls(t, u, base+"gemini-2.5-flash:generateContent", base+"gemini-2.5-pro:streamGenerateContent",
		base+"gemini-2.5-flash:countTokens")
	if reqs[1].Query != "alt=sse" {
		t.Errorf("stream query %q", reqs[1].Query)
	}
	if count.TotalTokens != 11 || int(count.TotalTokens) != fake.GeminiCountTokens(reqs[2].Body) {
		t.Errorf("counted %d, the fake counts %d", count.TotalTokens, fake.GeminiCountTokens(reqs[2].Body))
	}
}

func TestVertexAnthropicSDK(t *testing.T) {
	u := fake.NewVertex()
	defer u.Close()
	u.Push(fake.Script{Text: "Let me check.", ToolCalls: twoTools, Usage: fake.Usage{Input: 21, Output: 9, CachedInput: 100}},
		fake.Script{Text: "Sunny in Paris.", Chunks: 4, Usage: fake.Usage{Input: 44, Output: 31}})
	client := vertexAnthropic(t, u)

	msg, err := client.Messages.New(t.Context(), messageParams("claude-sonnet-4-5@20250929"))
	if err != nil {
		t.Fatal(err)
	}
	if msg.Model != "claude-sonnet-4-5@20250929" || msg.StopReason != anthropic.StopReasonToolUse || len(msg.Content) != 3 ||
		msg.Content[0].Text != "Let me check." || msg.Content[1].Name != "get_weather" || msg.Content[2].ID != "call_time2" {
		t.Errorf("message %s", msg.RawJSON())
	}
	if msg.Usage.InputTokens != 21 || msg.Usage.OutputTokens != 9 || msg.Usage.CacheReadInputTokens != 100 {
		t.Errorf("usage %+v", msg.Usage)
	}

	stream := client.Messages.NewStreaming(t.Context(), messageParams("claude-haiku-4-5@20251001"))
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Model != "claude-haiku-4-5@20251001" || len(acc.Content) != 1 || acc.Content[0].Text != "Sunny in Paris." ||
		acc.StopReason != anthropic.StopReasonEndTurn || acc.Usage.InputTokens != 44 || acc.Usage.OutputTokens != 31 {
		t.Errorf("streamed message %s", acc.RawJSON())
	}

	base := "/v1/projects/" + vertexProject + "/locations/" + vertexLocation + "/publishers/anthropic/models/"
	reqs := checkVertexCalls(t, u, base+"claude-sonnet-4-5@20250929:rawPredict", base+"claude-haiku-4-5@20251001:streamRawPredict")
	for i, r := range reqs {
		body := r.JSON()
		if body["anthropic_version"] != vertex.DefaultVersion || body["model"] != nil || body["max_tokens"] != float64(256) {
			t.Errorf("call %d body %s", i, r.Body)
		}
	}
}

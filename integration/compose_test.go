package integration

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/tidwall/gjson"
	"golang.org/x/crypto/bcrypt"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// A site composed by hand from the family handlers and Caddy's own: chat
// and the model list for every key, the usage figures behind basic_auth
// too, a deferred header naming the account from a placeholder, and a
// file_server for everything else. Each family serves only its own paths;
// the others reach the file server, not the gateway.
func TestComposedFamilies(t *testing.T) {
	t.Parallel()
	const user, password = "finance", "ledger-books-7"
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfg := exampleSite(t, `	root * `+siteRoot(t, map[string]string{"index.html": "<p>home</p>"})+`
	header >X-Account {http.gw.account}
	handle /v1/usage {
		basic_auth {
			`+user+` `+string(hash)+`
		}
		gw_usage
	}
	handle {
		gw_chat
		gw_models
		file_server
	}`)
	const boot = "sk-bootstrap-compose-test-0123456789abcdef"
	g, oa := startWithFakesKey(t, cfg, boot)
	oa.SetDefault(fake.Script{Text: "composed", Usage: fake.Usage{Input: 10, Output: 2}})

	// Chat is served, and the deferred header reads the placeholder the
	// gateway set once it knew the key.
	var raw *http.Response
	client := openai.NewClient(option.WithBaseURL(g.BaseURL+"/v1"), option.WithAPIKey(boot), option.WithMaxRetries(0))
	resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "gw-pinned-gpt-4.1-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	}, option.WithResponseInto(&raw))
	if err != nil {
		t.Fatalf("chat: %v", err)
	}
	if got := resp.Choices[0].Message.Content; got != "composed" {
		t.Errorf("chat answered %q, want %q", got, "composed")
	}
	if got := raw.Header.Get("X-Account"); got != "default" {
		t.Errorf("X-Account %q, want the bootstrap account %q", got, "default")
	}
	if raw.Header.Get("X-Gw-Cost-Usd") == "" {
		t.Error("chat answer has no X-Gw-Cost-Usd")
	}
	// A refused key leaves the placeholder empty, never its name.
	r := g.do(t, http.MethodGet, "/v1/models", "", bearer("sk-unknown-0123456789abcdef0123456789")...)
	expectError(t, r, http.StatusUnauthorized, `{"error":{"message":"invalid API key","type":"authentication_error","param":null,"code":"invalid_api_key"}}`, "req-")
	if got, ok := r.Header["X-Account"]; !ok || len(got) != 1 || got[0] != "" {
		t.Errorf("X-Account on a refused key %q, want present and empty", got)
	}
	if r := g.do(t, http.MethodGet, "/v1/models", "", bearer(boot)...); r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"gw-auto"`) {
		t.Errorf("GET /v1/models: %d %s", r.Status, r.Body)
	}

	// The guard: the usage figures need the password as well as the key
	// (which then travels as x-api-key, Authorization holding the
	// password).
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
	for _, tc := range []struct {
		name   string
		header []string
		status int
		byGW   bool
	}{
		{"key alone", bearer(boot), http.StatusUnauthorized, false},
		{"password alone", []string{"Authorization", basic}, http.StatusUnauthorized, true},
		{"wrong password", append([]string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":nope"))}, apiKey(boot)...), http.StatusUnauthorized, false},
		{"password and key", append([]string{"Authorization", basic}, apiKey(boot)...), http.StatusOK, true},
	} {
		t.Run("usage "+tc.name, func(t *testing.T) {
			r := g.do(t, http.MethodGet, "/v1/usage", "", tc.header...)
			if r.Status != tc.status {
				t.Fatalf("GET /v1/usage: %d %s, want %d", r.Status, r.Body, tc.status)
			}
			if byGW := r.Header.Get("X-Gw-Request-Id") != ""; byGW != tc.byGW {
				t.Errorf("answered by the gateway: %v, want %v", byGW, tc.byGW)
			}
			if !tc.byGW && r.Header.Get("Www-Authenticate") == "" {
				t.Error("basic_auth's refusal has no WWW-Authenticate")
			}
		})
	}

	// The fallback: a family not mounted here, or a path no family serves,
	// reaches the file server; the gateway answers none of them.
	for _, tc := range []struct {
		method, path string
		status       int
		body         string
	}{
		{http.MethodPost, "/v1/embeddings", http.StatusNotFound, ""},
		{http.MethodPost, "/v1/images/generations", http.StatusNotFound, ""},
		{http.MethodPost, "/mcp", http.StatusNotFound, ""},
		{http.MethodGet, "/v1/unknown", http.StatusNotFound, ""},
		{http.MethodGet, "/index.html", http.StatusOK, "<p>home</p>"},
	} {
		r := g.do(t, tc.method, tc.path, `{}`, bearer(boot)...)
		if r.Status != tc.status || (tc.body != "" && string(r.Body) != tc.body) {
			t.Errorf("%s %s: %d %q, want %d %q", tc.method, tc.path, r.Status, r.Body, tc.status, tc.body)
		}
		if id := r.Header.Get("X-Gw-Request-Id"); id != "" {
			t.Errorf("%s %s: answered by the gateway (request id %s), want the file server", tc.method, tc.path, id)
		}
	}
	if n := len(oa.Requests()); n != 1 {
		t.Errorf("the provider saw %d requests, want the one chat call", n)
	}
}

// A site that compresses the gateway's answers with Caddy's encode: a
// whole answer long enough to compress arrives gzipped and whole (encode
// drops the length the gateway set, so the gateway does not flush it
// early), a short refusal arrives uncompressed with its length, and an SDK
// client reads both.
func TestEncodedAnswers(t *testing.T) {
	t.Parallel()
	cfg := exampleSite(t, "\tencode gzip\n\tgw")
	const boot = "sk-bootstrap-encode-test-0123456789abcdef"
	g, oa := startWithFakesKey(t, cfg, boot)
	long := strings.Repeat("A long answer that compresses well. ", 40)
	oa.SetDefault(fake.Script{Text: long, Usage: fake.Usage{Input: 10, Output: 400}})

	r := g.do(t, http.MethodPost, "/v1/chat/completions", `{"model":"gw-pinned-gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`,
		append(bearer(boot), "Accept-Encoding", "gzip")...)
	// The length the gateway set went with the compression; net/http sets
	// the compressed one itself, as it does for any answer it has whole.
	if cl := r.Header.Get("Content-Length"); r.Status != http.StatusOK || r.Header.Get("Content-Encoding") != "gzip" || cl != strconv.Itoa(len(r.Body)) {
		t.Fatalf("chat: %d, Content-Encoding %q, Content-Length %q for %d bytes; want 200, gzip and their length", r.Status,
			r.Header.Get("Content-Encoding"), cl, len(r.Body))
	}
	zr, err := gzip.NewReader(bytes.NewReader(r.Body))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("gzipped answer cut short: %v", err)
	}
	if got := gjson.GetBytes(plain, "choices.0.message.content").String(); got != long {
		t.Errorf("chat answered %q, want the long text", got)
	}

	r = g.do(t, http.MethodGet, "/v1/models", "", append(bearer("sk-unknown-0123456789abcdef0123456789"), "Accept-Encoding", "gzip")...)
	if r.Header.Get("Content-Encoding") != "" || r.Header.Get("Content-Length") != strconv.Itoa(len(r.Body)) {
		t.Errorf("refusal: Content-Encoding %q, Content-Length %q for %d bytes; want none and its length",
			r.Header.Get("Content-Encoding"), r.Header.Get("Content-Length"), len(r.Body))
	}
	expectError(t, r, http.StatusUnauthorized, `{"error":{"message":"invalid API key","type":"authentication_error","param":null,"code":"invalid_api_key"}}`, "req-")

	client := openai.NewClient(option.WithBaseURL(g.BaseURL+"/v1"), option.WithAPIKey(boot), option.WithMaxRetries(0))
	resp, err := client.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "gw-pinned-gpt-4.1-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	if err != nil || resp.Choices[0].Message.Content != long {
		t.Errorf("SDK chat behind encode: %v", err)
	}
}

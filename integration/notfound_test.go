package integration

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	aoption "github.com/anthropics/anthropic-sdk-go/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// Every path under the gateway's own prefixes that is not a route answers
// 404 in a JSON shape an SDK reads (messages shape for messages paths),
// naming the base address the client most likely meant; anything else on
// Caddyfile.example is a 404 too. Nothing answers an empty 200.
func TestNotFound(t *testing.T) {
	t.Parallel()
	const boot = "sk-bootstrap-notfound-test-0123456789abcdef"
	g := startGateway(t, gwOptions{BootstrapKey: boot})
	const (
		chat     = `{"error":{"message":"<string>","type":"not_found_error","param":null,"code":"not_found"}}`
		messages = `{"type":"error","error":{"type":"not_found_error","message":"<string>"}}`
	)
	for _, tc := range []struct {
		method, path, want, hint string
	}{
		{"POST", "/chat/completions", chat, g.BaseURL + "/v1 (it is missing /v1)"},
		{"POST", "/responses", chat, g.BaseURL + "/v1 (it is missing /v1)"},
		{"POST", "/v1/v1/chat/completions", chat, "/v1 is doubled; the base address is " + g.BaseURL + "/v1"},
		{"POST", "/embeddings", chat, g.BaseURL + "/v1 (it is missing /v1)"},
		{"POST", "/v1/embeddings/x", chat, "no route /v1/embeddings/x"},
		{"POST", "/completions", chat, "no route /completions"},
		{"POST", "/v1/completions", chat, "no route /v1/completions"},
		{"GET", "/v1", chat, "no route /v1"},
		{"POST", "/mcp-other", chat, "no route /mcp-other"},
		{"POST", "/mcp/x", chat, "no route /mcp/x"},
		{"POST", "/v1/messages", messages, "the messages-style base address is " + g.BaseURL + "/alt"},
		{"POST", "/messages", messages, "the messages-style base address is " + g.BaseURL + "/alt"},
		{"POST", "/v1/messages/count_tokens", messages, g.BaseURL + "/alt"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := g.do(t, tc.method, tc.path, `{}`, bearer(boot)...)
			expectError(t, r, http.StatusNotFound, tc.want, "req-")
			if !strings.Contains(string(r.Body), tc.hint) {
				t.Errorf("body %s does not say %q", r.Body, tc.hint)
			}
		})
	}
	for _, p := range []string{"/", "/favicon.ico", "/docs/index.html"} {
		if r := g.do(t, http.MethodGet, p, ""); r.Status != http.StatusNotFound || len(r.Body) == 0 {
			t.Errorf("GET %s: %d %q, want a 404 with a body", p, r.Status, r.Body)
		}
	}

	// What the SDKs report for a wrong base address.
	ctx := context.Background()
	oc := openai.NewClient(option.WithBaseURL(g.BaseURL), option.WithAPIKey(boot), option.WithMaxRetries(0))
	_, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gw-auto",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	var oerr *openai.Error
	if !errors.As(err, &oerr) || oerr.StatusCode != http.StatusNotFound || oerr.Code != "not_found" ||
		!strings.Contains(oerr.Message, "missing /v1") {
		t.Errorf("openai-go without /v1: %v", err)
	}
	ac := anthropic.NewClient(aoption.WithBaseURL(g.BaseURL), aoption.WithAPIKey(boot), aoption.WithMaxRetries(0))
	_, err = ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "gw-auto", MaxTokens: 8,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	var aerr *anthropic.Error
	if !errors.As(err, &aerr) || aerr.StatusCode != http.StatusNotFound || aerr.Type() != anthropic.ErrorTypeNotFoundError ||
		!strings.Contains(string(aerr.RawJSON()), "/alt") {
		t.Errorf("anthropic-sdk-go without /alt: %v", err)
	}
	ac = anthropic.NewClient(aoption.WithBaseURL(g.BaseURL+"/v1"), aoption.WithAPIKey(boot), aoption.WithMaxRetries(0))
	_, err = ac.Messages.New(ctx, anthropic.MessageNewParams{Model: "gw-auto", MaxTokens: 8,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	if !errors.As(err, &aerr) || aerr.StatusCode != http.StatusNotFound || aerr.Type() != anthropic.ErrorTypeNotFoundError {
		t.Errorf("anthropic-sdk-go on the /v1 base: %v", err)
	}
}

// Caddy's admin endpoint refuses a request carrying Sec-Fetch-Mode (Node's
// fetch, browsers) unless its Origin is one the endpoint allows: the
// README tells such clients to send Origin: http://<admin address>.
func TestAdminOriginForFetchClients(t *testing.T) {
	t.Parallel()
	g := startGateway(t, gwOptions{})
	body := []byte(`{"id":"from-node","plan":"free"}`)
	if r := g.adminDo(t, http.MethodPost, "/gw/accounts", body, "Sec-Fetch-Mode", "cors"); r.Status != http.StatusForbidden {
		t.Fatalf("without Origin: %d %s", r.Status, r.Body)
	}
	if r := g.adminDo(t, http.MethodPost, "/gw/accounts", body, "Sec-Fetch-Mode", "cors", "Origin", g.AdminURL); r.Status != http.StatusCreated {
		t.Fatalf("with Origin %s: %d %s", g.AdminURL, r.Status, r.Body)
	}
	if r := g.adminDo(t, http.MethodGet, "/gw/accounts/from-node", nil, "Sec-Fetch-Mode", "cors", "Origin", "http://localhost:3000"); r.Status != http.StatusForbidden {
		t.Fatalf("a page's own origin, not configured: %d %s", r.Status, r.Body)
	}
}

// The README's admin origins for a browser page: the page's origin is
// let in, and the admin address must be listed too, since the list
// replaces the default and is also the list of Host values accepted.
func TestAdminOriginsForBrowserPages(t *testing.T) {
	t.Parallel()
	const page = "http://localhost:3000"
	for _, tc := range []struct {
		name       string
		origins    string
		page, curl int // status from the page; without Origin (curl)
	}{
		// 404: the admin API's own answer for an unknown account.
		{"page and admin address", "{$GW_ADMIN} " + page, http.StatusNotFound, http.StatusNotFound},
		{"page only", page, http.StatusForbidden, http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := exampleCaddyfile(t)
			const admin = "\tadmin {$GW_ADMIN:localhost:2019}\n"
			if !strings.Contains(c, admin) {
				t.Fatal("Caddyfile.example has no admin line")
			}
			c = strings.Replace(c, admin, "\tadmin {$GW_ADMIN:localhost:2019} {\n\t\torigins "+tc.origins+"\n\t}\n", 1)
			g := startGateway(t, gwOptions{Caddyfile: c})
			if r := g.adminDo(t, http.MethodGet, "/gw/accounts/none", nil, "Sec-Fetch-Mode", "cors", "Origin", page); r.Status != tc.page {
				t.Errorf("from %s: %d %s, want %d", page, r.Status, r.Body, tc.page)
			}
			if r := g.adminDo(t, http.MethodGet, "/gw/accounts/none", nil); r.Status != tc.curl {
				t.Errorf("without Origin: %d %s, want %d", r.Status, r.Body, tc.curl)
			}
			if r := g.adminDo(t, http.MethodGet, "/gw/accounts/none", nil, "Sec-Fetch-Mode", "cors", "Origin", "http://elsewhere.example"); r.Status != http.StatusForbidden {
				t.Errorf("from another origin: %d %s", r.Status, r.Body)
			}
		})
	}
}

package integration

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/internal/pdfpages/pdftest"
)

// billedCase is a call whose provider bills more than its text (or its
// body's bytes) suggests: what it sends, where, and what the provider
// bills for it.
type billedCase struct {
	name, path, body string
	// up serves the call; model is the backing model it is priced at.
	up    *fake.Upstream
	model string
	// billed is what the provider reports; anthropic: in the messages
	// format.
	billed    tokenUsage
	anthropic bool
	// low is a balance that cannot pay for the call, enough one that can.
	low, enough string
}

// headers are the headers of tc's call with key: a bearer token, or a
// messages-style call's (structured outputs' beta among them).
func (tc billedCase) headers(key string) []string {
	if strings.HasPrefix(tc.path, "/alt") {
		return append(apiKey(key), "Anthropic-Version", "2023-06-01", "Anthropic-Beta", "structured-outputs-2025-11-13")
	}
	return bearer(key)
}

// expectNeverOverdrawn runs tc on a prepaid account holding tc.low, less
// than what the provider bills for the call: the call is refused (402
// credit_exhausted) before it reaches the provider (its count endpoint
// aside), the balance untouched. With tc.enough, the call is served,
// billed exactly the provider's figure, and the balance is what is left,
// never below zero.
func expectNeverOverdrawn(t *testing.T, e *chatEnv, tc billedCase) {
	t.Helper()
	low, enough := mustUSD(t, tc.low), mustUSD(t, tc.enough)
	cost := listCost(t, tc.model, tc.billed, false)
	if cost <= low || cost > enough {
		t.Fatalf("%s: the provider's %s must lie above %s and within %s", tc.name, cost, low, enough)
	}
	account := "members-" + strings.ReplaceAll(tc.name, " ", "-")
	key := e.account(t, account, map[string]any{"balance_usd": tc.low})
	e.reset()
	tc.up.Push(fake.Script{Text: "Done.", Usage: fakeUsage(tc.anthropic, tc.billed)})
	r := e.do(t, http.MethodPost, tc.path, tc.body, tc.headers(key)...)
	if _, left := e.accountMoney(t, account); mustUSD(t, left) < 0 || left != low.String() {
		t.Errorf("%s with %s: the balance is %s after status %d: the provider billed %s", tc.name, low, left, r.Status, cost)
	}
	if r.Status != http.StatusPaymentRequired || r.Header.Get("X-Gw-Hold-Reason") != "credit_exhausted" {
		t.Fatalf("%s with %s: status %d %.300s, want 402 credit_exhausted: the provider bills %s", tc.name, low, r.Status, r.Body, cost)
	}
	for _, q := range tc.up.Requests() {
		if !strings.HasSuffix(q.Path, "/count_tokens") {
			t.Errorf("%s: the refused call reached the provider at %s", tc.name, q.Path)
		}
	}

	e.adminJSON(t, http.MethodPatch, "/gw/accounts/"+account, map[string]any{"add_balance_usd": (enough - low).String()}, http.StatusOK)
	r = e.do(t, http.MethodPost, tc.path, tc.body, tc.headers(key)...)
	if r.Status != http.StatusOK {
		t.Fatalf("%s with %s: status %d %.300s, want 200", tc.name, enough, r.Status, r.Body)
	}
	_, left := e.accountMoney(t, account)
	if r.Header.Get("X-Gw-Cost-Usd") != cost.String() || left != (enough-cost).String() || mustUSD(t, left) < 0 {
		t.Errorf("%s: cost %s, balance %s; want the provider's %s and %s left", tc.name, r.Header.Get("X-Gw-Cost-Usd"), left, cost, enough-cost)
	}
	e.expectJournalOK(t)
}

// TestPromptMembersCounted: prompt members a provider bills are counted
// when the gateway tightens a reservation: a chat completion's legacy
// functions (a 60,000-token description), the output schema of a
// messages-style call to an OpenAI-style model (output_format, or
// output_config's format) counted locally, and the same schema sent to an
// Anthropic-style provider's count endpoint, which counts it. Each call is
// refused when the balance cannot cover it, instead of overdrawing the
// balance, and served within the balance when it can.
func TestPromptMembersCounted(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	long := strings.Repeat("word ", 60_000)
	longTokens := o200k(t, long)
	schema := `{"type":"json_schema","schema":{"type":"object","description":"` + long + `","properties":{"a":{"type":"string"}}}}`
	messages := func(model, member string) string {
		return `{"model":"` + model + `","max_tokens":200,"messages":[{"role":"user","content":"Fill it in."}],` + member + `}`
	}
	// What the Anthropic-style fake counts is what it bills.
	counted := func(body string) tokenUsage {
		return tokenUsage{Input: int64(fake.CountTokens([]byte(body))), Output: 5}
	}
	openaiBilled := tokenUsage{Input: longTokens + 40, Output: 5}
	for _, tc := range []billedCase{
		{name: "legacy functions", path: "/v1/chat/completions", up: e.OA, model: "gpt-4.1-mini", billed: openaiBilled,
			body: `{"model":"gw-pinned-gpt-4.1-mini","messages":[{"role":"user","content":"Call it."}],` +
				`"functions":[{"name":"lookup","description":"` + long + `","parameters":{"type":"object","properties":{}}}]}`,
			low: "0.0050", enough: "0.0300"},
		{name: "output_format to an openai model", path: "/alt/v1/messages", up: e.OA, model: "gpt-4.1-mini", billed: openaiBilled,
			body: messages("gw-pinned-gpt-4.1-mini", `"output_format":`+schema), low: "0.0050", enough: "0.0300"},
		{name: "output_config to an openai model", path: "/alt/v1/messages", up: e.OA, model: "gpt-4.1-mini", billed: openaiBilled,
			body: messages("gw-pinned-gpt-4.1-mini", `"output_config":{"format":`+schema+`}`), low: "0.0050", enough: "0.0300"},
		{name: "output_format counted by the provider", path: "/alt/v1/messages", up: e.AN, model: "claude-haiku-4-5", anthropic: true,
			body: messages("gw-pinned-claude-haiku-4-5", `"output_format":`+schema), low: "0.0050", enough: "0.1000"},
		{name: "output_config counted by the provider", path: "/alt/v1/messages", up: e.AN, model: "claude-haiku-4-5", anthropic: true,
			body: messages("gw-pinned-claude-haiku-4-5", `"output_config":{"format":`+schema+`}`), low: "0.0050", enough: "0.1000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.anthropic {
				tc.billed = counted(tc.body)
			}
			expectNeverOverdrawn(t, e, tc)
			if !tc.anthropic {
				return
			}
			asked := 0
			for _, q := range e.AN.Requests() {
				if strings.HasSuffix(q.Path, "/count_tokens") {
					asked++
					if !strings.Contains(string(q.Body), long[:1000]) {
						t.Errorf("the count endpoint was not sent the schema: %.300s", q.Body)
					}
				}
			}
			if asked == 0 {
				t.Error("the count endpoint was never asked")
			}
		})
	}
}

// TestDocumentsReservedByPages: an inline PDF (9 KB, 100 pages) is billed
// by its pages, not its bytes, in every format (a chat-completions file
// part, a responses input_file, a messages-style document): a balance
// that its bytes fit but its pages do not is refused, never overdrawn;
// one that covers its pages serves it, billed exactly what the provider
// reports.
func TestDocumentsReservedByPages(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	const pages = 100
	pdf := pdftest.Make(pages, pdftest.Options{Text: "Quarterly figures, page after page."})
	b64 := base64.StdEncoding.EncodeToString(pdf)
	// OpenAI bills each page's text and image (about 4,000 tokens on this
	// model), Anthropic about 2,400 a page.
	openaiBilled := tokenUsage{Input: pages*4000 + 50, Output: 5}
	anthropicBilled := tokenUsage{Input: pages*2400 + 50, Output: 5}
	for _, tc := range []billedCase{
		{name: "chat file part", path: "/v1/chat/completions", up: e.OA, model: "gpt-4.1-mini", billed: openaiBilled,
			body: `{"model":"gw-pinned-gpt-4.1-mini","messages":[{"role":"user","content":[{"type":"text","text":"Sum it up."},` +
				`{"type":"file","file":{"filename":"q.pdf","file_data":"data:application/pdf;base64,` + b64 + `"}}]}]}`,
			low: "0.0500", enough: "0.4000"},
		{name: "responses input_file", path: "/v1/responses", up: e.OA, model: "gpt-4.1-mini", billed: openaiBilled,
			body: `{"model":"gw-pinned-gpt-4.1-mini","input":[{"role":"user","content":[{"type":"input_text","text":"Sum it up."},` +
				`{"type":"input_file","filename":"q.pdf","file_data":"data:application/pdf;base64,` + b64 + `"}]}]}`,
			low: "0.0500", enough: "0.4000"},
		{name: "messages document", path: "/alt/v1/messages", up: e.AN, model: "claude-haiku-4-5", anthropic: true, billed: anthropicBilled,
			body: `{"model":"gw-pinned-claude-haiku-4-5","max_tokens":200,"messages":[{"role":"user","content":[` +
				`{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + b64 + `"}},{"type":"text","text":"Sum it up."}]}]}`,
			low: "0.0500", enough: "1.2000"},
	} {
		t.Run(tc.name, func(t *testing.T) { expectNeverOverdrawn(t, e, tc) })
	}
}

// TestUncountableDocumentsRefused: an inline PDF whose pages cannot be
// counted is a 400 naming the part (param, and the message's first
// words), in every format, before any upstream call; nothing is billed.
func TestUncountableDocumentsRefused(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	const account = "uncountable"
	key := e.account(t, account, nil)
	b64 := base64.StdEncoding.EncodeToString([]byte("%PDF-1.7\n1 0 obj <</Type/Catalog>> endobj\ntrailer <</Root 1 0 R>>\n%%EOF\n"))
	for _, tc := range []struct {
		name, path, body, at string
	}{
		{"chat file part", "/v1/chat/completions", `{"model":"gw-pinned-gpt-4.1-mini","messages":[{"role":"user","content":[{"type":"text","text":"Read."},` +
			`{"type":"file","file":{"file_data":"data:application/pdf;base64,` + b64 + `"}}]}]}`, "messages[0].content[1]"},
		{"responses input_file", "/v1/responses", `{"model":"gw-pinned-gpt-4.1-mini","input":[{"role":"user","content":[` +
			`{"type":"input_file","file_data":"data:application/pdf;base64,` + b64 + `"}]}]}`, "input[0].content[0]"},
		{"messages document", "/alt/v1/messages", `{"model":"gw-pinned-claude-haiku-4-5","max_tokens":50,"messages":[{"role":"user","content":[` +
			`{"type":"tool_result","tool_use_id":"t","content":[{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + b64 + `"}}]}]}]}`,
			"messages[0].content[0].content[0]"},
	} {
		hdr := bearer(key)
		if strings.HasPrefix(tc.path, "/alt") {
			hdr = append(apiKey(key), "Anthropic-Version", "2023-06-01")
		}
		r := e.do(t, http.MethodPost, tc.path, tc.body, hdr...)
		msg := gjson.GetBytes(r.Body, "error.message").String()
		typ := gjson.GetBytes(r.Body, "error.type").String()
		param := gjson.GetBytes(r.Body, "error.param").String()
		if strings.HasPrefix(tc.path, "/alt") {
			param = tc.at // the messages-style error has no param: its message names the part
		}
		if r.Status != http.StatusBadRequest || typ != "invalid_request_error" || param != tc.at ||
			!strings.HasPrefix(msg, tc.at+" is a PDF whose pages cannot be counted (no pages found)") {
			t.Errorf("%s: status %d %s, want a 400 naming %s", tc.name, r.Status, r.Body, tc.at)
		}
	}
	if n := len(e.OA.Requests()) + len(e.AN.Requests()); n != 0 {
		t.Errorf("the upstreams saw %d requests, want none", n)
	}
	if l := e.ledger(t, account); len(l) != 0 {
		t.Errorf("ledger %+v, want nothing billed", l)
	}
}

package integration

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tiktoken-go/tokenizer"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// o200k counts s with the o200k tokenizer, the gateway's own count.
func o200k(t testing.TB, s string) int64 {
	t.Helper()
	codec, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	n, err := codec.Count(s)
	if err != nil {
		t.Fatal(err)
	}
	return int64(n)
}

// usagePrompt is the one user message of the usage tests; the gateway
// counts it as 4 tokens for the message and its text with o200k.
const usagePrompt = "Tell me something true about the sea."

// usageBody is a request of format path (chat completions, responses or
// messages) for model with usagePrompt.
func usageBody(path, model string, stream bool) string {
	switch path {
	case "/v1/responses":
		return fmt.Sprintf(`{"model":%q,"stream":%t,"input":[{"role":"user","content":%q}]}`, model, stream, usagePrompt)
	case "/alt/v1/messages":
		return fmt.Sprintf(`{"model":%q,"stream":%t,"max_tokens":100,"messages":[{"role":"user","content":%q}]}`, model, stream, usagePrompt)
	}
	return fmt.Sprintf(`{"model":%q,"stream":%t,"messages":[{"role":"user","content":%q}]}`, model, stream, usagePrompt)
}

// TestAnswersWithoutUsageArePaid: an answer whose provider reports no usage
// is billed from the gateway's own count (the prompt as the client sent it,
// the output as delivered), streamed or not, in every client format and
// from both upstream formats: never at zero. The receipt, the stream's
// delivered text and the ledger agree.
func TestAnswersWithoutUsageArePaid(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	const answer = "The sea covers about seventy percent of the planet's surface."
	prompt := 4 + o200k(t, usagePrompt)
	output := o200k(t, answer)
	paths := []string{"/v1/chat/completions", "/v1/responses", "/alt/v1/messages"}
	for _, b := range backends {
		for _, path := range paths {
			for _, stream := range []bool{false, true} {
				name := fmt.Sprintf("%s%s/stream=%t", b.name, path, stream)
				t.Run(name, func(t *testing.T) {
					account := "nousage-" + strings.NewReplacer("/", "-", "=", "-").Replace(name)
					key := e.account(t, account, nil)
					e.fakeOf(b).Push(fake.Script{Text: answer, NoUsage: true})
					hdr := bearer(key)
					if strings.HasPrefix(path, "/alt") {
						hdr = append(apiKey(key), "Anthropic-Version", "2023-06-01")
					}
					res := e.do(t, http.MethodPost, path, usageBody(path, b.model, stream), hdr...)
					if res.Status != http.StatusOK {
						t.Fatalf("status %d: %s", res.Status, res.Body)
					}
					if !strings.Contains(deliveredText(res.Body), answer) {
						t.Fatalf("the answer was not delivered: %s", res.Body)
					}
					want := listCost(t, b.backing, tokenUsage{Input: prompt, Output: output}, false)
					if want == 0 {
						t.Fatal("the expected cost is zero")
					}
					if !stream && res.Header.Get("X-Gw-Cost-Usd") != want.String() {
						t.Errorf("X-Gw-Cost-Usd %q, want %s", res.Header.Get("X-Gw-Cost-Usd"), want)
					}
					// A stream's receipt: the usage block the gateway puts where
					// the provider sent none, with the cost.
					if m := streamCostRe.FindAllSubmatch(res.Body, -1); stream && (len(m) != 1 || string(m[0][1]) != want.String()) {
						t.Errorf("stream receipts %q, want one cost_usd of %s", m, want)
					}
					e.expectLedger(t, account, ledgerEntry{RequestID: res.Header.Get("X-Gw-Request-Id"), Model: b.backing,
						Units: prompt + output, Unit: "token", Cost: want.String()})
				})
			}
		}
	}
	if n := e.log.count("answer without usable usage"); n != len(backends)*len(paths)*2 {
		t.Errorf("%d answers without usage were logged, want %d", n, len(backends)*len(paths)*2)
	}
}

// streamCostRe finds the cost_usd of a stream's usage block.
var streamCostRe = regexp.MustCompile(`"cost_usd":"([0-9.]+)"`)

// deliveredText is the text of a whole answer or of a stream's text
// deltas, in any of the three formats.
func deliveredText(body []byte) string {
	if gjson.ValidBytes(body) {
		v := gjson.ParseBytes(body)
		return v.Get("choices.0.message.content").String() + v.Get("content.0.text").String() +
			v.Get("output.0.content.0.text").String()
	}
	var b strings.Builder
	for _, line := range strings.Split(string(body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || !gjson.Valid(data) {
			continue
		}
		v := gjson.Parse(data)
		switch v.Get("type").String() {
		case "content_block_delta":
			b.WriteString(v.Get("delta.text").String())
		case "response.output_text.delta":
			b.WriteString(v.Get("delta").String())
		default:
			b.WriteString(v.Get("choices.0.delta.content").String())
		}
	}
	return b.String()
}

// TestCutAnswersAreFailures: a non-streamed answer longer than the
// gateway's read limit is a failed call (502, nothing billed), never an
// answer cut where its usage would have come and billed at zero.
func TestCutAnswersAreFailures(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	const account = "cut-answer"
	key := e.account(t, account, map[string]any{"balance_usd": "5.00"})
	e.OA.Push(fake.Script{Text: strings.Repeat("a", 65<<20), Usage: fake.Usage{Input: 20, Output: 30}})
	res := e.do(t, http.MethodPost, "/v1/chat/completions", usageBody("/v1/chat/completions", openaiBackend.model, false), bearer(key)...)
	if res.Status != http.StatusBadGateway {
		t.Fatalf("status %d, want 502: %.300s", res.Status, res.Body)
	}
	if got := gjson.GetBytes(res.Body, "error.type").String(); got == "" {
		t.Errorf("no error in the chat family's shape: %.300s", res.Body)
	}
	if l := e.ledger(t, account); len(l) != 0 {
		t.Errorf("ledger %+v, want nothing billed", l)
	}
	if _, balance := e.accountMoney(t, account); balance != "5.00" {
		t.Errorf("balance %s, want 5.00", balance)
	}
}

// TestAnswerSizeBounded: a non-streamed request that asks for more
// answers and log-probabilities than an answer the gateway can read could
// hold is refused before any upstream call, naming the field.
func TestAnswerSizeBounded(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	key := e.account(t, "answer-size", nil)
	for _, tc := range []struct {
		body, param string
	}{
		{`{"model":"gw-pinned-gpt-4.1-mini","n":128,"logprobs":true,"top_logprobs":20,"messages":[{"role":"user","content":"hi"}]}`, "n"},
		{`{"model":"gw-pinned-gpt-4.1-mini","logprobs":true,"top_logprobs":20,"max_completion_tokens":400000,"messages":[{"role":"user","content":"hi"}]}`, "top_logprobs"},
		{`{"model":"gw-pinned-gpt-4.1-mini","max_completion_tokens":1000000,"n":8,"messages":[{"role":"user","content":"hi"}]}`, "n"},
	} {
		res := e.do(t, http.MethodPost, "/v1/chat/completions", tc.body, bearer(key)...)
		if res.Status != http.StatusBadRequest || gjson.GetBytes(res.Body, "error.param").String() != tc.param {
			t.Errorf("%s: status %d %s, want 400 naming %s", tc.body, res.Status, res.Body, tc.param)
		}
	}
	// Streamed, the same request is read a piece at a time: no bound.
	e.OA.Push(fake.Script{Text: "ok", Usage: fake.Usage{Input: 5, Output: 1}})
	res := e.do(t, http.MethodPost, "/v1/chat/completions",
		`{"model":"gw-pinned-gpt-4.1-mini","stream":true,"n":128,"logprobs":true,"top_logprobs":20,"messages":[{"role":"user","content":"hi"}]}`, bearer(key)...)
	if res.Status != http.StatusOK {
		t.Errorf("streamed: status %d %s, want 200", res.Status, res.Body)
	}
	if n := len(e.OA.Requests()); n != 1 {
		t.Errorf("the upstream saw %d requests, want only the streamed one", n)
	}
}

// TestEmptyAnswersAlike: an empty answer (no text, tool call or refusal)
// is the same failure whichever format the provider speaks: one empty text
// block from a messages-style provider is a 502 like an empty message from
// a chat-completions-style one, billed nothing.
func TestEmptyAnswersAlike(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			account := "empty-" + b.name
			key := e.account(t, account, nil)
			e.fakeOf(b).Push(fake.Script{EmptyBlock: true, Usage: fake.Usage{Input: 12, Output: 1}})
			res := e.do(t, http.MethodPost, "/v1/chat/completions", usageBody("/v1/chat/completions", b.model, false), bearer(key)...)
			if res.Status != http.StatusBadGateway {
				t.Errorf("status %d %s, want 502", res.Status, res.Body)
			}
			if l := e.ledger(t, account); len(l) != 0 {
				t.Errorf("ledger %+v, want nothing billed", l)
			}
		})
	}
}

// TestFetchedDocumentsRefused: content the provider fetches itself (a
// document or file by URL or file id) costs a few bytes of the body but a
// whole document upstream, which no reservation can bound: it is refused
// with a 400 naming the part, before any upstream call, nothing charged.
// Inline documents and images by URL (bounded per image) pass.
func TestFetchedDocumentsRefused(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	key := e.account(t, "fetched-docs", nil)
	msgs := func(part string) string {
		return `{"model":"gw-pinned-claude-sonnet-4-5","max_tokens":50,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yes"},{"role":"user","content":[{"type":"text","text":"read"},` + part + `]}]}`
	}
	for _, tc := range []struct {
		name, path, body, param, at string
	}{
		{"messages url document", "/alt/v1/messages", msgs(`{"type":"document","source":{"type":"url","url":"https://example.com/a.pdf"}}`), "messages", "messages[2].content[1]"},
		{"messages file document", "/alt/v1/messages", msgs(`{"type":"document","source":{"type":"file","file_id":"file_011"}}`), "messages", "messages[2].content[1]"},
		{"messages tool result document", "/alt/v1/messages",
			`{"model":"gw-pinned-claude-sonnet-4-5","max_tokens":50,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"document","source":{"type":"url","url":"https://example.com/a.pdf"}}]}]}]}`,
			"messages", "messages[0].content[0].content[0]"},
		{"chat file id", "/v1/chat/completions",
			`{"model":"gw-pinned-gpt-4.1-mini","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-abc"}}]}]}`, "messages", "messages[0].content[0]"},
		{"responses file url", "/v1/responses",
			`{"model":"gw-pinned-gpt-4.1-mini","input":[{"role":"user","content":[{"type":"input_text","text":"read"},{"type":"input_file","file_url":"https://example.com/a.pdf"}]}]}`, "input", "input[0].content[1]"},
		{"responses tool output file", "/v1/responses",
			`{"model":"gw-pinned-gpt-4.1-mini","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_file","file_url":"https://example.com/a.pdf"}]}]}`, "input", "input[0].output[0]"},
		{"responses file id", "/v1/responses",
			`{"model":"gw-pinned-gpt-4.1-mini","input":[{"role":"user","content":[{"type":"input_file","file_id":"file-abc"}]}]}`, "input", "input[0].content[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hdr := bearer(key)
			if strings.HasPrefix(tc.path, "/alt") {
				hdr = append(apiKey(key), "Anthropic-Version", "2023-06-01")
			}
			res := e.do(t, http.MethodPost, tc.path, tc.body, hdr...)
			msg := gjson.GetBytes(res.Body, "error.message").String()
			param := gjson.GetBytes(res.Body, "error.param").String()
			if strings.HasPrefix(tc.path, "/alt") {
				param = tc.param // the messages-style error shape has no param: the message names it
			}
			if res.Status != http.StatusBadRequest || param != tc.param || !strings.HasPrefix(msg, tc.at+" ") {
				t.Errorf("status %d %s, want 400 naming %s at %s", res.Status, res.Body, tc.param, tc.at)
			}
		})
	}
	if n := len(e.OA.Requests()) + len(e.AN.Requests()); n != 0 {
		t.Errorf("the upstreams saw %d requests, want none", n)
	}
	if l := e.ledger(t, "fetched-docs"); len(l) != 0 {
		t.Errorf("ledger %+v, want nothing billed", l)
	}
	// An inline document is body bytes, reserved for as they are.
	e.AN.Push(fake.Script{Text: "read it", Usage: fake.Usage{Input: 300, Output: 3}})
	res := e.do(t, http.MethodPost, "/alt/v1/messages",
		msgs(`{"type":"document","source":{"type":"text","media_type":"text/plain","data":"The sea is salty."}}`),
		append(apiKey(key), "Anthropic-Version", "2023-06-01")...)
	if res.Status != http.StatusOK {
		t.Errorf("inline document: status %d %s, want 200", res.Status, res.Body)
	}
}

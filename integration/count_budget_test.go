package integration

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// countPath is the count_tokens route of the messages-style prefix.
const countPath = "/alt/v1/messages/count_tokens"

// countBodyOf is a count_tokens body for model of exactly size bytes: one
// user message of prose.
func countBodyOf(t testing.TB, model string, size int) string {
	t.Helper()
	head, tail := `{"model":"`+model+`","messages":[{"role":"user","content":"`, `"}]}`
	text := strings.Repeat("the cat sat on the mat. ", size/24+1)[:size-len(head)-len(tail)]
	return head + text + tail
}

// expectCounted checks a count_tokens answer is 200 with a count.
func expectCounted(t testing.TB, r response, what string) {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("%s: %d %s", what, r.Status, r.Body)
	}
	matchJSON(t, r.Body, `{"input_tokens":"<number>"}`)
}

// expectCountRefused checks a count_tokens answer is the messages-style 429
// with a Retry-After of at least least and at most most seconds.
func expectCountRefused(t testing.TB, r response, least, most int, what string) {
	t.Helper()
	expectError(t, r, http.StatusTooManyRequests, `{"type":"error","error":{"type":"rate_limit_error","message":"<string>"}}`, "req-")
	if ra, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || ra < least || ra > most {
		t.Fatalf("%s: Retry-After %q, want %d to %d seconds", what, r.Header.Get("Retry-After"), least, most)
	}
}

// Counting tokens costs CPU by the byte and is not billed, so each key
// has a budget of count_tokens body bytes a minute: a key that has sent
// it is refused 429 with Retry-After (its bodies are not read as JSON),
// while another key of the same account, and a key of another account,
// count as before. A body larger than the whole budget is 413.
func TestCountTokensByteBudget(t *testing.T) {
	t.Parallel()
	// 60 KiB a minute: 1 KiB comes back each second.
	e := newChatEnv(t, withGW(t, "\t\tlimits {\n\t\t\tcount_tokens_bytes_per_minute 60KiB\n\t\t}"))
	keyA := e.account(t, "counter", nil)
	keyB, _ := e.createKey(t, "counter", map[string]any{"name": "second"})
	other := e.account(t, "other", nil)
	// gw-pinned-gpt-4.1-mini is counted by the gateway (its provider has
	// no count endpoint): the work the budget bounds.
	body := countBodyOf(t, openaiBackend.model, 20<<10)
	for i := range 3 {
		expectCounted(t, e.do(t, http.MethodPost, countPath, body, apiKey(keyA)...), "key A, body "+strconv.Itoa(i+1))
	}
	// 60 KiB sent: 20 KiB more is 20 s away, less what came back since.
	expectCountRefused(t, e.do(t, http.MethodPost, countPath, body, apiKey(keyA)...), 15, 20, "key A past its budget")
	malformed := "{" + strings.Repeat(" ", 20<<10-1)
	expectCountRefused(t, e.do(t, http.MethodPost, countPath, malformed, apiKey(keyA)...), 15, 20, "key A, a malformed body past its budget")
	expectCounted(t, e.do(t, http.MethodPost, countPath, body, bearer(keyB)...), "key B of the same account")
	expectCounted(t, e.do(t, http.MethodPost, countPath, body, apiKey(other)...), "a key of another account")

	r := e.do(t, http.MethodPost, countPath, countBodyOf(t, openaiBackend.model, 60<<10+1), apiKey(other)...)
	expectError(t, r, http.StatusRequestEntityTooLarge, `{"type":"error","error":{"type":"request_too_large","message":"<string>"}}`, "req-")
	expectCounted(t, e.do(t, http.MethodPost, countPath, countBodyOf(t, openaiBackend.model, 40<<10), apiKey(other)...), "another account's last 40 KiB")
}

// By default a key may send 64 MiB of count_tokens bodies a minute: two
// bodies of the largest size (32 MiB) pass, a third is refused 429 for
// about the 30 s the budget takes to give 32 MiB back, and another key is
// not affected.
func TestCountTokensByteBudgetDefault(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	keyA := e.account(t, "big-counter", nil)
	keyB, _ := e.createKey(t, "big-counter", map[string]any{"name": "second"})
	// Counted by the fake provider, so the test spends no tokenizer time:
	// the budget is taken before the body is routed.
	body := countBodyOf(t, anthropicBackend.model, 32<<20)
	for i := range 2 {
		expectCounted(t, e.do(t, http.MethodPost, countPath, body, apiKey(keyA)...), "32 MiB body "+strconv.Itoa(i+1))
	}
	expectCountRefused(t, e.do(t, http.MethodPost, countPath, body, apiKey(keyA)...), 20, 30, "a third 32 MiB body")
	expectCounted(t, e.do(t, http.MethodPost, countPath, body, apiKey(keyB)...), "another key")
}

package integration

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// minOutputTokens mirrors the gateway's floor of a lowered output limit.
const minOutputTokens = 64

// TestBalanceSpentToLastCent: a prepaid balance worth three small calls
// buys three, though the worst case of one (a 4,096-token answer) is
// forty times the balance: the gateway counts the prompt, lowers the
// output limit it sets itself to what is left, announces it in
// X-Gw-Output-Limit and sends it upstream. The fourth call, with less
// left than the smallest useful call, is refused; the balance ends at
// what is left, never below zero. A limit the client set is never
// lowered: 402 when it does not fit, served as it is when it does.
func TestBalanceSpentToLastCent(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	use := tokenUsage{Input: 30, Output: 90}
	call := listCost(t, "gpt-4.1-mini", use, false)
	const slack = 10_000 // nano-dollars: less than the smallest useful call
	balance := 3*call + slack
	const account = "last-cent"
	key := e.account(t, account, map[string]any{"balance_usd": balance.String()})
	body := `{"model":"gw-pinned-gpt-4.1-mini","messages":[{"role":"user","content":"Name one fish."}]}`

	for i := range 3 {
		e.reset()
		e.OA.Push(fake.Script{Text: "A cod.", Usage: fakeUsage(false, use), CapOutput: true})
		r := e.do(t, http.MethodPost, "/v1/chat/completions", body, bearer(key)...)
		if r.Status != http.StatusOK {
			t.Fatalf("call %d: status %d %s", i+1, r.Status, r.Body)
		}
		limit, err := strconv.Atoi(r.Header.Get("X-Gw-Output-Limit"))
		if err != nil || limit < minOutputTokens || limit >= 4096 {
			t.Fatalf("call %d: X-Gw-Output-Limit %q, want a lowered limit", i+1, r.Header.Get("X-Gw-Output-Limit"))
		}
		if sent := e.OA.Requests()[0].JSON()["max_completion_tokens"]; sent != float64(limit) {
			t.Errorf("call %d: the upstream was sent max_completion_tokens %v, want %d", i+1, sent, limit)
		}
		if r.Header.Get("X-Gw-Cost-Usd") != call.String() {
			t.Errorf("call %d: cost %s, want %s", i+1, r.Header.Get("X-Gw-Cost-Usd"), call)
		}
	}
	e.reset()
	r := e.do(t, http.MethodPost, "/v1/chat/completions", body, bearer(key)...)
	if r.Status != http.StatusPaymentRequired || r.Header.Get("X-Gw-Hold-Reason") != "credit_exhausted" {
		t.Fatalf("fourth call: status %d %v %s, want 402 credit_exhausted", r.Status, r.Header, r.Body)
	}
	if n := len(e.OA.Requests()); n != 0 {
		t.Errorf("the refused call reached the upstream (%d requests)", n)
	}
	if _, left := e.accountMoney(t, account); left != pricing.Money(slack).String() {
		t.Errorf("balance %s, want %s", left, pricing.Money(slack))
	}

	// A client's own limit is never lowered.
	key2 := e.account(t, "last-cent-set", map[string]any{"balance_usd": balance.String()})
	r = e.do(t, http.MethodPost, "/v1/chat/completions",
		`{"model":"gw-pinned-gpt-4.1-mini","max_completion_tokens":4096,"messages":[{"role":"user","content":"Name one fish."}]}`, bearer(key2)...)
	if r.Status != http.StatusPaymentRequired || len(e.OA.Requests()) != 0 {
		t.Fatalf("a client's limit that does not fit: status %d %s, want 402 and no upstream call", r.Status, r.Body)
	}
	e.OA.Push(fake.Script{Text: "A cod.", Usage: fakeUsage(false, use), CapOutput: true})
	r = e.do(t, http.MethodPost, "/v1/chat/completions",
		`{"model":"gw-pinned-gpt-4.1-mini","max_completion_tokens":100,"messages":[{"role":"user","content":"Name one fish."}]}`, bearer(key2)...)
	if r.Status != http.StatusOK || r.Header.Get("X-Gw-Output-Limit") != "" {
		t.Fatalf("a client's limit that fits: status %d %v %s, want 200 without X-Gw-Output-Limit", r.Status, r.Header, r.Body)
	}
	if sent := e.OA.Requests()[0].JSON()["max_completion_tokens"]; sent != float64(100) {
		t.Errorf("the client's limit was sent as %v, want 100", sent)
	}
	e.expectJournalOK(t)
}

// TestFreeAllowanceSpentToLastCent: a free account sending large prompts
// to a messages-style model spends its 1 USD of chat to within one small
// call, never past it: the prompt is counted by the provider's free count
// endpoint (here a quarter of its bytes, where the worst case assumes a
// token a byte at the cache-write price), and the last calls' output is
// lowered to what is left. Streams and whole answers alike.
func TestFreeAllowanceSpentToLastCent(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	const account = "free-last-cent"
	key := e.account(t, account, map[string]any{"plan": "free", "cleared": false})
	prompt := strings.Repeat("the sea is deep ", 1500) // 24,000 bytes
	body := func(stream bool) string {
		return `{"model":"gw-pinned-claude-haiku-4-5","stream":` + strconv.FormatBool(stream) +
			`,"messages":[{"role":"user","content":"` + prompt + `"}]}`
	}
	// Each call: the counted prompt, 700 tokens of answer (fewer when the
	// lowered limit stops it).
	counted := int64(fake.CountTokens([]byte(`{"messages":[{"role":"user","content":"` + prompt + `"}]}`)))
	var spent pricing.Money
	lowered := 0
	for i := 0; ; i++ {
		if i == 400 {
			t.Fatal("the free allowance was never used up")
		}
		e.reset()
		e.AN.Push(fake.Script{Text: "It is.", Usage: fake.Usage{Input: int(counted), Output: 700}, CapOutput: true})
		r := e.do(t, http.MethodPost, "/v1/chat/completions", body(i%2 == 1), bearer(key)...)
		if r.Status == http.StatusPaymentRequired {
			if r.Header.Get("X-Gw-Hold-Reason") != "credit_exhausted" {
				t.Fatalf("refusal %v %s, want credit_exhausted", r.Header, r.Body)
			}
			break
		}
		if r.Status != http.StatusOK {
			t.Fatalf("call %d: status %d %s", i+1, r.Status, r.Body)
		}
		if r.Header.Get("X-Gw-Output-Limit") != "" {
			lowered++
		}
	}
	spent, _ = e.accountMoney(t, account)
	smallest := listCost(t, "claude-haiku-4-5", tokenUsage{Input: counted, Output: minOutputTokens}, false)
	if spent > pricing.USD(1) || pricing.USD(1)-spent >= smallest {
		t.Errorf("spent %s of the free 1.00: want within one smallest call (%s) of it, never past it", spent, smallest)
	}
	if lowered == 0 {
		t.Error("no call had its output limit lowered")
	}
	// Every call's prompt was counted by the provider's endpoint once the
	// worst case no longer fitted.
	e.expectJournalOK(t)
}

// TestLastCentConcurrent: calls racing for the last of a balance never
// take it below zero, and each one served is billed what it reported.
func TestLastCentConcurrent(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	use := tokenUsage{Input: 30, Output: 90}
	call := listCost(t, "gpt-4.1-mini", use, false)
	balance := 4*call + 10_000
	const account = "last-cent-race"
	key := e.account(t, account, map[string]any{"balance_usd": balance.String()})
	const n = 12
	e.OA.SetDefault(fake.Script{Text: "A cod.", Usage: fakeUsage(false, use), CapOutput: true})
	var wg sync.WaitGroup
	codes := make([]int, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.do(t, http.MethodPost, "/v1/chat/completions",
				`{"model":"gw-pinned-gpt-4.1-mini","messages":[{"role":"user","content":"Name one fish."}]}`, bearer(key)...)
			codes[i] = r.Status
		}()
	}
	wg.Wait()
	served := 0
	for _, c := range codes {
		switch c {
		case http.StatusOK:
			served++
		case http.StatusPaymentRequired:
		default:
			t.Errorf("status %d, want 200 or 402", c)
		}
	}
	if served == 0 {
		t.Fatal("no call was served")
	}
	spent, left := e.accountMoney(t, account)
	if mustUSD(t, left) < 0 || spent+mustUSD(t, left) != balance {
		t.Errorf("spent %s, left %s of %s: want no overdraft and the two adding up", spent, left, balance)
	}
	for _, l := range e.ledger(t, account) {
		if c := mustUSD(t, l.Cost); c <= 0 || c > call {
			t.Errorf("ledger entry %+v: cost outside (0, %s]", l, call)
		}
	}
	e.expectJournalOK(t)
}

// expectJournalOK checks GET /gw/journal/check.
func (g *gateway) expectJournalOK(t testing.TB) {
	t.Helper()
	r := g.adminJSON(t, http.MethodGet, "/gw/journal/check", nil, http.StatusOK)
	if !gjson.GetBytes(r.Body, "ok").Bool() {
		t.Errorf("journal check: %s", r.Body)
	}
}

// TestTightenedCallsKeepTheirShape: on the tightening path a request
// keeps the limit fields it had: a chat client's own max_tokens is sent as
// it is (never joined by a max_completion_tokens, which providers refuse
// beside it) and announces nothing; a responses client with no limit gets
// its lowered limit as max_output_tokens.
func TestTightenedCallsKeepTheirShape(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	use := tokenUsage{Input: 30, Output: 90}
	call := listCost(t, "gpt-4.1-mini", use, false)
	key := e.account(t, "shape-legacy", map[string]any{"balance_usd": (3 * call).String()})
	e.OA.Push(fake.Script{Text: "A cod.", Usage: fakeUsage(false, use), CapOutput: true})
	r := e.do(t, http.MethodPost, "/v1/chat/completions",
		`{"model":"gw-pinned-gpt-4.1-mini","max_tokens":100,"messages":[{"role":"user","content":"Name one fish."}]}`, bearer(key)...)
	if r.Status != http.StatusOK || r.Header.Get("X-Gw-Output-Limit") != "" {
		t.Fatalf("a client's max_tokens: %d %v %s, want 200 without X-Gw-Output-Limit", r.Status, r.Header, r.Body)
	}
	sent := e.OA.Requests()[0].JSON()
	if _, both := sent["max_completion_tokens"]; both || sent["max_tokens"] != float64(100) {
		t.Errorf("sent max_tokens %v max_completion_tokens %v, want the client's max_tokens alone", sent["max_tokens"], sent["max_completion_tokens"])
	}

	e.reset()
	key = e.account(t, "shape-responses", map[string]any{"balance_usd": (3 * call).String()})
	e.OA.Push(fake.Script{Text: "A cod.", Usage: fakeUsage(false, use), CapOutput: true})
	r = e.do(t, http.MethodPost, "/v1/responses", `{"model":"gw-pinned-gpt-4.1-mini","input":"Name one fish."}`, bearer(key)...)
	limit, err := strconv.Atoi(r.Header.Get("X-Gw-Output-Limit"))
	if r.Status != http.StatusOK || err != nil || limit < minOutputTokens {
		t.Fatalf("responses: %d %v %s, want 200 with a lowered limit", r.Status, r.Header, r.Body)
	}
	if got := e.OA.Requests()[0].JSON()["max_output_tokens"]; got != float64(limit) {
		t.Errorf("responses: sent max_output_tokens %v, want %d", got, limit)
	}
}

// TestTightenedPromptCountsEverything: the prompt count of a tightened
// reservation bounds what the provider bills, tool calls and tool results
// included: a call whose prompt is mostly a large tool result is refused
// when the balance cannot cover that prompt, instead of being reserved at
// its text and drawing the balance below zero.
func TestTightenedPromptCountsEverything(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	result := strings.Repeat("row 17, value 42; ", 4000) // about 28,000 tokens
	body := `{"model":"gw-pinned-gpt-4.1-mini","input":[{"role":"user","content":"Sum it."},` +
		`{"type":"function_call","call_id":"c1","name":"rows","arguments":"{}"},` +
		`{"type":"function_call_output","call_id":"c1","output":"` + result + `"}]}`
	resultTokens := o200k(t, result)
	// Enough for the text of the prompt and a short answer, not for the
	// tool result.
	balance := listCost(t, "gpt-4.1-mini", tokenUsage{Input: resultTokens / 2, Output: 200}, false)
	const account = "tool-result"
	key := e.account(t, account, map[string]any{"balance_usd": balance.String()})
	e.OA.Push(fake.Script{Text: "Lots.", Usage: fake.Usage{Input: int(resultTokens) + 20, Output: 3}, CapOutput: true})
	r := e.do(t, http.MethodPost, "/v1/responses", body, bearer(key)...)
	if r.Status != http.StatusPaymentRequired {
		t.Fatalf("status %d %s, want 402: the tool result does not fit", r.Status, r.Body)
	}
	if _, left := e.accountMoney(t, account); left != balance.String() {
		t.Errorf("balance %s, want %s", left, balance)
	}
	// With the money for it, the same call is served, and the balance
	// stays at or above zero.
	e.adminJSON(t, http.MethodPatch, "/gw/accounts/"+account, map[string]any{"add_balance_usd": balance.String()}, http.StatusOK)
	r = e.do(t, http.MethodPost, "/v1/responses", body, bearer(key)...)
	if r.Status != http.StatusOK {
		t.Fatalf("with twice the balance: %d %s", r.Status, r.Body)
	}
	if _, left := e.accountMoney(t, account); mustUSD(t, left) < 0 {
		t.Errorf("balance %s went below zero", left)
	}
	e.expectJournalOK(t)
}

// TestTightenedCountWithoutTheCountEndpoint: when a messages-style
// provider's count endpoint fails (here overloaded), the tightened
// reservation counts the prompt itself and the call is served: a
// count that cannot be had is never a money refusal.
func TestTightenedCountWithoutTheCountEndpoint(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	e.AN.CountStatus = 529
	use := tokenUsage{Input: 30, Output: 90}
	call := listCost(t, "claude-haiku-4-5", use, false)
	key := e.account(t, "count-down", map[string]any{"balance_usd": (3 * call).String()})
	e.AN.Push(fake.Script{Text: "A cod.", Usage: fakeUsage(true, use), CapOutput: true})
	r := e.do(t, http.MethodPost, "/v1/chat/completions",
		`{"model":"gw-pinned-claude-haiku-4-5","messages":[{"role":"user","content":"Name one fish."}]}`, bearer(key)...)
	limit, err := strconv.Atoi(r.Header.Get("X-Gw-Output-Limit"))
	if r.Status != http.StatusOK || err != nil || limit < minOutputTokens {
		t.Fatalf("status %d %v %s, want 200 with a lowered limit", r.Status, r.Header, r.Body)
	}
	counted := 0
	for _, q := range e.AN.Requests() {
		if strings.HasSuffix(q.Path, "/count_tokens") {
			counted++
		}
	}
	if counted != 1 {
		t.Errorf("the count endpoint was asked %d times, want once", counted)
	}
}

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

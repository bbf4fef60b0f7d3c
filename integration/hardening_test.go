package integration

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// withGW returns Caddyfile.example with lines added to its gw block.
func withGW(t testing.TB, lines string) string {
	t.Helper()
	c := exampleCaddyfile(t)
	if !strings.Contains(c, "\tgw {\n") {
		t.Fatal("Caddyfile.example has no gw block")
	}
	return strings.Replace(c, "\tgw {\n", "\tgw {\n"+lines+"\n", 1)
}

// n multiplies the reservation: against a small prepaid balance, a call
// asking for several answers has its output limit lowered so that all of
// them fit, and many concurrent calls never take the balance below zero;
// what was charged is exactly the ledger.
func TestAnswersAgainstSmallBalance(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	const account = "small"
	key := e.account(t, account, map[string]any{"balance_usd": "0.015"})
	e.OA.SetDefault(fake.Script{Text: "ok", Usage: fake.Usage{Input: 20, Output: 4000}, CapOutput: true})
	body := `{"model":"gw-pinned-gpt-4.1-mini","n":3,"messages":[{"role":"user","content":"hi"}]}`
	// The worst case of n=3 is 3 × 4,096 output tokens: more than 0.015
	// USD. The limit is lowered so that three answers fit.
	r := e.do(t, http.MethodPost, "/v1/chat/completions", body, bearer(key)...)
	limit, err := strconv.Atoi(r.Header.Get("X-Gw-Output-Limit"))
	perOut := pricing.Cost(false, pricing.Line{Units: 1, Rate: pricing.PerMillion(mustUSD(t, listPrices["gpt-4.1-mini"][1]))})
	if r.Status != http.StatusOK || err != nil || 3*pricing.Money(limit)*perOut > mustUSD(t, "0.015") || limit >= 4096 {
		t.Fatalf("n=3 against 0.015 USD: %d %v %s", r.Status, r.Header, r.Body)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := e.do(t, http.MethodPost, "/v1/chat/completions", strings.Replace(body, `"n":3`, `"n":1`, 1), bearer(key)...)
			if r.Status == http.StatusOK {
				mu.Lock()
				ok++
				mu.Unlock()
			} else if r.Status != http.StatusPaymentRequired {
				t.Errorf("status %d: %s", r.Status, r.Body)
			}
		}()
	}
	wg.Wait()
	acc := e.getAccount(t, account)
	balance := mustUSD(t, acc["balance_usd"].(string))
	if balance < 0 {
		t.Fatalf("balance %v went below zero", balance)
	}
	var spent pricing.Money
	for _, c := range ledgerOf(t, e.gateway, account) {
		spent += c
	}
	if spent+balance != mustUSD(t, "0.015") || ok == 0 {
		t.Fatalf("%d calls served, %v spent, balance %v", ok, spent, balance)
	}
}

// The per-account bound on billed calls in flight: one more is 429 with
// Retry-After until one finishes; other accounts are not affected.
func TestMaxInFlight(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, withGW(t, "\t\tlimits {\n\t\t\tmax_in_flight 2\n\t\t}"))
	key := e.account(t, "busy", nil)
	other := e.account(t, "other", nil)
	gate := make(chan struct{})
	e.OA.Push(fake.Script{Text: "a", Gate: gate}, fake.Script{Text: "b", Gate: gate})
	body := `{"model":"gw-pinned-gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if r := e.do(t, http.MethodPost, "/v1/chat/completions", body, bearer(key)...); r.Status != http.StatusOK {
				t.Errorf("held call: %d %s", r.Status, r.Body)
			}
		}()
	}
	waitRequests(t, e.OA, 2)
	r := e.do(t, http.MethodPost, "/v1/chat/completions", body, bearer(key)...)
	if r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") != "1" {
		t.Fatalf("third call in flight: %d %s", r.Status, r.Body)
	}
	e.OA.SetDefault(fake.Script{Text: "c"})
	if r := e.do(t, http.MethodPost, "/v1/chat/completions", body, bearer(other)...); r.Status != http.StatusOK {
		t.Fatalf("another account: %d %s", r.Status, r.Body)
	}
	close(gate)
	wg.Wait()
	if r := e.do(t, http.MethodPost, "/v1/chat/completions", body, bearer(key)...); r.Status != http.StatusOK {
		t.Fatalf("after the held calls: %d %s", r.Status, r.Body)
	}
}

// waitRequests waits until u has received n requests.
func waitRequests(t testing.TB, u *fake.Upstream, n int) {
	t.Helper()
	timeout := time.After(requestTimeout)
	for {
		got, next := u.Arrived()
		if got >= n {
			return
		}
		select {
		case <-next:
		case <-timeout:
			t.Fatalf("the upstream received %d requests, want %d", got, n)
		}
	}
}

// Escalation cannot be steered: a key limited to gw-fast is never served
// by a model of a stronger lane, and an empty answer its own stop
// sequences explain is served (and billed) rather than escalated.
func TestEscalationNotSteered(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	const account = "steer"
	e.account(t, account, nil)
	fastOnly, _ := e.createKey(t, account, map[string]any{"name": "fast", "models": []string{"gw-fast"}})
	body := `{"model":"gw-fast","messages":[{"role":"user","content":"hi"}]}`
	e.reset()
	e.OA.Push(fake.Script{Status: 500})
	r := e.do(t, http.MethodPost, "/v1/chat/completions", body, bearer(fastOnly)...)
	if r.Status != http.StatusBadGateway {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	var models []any
	for _, q := range append(e.OA.Requests(), e.AN.Requests()...) {
		models = append(models, q.JSON()["model"])
	}
	// The fast lane's model, and nothing of the stronger lanes.
	if fmt.Sprint(models) != "[gpt-4.1-nano]" {
		t.Fatalf("upstreams asked for %v", models)
	}

	e.reset()
	e.OA.Push(fake.Script{Text: "", Usage: fake.Usage{Input: 12, Output: 0}})
	key := e.account(t, "stops", nil)
	r = e.do(t, http.MethodPost, "/v1/chat/completions", `{"model":"gw-fast","stop":["Hello"],"messages":[{"role":"user","content":"hi"}]}`, bearer(key)...)
	if r.Status != http.StatusOK || r.Header.Get("X-Gw-Escalated") != "" {
		t.Fatalf("empty answer after its own stop sequence: %d %v %s", r.Status, r.Header, r.Body)
	}
	if n := len(e.OA.Requests()) + len(e.AN.Requests()); n != 1 {
		t.Fatalf("%d upstream requests, want 1", n)
	}
	if _, ok := ledgerOf(t, e.gateway, "stops")[r.Header.Get("X-Gw-Request-Id")]; !ok {
		t.Fatal("the empty answer was not billed")
	}
}

// Usage that cannot be right (below zero: a credit) fails the call: a
// whole answer is not served and billed nothing; a stream, whose answer
// was delivered, ends in an error event and is billed for what it
// delivered by the gateway's own count (never credited, never free).
func TestNegativeUsageIsAFailure(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	key := e.account(t, "negative", map[string]any{"balance_usd": "1.00"})
	e.OA.Push(fake.Script{Text: "credit me", Usage: fake.Usage{Input: 10, Output: -1_000_000}})
	r := e.do(t, http.MethodPost, "/v1/chat/completions", `{"model":"gw-pinned-gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`, bearer(key)...)
	if r.Status != http.StatusBadGateway {
		t.Fatalf("whole answer: %d %s", r.Status, r.Body)
	}
	e.expectNoCharge(t, "negative", "1.00")

	e.OA.Push(fake.Script{Text: "credit me", Usage: fake.Usage{Input: 10, Output: -1_000_000}})
	r = e.do(t, http.MethodPost, "/v1/chat/completions", `{"model":"gw-pinned-gpt-4.1-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`, bearer(key)...)
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"error"`) || strings.Contains(string(r.Body), "cost_usd") {
		t.Fatalf("stream: %d %s", r.Status, r.Body)
	}
	want := listCost(t, "gpt-4.1-mini", tokenUsage{Input: 4 + o200k(t, "hi"), Output: o200k(t, "credit me")}, false)
	e.expectLedger(t, "negative", ledgerEntry{RequestID: r.Header.Get("X-Gw-Request-Id"), Model: "gpt-4.1-mini",
		Units: 4 + o200k(t, "hi") + o200k(t, "credit me"), Unit: "token", Cost: want.String()})
}

// The reservation is an upper bound of the prompt too: a prompt whose
// tokens are many more than a quarter of its bytes (here one token every
// two bytes, as the o200k tokenizer counts "a a a ...") is reserved at a
// token a byte, so a prepaid balance it would overdraw refuses it before
// the provider is asked, instead of ending below zero.
func TestPromptReservedAtItsBound(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	const account, balance = "dense", "0.005"
	key := e.account(t, account, map[string]any{"balance_usd": balance})
	text := strings.Repeat("a ", 20000)
	tokens := o200k(t, text)
	// What the provider would bill: more than the balance (gpt-4.1-mini
	// reads at 0.40 USD a million tokens).
	if cost := pricing.Cost(false, pricing.Line{Units: tokens, Rate: pricing.PerMillion(mustUSD(t, "0.40"))}); cost <= mustUSD(t, balance) {
		t.Fatalf("the prompt costs %v, not more than the balance", cost)
	}
	e.OA.SetDefault(fake.Script{Text: "ok", Usage: fake.Usage{Input: int(tokens), Output: 10}})
	body := `{"model":"gw-pinned-gpt-4.1-mini","max_completion_tokens":100,"messages":[{"role":"user","content":"` + text + `"}]}`
	r := e.do(t, http.MethodPost, "/v1/chat/completions", body, bearer(key)...)
	if r.Status != http.StatusPaymentRequired || r.Header.Get("X-Gw-Hold-Reason") != "credit_exhausted" {
		t.Fatalf("a prompt dearer than the balance: %d %s", r.Status, r.Body)
	}
	if n := len(e.OA.Requests()); n != 0 {
		t.Fatalf("the provider was asked %d times", n)
	}
	e.expectNoCharge(t, account, balance)
}

// An output limit sent as null is no limit to the provider: the gateway
// sends its own (the limit its reservation assumed) on every path.
func TestNullOutputLimitIsBounded(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	key := e.account(t, "nolimit", map[string]any{"balance_usd": "1.00"})
	for _, tc := range []struct{ path, body, field string }{
		{"/v1/chat/completions", `{"model":"gw-pinned-gpt-4.1-mini","max_completion_tokens":null,"messages":[{"role":"user","content":"hi"}]}`, "max_completion_tokens"},
		{"/v1/chat/completions", `{"model":"gw-pinned-gpt-4.1-mini","max_tokens":null,"messages":[{"role":"user","content":"hi"}]}`, "max_completion_tokens"},
		{"/v1/responses", `{"model":"gw-pinned-gpt-4.1-mini","max_output_tokens":null,"input":"hi"}`, "max_output_tokens"},
		{"/v1/chat/completions", `{"model":"gw-pinned-claude-haiku-4-5","max_completion_tokens":null,"messages":[{"role":"user","content":"hi"}]}`, "max_tokens"},
	} {
		e.reset()
		r := e.do(t, http.MethodPost, tc.path, tc.body, bearer(key)...)
		if r.Status != http.StatusOK {
			t.Fatalf("%s: %d %s", tc.body, r.Status, r.Body)
		}
		reqs := append(e.OA.Requests(), e.AN.Requests()...)
		if len(reqs) != 1 {
			t.Fatalf("%s: %d upstream requests", tc.body, len(reqs))
		}
		if got := reqs[0].JSON()[tc.field]; got != float64(4096) {
			t.Fatalf("%s: the provider got %s = %v", tc.body, tc.field, got)
		}
	}
}

// A provider's error event mid-stream reaches the client in the gateway's
// words: the provider's message (which may name the operator's
// organisation and its limits) never does, on any path or backend.
func TestMidStreamErrorInGatewayWords(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	key := e.account(t, "leaks", map[string]any{"balance_usd": "1.00"})
	const secret = "Rate limit reached for org-Secret123 on tokens per min"
	for _, model := range []string{"gw-pinned-gpt-4.1-mini", "gw-pinned-claude-haiku-4-5"} {
		for _, tc := range []struct {
			path, body string
			key        []string
		}{
			{"/v1/chat/completions", `{"model":"` + model + `","stream":true,"messages":[{"role":"user","content":"hi"}]}`, bearer(key)},
			{"/v1/responses", `{"model":"` + model + `","stream":true,"input":"hi"}`, bearer(key)},
			{"/alt/v1/messages", `{"model":"` + model + `","max_tokens":50,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, apiKey(key)},
		} {
			e.reset()
			up := e.OA
			if strings.Contains(model, "claude") {
				up = e.AN
			}
			up.Push(fake.Script{Text: midStreamText, Chunks: 4, MidStreamError: true, ErrorMessage: secret})
			r := e.do(t, http.MethodPost, tc.path, tc.body, tc.key...)
			body := string(r.Body)
			if r.Status != http.StatusOK || !strings.Contains(body, "tick") || !strings.Contains(body, "error") {
				t.Fatalf("%s %s: %d %s", model, tc.path, r.Status, body)
			}
			if strings.Contains(body, "org-Secret123") {
				t.Errorf("%s %s: the provider's words reached the client: %s", model, tc.path, body)
			}
		}
	}
}

// count_tokens is never billed, so it has a rate budget of its own
// (count_tokens_per_minute): past it, 429 with Retry-After in the
// messages-style shape, while the account's chat is untouched.
func TestCountTokensBudget(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, withGW(t, "\t\tlimits {\n\t\t\tcount_tokens_per_minute 2\n\t\t}"))
	key := e.account(t, "counter", nil)
	body := `{"model":"gw-pinned-gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`
	for i := range 2 {
		if r := e.do(t, http.MethodPost, "/alt/v1/messages/count_tokens", body, apiKey(key)...); r.Status != http.StatusOK {
			t.Fatalf("call %d: %d %s", i+1, r.Status, r.Body)
		}
	}
	r := e.do(t, http.MethodPost, "/alt/v1/messages/count_tokens", body, apiKey(key)...)
	expectError(t, r, http.StatusTooManyRequests, `{"type":"error","error":{"type":"rate_limit_error","message":"<string>"}}`, "req-")
	if ra := r.Header.Get("Retry-After"); ra == "" || ra == "0" {
		t.Fatalf("Retry-After %q", ra)
	}
	if r := e.do(t, http.MethodPost, "/alt/v1/messages", `{"model":"gw-pinned-gpt-4.1-mini","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`, apiKey(key)...); r.Status != http.StatusOK {
		t.Fatalf("chat after count_tokens' budget: %d %s", r.Status, r.Body)
	}
}

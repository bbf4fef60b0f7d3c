package integration

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// servedBy is the fake that serves backing model id.
func (e *chatEnv) servedBy(id string) (*fake.Upstream, bool) {
	if strings.HasPrefix(id, "claude") {
		return e.AN, true
	}
	return e.OA, false
}

// billedText is what billedCall's upstream answers.
const billedText = "Billed answer."

// billedCall sends r with client k and key, the upstream serving the
// backing model served answering with usage u, and checks the receipt: the
// routing headers (routed: the gateway picked the model) with X-Gw-Cost-Usd,
// or for a stream X-Gw-Alias and cost_usd in the final usage block, equal
// to the list price of u on served (×1.12 for payg) and to the ledger
// entry under the request id. It returns the cost.
func (e *chatEnv) billedCall(t *testing.T, k clientKind, key, account string, r chatReq, served string, routed bool, u tokenUsage, payg bool) pricing.Money {
	t.Helper()
	e.reset()
	up, anthropicFormat := e.servedBy(served)
	up.Push(fake.Script{Text: billedText, Usage: fakeUsage(anthropicFormat, u)})
	res, err := e.run(t, k, key, r)
	if err != nil {
		t.Fatalf("%s %s: %v", k, r.model, err)
	}
	if res.text != billedText {
		t.Errorf("text %q, want %q", res.text, billedText)
	}
	if reqs := up.Requests(); len(reqs) != 1 || reqs[0].JSON()["model"] != served {
		t.Errorf("upstream of %s received %d requests (want 1, with model %s)", served, len(reqs), served)
	}
	cost := listCost(t, served, u, payg)
	if x := exactCost(t, served, u, payg); x != cost {
		t.Fatalf("pricing.Cost %s, exact computation %s", cost, x)
	}
	if r.stream {
		expectGwHeaders(t, res.header, streamHeaders(r.model))
		if res.streamCost != cost.String() {
			t.Errorf("stream cost_usd %q, want %q", res.streamCost, cost.String())
		}
	} else {
		expectGwHeaders(t, res.header, receipts(served, r.model, routed, cost))
		// A whole answer is sent with its length, not chunked: the gateway
		// hands it over before it logs the call.
		if n, err := strconv.Atoi(res.header.Get("Content-Length")); err != nil || n <= 0 {
			t.Errorf("Content-Length %q, want the answer's length", res.header.Get("Content-Length"))
		}
	}
	e.expectLedger(t, account, ledgerEntry{RequestID: res.header.Get("X-Gw-Request-Id"), Endpoint: k.ledgerEndpoint(),
		Model: served, Units: u.Units(), Unit: "token", Cost: cost.String()})
	return cost
}

// TestChatReceipts: routed aliases say X-Gw-Routed true and name the
// model that served, pinned ones false; streams carry only X-Gw-Alias; each
// receipt is the ledger entry to the nano-dollar and the spend is their
// sum; a payg account pays the list price ×1.12, rounded once; a prepaid
// balance is drawn down by exactly the receipts.
func TestChatReceipts(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")

	cases := []struct {
		k      clientKind
		model  string
		stream bool
		tools  bool
		served string
		routed bool
	}{
		{chatClient, "gw-fast", false, false, "gpt-4.1-nano", true},
		{messagesClient, "gw-fast", false, false, "gpt-4.1-nano", true},
		{responsesClient, "gw-auto", false, false, "gpt-4.1-nano", true},
		{chatClient, "gw-auto", false, true, "gpt-4.1-mini", true}, // tools: the standard lane
		{messagesClient, "gw-auto", false, true, "gpt-4.1-mini", true},
		{chatClient, "gw-standard", false, false, "gpt-4.1-mini", true},
		{chatClient, "gw-reasoning", false, false, "o4-mini", true},
		{chatClient, "gw-pinned-claude-haiku-4-5", false, false, "claude-haiku-4-5", false},
		{responsesClient, "gw-pinned-claude-opus-4-1", false, false, "claude-opus-4-1", false},
		{chatClient, "gw-fast", true, false, "gpt-4.1-nano", true},
		{messagesClient, "gw-auto", true, false, "gpt-4.1-nano", true},
		{responsesClient, "gw-standard", true, false, "gpt-4.1-mini", true},
	}
	usage := func(i int) tokenUsage {
		return tokenUsage{Input: 2000 + int64(i)*37, Cached: 300, Output: 150 + int64(i)*11}
	}

	t.Run("postpaid", func(t *testing.T) {
		const account = "receipts"
		key := e.account(t, account, nil)
		var sum pricing.Money
		for i, c := range cases {
			t.Run(fmt.Sprintf("%s/%s/stream=%t", c.k, c.model, c.stream), func(t *testing.T) {
				sum += e.billedCall(t, c.k, key, account, chatReq{model: c.model, stream: c.stream, tools: c.tools}, c.served, c.routed, usage(i), false)
			})
		}
		if spend, balance := e.accountMoney(t, account); spend != sum || balance != "" {
			t.Errorf("spend %s balance %q, want %s and no balance", spend, balance, sum)
		}
		if n := len(e.ledger(t, account)); n != len(cases) {
			t.Errorf("ledger has %d entries, want %d", n, len(cases))
		}
	})

	t.Run("payg", func(t *testing.T) {
		const account = "receipts-payg"
		key := e.account(t, account, map[string]any{"payg": true})
		var sum pricing.Money
		for i, c := range cases[:4] {
			t.Run(fmt.Sprintf("%s/%s", c.k, c.model), func(t *testing.T) {
				u := usage(i)
				cost := e.billedCall(t, c.k, key, account, chatReq{model: c.model, tools: c.tools}, c.served, c.routed, u, true)
				if list := listCost(t, c.served, u, false); cost == list {
					t.Errorf("payg cost %s is the list price", cost)
				}
				sum += cost
			})
		}
		// A pinned anthropic model, streamed, with usage whose list price
		// ×1.12 is 0.003763200 USD.
		t.Run("messages/stream", func(t *testing.T) {
			u := tokenUsage{Input: 500, Cached: 0, Output: 124}
			cost := e.billedCall(t, messagesClient, key, account, chatReq{model: anthropicBackend.model, stream: true}, anthropicBackend.backing, false, u, true)
			if want := mustUSD(t, "0.0037632"); cost != want {
				t.Errorf("payg cost %s, want %s", cost, want)
			}
			sum += cost
		})
		if spend, _ := e.accountMoney(t, account); spend != sum {
			t.Errorf("spend %s, want %s", spend, sum)
		}
	})

	t.Run("prepaid", func(t *testing.T) {
		const account = "receipts-prepaid"
		key := e.account(t, account, map[string]any{"balance_usd": "2.00"})
		var sum pricing.Money
		for i, c := range cases[6:] {
			t.Run(fmt.Sprintf("%s/%s/stream=%t", c.k, c.model, c.stream), func(t *testing.T) {
				sum += e.billedCall(t, c.k, key, account, chatReq{model: c.model, stream: c.stream, tools: c.tools}, c.served, c.routed, usage(i), false)
			})
		}
		spend, balance := e.accountMoney(t, account)
		if want := mustUSD(t, "2.00") - sum; spend != sum || balance != want.String() {
			t.Errorf("spend %s balance %q, want %s and %q", spend, balance, sum, want.String())
		}
	})
}

// rawChat is a minimal request body of client k's format and its path.
func rawChat(k clientKind, model string, stream bool) (path, body string) {
	switch k {
	case responsesClient:
		return "/v1/responses", fmt.Sprintf(`{"model":%q,"input":"hi","stream":%t}`, model, stream)
	case messagesClient:
		return "/alt/v1/messages", fmt.Sprintf(`{"model":%q,"max_tokens":64,"messages":[{"role":"user","content":"hi"}],"stream":%t}`, model, stream)
	}
	return "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}],"stream":%t}`, model, stream)
}

// authFor is how client k sends key (messages: x-api-key).
func authFor(k clientKind, key string) []string {
	if k == messagesClient {
		return apiKey(key)
	}
	return bearer(key)
}

// expectCreditExhausted checks a 402 credit_exhausted refusal in k's shape.
func expectCreditExhausted(t *testing.T, k clientKind, r response) {
	t.Helper()
	if k == messagesClient {
		expectError(t, r, http.StatusPaymentRequired,
			`{"type":"error","error":{"type":"billing_error","message":"<string>","code":"credit_exhausted"}}`, "req-")
		return
	}
	expectError(t, r, http.StatusPaymentRequired,
		`{"error":{"message":"<string>","type":"insufficient_quota","param":null,"code":"credit_exhausted","provider_specific_fields":{"error":"credit_exhausted"}}}`, "req-")
	if h := r.Header.Get("X-Gw-Hold-Reason"); h != "credit_exhausted" {
		t.Errorf("X-Gw-Hold-Reason %q, want credit_exhausted", h)
	}
}

// TestChatMoneyRefusals: a prepaid account at 0.00 and a free account past
// the 1 USD chat stop are refused with 402 in each client's shape, before
// any upstream is asked; the SDKs read the refusal.
func TestChatMoneyRefusals(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")

	refused := func(t *testing.T, account, key string) {
		t.Helper()
		before := len(e.ledger(t, account))
		for _, k := range clientKinds {
			for _, b := range backends {
				for _, stream := range []bool{false, true} {
					path, body := rawChat(k, b.model, stream)
					expectCreditExhausted(t, k, e.do(t, http.MethodPost, path, body, authFor(k, key)...))
				}
			}
			_, err := e.run(t, k, key, chatReq{model: openaiBackend.model})
			switch k {
			case messagesClient:
				var ae *anthropic.Error
				if !errors.As(err, &ae) || ae.StatusCode != http.StatusPaymentRequired || ae.Type() != anthropic.ErrorTypeBillingError {
					t.Errorf("anthropic-sdk-go: %v, want a 402 billing_error", err)
				}
			default:
				var oe *openai.Error
				if !errors.As(err, &oe) || oe.StatusCode != http.StatusPaymentRequired || oe.Code != "credit_exhausted" || oe.Type != "insufficient_quota" {
					t.Errorf("openai-go %s: %v, want a 402 credit_exhausted", k, err)
				}
			}
		}
		if n := len(e.ledger(t, account)); n != before {
			t.Errorf("ledger grew from %d to %d entries", before, n)
		}
	}

	t.Run("prepaid at zero", func(t *testing.T) {
		e.reset()
		const account = "broke"
		key := e.account(t, account, map[string]any{"balance_usd": "0.00"})
		refused(t, account, key)
		if n := len(e.OA.Requests()) + len(e.AN.Requests()); n != 0 {
			t.Errorf("upstreams received %d requests", n)
		}
		if spend, balance := e.accountMoney(t, account); spend != 0 || balance != "0.00" {
			t.Errorf("spend %s balance %q, want 0.00 and 0.00", spend, balance)
		}
	})

	t.Run("free past the chat stop", func(t *testing.T) {
		const account = "free-chat"
		key := e.account(t, account, map[string]any{"plan": "free", "cleared": false})
		// One call within the stop reports 100,000 output tokens on
		// claude-opus-4-1: 7.50 USD of output, 0.015 of input. The
		// account pays the 1 USD the stop leaves; the rest is the
		// operator's shortfall.
		u := tokenUsage{Input: 1000, Output: 100000}
		e.reset()
		e.AN.Push(fake.Script{Text: billedText, Usage: fakeUsage(true, u)})
		r := e.do(t, http.MethodPost, "/v1/chat/completions", `{"model":"gw-pinned-claude-opus-4-1","messages":[{"role":"user","content":"hi"}]}`, bearer(key)...)
		cost := mustUSD(t, "1.00")
		if r.Status != http.StatusOK || r.Header.Get("X-Gw-Cost-Usd") != cost.String() {
			t.Fatalf("status %d, X-Gw-Cost-Usd %q: want 200 and %s", r.Status, r.Header.Get("X-Gw-Cost-Usd"), cost)
		}
		e.expectLedger(t, account, ledgerEntry{RequestID: r.Header.Get("X-Gw-Request-Id"), Endpoint: "chat",
			Model: "claude-opus-4-1", Units: u.Units(), Unit: "token", Cost: cost.String(), Shortfall: "6.515"})
		e.reset()
		refused(t, account, key)
		if n := len(e.OA.Requests()) + len(e.AN.Requests()); n != 0 {
			t.Errorf("upstreams received %d requests after the stop", n)
		}
		if spend, _ := e.accountMoney(t, account); spend != cost {
			t.Errorf("spend %s, want %s", spend, cost)
		}
	})
}

// sseCost is cost_usd of the final usage block of a raw chat-completions
// or messages stream ("" when none carries it).
func sseCost(body []byte) string {
	cost := ""
	for _, line := range strings.Split(string(body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		for _, p := range []string{"usage.cost_usd", "response.usage.cost_usd"} {
			if c := gjson.Get(data, p); c.Exists() {
				cost = c.String()
			}
		}
	}
	return cost
}

// TestChatLaneBilling: on an account with lane billing, gw-auto calls are
// billed at the price of the fast lane's cheapest model for fast work and
// of the standard lane's for everything else, whatever model served, and
// say so in X-Gw-Billed-Lane (not on streams, which carry only X-Gw-Alias);
// other aliases are billed at the serving model's price.
func TestChatLaneBilling(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	const account = "lanes"
	key := e.account(t, account, map[string]any{"lane_billing": true})
	u := tokenUsage{Input: 1500, Cached: 500, Output: 300}
	const tools = `,"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{}}}}]`
	cases := []struct {
		name, model, text, extra string
		stream                   bool
		served, lane, priceOf    string
	}{
		{"short chat", "gw-auto", "hi there", "", false, "gpt-4.1-nano", "fast", "gpt-4.1-nano"},
		{"reasoning", "gw-auto", "Prove that the sum of two even numbers is even.", "", false, "o4-mini", "standard", "gpt-4.1-mini"},
		{"tools", "gw-auto", "Weather in Paris?", tools, false, "gpt-4.1-mini", "standard", "gpt-4.1-mini"},
		{"reasoning streamed", "gw-auto", "Prove that the sum of two even numbers is even.", "", true, "o4-mini", "", "gpt-4.1-mini"},
		{"not gw-auto", "gw-reasoning", "hi there", "", false, "o4-mini", "", "o4-mini"},
	}
	var sum pricing.Money
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e.reset()
			e.OA.Push(fake.Script{Text: "Answer.", Usage: fakeUsage(false, u)})
			body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%q}],"stream":%t%s}`, c.model, c.text, c.stream, c.extra)
			r := e.do(t, http.MethodPost, "/v1/chat/completions", body, bearer(key)...)
			if r.Status != http.StatusOK {
				t.Fatalf("status %d: %s", r.Status, r.Body)
			}
			if reqs := e.OA.Requests(); len(reqs) != 1 || reqs[0].JSON()["model"] != c.served {
				t.Fatalf("upstream requests %d, want 1 for %s", len(reqs), c.served)
			}
			cost := listCost(t, c.priceOf, u, false)
			if c.stream {
				expectGwHeaders(t, r.Header, streamHeaders(c.model))
				if got := sseCost(r.Body); got != cost.String() {
					t.Errorf("stream cost_usd %q, want %q", got, cost.String())
				}
			} else {
				want := receipts(c.served, c.model, true, cost)
				if c.lane != "" {
					want["X-Gw-Billed-Lane"] = c.lane
				}
				expectGwHeaders(t, r.Header, want)
			}
			e.expectLedger(t, account, ledgerEntry{RequestID: r.Header.Get("X-Gw-Request-Id"), Endpoint: "chat", Model: c.served,
				Units: u.Units(), Unit: "token", Cost: cost.String()})
			sum += cost
		})
	}
	if spend, _ := e.accountMoney(t, account); spend != sum {
		t.Errorf("spend %s, want %s", spend, sum)
	}
}

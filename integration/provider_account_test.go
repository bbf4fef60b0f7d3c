package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// A provider refusing the gateway's own account (credit or quota used up,
// billing not set up) is not the caller's fault: the caller gets the
// gateway's own 503, never the provider's words, pays nothing, and the
// model's health pays for it (the call escalates where the route allows).

// accountErrors are the providers' answers for an account out of credit or
// quota, as fake sends them.
var accountErrors = []struct {
	name      string
	anthropic bool
	script    func() fake.Script
}{
	{"openai insufficient_quota", false, fake.OpenAIInsufficientQuota},
	{"openai billing_not_active", false, fake.OpenAIBillingNotActive},
	{"openai billing_hard_limit_reached", false, fake.OpenAIBillingHardLimit},
	{"anthropic credit balance too low", true, fake.AnthropicCreditTooLow},
	{"anthropic usage limits", true, fake.AnthropicUsageLimit},
	{"anthropic billing_error", true, fake.AnthropicBillingError},
}

// accountWords are words of the providers' messages about their accounts:
// none may reach a caller.
var accountWords = []string{"quota", "billing", "credit", "usage limit", "plans", "account"}

// expectNoAccountWords checks that body says nothing of the provider's
// account.
func expectNoAccountWords(t *testing.T, body []byte) {
	t.Helper()
	low := strings.ToLower(string(body))
	for _, w := range accountWords {
		if strings.Contains(low, w) {
			t.Errorf("the answer speaks of the provider's account (%q): %s", w, body)
		}
	}
}

// expectUnavailable checks the gateway's own 503 in k's shape.
func expectUnavailable(t *testing.T, k clientKind, r response) {
	t.Helper()
	if k == messagesClient {
		expectError(t, r, http.StatusServiceUnavailable, `{"type":"error","error":{"type":"api_error","message":"<string>"}}`, "req-")
	} else {
		expectError(t, r, http.StatusServiceUnavailable, `{"error":{"message":"<string>","type":"api_error","param":null,"code":"service_unavailable"}}`, "req-")
	}
	expectNoAccountWords(t, r.Body)
}

// TestProviderAccountRefusals: each provider's account errors, on a pinned
// model of its format, reach every client (chat completions, responses,
// messages; streamed or not) as the gateway's 503 in the client's shape,
// without the provider's words, and cost nothing; so does the provider's
// count endpoint refusing.
func TestProviderAccountRefusals(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	e.AN.CountError = fake.AnthropicCreditTooLow()
	const account, balance = "provider-account", "5.00"
	key := e.account(t, account, map[string]any{"balance_usd": balance})
	pinned := map[bool]backend{
		false: {name: "openai", model: "gw-pinned-gpt-4.1-nano", backing: "gpt-4.1-nano"},
		true:  {name: "anthropic", model: "gw-pinned-claude-haiku-4-5", backing: "claude-haiku-4-5", anthropic: true},
	}
	for _, ae := range accountErrors {
		b := pinned[ae.anthropic]
		for _, k := range clientKinds {
			for _, stream := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/stream=%t", ae.name, k, stream), func(t *testing.T) {
					e.reset()
					e.fakeOf(b).Push(ae.script())
					path, body := rawChat(k, b.model, stream)
					r := e.do(t, http.MethodPost, path, body, authFor(k, key)...)
					expectUnavailable(t, k, r)
					if n, o := len(e.fakeOf(b).Requests()), len(e.otherFake(b).Requests()); n != 1 || o != 0 {
						t.Errorf("upstreams received %d and %d requests, want 1 and 0 (a pinned model is not escalated)", n, o)
					}
				})
			}
		}
	}
	t.Run("count_tokens", func(t *testing.T) {
		e.reset()
		r := e.do(t, http.MethodPost, "/alt/v1/messages/count_tokens", `{"model":"gw-pinned-claude-haiku-4-5","messages":[{"role":"user","content":"hi"}]}`, apiKey(key)...)
		expectUnavailable(t, messagesClient, r)
		if n := len(e.AN.Requests()); n != 1 {
			t.Errorf("the count endpoint was asked %d times, want 1", n)
		}
	})
	e.expectNoCharge(t, account, balance)
}

// TestProviderAccountEscalation: an account refusal counts against the
// model's health like any provider failure, and an alias escalates past
// it: gpt-4.1-mini out of quota serves gw-standard from o4-mini; three in a
// row cool it down, so gw-standard starts at claude-sonnet-4-5, whose
// credit refusal escalates again; three of those cool it down too, and
// gw-standard is back at the cheaper of two cooling models.
func TestProviderAccountEscalation(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	const account = "provider-account-escalation"
	key := e.account(t, account, nil)
	healKey := e.account(t, "provider-account-heal", nil)
	u := tokenUsage{Input: 900, Output: 80}
	heal := func(t *testing.T) {
		t.Helper()
		e.reset()
		if _, err := e.run(t, chatClient, healKey, chatReq{model: "gw-pinned-gpt-4.1-mini"}); err != nil {
			t.Fatalf("healing call: %v", err)
		}
	}
	escalated := func(t *testing.T, k clientKind, stream bool, first *fake.Upstream, failure fake.Script, firstModel, served string) {
		t.Helper()
		e.reset()
		first.Push(failure)
		up, anthropicFormat := e.servedBy(served)
		up.Push(fake.Script{Text: "Escalated answer.", Usage: fakeUsage(anthropicFormat, u)})
		res, err := e.run(t, k, key, chatReq{model: "gw-standard", stream: stream})
		if err != nil {
			t.Fatal(err)
		}
		if res.text != "Escalated answer." || res.model != served {
			t.Errorf("text %q from %q, want the escalated answer from %s", res.text, res.model, served)
		}
		var models []any
		for _, r := range append(e.OA.Requests(), e.AN.Requests()...) {
			models = append(models, r.JSON()["model"])
		}
		if fmt.Sprint(models) != fmt.Sprint([]any{firstModel, served}) && fmt.Sprint(models) != fmt.Sprint([]any{served, firstModel}) {
			t.Errorf("upstreams were asked for %v, want %s then %s", models, firstModel, served)
		}
		cost := listCost(t, served, u, false)
		if !stream {
			want := receipts(served, "gw-standard", true, cost)
			want["X-Gw-Escalated"] = "true"
			expectGwHeaders(t, res.header, want)
		} else if res.streamCost != cost.String() {
			t.Errorf("stream cost_usd %q, want %q", res.streamCost, cost.String())
		}
		e.expectLedger(t, account, ledgerEntry{RequestID: res.header.Get("X-Gw-Request-Id"), Endpoint: k.ledgerEndpoint(),
			Model: served, Units: u.Units(), Unit: "token", Cost: cost.String()})
	}
	for _, k := range clientKinds {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("openai quota escalates/%s/stream=%t", k, stream), func(t *testing.T) {
				heal(t)
				escalated(t, k, stream, e.OA, fake.OpenAIInsufficientQuota(), "gpt-4.1-mini", "o4-mini")
			})
		}
	}
	firstAsked := func(t *testing.T) string {
		t.Helper()
		e.reset()
		if _, err := e.run(t, chatClient, key, chatReq{model: "gw-standard"}); err != nil {
			t.Fatal(err)
		}
		if r := append(e.AN.Requests(), e.OA.Requests()...); len(r) == 1 {
			return fmt.Sprint(r[0].JSON()["model"])
		}
		t.Fatalf("upstreams received %d and %d requests, want 1", len(e.OA.Requests()), len(e.AN.Requests()))
		return ""
	}
	coolDown := func(t *testing.T, up *fake.Upstream, failure func() fake.Script, model string) {
		t.Helper()
		for range 3 {
			e.reset()
			up.Push(failure())
			path, body := rawChat(chatClient, model, false)
			expectUnavailable(t, chatClient, e.do(t, http.MethodPost, path, body, bearer(healKey)...))
		}
	}
	t.Run("openai quota counts against health", func(t *testing.T) {
		heal(t)
		coolDown(t, e.OA, fake.OpenAIInsufficientQuota, "gw-pinned-gpt-4.1-mini")
		if got := firstAsked(t); got != "claude-sonnet-4-5" {
			t.Errorf("gw-standard asked %s first, want claude-sonnet-4-5 while gpt-4.1-mini cools down", got)
		}
	})
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("anthropic credit escalates/stream=%t", stream), func(t *testing.T) {
			escalated(t, messagesClient, stream, e.AN, fake.AnthropicCreditTooLow(), "claude-sonnet-4-5", "o4-mini")
		})
	}
	t.Run("anthropic credit counts against health", func(t *testing.T) {
		coolDown(t, e.AN, fake.AnthropicCreditTooLow, "gw-pinned-claude-sonnet-4-5")
		if got := firstAsked(t); got != "gpt-4.1-mini" {
			t.Errorf("gw-standard asked %s first, want gpt-4.1-mini (both cooling, the cheaper first)", got)
		}
	})
}

// TestAbilityProviderAccountRefusals: the ability endpoints that call a
// provider (transcription, speech, image generation and edits, search,
// decision mode) answer its account refusals with their family's 503
// (capability_unavailable; decision mode upstream_unavailable), without
// the provider's words and without a charge.
func TestAbilityProviderAccountRefusals(t *testing.T) {
	t.Parallel()
	oa, an := fake.NewOpenAI(), fake.NewAnthropic()
	t.Cleanup(oa.Close)
	t.Cleanup(an.Close)
	g := startGateway(t, gwOptions{Env: map[string]string{"GW_OPENAI_BASE_URL": oa.URL, "GW_ANTHROPIC_BASE_URL": an.URL, "GW_SEARCH_BASE_URL": oa.URL}})
	const account, balance = "ability-account", "5.00"
	key := g.newAccountKey(t, map[string]any{"id": account, "plan": "paid", "cleared": true, "balance_usd": balance})
	const unavailable = `{"error":{"message":"<string>","type":"api_error","code":"capability_unavailable"}}`
	wav, wavType := multipartBody(t, "a.wav", wavOf(16000, 2))
	edit, editType := multipartImages(t, "image", [][]byte{imageFixture(t, "red.png")}, "prompt", "add a hat")
	for _, c := range []struct {
		name, path, body, contentType string
		want, idPrefix                string
	}{
		{"transcription", "/v1/audio/transcriptions", wav, wavType, unavailable, "req-"},
		{"speech", "/v1/audio/speech", `{"input":"hi","voice":"alloy"}`, "application/json", unavailable, "req-"},
		{"image generation", "/v1/images/generations", `{"prompt":"a cat"}`, "application/json", unavailable, "req-"},
		{"image edit", "/v1/images/edits", edit, editType, unavailable, "req-"},
		{"search", "/v1/search", `{"query":"what is caddy?"}`, "application/json", unavailable, "req-"},
		{"decide", "/v1/decide", `{"model":"gw-decide","state":"s","questions":{"q":{"type":"noul","instructions":"?"}}}`, "application/json",
			`{"error":{"message":"<string>","type":"api_error","code":"upstream_unavailable","param":null}}`, "dec-"},
	} {
		for _, ae := range accountErrors {
			if ae.anthropic {
				continue // every ability provider is chat-completions style
			}
			t.Run(c.name+"/"+ae.name, func(t *testing.T) {
				oa.Reset()
				oa.Push(ae.script())
				r := g.do(t, http.MethodPost, c.path, c.body, append(bearer(key), "Content-Type", c.contentType)...)
				expectError(t, r, http.StatusServiceUnavailable, c.want, c.idPrefix)
				expectNoAccountWords(t, r.Body)
				if n := len(oa.Requests()); n != 1 {
					t.Errorf("the provider was asked %d times, want 1", n)
				}
			})
		}
	}
	if l := ledgerOf(t, g, account); len(l) != 0 {
		t.Errorf("refusals were charged: %v", l)
	}
	if b := balanceOf(t, g, account); b != mustUSD(t, balance) {
		t.Errorf("balance %s, want %s", b, balance)
	}
}

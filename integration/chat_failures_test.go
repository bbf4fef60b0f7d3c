package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// expectNoCharge checks that the account's ledger is empty and its balance
// and spend are what they were.
func (e *chatEnv) expectNoCharge(t *testing.T, account, balance string) {
	t.Helper()
	if l := e.ledger(t, account); len(l) != 0 {
		t.Errorf("ledger has %d entries, want none: %+v", len(l), l)
	}
	if spend, b := e.accountMoney(t, account); spend != 0 || b != balance {
		t.Errorf("spend %s balance %q, want 0.00 and %q", spend, b, balance)
	}
}

// TestChatUpstreamFailures: an upstream 500, 429 or 529 on a pinned model
// reaches each client as the mapped status in its own shape (chat and
// responses {error:{message,type,param,code}}, messages
// {type:"error",error:{type,message}}), with Retry-After passed on, whether
// or not it asked to stream; it is not escalated, and costs nothing.
func TestChatUpstreamFailures(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	const account, balance = "failures", "5.00"
	key := e.account(t, account, map[string]any{"balance_usd": balance})

	type want struct {
		status              int
		chatType, chatCode  string
		messagesType        string
		retryAfter          string
		upstreamRetryHeader string
	}
	failures := map[int]want{
		500: {http.StatusBadGateway, "api_error", "upstream_error", "api_error", "", ""},
		429: {http.StatusTooManyRequests, "rate_limit_error", "rate_limit_exceeded", "rate_limit_error", "7", "7"},
		529: {529, "overloaded_error", "overloaded", "overloaded_error", "3", "3"},
	}
	for _, status := range []int{500, 429, 529} {
		w := failures[status]
		for _, b := range backends {
			for _, k := range clientKinds {
				for _, stream := range []bool{false, true} {
					t.Run(fmt.Sprintf("%d/%s/%s/stream=%t", status, b.name, k, stream), func(t *testing.T) {
						script := fake.Script{Status: status}
						if w.upstreamRetryHeader != "" {
							script.Header = http.Header{"Retry-After": {w.upstreamRetryHeader}}
						}

						// The wire, exactly.
						e.reset()
						e.fakeOf(b).Push(script)
						path, body := rawChat(k, b.model, stream)
						r := e.do(t, http.MethodPost, path, body, authFor(k, key)...)
						if k == messagesClient {
							expectError(t, r, w.status, fmt.Sprintf(`{"type":"error","error":{"type":%q,"message":"<string>"}}`, w.messagesType), "req-")
						} else {
							expectError(t, r, w.status, fmt.Sprintf(`{"error":{"message":"<string>","type":%q,"param":null,"code":%q}}`, w.chatType, w.chatCode), "req-")
						}
						if got := r.Header.Get("Retry-After"); got != w.retryAfter {
							t.Errorf("Retry-After %q, want %q", got, w.retryAfter)
						}
						expectGwHeaders(t, r.Header, map[string]string{"X-Gw-Request-Id": anyValue})
						if n, o := len(e.fakeOf(b).Requests()), len(e.otherFake(b).Requests()); n != 1 || o != 0 {
							t.Errorf("upstreams received %d and %d requests, want 1 and 0 (a pinned model is not escalated)", n, o)
						}

						// The SDK's view.
						e.reset()
						e.fakeOf(b).Push(script)
						_, err := e.run(t, k, key, chatReq{model: b.model, stream: stream})
						if k == messagesClient {
							var ae *anthropic.Error
							if !errors.As(err, &ae) || ae.StatusCode != w.status || string(ae.Type()) != w.messagesType {
								t.Errorf("anthropic-sdk-go: %v, want %d %s", err, w.status, w.messagesType)
							}
						} else {
							var oe *openai.Error
							if !errors.As(err, &oe) || oe.StatusCode != w.status || oe.Type != w.chatType || oe.Code != w.chatCode {
								t.Errorf("openai-go: %v, want %d %s %s", err, w.status, w.chatType, w.chatCode)
							}
						}
					})
				}
			}
		}
	}
	e.expectNoCharge(t, account, balance)
}

// midStreamText is what the upstream streams before it fails; the client
// gets its first piece, "tick ".
const midStreamText = "tick tock tick tock "

// TestChatMidStreamErrors: an upstream that fails after the stream started
// ends the client's stream with an error event that the SDK reports as an
// error, after the content sent so far; what was delivered is billed.
func TestChatMidStreamErrors(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	const account, balance = "midstream", "5.00"
	key := e.account(t, account, map[string]any{"balance_usd": balance})
	for _, k := range clientKinds {
		for _, b := range backends {
			name := fmt.Sprintf("%s/%s", k, b.name)
			t.Run(name, func(t *testing.T) {
				e.reset()
				e.fakeOf(b).Push(fake.Script{Text: midStreamText, Chunks: 4, MidStreamError: true, Usage: fakeUsage(b.anthropic, matrixUsage)})
				res, err := e.run(t, k, key, chatReq{model: b.model, stream: true})
				if err == nil {
					t.Errorf("the stream ended without an error the SDK reports (error event %q, terminal event %q)", res.errorEvent, res.terminal)
				} else if errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("the stream did not end: %v", err)
				}
				if res.streamedText != "tick " {
					t.Errorf("text before the error %q, want %q", res.streamedText, "tick ")
				}
				if res.streamCost != "" || res.terminal == "response.completed" {
					t.Errorf("a failed stream reported cost_usd %q and terminal event %q", res.streamCost, res.terminal)
				}
				expectGwHeaders(t, res.header, streamHeaders(b.model))
				// What was delivered is billed: one entry under the
				// request id, with the delivered output in its units.
				id := res.header.Get("X-Gw-Request-Id")
				waitHandled(t, e.gateway, id)
				if c, ok := ledgerOf(t, e.gateway, account)[id]; !ok || c <= 0 {
					t.Errorf("the delivered part was not billed: %v %v", c, ok)
				}
			})
		}
	}
	var spent pricing.Money
	for _, c := range ledgerOf(t, e.gateway, account) {
		spent += c
	}
	if got := balanceOf(t, e.gateway, account); got != mustUSD(t, balance)-spent {
		t.Errorf("balance %v, want %v less the ledger's %v", got, balance, spent)
	}
}

// TestChatEscalation: when the model gw-standard chose fails before
// anything reached the client (5xx, 429, 529), the next stronger lane's
// model serves (o4-mini, or claude-opus-4-1 through the other upstream
// format while o4-mini is cooling down), with X-Gw-Escalated: true, billed
// once at the serving model's price; a client error (400) is not
// escalated, and a pinned model never is.
func TestChatEscalation(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	const account = "escalation"
	key := e.account(t, account, nil)
	// Each failure counts against the model's health (3 in a row: skipped
	// for 30 s); a success, on another account, clears it.
	healKey := e.account(t, "escalation-heal", nil)
	heal := func(t *testing.T) {
		t.Helper()
		e.reset()
		if _, err := e.run(t, chatClient, healKey, chatReq{model: openaiBackend.model}); err != nil {
			t.Fatalf("healing call: %v", err)
		}
	}
	u := tokenUsage{Input: 900, Cached: 100, Output: 80}
	var sum pricing.Money
	escalated := func(t *testing.T, k clientKind, stream bool, status int, served string) {
		t.Helper()
		heal(t)
		e.reset()
		e.OA.Push(fake.Script{Status: status})
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
		if fmt.Sprint(models) != fmt.Sprint([]any{"gpt-4.1-mini", served}) {
			t.Errorf("upstreams were asked for %v, want gpt-4.1-mini then %s", models, served)
		}
		cost := listCost(t, served, u, false)
		if stream {
			expectGwHeaders(t, res.header, streamHeaders("gw-standard"))
			if res.streamCost != cost.String() {
				t.Errorf("stream cost_usd %q, want %q", res.streamCost, cost.String())
			}
		} else {
			want := receipts(served, "gw-standard", true, cost)
			want["X-Gw-Escalated"] = "true"
			expectGwHeaders(t, res.header, want)
		}
		e.expectLedger(t, account, ledgerEntry{RequestID: res.header.Get("X-Gw-Request-Id"), Endpoint: k.ledgerEndpoint(),
			Model: served, Units: u.Units(), Unit: "token", Cost: cost.String()})
		sum += cost
	}

	for _, c := range []struct {
		k      clientKind
		status int
		stream bool
	}{
		{chatClient, 500, false},
		{messagesClient, 429, false},
		{responsesClient, 503, false},
		{chatClient, 500, true},
		{messagesClient, 529, true},
		{responsesClient, 502, true},
	} {
		t.Run(fmt.Sprintf("%s/%d/stream=%t", c.k, c.status, c.stream), func(t *testing.T) {
			escalated(t, c.k, c.stream, c.status, "o4-mini")
		})
	}

	t.Run("a client error is not escalated", func(t *testing.T) {
		heal(t)
		e.reset()
		e.OA.Push(fake.Script{Status: 400, ErrorMessage: "Invalid 'messages[0].content': bad."})
		path, body := rawChat(chatClient, "gw-standard", false)
		r := e.do(t, http.MethodPost, path, body, bearer(key)...)
		expectError(t, r, http.StatusBadRequest, `{"error":{"message":"Invalid 'messages[0].content': bad.","type":"invalid_request_error","param":null,"code":null}}`, "req-")
		if len(e.OA.Requests()) != 1 || len(e.AN.Requests()) != 0 {
			t.Errorf("upstream requests: %d to openai, %d to anthropic; want 1 and 0", len(e.OA.Requests()), len(e.AN.Requests()))
		}
	})

	t.Run("a pinned model is never escalated", func(t *testing.T) {
		for _, k := range clientKinds {
			for _, stream := range []bool{false, true} {
				heal(t)
				e.reset()
				e.OA.Push(fake.Script{Status: 500})
				path, body := rawChat(k, openaiBackend.model, stream)
				r := e.do(t, http.MethodPost, path, body, authFor(k, key)...)
				if r.Status != http.StatusBadGateway || r.Header.Get("X-Gw-Escalated") != "" {
					t.Errorf("%s: status %d X-Gw-Escalated %q, want 502 and none; body %s", k, r.Status, r.Header.Get("X-Gw-Escalated"), r.Body)
				}
				if len(e.OA.Requests()) != 1 || len(e.AN.Requests()) != 0 {
					t.Errorf("%s: upstream requests: %d to openai, %d to anthropic; want 1 and 0", k, len(e.OA.Requests()), len(e.AN.Requests()))
				}
			}
		}
	})

	// Three failures in a row cool o4-mini down: the reasoning lane's
	// healthy model is then claude-opus-4-1, behind the other format.
	t.Run("across formats", func(t *testing.T) {
		e.reset()
		for range 3 {
			e.OA.Push(fake.Script{Status: 500})
			path, body := rawChat(chatClient, "gw-pinned-o4-mini", false)
			if r := e.do(t, http.MethodPost, path, body, bearer(healKey)...); r.Status != http.StatusBadGateway {
				t.Fatalf("pinned o4-mini: status %d, want 502", r.Status)
			}
		}
		for _, k := range clientKinds {
			for _, stream := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/stream=%t", k, stream), func(t *testing.T) {
					escalated(t, k, stream, 500, "claude-opus-4-1")
				})
			}
		}
	})

	var got pricing.Money
	l := e.ledger(t, account)
	for _, x := range l {
		got += mustUSD(t, x.Cost)
	}
	if len(l) != 12 || got != sum {
		t.Errorf("ledger: %d entries summing to %s, want 12 summing to %s (one per escalated call)", len(l), got, sum)
	}
}

// TestChatBadInput: malformed requests, unknown models and models the key
// may not use are refused in each client's shape, before any upstream is
// asked and without a charge.
func TestChatBadInput(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	const account = "bad-input"
	key := e.account(t, account, map[string]any{"balance_usd": "1.00"})
	limited, _ := e.createKey(t, account, map[string]any{"name": "limited", "models": []string{"gw-pinned-gpt-4.1-mini"}})

	const (
		chatInvalid     = `{"error":{"message":"<string>","type":"invalid_request_error","param":%q,"code":null}}`
		messagesInvalid = `{"type":"error","error":{"type":"invalid_request_error","message":"<string>"}}`
	)
	cases := []struct {
		name, path, body string
		key              []string
		status           int
		want             string
	}{
		{"chat body not JSON", "/v1/chat/completions", `{"model": "gw-auto", "messages": [`, bearer(key), 400, fmt.Sprintf(chatInvalid, "body")},
		{"chat body not an object", "/v1/chat/completions", `["gw-auto"]`, bearer(key), 400, fmt.Sprintf(chatInvalid, "body")},
		{"chat without messages", "/v1/chat/completions", `{"model":"gw-auto"}`, bearer(key), 400, fmt.Sprintf(chatInvalid, "messages")},
		{"responses body not JSON", "/v1/responses", `model=gw-auto`, bearer(key), 400, fmt.Sprintf(chatInvalid, "body")},
		{"responses without input", "/v1/responses", `{"model":"gw-auto"}`, bearer(key), 400, fmt.Sprintf(chatInvalid, "input")},
		{"messages body not JSON", "/alt/v1/messages", `{"model":`, apiKey(key), 400, messagesInvalid},
		{"messages without max_tokens", "/alt/v1/messages", `{"model":"gw-auto","messages":[{"role":"user","content":"hi"}]}`, apiKey(key), 400, messagesInvalid},
		{"messages with max_tokens 0", "/alt/v1/messages", `{"model":"gw-auto","max_tokens":0,"messages":[{"role":"user","content":"hi"}]}`, apiKey(key), 400, messagesInvalid},
		{"chat unknown model", "/v1/chat/completions", `{"model":"gw-pinned-gpt-0","messages":[{"role":"user","content":"hi"}]}`, bearer(key), 400,
			`{"error":{"message":"<string>","type":"invalid_request_error","param":"model","code":"model_not_found"}}`},
		{"responses unknown model", "/v1/responses", `{"model":"no-such-model","input":"hi"}`, bearer(key), 400,
			`{"error":{"message":"<string>","type":"invalid_request_error","param":"model","code":"model_not_found"}}`},
		{"messages unknown model", "/alt/v1/messages", `{"model":"gw-pinned-claude-0","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, apiKey(key), 400,
			`{"type":"error","error":{"type":"invalid_request_error","message":"<string>","code":"model_not_found"}}`},
		// One reading of the body: a duplicate key or a body
		// nested too deep is refused before it is routed or billed.
		{"chat duplicate model", "/v1/chat/completions", `{"model":"gw-pinned-gpt-4.1-nano","messages":[{"role":"user","content":"hi"}],"model":"gw-pinned-o4-mini"}`, bearer(key), 400, fmt.Sprintf(chatInvalid, "body")},
		{"chat duplicate stream_options", "/v1/chat/completions", `{"model":"gw-fast","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}],"stream_options":{"include_usage":false}}`, bearer(key), 400, fmt.Sprintf(chatInvalid, "body")},
		{"chat duplicate max_tokens", "/v1/chat/completions", `{"model":"gw-fast","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"max_tokens":100000}`, bearer(key), 400, fmt.Sprintf(chatInvalid, "body")},
		{"responses duplicate model", "/v1/responses", `{"model":"gw-fast","input":"hi","model":"gw-pinned-o4-mini"}`, bearer(key), 400, fmt.Sprintf(chatInvalid, "body")},
		{"responses duplicate max_output_tokens", "/v1/responses", `{"model":"gw-fast","max_output_tokens":5,"input":"hi","max_output_tokens":100000}`, bearer(key), 400, fmt.Sprintf(chatInvalid, "body")},
		{"messages duplicate model", "/alt/v1/messages", `{"model":"gw-fast","max_tokens":8,"messages":[{"role":"user","content":"hi"}],"model":"gw-pinned-claude-opus-4-1"}`, apiKey(key), 400, messagesInvalid},
		{"messages duplicate max_tokens", "/alt/v1/messages", `{"model":"gw-fast","max_tokens":8,"messages":[{"role":"user","content":"hi"}],"max_tokens":64000}`, apiKey(key), 400, messagesInvalid},
		{"messages duplicate nested", "/alt/v1/messages", `{"model":"gw-fast","max_tokens":8,"messages":[{"role":"user","content":"hi","role":"assistant"}]}`, apiKey(key), 400, messagesInvalid},
		{"count_tokens duplicate model", "/alt/v1/messages/count_tokens", `{"model":"gw-fast","messages":[{"role":"user","content":"hi"}],"model":"gw-pinned-claude-opus-4-1"}`, apiKey(key), 400, messagesInvalid},
		{"chat nested too deep", "/v1/chat/completions", `{"model":"gw-fast","messages":[{"role":"user","content":"hi"}],"metadata":` + strings.Repeat("[", 65) + strings.Repeat("]", 65) + `}`, bearer(key), 400, fmt.Sprintf(chatInvalid, "body")},
		// Nothing unpriced passes.
		{"chat hosted tool", "/v1/chat/completions", `{"model":"gw-fast","tools":[{"type":"web_search"}],"messages":[{"role":"user","content":"hi"}]}`, bearer(key), 400, fmt.Sprintf(chatInvalid, "tools")},
		{"chat priority tier", "/v1/chat/completions", `{"model":"gw-fast","service_tier":"priority","messages":[{"role":"user","content":"hi"}]}`, bearer(key), 400, fmt.Sprintf(chatInvalid, "service_tier")},
		{"chat n too large", "/v1/chat/completions", `{"model":"gw-fast","n":500,"messages":[{"role":"user","content":"hi"}]}`, bearer(key), 400, fmt.Sprintf(chatInvalid, "n")},
		{"responses code interpreter", "/v1/responses", `{"model":"gw-fast","input":"hi","tools":[{"type":"code_interpreter","container":{"type":"auto"}}]}`, bearer(key), 400, fmt.Sprintf(chatInvalid, "tools")},
		{"responses background", "/v1/responses", `{"model":"gw-fast","input":"hi","background":true}`, bearer(key), 400, fmt.Sprintf(chatInvalid, "background")},
		{"responses previous_response_id", "/v1/responses", `{"model":"gw-fast","input":"hi","previous_response_id":"resp_123"}`, bearer(key), 400, fmt.Sprintf(chatInvalid, "previous_response_id")},
		{"messages server tool", "/alt/v1/messages", `{"model":"gw-fast","max_tokens":8,"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"hi"}]}`, apiKey(key), 400, messagesInvalid},
		{"messages premium beta", "/alt/v1/messages", `{"model":"gw-pinned-claude-haiku-4-5","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, append(apiKey(key), "anthropic-beta", "context-1m-2025-08-07"), 400, messagesInvalid},
		{"chat audio input", "/v1/chat/completions", `{"model":"gw-fast","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]}`, bearer(key), 400, fmt.Sprintf(chatInvalid, "messages")},
		{"messages one-hour cache", "/alt/v1/messages", `{"model":"gw-fast","max_tokens":8,"system":[{"type":"text","text":"s","cache_control":{"type":"ephemeral","ttl":"1h"}}],"messages":[{"role":"user","content":"hi"}]}`, apiKey(key), 400, messagesInvalid},
		{"chat one-hour cache", "/v1/chat/completions", `{"model":"gw-pinned-claude-haiku-4-5","messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral","ttl":"1h"}}]}]}`, bearer(key), 400, fmt.Sprintf(chatInvalid, "cache_control")},
		// The reservation is an upper bound: an output limit is a
		// whole number the provider would honour.
		{"chat output limit past any model", "/v1/chat/completions", `{"model":"gw-fast","max_completion_tokens":9000000000000000000,"messages":[{"role":"user","content":"hi"}]}`, bearer(key), 400, fmt.Sprintf(chatInvalid, "max_completion_tokens")},
		{"responses output limit a string", "/v1/responses", `{"model":"gw-fast","max_output_tokens":"5","input":"hi"}`, bearer(key), 400, fmt.Sprintf(chatInvalid, "max_output_tokens")},
		{"messages max_tokens null", "/alt/v1/messages", `{"model":"gw-fast","max_tokens":null,"messages":[{"role":"user","content":"hi"}]}`, apiKey(key), 400, messagesInvalid},
		{"chat model not on the key's list", "/v1/chat/completions", `{"model":"gw-pinned-claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}]}`, bearer(limited), 401,
			`{"error":{"message":"<string>","type":"permission_error","param":null,"code":"model_not_allowed"}}`},
		{"chat alias not on the key's list", "/v1/chat/completions", `{"model":"gw-auto","messages":[{"role":"user","content":"hi"}],"stream":true}`, bearer(limited), 401,
			`{"error":{"message":"<string>","type":"permission_error","param":null,"code":"model_not_allowed"}}`},
		{"responses model not on the key's list", "/v1/responses", `{"model":"gw-fast","input":"hi"}`, bearer(limited), 401,
			`{"error":{"message":"<string>","type":"permission_error","param":null,"code":"model_not_allowed"}}`},
		{"messages model not on the key's list", "/alt/v1/messages", `{"model":"gw-pinned-claude-sonnet-4-5","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`, apiKey(limited), 401,
			`{"type":"error","error":{"type":"permission_error","message":"<string>","code":"model_not_allowed"}}`},
	}
	e.reset()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			expectError(t, e.do(t, http.MethodPost, c.path, c.body, c.key...), c.status, c.want, "req-")
		})
	}
	if n := len(e.OA.Requests()) + len(e.AN.Requests()); n != 0 {
		t.Errorf("upstreams received %d requests", n)
	}
	e.expectNoCharge(t, account, "1.00")

	// A huge run of '[' is refused without taking the process down.
	t.Run("10 MB of [", func(t *testing.T) {
		r := e.do(t, http.MethodPost, "/v1/chat/completions", strings.Repeat("[", 10<<20), bearer(key)...)
		if r.Status != http.StatusBadRequest && r.Status != http.StatusRequestEntityTooLarge {
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
		if r := e.do(t, http.MethodGet, "/v1/models", "", bearer(key)...); r.Status != http.StatusOK {
			t.Fatalf("the gateway stopped serving: %d", r.Status)
		}
	})

	t.Run("the key's own model works", func(t *testing.T) {
		e.billedCall(t, chatClient, limited, account, chatReq{model: "gw-pinned-gpt-4.1-mini"}, "gpt-4.1-mini", false, tokenUsage{Input: 10, Output: 5}, false)
		e.billedCall(t, messagesClient, limited, account, chatReq{model: "gw-pinned-gpt-4.1-mini"}, "gpt-4.1-mini", false, tokenUsage{Input: 10, Output: 5}, false)
	})
}

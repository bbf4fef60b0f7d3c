package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// TestChatCountTokens: anthropic-sdk-go's Messages.CountTokens on a model
// of the messages-style provider is answered by that provider's
// count_tokens (with the backing model id); on a model of the other
// provider it is counted locally, without an upstream request. Neither is
// billed.
func TestChatCountTokens(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	const account = "count"
	key := e.account(t, account, map[string]any{"balance_usd": "1.00"})
	c := e.anthropicClient(key)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	params := func(model string) anthropic.MessageCountTokensParams {
		return anthropic.MessageCountTokensParams{
			Model:  model,
			System: anthropic.MessageCountTokensParamsSystemUnion{OfString: anthropic.String(systemText)},
			Messages: []anthropic.MessageParam{
				anthropic.NewUserMessage(anthropic.NewTextBlock(userText)),
				anthropic.NewAssistantMessage(anthropic.NewTextBlock("Let me look that up for you.")),
				anthropic.NewUserMessage(anthropic.NewTextBlock("Thanks, and tomorrow's forecast too.")),
			},
		}
	}

	t.Run("upstream", func(t *testing.T) {
		e.reset()
		got, err := c.Messages.CountTokens(ctx, params(anthropicBackend.model))
		if err != nil {
			t.Fatal(err)
		}
		reqs := e.AN.Requests()
		if len(reqs) != 1 || len(e.OA.Requests()) != 0 {
			t.Fatalf("upstream requests: %d to anthropic, %d to openai; want 1 and 0", len(reqs), len(e.OA.Requests()))
		}
		r := reqs[0]
		if r.Path != "/v1/messages/count_tokens" || r.Header.Get("X-Api-Key") != upstreamAnthropicKey {
			t.Errorf("upstream request %s with x-api-key %q, want /v1/messages/count_tokens with the gateway's key", r.Path, r.Header.Get("X-Api-Key"))
		}
		body := r.JSON()
		if body["model"] != anthropicBackend.backing || contentText(body["system"]) != systemText || len(body["messages"].([]any)) != 3 {
			t.Errorf("upstream body %s: want model %s, the system prompt and 3 messages", r.Body, anthropicBackend.backing)
		}
		if want := fake.CountTokens(r.Body); got.InputTokens != int64(want) || want <= 1 {
			t.Errorf("input_tokens %d, want the upstream's count %d", got.InputTokens, want)
		}
	})

	t.Run("local", func(t *testing.T) {
		e.reset()
		got, err := c.Messages.CountTokens(ctx, params(openaiBackend.model))
		if err != nil {
			t.Fatal(err)
		}
		if n := len(e.OA.Requests()) + len(e.AN.Requests()); n != 0 {
			t.Errorf("upstreams received %d requests, want none", n)
		}
		// The text alone is 40 tokens or so; 4 a message on top.
		if got.InputTokens < 12 || got.InputTokens > 200 {
			t.Errorf("local count %d, want a plausible positive number", got.InputTokens)
		}
		again, err := c.Messages.CountTokens(ctx, params(openaiBackend.model))
		if err != nil || again.InputTokens != got.InputTokens {
			t.Errorf("second local count %v (%v), want %d again", again, err, got.InputTokens)
		}
	})

	e.expectNoCharge(t, account, "1.00")
}

// cacheCaddyfile is Caddyfile.example with `cache_ttl 1m` in the gw block.
func cacheCaddyfile(t *testing.T) string {
	t.Helper()
	ex := exampleCaddyfile(t)
	out := strings.Replace(ex, "\tgw {\n", "\tgw {\n\t\tcache_ttl 1m\n", 1)
	if out == ex {
		t.Fatal("Caddyfile.example has no `gw {` block to configure")
	}
	return out
}

// TestChatCache: with cache_ttl set, the second identical temperature-0
// non-streaming request of an account is answered from the cache: the same
// body, X-Gw-Cache: hit, no X-Gw-Routed-Model, X-Gw-Cost-Usd 0.00, no
// upstream request and no ledger entry. Other accounts, other settings and
// streams are not served from it.
func TestChatCache(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, cacheCaddyfile(t))
	const account = "cache"
	key := e.account(t, account, nil)
	otherKey := e.account(t, "cache-other", nil)
	u := tokenUsage{Input: 321, Cached: 0, Output: 45}

	cases := []struct {
		k clientKind
		b backend
	}{{chatClient, openaiBackend}, {responsesClient, anthropicBackend}, {messagesClient, anthropicBackend}, {messagesClient, openaiBackend}}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%s", c.k, c.b.name), func(t *testing.T) {
			path, _ := rawChat(c.k, c.b.model, false)
			body := cacheBody(c.k, c.b.model, 0)
			e.reset()
			e.fakeOf(c.b).SetDefault(fake.Script{Text: "Cached answer for " + c.k.String(), Usage: fakeUsage(c.b.anthropic, u)})
			defer e.fakeOf(c.b).SetDefault(fake.DefaultScript())
			cost := listCost(t, c.b.backing, u, false)
			before := len(e.ledger(t, account))

			first := e.do(t, http.MethodPost, path, body, authFor(c.k, key)...)
			if first.Status != http.StatusOK {
				t.Fatalf("first: %d %s", first.Status, first.Body)
			}
			expectGwHeaders(t, first.Header, receipts(c.b.backing, c.b.model, false, cost))

			second := e.do(t, http.MethodPost, path, body, authFor(c.k, key)...)
			if second.Status != http.StatusOK {
				t.Fatalf("second: %d %s", second.Status, second.Body)
			}
			expectGwHeaders(t, second.Header, map[string]string{
				"X-Gw-Model": c.b.backing, "X-Gw-Original-Model": c.b.model, "X-Gw-Routed": "false",
				"X-Gw-Request-Id": anyValue, "X-Gw-Cost-Usd": "0.00", "X-Gw-Cache": "hit",
			})
			if id1, id2 := first.Header.Get("X-Gw-Request-Id"), second.Header.Get("X-Gw-Request-Id"); id1 == id2 {
				t.Errorf("both answers have request id %q", id1)
			}
			if !bytes.Equal(first.Body, second.Body) {
				t.Errorf("cached body\n%s\ndiffers from the first\n%s", second.Body, first.Body)
			}
			if n := len(e.fakeOf(c.b).Requests()); n != 1 {
				t.Errorf("upstream received %d requests, want 1", n)
			}
			l := e.ledger(t, account)
			if len(l) != before+1 {
				t.Errorf("ledger grew by %d entries, want 1", len(l)-before)
			}
			e.expectLedger(t, account, ledgerEntry{RequestID: first.Header.Get("X-Gw-Request-Id"), Endpoint: c.k.ledgerEndpoint(),
				Model: c.b.backing, Units: u.Units(), Unit: "token", Cost: cost.String()})

			// Not served from the cache: another account, another
			// temperature, a stream.
			misses := []struct {
				name, body string
				key        string
			}{
				{"another account", body, otherKey},
				{"temperature 0.7", cacheBody(c.k, c.b.model, 0.7), key},
				{"temperature 0.7 again", cacheBody(c.k, c.b.model, 0.7), key},
				{"a stream", strings.Replace(body, `"temperature":0`, `"temperature":0,"stream":true`, 1), key},
			}
			for i, m := range misses {
				r := e.do(t, http.MethodPost, path, m.body, authFor(c.k, m.key)...)
				if r.Status != http.StatusOK || r.Header.Get("X-Gw-Cache") != "" {
					t.Errorf("%s: status %d X-Gw-Cache %q, want 200 and no cache", m.name, r.Status, r.Header.Get("X-Gw-Cache"))
				}
				if n := len(e.fakeOf(c.b).Requests()); n != 2+i {
					t.Errorf("%s: upstream received %d requests in all, want %d", m.name, n, 2+i)
				}
			}
		})
	}
	var sum pricing.Money
	for _, l := range e.ledger(t, account) {
		sum += mustUSD(t, l.Cost)
	}
	if spend, _ := e.accountMoney(t, account); spend != sum {
		t.Errorf("spend %s, want the ledger's sum %s", spend, sum)
	}
}

// cacheBody is a non-streaming request of client k with temperature temp.
func cacheBody(k clientKind, model string, temp float64) string {
	switch k {
	case responsesClient:
		return fmt.Sprintf(`{"model":%q,"input":"Name three French cheeses.","temperature":%v}`, model, temp)
	case messagesClient:
		return fmt.Sprintf(`{"model":%q,"max_tokens":64,"messages":[{"role":"user","content":"Name three French cheeses."}],"temperature":%v}`, model, temp)
	}
	return fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Name three French cheeses."}],"temperature":%v}`, model, temp)
}

// TestChatSecondOpinion: a gw-auto request with "second_opinion": true is
// answered by the routed model and checked by a model of another lane (the
// field never reaches an upstream); the answer carries
// X-Gw-Second-Opinion and a second_opinion body field with the checker's
// verdict, both calls are in the ledger (<id> and <id>-so) and
// X-Gw-Cost-Usd is their sum. A stream or another model cannot have one.
func TestChatSecondOpinion(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	const account = "opinion"
	key := e.account(t, account, nil)
	const question = "What is the capital of France?"
	const answer = "The capital of France is Lyon."
	// "What is the capital of France?" is short chat: gw-auto takes the
	// fast lane (gpt-4.1-nano); the check runs on the cheapest model of the
	// reasoning lane (o4-mini). Both are behind the OpenAI-style fake.
	answerUsage := tokenUsage{Input: 420, Cached: 0, Output: 12}
	checkUsage := tokenUsage{Input: 610, Cached: 0, Output: 33}
	answerCost := listCost(t, "gpt-4.1-nano", answerUsage, false)
	checkCost := listCost(t, "o4-mini", checkUsage, false)

	cases := []struct {
		name, reply, verdict, notes string
		k                           clientKind
	}{
		{"chat disagree", `{"verdict":"disagree","notes":"wrong"}`, "disagree", "wrong", chatClient},
		{"chat agree", "Sure. {\"verdict\": \"agree\", \"notes\": \"Correct and complete.\"}", "agree", "Correct and complete.", chatClient},
		{"messages disagree", `{"verdict":"disagree","notes":"Paris, not Lyon."}`, "disagree", "Paris, not Lyon.", messagesClient},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e.reset()
			e.OA.Push(fake.Script{Text: answer, Usage: fakeUsage(false, answerUsage)},
				fake.Script{Text: c.reply, Usage: fakeUsage(false, checkUsage)})
			var r response
			switch c.k {
			case messagesClient:
				r = e.do(t, http.MethodPost, "/alt/v1/messages",
					`{"model":"gw-auto","max_tokens":100,"messages":[{"role":"user","content":"`+question+`"}],"second_opinion":true}`, apiKey(key)...)
			default:
				r = e.do(t, http.MethodPost, "/v1/chat/completions",
					`{"model":"gw-auto","messages":[{"role":"user","content":"`+question+`"}],"second_opinion":true}`, bearer(key)...)
			}
			if r.Status != http.StatusOK {
				t.Fatalf("status %d: %s", r.Status, r.Body)
			}
			want := receipts("gpt-4.1-nano", "gw-auto", true, answerCost+checkCost)
			want["X-Gw-Second-Opinion"] = c.verdict
			expectGwHeaders(t, r.Header, want)

			var body struct {
				SecondOpinion map[string]any `json:"second_opinion"`
				Choices       []struct {
					Message struct {
						Content string `json:"content"`
					} `json:"message"`
				} `json:"choices"`
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			}
			if err := json.Unmarshal(r.Body, &body); err != nil {
				t.Fatal(err)
			}
			got := ""
			if len(body.Choices) == 1 {
				got = body.Choices[0].Message.Content
			} else if len(body.Content) == 1 {
				got = body.Content[0].Text
			}
			if got != answer {
				t.Errorf("answer %q, want %q: %s", got, answer, r.Body)
			}
			if want := map[string]any{"model": "o4-mini", "verdict": c.verdict, "notes": c.notes}; !sameJSON(mustJSONText(t, body.SecondOpinion), mustJSONText(t, want)) {
				t.Errorf("second_opinion %v, want %v", body.SecondOpinion, want)
			}

			reqs := e.OA.Requests()
			if len(reqs) != 2 || len(e.AN.Requests()) != 0 {
				t.Fatalf("upstream requests: %d to openai, %d to anthropic; want the answer and the check on openai", len(reqs), len(e.AN.Requests()))
			}
			for i, m := range []string{"gpt-4.1-nano", "o4-mini"} {
				b := reqs[i].JSON()
				if _, ok := b["second_opinion"]; ok || b["model"] != m {
					t.Errorf("upstream request %d: model %v, second_opinion present %t; want %s and absent", i, b["model"], ok, m)
				}
			}
			if check := string(reqs[1].Body); !strings.Contains(check, question) || !strings.Contains(check, answer) {
				t.Errorf("the check request does not show the question and the answer: %s", check)
			}

			id := r.Header.Get("X-Gw-Request-Id")
			e.expectLedger(t, account, ledgerEntry{RequestID: id, Endpoint: c.k.ledgerEndpoint(), Model: "gpt-4.1-nano",
				Units: answerUsage.Units(), Unit: "token", Cost: answerCost.String()})
			e.expectLedger(t, account, ledgerEntry{RequestID: id + "-so", Endpoint: c.k.ledgerEndpoint(), Model: "o4-mini",
				Units: checkUsage.Units(), Unit: "token", Cost: checkCost.String()})
		})
	}

	t.Run("openai-go with WithJSONSet", func(t *testing.T) {
		e.reset()
		e.OA.Push(fake.Script{Text: answer, Usage: fakeUsage(false, answerUsage)},
			fake.Script{Text: `{"verdict":"agree","notes":"ok"}`, Usage: fakeUsage(false, checkUsage)})
		var hr *http.Response
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c := e.openaiClient(key)
		out, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model: "gw-auto", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(question)},
		}, option.WithJSONSet("second_opinion", true), option.WithResponseInto(&hr))
		if err != nil {
			t.Fatal(err)
		}
		if hr.Header.Get("X-Gw-Second-Opinion") != "agree" || hr.Header.Get("X-Gw-Cost-Usd") != (answerCost+checkCost).String() {
			t.Errorf("X-Gw-Second-Opinion %q X-Gw-Cost-Usd %q, want agree and %s", hr.Header.Get("X-Gw-Second-Opinion"), hr.Header.Get("X-Gw-Cost-Usd"), answerCost+checkCost)
		}
		if v := out.JSON.ExtraFields["second_opinion"]; !sameJSON(v.Raw(), `{"model":"o4-mini","verdict":"agree","notes":"ok"}`) {
			t.Errorf("second_opinion %s", v.Raw())
		}
	})

	t.Run("refused", func(t *testing.T) {
		e.reset()
		before := len(e.ledger(t, account))
		const refusal = `{"error":{"message":"<string>","type":"invalid_request_error","param":"second_opinion","code":null}}`
		for _, body := range []string{
			`{"model":"gw-auto","messages":[{"role":"user","content":"hi"}],"stream":true,"second_opinion":true}`,
			`{"model":"gw-fast","messages":[{"role":"user","content":"hi"}],"second_opinion":true}`,
			`{"model":"gw-pinned-gpt-4.1-mini","messages":[{"role":"user","content":"hi"}],"second_opinion":true}`,
		} {
			expectError(t, e.do(t, http.MethodPost, "/v1/chat/completions", body, bearer(key)...), http.StatusBadRequest, refusal, "req-")
		}
		expectError(t, e.do(t, http.MethodPost, "/alt/v1/messages",
			`{"model":"gw-auto","max_tokens":10,"stream":true,"messages":[{"role":"user","content":"hi"}],"second_opinion":true}`, apiKey(key)...),
			http.StatusBadRequest, `{"type":"error","error":{"type":"invalid_request_error","message":"<string>"}}`, "req-")
		if n := len(e.OA.Requests()) + len(e.AN.Requests()); n != 0 {
			t.Errorf("upstreams received %d requests", n)
		}
		if n := len(e.ledger(t, account)); n != before {
			t.Errorf("ledger grew from %d to %d", before, n)
		}
	})

	var sum pricing.Money
	for _, l := range e.ledger(t, account) {
		sum += mustUSD(t, l.Cost)
	}
	if spend, _ := e.accountMoney(t, account); spend != sum || sum != 4*(answerCost+checkCost) {
		t.Errorf("spend %s, ledger sum %s, want both %s", spend, sum, 4*(answerCost+checkCost))
	}
}

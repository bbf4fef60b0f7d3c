package integration

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// Betas: what client libraries send on their own passes, to a
// messages-style model with the header and to a chat-completions-style one
// without it; a beta outside the gateway's table is refused, naming it; a
// priced one is billed at its price or refused.

// clientRecording is one file of testdata/clients: the requests a library
// sent for each call (record.mjs).
type clientRecording struct {
	Library string `json:"library"`
	Version string `json:"version"`
	Calls   []struct {
		Call     string            `json:"call"`
		Requests []recordedRequest `json:"requests"`
	} `json:"calls"`
}

// recordedRequest is one request as the library sent it, without its key.
type recordedRequest struct {
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Headers map[string]string `json:"headers"`
	Body    json.RawMessage   `json:"body"`
}

func loadRecordings(t *testing.T) []clientRecording {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "clients", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no client recordings (%v)", err)
	}
	var out []clientRecording
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var r clientRecording
		if err := json.Unmarshal(b, &r); err != nil || len(r.Calls) == 0 {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, r)
	}
	return out
}

// replay sends a recorded request through the gateway's messages-style
// path with the recorded headers, the key in x-api-key, and model in place
// of the recorded one.
func (e *chatEnv) replay(t *testing.T, key, model string, r recordedRequest) response {
	t.Helper()
	body, err := sjson.SetBytes(r.Body, "model", model)
	if err != nil {
		t.Fatal(err)
	}
	var header []string
	for k, v := range r.Headers {
		header = append(header, k, v)
	}
	return e.do(t, r.Method, "/alt"+r.Path, string(body), append(header, apiKey(key)...)...)
}

// betaUsage is what the fakes report for a replayed call.
var betaUsage = tokenUsage{Input: 40, Output: 12}

// answerFor is the fakes' answer to a recorded body: a call of its first
// tool, or the structured answer.
func answerFor(body []byte, anthropicFormat bool) fake.Script {
	s := fake.Script{Usage: fakeUsage(anthropicFormat, betaUsage)}
	if name := gjson.GetBytes(body, "tools.0.name"); name.Exists() {
		s.ToolCalls = []fake.ToolCall{{Name: name.String(), Arguments: `{"city":"Paris","temperature_c":21}`}}
	} else {
		s.Text = `{"city":"Paris","temperature_c":21}`
	}
	return s
}

// TestClientBetas replays what the AI SDK, the official TypeScript SDK and
// LangChain sent for tool calls and structured output, whole and
// streamed, on a messages-style model (the upstream gets the library's
// betas exactly) and on a chat-completions-style model behind the
// messages-style path (the betas are dropped); each is answered and billed
// once at list price.
func TestClientBetas(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	const account = "client-betas"
	key := e.account(t, account, nil)
	for _, rec := range loadRecordings(t) {
		for _, call := range rec.Calls {
			for _, r := range call.Requests {
				for _, b := range backends {
					t.Run(fmt.Sprintf("%s/%s/%s", rec.Library, call.Call, b.name), func(t *testing.T) {
						e.reset()
						count := strings.HasPrefix(r.Path, "/v1/messages/count_tokens")
						up := e.fakeOf(b)
						up.Push(answerFor(r.Body, b.anthropic))
						res := e.replay(t, key, b.model, r)
						if res.Status != http.StatusOK {
							t.Fatalf("status %d: %s", res.Status, res.Body)
						}
						reqs := up.Requests()
						wantReqs := 1
						if count && !b.anthropic {
							wantReqs = 0 // counted by the gateway
						}
						if len(reqs) != wantReqs || len(e.otherFake(b).Requests()) != 0 {
							t.Fatalf("upstreams received %d and %d requests, want %d and 0", len(reqs), len(e.otherFake(b).Requests()), wantReqs)
						}
						if wantReqs == 1 {
							got := strings.Join(reqs[0].Header.Values("Anthropic-Beta"), ",")
							want := r.Headers["anthropic-beta"]
							if !b.anthropic {
								want = "" // a translated call's betas are dropped
							}
							if got != want {
								t.Errorf("upstream anthropic-beta %q, want %q", got, want)
							}
						}
						if count {
							if n := gjson.GetBytes(res.Body, "input_tokens"); n.Type != gjson.Number || n.Int() <= 0 {
								t.Errorf("count_tokens answered %s", res.Body)
							}
							return
						}
						if gjson.GetBytes(r.Body, "stream").Bool() {
							if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") || !strings.Contains(string(res.Body), "event: message_stop") {
								t.Errorf("stream %q ended without message_stop: %s", ct, res.Body)
							}
						} else if got := gjson.GetBytes(res.Body, "type").String(); got != "message" {
							t.Errorf("answer type %q: %s", got, res.Body)
						}
						id := res.Header.Get("X-Gw-Request-Id")
						waitHandled(t, e.gateway, id)
						e.expectLedger(t, account, ledgerEntry{RequestID: id, Endpoint: "messages", Model: b.backing,
							Units: betaUsage.Units(), Unit: "token", Cost: listCost(t, b.backing, betaUsage, false).String()})
					})
				}
			}
		}
	}
}

// scaledCost is usage u on model at inPct and outPct percent of its list
// input and output prices, computed exactly and rounded once.
func scaledCost(t testing.TB, model string, u tokenUsage, inPct, outPct int64) pricing.Money {
	t.Helper()
	p := listPrices[model]
	price := func(s string, pct int64) *big.Rat {
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			t.Fatalf("bad price %q", s)
		}
		return r.Mul(r, big.NewRat(pct, 100))
	}
	sum := new(big.Rat).Mul(big.NewRat(u.Input, 1_000_000), price(p[0], inPct))
	sum.Add(sum, new(big.Rat).Mul(big.NewRat(u.Output, 1_000_000), price(p[1], outPct)))
	nanos := sum.Mul(sum, big.NewRat(1_000_000_000, 1))
	if !nanos.IsInt() {
		t.Fatalf("%s is not a whole number of nano-dollars", nanos)
	}
	return pricing.Money(nanos.Num().Int64())
}

// messagesBody is a small messages-style request for model.
func messagesBody(model string, stream bool) string {
	return fmt.Sprintf(`{"model":%q,"max_tokens":64,"messages":[{"role":"user","content":"hi"}],"stream":%t}`, model, stream)
}

// TestBetaTable: a beta outside the table is refused with a 400 naming it
// when the call would forward it (anthropic-beta or vendor-beta, on the
// messages-style and the chat-completions path alike), before any
// upstream is asked and without a charge; on a translated call it is
// dropped. A priced beta is billed at its price when it reaches a
// messages-style model, at list price when it is dropped; a beta priced
// beyond what the gateway bills is refused.
func TestBetaTable(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	const account, balance = "beta-table", "5.00"
	key := e.account(t, account, map[string]any{"balance_usd": balance})
	const unknown = "made-up-feature-2099-01-01"

	refusals := []struct {
		name, path, body string
		header           []string
		beta             string
	}{
		{"messages unknown", "/alt/v1/messages", messagesBody(anthropicBackend.model, false), []string{"anthropic-beta", "structured-outputs-2025-11-13, " + unknown}, unknown},
		{"messages unknown streamed", "/alt/v1/messages", messagesBody(anthropicBackend.model, true), []string{"anthropic-beta", unknown}, unknown},
		{"messages vendor-beta", "/alt/v1/messages", messagesBody(anthropicBackend.model, false), []string{"vendor-beta", unknown}, unknown},
		{"messages refused priced", "/alt/v1/messages", messagesBody(anthropicBackend.model, false), []string{"anthropic-beta", "context-1m-2025-08-07"}, "context-1m-2025-08-07"},
		{"count_tokens unknown", "/alt/v1/messages/count_tokens", `{"model":"gw-pinned-claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}]}`, []string{"anthropic-beta", unknown}, unknown},
		{"chat to a messages-style model", "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}]}`, anthropicBackend.model), []string{"anthropic-beta", unknown}, unknown},
	}
	for _, c := range refusals {
		t.Run(c.name, func(t *testing.T) {
			e.reset()
			auth := apiKey(key)
			if strings.HasPrefix(c.path, "/v1/") {
				auth = bearer(key)
			}
			r := e.do(t, http.MethodPost, c.path, c.body, append(c.header, auth...)...)
			if strings.HasPrefix(c.path, "/alt/") {
				expectError(t, r, http.StatusBadRequest, `{"type":"error","error":{"type":"invalid_request_error","message":"<string>"}}`, "req-")
			} else {
				expectError(t, r, http.StatusBadRequest, fmt.Sprintf(`{"error":{"message":"<string>","type":"invalid_request_error","param":%q,"code":null}}`, c.header[0]), "req-")
			}
			if msg := gjson.GetBytes(r.Body, "error.message").String(); !strings.Contains(msg, c.beta) {
				t.Errorf("message %q does not name %s", msg, c.beta)
			}
			if n := len(e.OA.Requests()) + len(e.AN.Requests()); n != 0 {
				t.Errorf("upstreams received %d requests", n)
			}
		})
	}
	e.expectNoCharge(t, account, balance)

	u := tokenUsage{Input: 1000, Output: 100}
	billed := func(t *testing.T, b backend, beta string, stream bool, want pricing.Money) {
		t.Helper()
		e.reset()
		e.fakeOf(b).Push(fake.Script{Text: "ok", Usage: fakeUsage(b.anthropic, u)})
		r := e.do(t, http.MethodPost, "/alt/v1/messages", messagesBody(b.model, stream), append([]string{"anthropic-beta", beta}, apiKey(key)...)...)
		if r.Status != http.StatusOK {
			t.Fatalf("status %d: %s", r.Status, r.Body)
		}
		reqs := e.fakeOf(b).Requests()
		if len(reqs) != 1 {
			t.Fatalf("upstream received %d requests", len(reqs))
		}
		wantBeta := beta
		if !b.anthropic {
			wantBeta = ""
		}
		if got := reqs[0].Header.Get("Anthropic-Beta"); got != wantBeta {
			t.Errorf("upstream anthropic-beta %q, want %q", got, wantBeta)
		}
		id := r.Header.Get("X-Gw-Request-Id")
		if !stream && r.Header.Get("X-Gw-Cost-Usd") != want.String() {
			t.Errorf("X-Gw-Cost-Usd %q, want %s", r.Header.Get("X-Gw-Cost-Usd"), want)
		}
		waitHandled(t, e.gateway, id)
		e.expectLedger(t, account, ledgerEntry{RequestID: id, Endpoint: "messages", Model: b.backing, Units: u.Units(), Unit: "token", Cost: want.String()})
	}
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("unknown dropped on a translated call/stream=%t", stream), func(t *testing.T) {
			billed(t, openaiBackend, unknown, stream, listCost(t, openaiBackend.backing, u, false))
		})
		t.Run(fmt.Sprintf("priced/stream=%t", stream), func(t *testing.T) {
			billed(t, anthropicBackend, "fast-mode-2026-02-01", stream, scaledCost(t, anthropicBackend.backing, u, 600, 600))
		})
		t.Run(fmt.Sprintf("priced dropped on a translated call/stream=%t", stream), func(t *testing.T) {
			billed(t, openaiBackend, "fast-mode-2026-02-01", stream, listCost(t, openaiBackend.backing, u, false))
		})
	}
}

// TestBetaTableConfigured: the Caddyfile's beta lines extend the table (a
// new price-neutral beta is forwarded), trim it (a default one refused)
// and price a beta (billed at the percentages given). An answer shaped by
// betas is not cached.
func TestBetaTableConfigured(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, withGW(t, "\t\tcache_ttl 1m\n"+
		"\t\tbeta made-up-feature-2099-01-01 neutral\n"+
		"\t\tbeta structured-outputs-2025-11-13 refused\n"+
		"\t\tbeta context-1m-2025-08-07 priced 200 150"))
	const account = "beta-configured"
	key := e.account(t, account, nil)
	u := tokenUsage{Input: 1000, Output: 100}
	for _, c := range []struct {
		beta   string
		status int
		cost   pricing.Money
	}{
		{"made-up-feature-2099-01-01", http.StatusOK, listCost(t, anthropicBackend.backing, u, false)},
		{"structured-outputs-2025-11-13", http.StatusBadRequest, 0},
		{"context-1m-2025-08-07", http.StatusOK, scaledCost(t, anthropicBackend.backing, u, 200, 150)},
		{"interleaved-thinking-2025-05-14", http.StatusOK, listCost(t, anthropicBackend.backing, u, false)},
	} {
		t.Run(c.beta, func(t *testing.T) {
			e.reset()
			e.AN.Push(fake.Script{Text: "ok", Usage: fakeUsage(true, u)})
			r := e.do(t, http.MethodPost, "/alt/v1/messages", messagesBody(anthropicBackend.model, false), append([]string{"anthropic-beta", c.beta}, apiKey(key)...)...)
			if r.Status != c.status {
				t.Fatalf("status %d, want %d: %s", r.Status, c.status, r.Body)
			}
			if c.status != http.StatusOK {
				if msg := gjson.GetBytes(r.Body, "error.message").String(); !strings.Contains(msg, c.beta) {
					t.Errorf("message %q does not name %s", msg, c.beta)
				}
				if len(e.AN.Requests()) != 0 {
					t.Errorf("the upstream was asked")
				}
				return
			}
			if got := e.AN.Requests()[0].Header.Get("Anthropic-Beta"); got != c.beta {
				t.Errorf("upstream anthropic-beta %q, want %q", got, c.beta)
			}
			if got := r.Header.Get("X-Gw-Cost-Usd"); got != c.cost.String() {
				t.Errorf("X-Gw-Cost-Usd %q, want %s", got, c.cost)
			}
		})
	}

	t.Run("not cached", func(t *testing.T) {
		e.reset()
		body := `{"model":"gw-pinned-claude-sonnet-4-5","max_tokens":64,"temperature":0,"messages":[{"role":"user","content":"same"}]}`
		for i := range 2 {
			r := e.do(t, http.MethodPost, "/alt/v1/messages", body, append([]string{"anthropic-beta", "interleaved-thinking-2025-05-14"}, apiKey(key)...)...)
			if r.Status != http.StatusOK || r.Header.Get("X-Gw-Cache") != "" {
				t.Fatalf("call %d: status %d X-Gw-Cache %q", i, r.Status, r.Header.Get("X-Gw-Cache"))
			}
		}
		if n := len(e.AN.Requests()); n != 2 {
			t.Errorf("upstream received %d requests, want 2", n)
		}
	})
}

package integration

import (
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/pricing"
)

func lp(p float64) float64 { return math.Log(p) }

// Decision mode through the built gateway: answers from the model's
// log-probabilities, its response headers, billing of input tokens only at
// 0.1008 USD per million, and the error rows.
func TestDecide(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, withGW(t, "\t\tlimits {\n\t\t\tdecide_requests_per_minute 100\n\t\t}"))
	key := e.account(t, "decider", map[string]any{"balance_usd": "1.00"})
	// One answer serves every question: each reads the labels of its own
	// options ("1".."n" for choices, "0".."n-1" for score levels, yes/no).
	// The third choice ("3") has no log-probability: it gets the floor,
	// which rounds to 0.
	e.OA.SetDefault(fake.Script{Text: "1", Usage: fake.Usage{Input: 300, Output: 1}, TopLogprobs: []fake.Logprob{
		{Token: "1", Logprob: lp(0.6)}, {Token: "yes", Logprob: lp(0.3)}, {Token: "2", Logprob: lp(0.2)},
		{Token: "0", Logprob: lp(0.1)}, {Token: "no", Logprob: lp(0.1)}, {Token: " Yes", Logprob: lp(0.05)}, {Token: "maybe", Logprob: lp(0.01)},
	}})
	req := `{"model":"gw-decide","state":{"ticket":"printer on fire","priority":"unset"},"questions":{
		"team":{"type":"choice","instructions":"Which team handles it?","criteria":{"it":"IT","facilities":"Facilities","legal":"Legal"}},
		"severity":{"type":"score","instructions":"How severe?","criteria":["low","medium","high"]},
		"urgent":{"type":"noul","instructions":"Is it urgent?"}}}`
	r := e.do(t, http.MethodPost, "/v1/decide", req, bearer(key)...)
	if r.Status != http.StatusOK {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	for h, want := range map[string]string{"X-Gw-No-Retain": "applied", "Cache-Control": "no-store", "X-Gw-Alias": "gw-decide", "X-Gw-Routed-Model": "gw-decide"} {
		if got := r.Header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}
	expectRequestID(t, r, "dec-")
	matchJSON(t, r.Body, `{"model":"gw-decide","usage":{"input_tokens":900},"answers":{
		"team":{"type":"choice","choice":"it","probabilities":{"it":0.75,"facilities":0.25,"legal":0}},
		"severity":{"type":"score","score":1.1111,"probabilities":{"0":0.1111,"1":0.6667,"2":0.2222},"legend":{"0":"low","1":"medium","2":"high"}},
		"urgent":{"type":"noul","noul":0.7778}}}`)
	cost := pricing.Cost(false, pricing.Line{Units: 900, Rate: pricing.DecideRate})
	if got := r.Header.Get("X-Gw-Cost-Usd"); got != cost.String() {
		t.Errorf("cost %s, want %s", got, cost)
	}
	if c, ok := ledgerOf(t, e.gateway, "decider")[r.Header.Get("X-Gw-Request-Id")]; !ok || c != cost {
		t.Errorf("ledger %v %v, want %v", c, ok, cost)
	}
	// The questions asked: one token, top log-probabilities, the options
	// under their labels.
	for _, q := range e.OA.Requests() {
		b := q.JSON()
		if b["max_completion_tokens"] != float64(1) || b["logprobs"] != true || b["top_logprobs"] != float64(20) || b["model"] != "gpt-4.1-mini" {
			t.Fatalf("question %s", q.Body)
		}
	}

	free := e.account(t, "free-decider", map[string]any{"plan": "free"})
	broke := e.account(t, "broke-decider", map[string]any{"balance_usd": "0"})
	_, _ = e.createKey(t, "decider", map[string]any{"name": "x"})
	noDecide, _ := e.createKey(t, "decider", map[string]any{"name": "chat only", "models": []string{"gw-auto"}})
	const errShape = `{"error":{"message":"<string>","type":"<string>","code":%q,"param":%s}}`
	for _, tc := range []struct {
		name, key, body string
		push            *fake.Script
		status          int
		code, param     string
	}{
		{"wrong model", key, strings.Replace(req, `"gw-decide"`, `"gw-auto"`, 1), nil, 422, "model_not_supported", `"model"`},
		{"state too long", key, `{"model":"gw-decide","state":"` + strings.Repeat("word ", 2100) + `","questions":{"q":{"type":"noul","instructions":"?"}}}`, nil, 422, "state_too_long", `"state"`},
		{"bad question", key, `{"model":"gw-decide","state":"s","questions":{"q":{"type":"choice","instructions":"?","criteria":{"only":"one"}}}}`, nil, 422, "invalid_request", `"questions"`},
		{"key without gw-decide", noDecide, req, nil, 403, "model_not_allowed", "null"},
		{"free plan", free, req, nil, 403, "paid_plan_required", "null"},
		{"bad key", "sk-nope", req, nil, 401, "invalid_api_key", "null"},
		{"model overloaded", key, `{"model":"gw-decide","state":"s","questions":{"q":{"type":"noul","instructions":"?"}}}`, &fake.Script{Status: 529}, 529, "upstream_overloaded", "null"},
		{"model refuses", key, `{"model":"gw-decide","state":"s","questions":{"q":{"type":"noul","instructions":"?"}}}`, &fake.Script{Status: 400}, 422, "upstream_rejected", `"body"`},
		{"model unavailable", key, `{"model":"gw-decide","state":"s","questions":{"q":{"type":"noul","instructions":"?"}}}`, &fake.Script{Status: 500}, 503, "upstream_unavailable", "null"},
		{"balance used up", broke, req, nil, 402, "credit_exhausted", "null"},
		{"model answers off the options", key, `{"model":"gw-decide","state":"s","questions":{"q":{"type":"noul","instructions":"?"}}}`,
			&fake.Script{Text: "Maybe", Usage: fake.Usage{Input: 10}, TopLogprobs: []fake.Logprob{{Token: "Maybe", Logprob: 0}}}, 422, "upstream_rejected", `"questions"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.push != nil {
				e.OA.Push(*tc.push)
			}
			r := e.do(t, http.MethodPost, "/v1/decide", tc.body, bearer(tc.key)...)
			want := strings.Replace(strings.Replace(errShape, "%q", `"`+tc.code+`"`, 1), "%s", tc.param, 1)
			expectError(t, r, tc.status, want, "dec-")
		})
	}
	// A body over 13 MB is refused while reading.
	big := `{"model":"gw-decide","state":"` + strings.Repeat("a", 13_000_001) + `"}`
	if r := e.do(t, http.MethodPost, "/v1/systemone", big, bearer(key)...); r.Status != http.StatusRequestEntityTooLarge || !strings.Contains(string(r.Body), "request_too_large") {
		t.Fatalf("13 MB: %d %s", r.Status, r.Body)
	}
	// Nothing of the failures was billed.
	if l := ledgerOf(t, e.gateway, "decider"); len(l) != 1 {
		t.Fatalf("ledger %v", l)
	}
}

package integration

import (
	"context"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// Web search through the built gateway against a fake responses API with
// web-search items and url citations: the strict body, the answer, the
// price per search and per token equal to the ledger, every failure row
// unbilled, and the web_search tool.
func TestSearch(t *testing.T) {
	t.Parallel()
	oa, an := fake.NewOpenAI(), fake.NewAnthropic()
	t.Cleanup(oa.Close)
	t.Cleanup(an.Close)
	g := startGateway(t, gwOptions{Env: map[string]string{"GW_OPENAI_BASE_URL": oa.URL, "GW_ANTHROPIC_BASE_URL": an.URL, "GW_SEARCH_BASE_URL": oa.URL}})
	key := g.newAccountKey(t, map[string]any{"id": "searcher", "plan": "paid", "cleared": true, "balance_usd": "1.00"})
	oa.Push(fake.Script{Text: "Caddy is a web server.", WebSearches: []string{"caddy", "caddy server"},
		Citations: []string{"https://caddyserver.com/", "https://github.com/caddyserver/caddy", "https://caddyserver.com/"},
		Usage:     fake.Usage{Input: 1000, Output: 200}})
	r := g.do(t, http.MethodPost, "/v1/search", `{"query":"what is caddy?"}`, bearer(key)...)
	if r.Status != http.StatusOK {
		t.Fatalf("search: %d %s", r.Status, r.Body)
	}
	// 2 searches at 0.025, 1,000 input tokens at 0.40/M, 200 output at 1.60/M.
	cost := pricing.Cost(false, pricing.Line{Units: 2, Rate: pricing.PerUnit(pricing.Micro(25000))},
		pricing.Line{Units: 1000, Rate: pricing.PerMillion(pricing.Micro(400_000))}, pricing.Line{Units: 200, Rate: pricing.PerMillion(pricing.Micro(1_600_000))})
	matchJSON(t, r.Body, `{"answer":"Caddy is a web server.","citations":["https://caddyserver.com/","https://github.com/caddyserver/caddy"],"searches":2,"cost_microcents":50720,"cost_usd":"0.05072"}`)
	if r.Header.Get("X-Gw-Cost-Usd") != cost.String() || cost.String() != "0.05072" {
		t.Fatalf("cost header %s, want %s", r.Header.Get("X-Gw-Cost-Usd"), cost)
	}
	if c := ledgerOf(t, g, "searcher")[r.Header.Get("X-Gw-Request-Id")]; c != cost {
		t.Fatalf("ledger %v", c)
	}
	sent := oa.Requests()[0].JSON()
	if sent["store"] != false || sent["max_tool_calls"] != float64(3) || !strings.Contains(string(oa.Requests()[0].Body), `"web_search"`) ||
		oa.Requests()[0].Path != "/v1/responses" {
		t.Fatalf("sent %s to %s", oa.Requests()[0].Body, oa.Requests()[0].Path)
	}

	const (
		bad      = `{"error":{"message":"<string>","type":"invalid_request_error"}}`
		badQuery = `{"error":{"message":"<string>","type":"invalid_request_error","param":"query"}}`
	)
	upstreamErr := func(code string) string {
		return `{"error":{"message":"<string>","type":"api_error","code":"` + code + `"}}`
	}
	for _, tc := range []struct {
		name, body string
		push       *fake.Script
		status     int
		want       string
	}{
		{"not JSON", `{"query":`, nil, 400, bad},
		{"not an object", `["q"]`, nil, 400, bad},
		{"model field", `{"query":"q","model":"gpt-5"}`, nil, 400, bad},
		{"tools field", `{"query":"q","tools":[]}`, nil, 400, bad},
		{"search_parameters", `{"query":"q","search_parameters":{}}`, nil, 400, bad},
		{"no query", `{}`, nil, 400, badQuery},
		{"blank query", `{"query":"   "}`, nil, 400, badQuery},
		{"query not text", `{"query":5}`, nil, 400, badQuery},
		{"query too long", `{"query":"` + strings.Repeat("é", 2001) + `"}`, nil, 400, badQuery},
		{"upstream failed", `{"query":"q"}`, &fake.Script{Status: 500}, 502, upstreamErr("upstream_error")},
		{"upstream incomplete", `{"query":"q"}`, &fake.Script{Text: "cut", Finish: "length", Usage: fake.Usage{Input: 5, Output: 5}}, 502, upstreamErr("upstream_incomplete")},
		{"upstream empty", `{"query":"q"}`, &fake.Script{Text: "", Usage: fake.Usage{Input: 5}}, 502, upstreamErr("upstream_empty")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.push != nil {
				oa.Push(*tc.push)
			}
			expectError(t, g.do(t, http.MethodPost, "/v1/search", tc.body, bearer(key)...), tc.status, tc.want, "req-")
		})
	}
	if l := ledgerOf(t, g, "searcher"); len(l) != 1 {
		t.Fatalf("failures were billed: %v", l)
	}
	// The query of 2,000 characters is fine, and /search is the same route.
	oa.Push(fake.Script{Text: "ok", Usage: fake.Usage{Input: 1, Output: 1}})
	if r := g.do(t, http.MethodPost, "/search", `{"query":"`+strings.Repeat("é", 2000)+`"}`, apiKey(key)...); r.Status != 200 {
		t.Fatalf("/search: %d %s", r.Status, r.Body)
	}
	// The web_search tool calls the route.
	oa.Push(fake.Script{Text: "Tool answer.", WebSearches: []string{"x"}, Citations: []string{"https://a.example/"}, Usage: fake.Usage{Input: 10, Output: 5}})
	s := mcpSession(t, g.BaseURL+"/mcp-tools/", key)
	res, err := s.CallTool(context.Background(), &sdk.CallToolParams{Name: "web_search", Arguments: map[string]any{"query": "x"}})
	if err != nil || res.IsError {
		t.Fatalf("web_search tool: %v %+v", err, res)
	}
	if out := structured(t, res); out["answer"] != "Tool answer." || out["searches"] != float64(1) || out["cost_microcents"] != float64(25012) {
		t.Fatalf("web_search %v", out)
	}
}

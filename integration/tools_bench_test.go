package integration

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// TestToolsBenchReport measures the tools server against the direct routes
// in one run, one bin/caddy: tools/call list_capabilities against GET
// /v1/models (the direct read of the same ability rows), and tools/call
// web_search against POST /v1/search to the same fake provider, each as
// p50/p99 ratios. Calls are stateless JSON-RPC posts with no initialize,
// as the tools server allows. It asserts no timing. Skipped unless
// GW_BENCH=1; GW_BENCH_N requests per target (300). Searches rotate over
// fresh accounts so the 60-a-minute ability budget never answers.
func TestToolsBenchReport(t *testing.T) {
	if os.Getenv("GW_BENCH") != "1" {
		t.Skip("set GW_BENCH=1 to measure")
	}
	n := benchEnvInt(t, "GW_BENCH_N", 300)
	oa, an := fake.NewOpenAI(), fake.NewAnthropic()
	t.Cleanup(oa.Close)
	t.Cleanup(an.Close)
	oa.Default = fake.Script{Text: "Caddy is a web server.", WebSearches: []string{"caddy"},
		Citations: []string{"https://caddyserver.com/"}, Usage: fake.Usage{Input: 1000, Output: 200}}
	g := startGateway(t, gwOptions{Env: map[string]string{"GW_OPENAI_BASE_URL": oa.URL, "GW_ANTHROPIC_BASE_URL": an.URL, "GW_SEARCH_BASE_URL": oa.URL}})
	// limits.RequestsPerMinute is 60: 50 searches a key stays under it.
	const perKey = 50
	keys := func(prefix string) []string {
		var out []string
		for i := range (n + perKey - 1) / perKey {
			out = append(out, g.newAccountKey(t, map[string]any{"id": fmt.Sprintf("%s-%d", prefix, i), "plan": "paid", "cleared": true}))
		}
		return out
	}
	direct, viaTools, listKey := keys("bench-direct"), keys("bench-tools"), keys("bench-list")[0]
	client := &http.Client{Timeout: requestTimeout}
	send := func(method, path, key, body, want string) error {
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, _ := http.NewRequest(method, g.BaseURL+path, rd)
		req.Header.Set("Authorization", "Bearer "+key)
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), want) || strings.Contains(string(b), `"isError":true`) {
			return fmt.Errorf("%s %s: %d %.500s", method, path, resp.StatusCode, b)
		}
		return nil
	}
	measure := func(do func(i int) error) (p50, p99 time.Duration) {
		var d []time.Duration
		for i := range n {
			start := time.Now()
			if err := do(i); err != nil {
				t.Fatal(err)
			}
			d = append(d, time.Since(start))
		}
		slices.Sort(d)
		return d[len(d)/2], d[len(d)*99/100]
	}
	call := func(name, args string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + name + `","arguments":` + args + `}}`
	}
	type row struct {
		name                   string
		d50, d99, t50, t99     time.Duration
		directName, toolsLabel string
	}
	var rows []row
	m50, m99 := measure(func(int) error { return send(http.MethodGet, "/v1/models", listKey, "", `"gw-auto"`) })
	l50, l99 := measure(func(int) error {
		return send(http.MethodPost, "/mcp-tools/", listKey, call("list_capabilities", `{}`), `premium_unlocked`)
	})
	rows = append(rows, row{"list_capabilities", m50, m99, l50, l99, "GET /v1/models", "tools/call list_capabilities"})
	s50, s99 := measure(func(i int) error {
		return send(http.MethodPost, "/v1/search", direct[i/perKey], `{"query":"what is caddy?"}`, `"answer"`)
	})
	w50, w99 := measure(func(i int) error {
		return send(http.MethodPost, "/mcp-tools/", viaTools[i/perKey], call("web_search", `{"query":"what is caddy?"}`), `Caddy is a web server.`)
	})
	rows = append(rows, row{"web_search", s50, s99, w50, w99, "POST /v1/search", "tools/call web_search"})

	var b strings.Builder
	fmt.Fprintf(&b, "| call | direct | direct p50 µs | tools p50 µs | ratio | direct p99 µs | tools p99 µs | ratio |\n|---|---|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %.2f× | %d | %d | %.2f× |\n", r.toolsLabel, r.directName, r.d50.Microseconds(), r.t50.Microseconds(),
			float64(r.t50)/float64(r.d50), r.d99.Microseconds(), r.t99.Microseconds(), float64(r.t99)/float64(r.d99))
	}
	t.Log("\n" + b.String())
	if out := os.Getenv("GW_BENCH_OUT"); out != "" {
		_ = os.WriteFile(out+".tools.md", []byte(b.String()), 0o644)
	}
}

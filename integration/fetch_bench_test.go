package integration

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestFetchBenchReport measures page reading against a bare Caddy
// reverse_proxy of the same page, in one run: an uncached read (a new URL
// each time: fetch, readability, Markdown, billing) and a cached read (the
// same URL), each as p50/p99 ratios to the bare proxy. It asserts no
// timing. Skipped unless GW_BENCH=1; GW_BENCH_N requests per target (300).
func TestFetchBenchReport(t *testing.T) {
	if os.Getenv("GW_BENCH") != "1" {
		t.Skip("set GW_BENCH=1 to measure")
	}
	n := benchEnvInt(t, "GW_BENCH_N", 300)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=iso-8859-1")
		_, _ = w.Write([]byte(articleHTML))
	}))
	t.Cleanup(site.Close)
	host := strings.TrimPrefix(site.URL, "http://")
	bare := freePorts(t, 1)[0]
	config := exampleCaddyfile(t) + fmt.Sprintf("\nhttp://127.0.0.1:%s {\n\treverse_proxy %s\n}\n", bare, host)
	g := startGateway(t, gwOptions{Caddyfile: config, Env: map[string]string{"GW_FETCH_ALLOW": host}})
	key := g.newAccountKey(t, map[string]any{"id": "bench-fetch", "plan": "paid", "cleared": true})
	client := &http.Client{Timeout: requestTimeout}
	measure := func(do func(i int) (*http.Response, error)) (p50, p99 time.Duration) {
		var d []time.Duration
		for i := range n {
			start := time.Now()
			resp, err := do(i)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			d = append(d, time.Since(start))
		}
		slices.Sort(d)
		return d[len(d)/2], d[len(d)*99/100]
	}
	post := func(url string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, g.BaseURL+"/v1/fetch", strings.NewReader(`{"url":"`+url+`"}`))
		req.Header.Set("Authorization", "Bearer "+key)
		return client.Do(req)
	}
	b50, b99 := measure(func(i int) (*http.Response, error) {
		return client.Get(fmt.Sprintf("http://127.0.0.1:%s/page?n=%d", bare, i))
	})
	u50, u99 := measure(func(i int) (*http.Response, error) { return post(fmt.Sprintf("%s/page?n=%d", site.URL, i)) })
	c50, c99 := measure(func(int) (*http.Response, error) { return post(site.URL + "/page?n=0") })
	var b strings.Builder
	fmt.Fprintf(&b, "| read | bare p50 µs | gateway p50 µs | ratio | bare p99 µs | gateway p99 µs | ratio |\n|---|--:|--:|--:|--:|--:|--:|\n")
	row := func(name string, g50, g99 time.Duration) {
		fmt.Fprintf(&b, "| %s | %d | %d | %.2f× | %d | %d | %.2f× |\n", name, b50.Microseconds(), g50.Microseconds(),
			float64(g50)/float64(b50), b99.Microseconds(), g99.Microseconds(), float64(g99)/float64(b99))
	}
	row("uncached", u50, u99)
	row("cached", c50, c99)
	t.Log("\n" + b.String())
	if out := os.Getenv("GW_BENCH_OUT"); out != "" {
		_ = os.WriteFile(out+".fetch.md", []byte(b.String()), 0o644)
	}
}

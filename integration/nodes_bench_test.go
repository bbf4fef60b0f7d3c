package integration

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/internal/testsvc"
)

// TestNodesBenchReport measures, in one run against one fake provider,
// the throughput of chat calls (GW_BENCH_CONC clients, 32; GW_BENCH_N
// calls, 2000; each scenario on fresh accounts, one per client) on one
// node with the embedded store, one node on PostgreSQL and Redis, and two
// such nodes sharing them, and prints the ratios. It asserts no figure.
// Skipped unless GW_BENCH=1.
//
//	GW_BENCH=1 go test -count=1 -run TestNodesBenchReport -v ./integration
func TestNodesBenchReport(t *testing.T) {
	if os.Getenv("GW_BENCH") != "1" {
		t.Skip("set GW_BENCH=1 to measure")
	}
	n, conc := benchEnvInt(t, "GW_BENCH_N", 2000), benchEnvInt(t, "GW_BENCH_CONC", 32)
	oa, an := fake.NewOpenAI(), fake.NewAnthropic()
	t.Cleanup(oa.Close)
	t.Cleanup(an.Close)
	oa.Default = fake.Script{Text: "bench", Usage: fake.Usage{Input: 10, Output: 100}}
	env := func(extra ...string) map[string]string {
		m := map[string]string{"GW_OPENAI_BASE_URL": oa.URL, "GW_ANTHROPIC_BASE_URL": an.URL}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i]] = extra[i+1]
		}
		return m
	}
	cfg := withGW(t, fmt.Sprintf("\t\tlimits {\n\t\t\tmax_in_flight %d\n\t\t}", 4*conc))
	db, rd := testsvc.Postgres(t), testsvc.Redis(t)
	embedded := startGateway(t, gwOptions{Caddyfile: cfg, Env: env()})
	shared := env("GW_DATABASE_URL", db, "GW_REDIS_URL", rd)
	a := startGateway(t, gwOptions{Caddyfile: cfg, Env: shared})
	b := startGateway(t, gwOptions{Caddyfile: cfg, Env: shared})
	client := &http.Client{Timeout: requestTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: 2 * conc, DisableCompression: true}}
	made := 0
	run := func(nodes ...*gateway) float64 {
		keys := make([]string, conc)
		for i := range keys {
			made++
			keys[i] = nodes[0].newAccountKey(t, map[string]any{"id": fmt.Sprintf("nb-%d", made), "plan": "paid", "cleared": true})
		}
		var next atomic.Int64
		var wg sync.WaitGroup
		start := time.Now()
		for c := range conc {
			wg.Go(func() {
				for {
					i := next.Add(1)
					if i > int64(n) {
						return
					}
					g := nodes[int(i)%len(nodes)]
					req, _ := http.NewRequest(http.MethodPost, g.BaseURL+"/v1/chat/completions", strings.NewReader(nodesChat))
					req.Header.Set("Authorization", "Bearer "+keys[c])
					req.Header.Set("Content-Type", "application/json")
					resp, err := client.Do(req)
					if err != nil {
						t.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						t.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			})
		}
		wg.Wait()
		oa.Reset()
		return float64(n) / time.Since(start).Seconds()
	}
	run(embedded) // warm up every node
	run(a, b)
	sqliteRate, pgRate, twoRate := run(embedded), run(a), run(a, b)
	var md strings.Builder
	fmt.Fprintf(&md, "%d chat calls from %d clients (an account each) per scenario; loopback; every process on one %d-CPU machine; %s.\n\n",
		n, conc, runtime.NumCPU(), runtime.Version())
	fmt.Fprintf(&md, "| setup | calls/s | ratio |\n|---|--:|--:|\n")
	fmt.Fprintf(&md, "| one node, embedded store | %.0f | 1.00× |\n", sqliteRate)
	fmt.Fprintf(&md, "| one node, PostgreSQL + Redis | %.0f | %.2f× of embedded |\n", pgRate, pgRate/sqliteRate)
	fmt.Fprintf(&md, "| two nodes, PostgreSQL + Redis | %.0f | %.2f× of one node |\n", twoRate, twoRate/pgRate)
	fmt.Print("\n" + md.String() + "\n")
	if out := os.Getenv("GW_BENCH_OUT"); out != "" {
		_ = os.WriteFile(out+".nodes.md", []byte(md.String()), 0o644)
	}
}

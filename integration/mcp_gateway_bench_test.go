package integration

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// The MCP gateway's bench: what a tools/call costs through the gateway
// against the same call posted straight to the upstream server.
const (
	// mcpBenchPrice is each upstream server's price of a call (USD).
	mcpBenchPrice = "0.001"
	// mcpBenchText is what the bench's calls of echo send; the server
	// answers fake.EchoPrefix + it.
	mcpBenchText = "bench"
	// mcpBenchBalance is each bench account's prepaid balance (USD):
	// far above what any load spends.
	mcpBenchBalance = "100000"
	// mcpBenchPerMinute is the bench's mcp_requests_per_minute: far above
	// any load, so that no call is refused 429.
	mcpBenchPerMinute = 1_000_000
)

// mcpBenchScenario is one upstream server of the bench, called directly
// and through the gateway.
type mcpBenchScenario struct {
	name       string
	upstream   *fake.MCP
	direct, gw benchTarget
}

// mcpBenchPhase is one scenario's measure at one number of connections.
type mcpBenchPhase struct {
	scenario             string
	conc                 int
	direct, gw           benchStats
	gwCPU                time.Duration // the gateway process's CPU over its calls
	upstreamPerCall      float64       // HTTP requests that reached the server per gateway call
	batches, charges     float64       // gw_charge_commit_seconds over the phase
	commitP50, commitP99 time.Duration // its p50 and p99
}

// TestMCPGatewayBenchReport measures a tool call through the MCP gateway
// (/mcp-gateway/, tool <server>__echo: key, ability, rate budgets, the
// money gate, the upstream call through the gateway's pooled session, the
// charge and the receipt) against the same tools/call posted straight to
// the same fake MCP server, in one run and one bin/caddy. Both sides are
// raw JSON-RPC posts (not the SDK's client), so the client's cost is the
// same: to the gateway in the stateless era (2026-07-28), and to the
// server in its own era; every answer is checked (200, the echo's text,
// and through the gateway the receipt's cost). Two upstreams: one of the
// stateless era and one of the sessions era (the gateway keeps one
// session with it; the direct side posts on a session of its own). Each
// is measured at one connection (p50, p99) and at GW_BENCH_CONC (32)
// connections (throughput), direct and gateway interleaved in batches of
// GW_BENCH_BATCH (100), alternating which goes first; each phase charges
// a fresh paid account. It asserts no timing. Skipped unless GW_BENCH=1;
// GW_BENCH_N calls per side, phase and scenario (2000);
// GW_BENCH_SCENARIOS (stateless,sessions) picks and orders the
// scenarios; GW_BENCH_ACCESS_LOG=none drops the gateway site's access
// log; GW_BENCH_OUT writes the tables to <GW_BENCH_OUT>.mcp-gateway.md
// too; GW_BENCH_PROFILE writes a profile of the gateway loaded alone with
// the first scenario's calls, as TestBenchReport does.
func TestMCPGatewayBenchReport(t *testing.T) {
	if os.Getenv("GW_BENCH") != "1" {
		t.Skip("set GW_BENCH=1 to measure the MCP gateway against the MCP server called directly")
	}
	n := benchEnvInt(t, "GW_BENCH_N", 2000)
	conc := benchEnvInt(t, "GW_BENCH_CONC", 32)
	batch := benchEnvInt(t, "GW_BENCH_BATCH", 100)
	budget := benchEnvDuration(t, "GW_BENCH_BUDGET", 90*time.Second)

	stateless := fake.NewMCP(t, fake.MCPOptions{Stateless: true})
	sessions := fake.NewMCP(t, fake.MCPOptions{})
	// The per-account MCP budgets are raised above the load: no call is
	// refused 429.
	cfg, _ := benchAccessLog(t, withGW(t, fmt.Sprintf(`		mcp_server stateless {
			url %s
			auth none
			price %s
		}
		mcp_server sessions {
			url %s
			auth none
			price %s
		}
		limits {
			mcp_requests_per_minute %d
			mcp_max_in_flight %d
			max_in_flight %d
		}`, stateless.URL(), mcpBenchPrice, sessions.URL(), mcpBenchPrice, mcpBenchPerMinute, 2*conc, 2*conc)))
	g := startGateway(t, gwOptions{Caddyfile: cfg})
	client := &http.Client{
		Timeout: requestTimeout,
		Transport: &http.Transport{Proxy: nil, MaxIdleConns: 4 * conc, MaxIdleConnsPerHost: 2 * conc,
			DisableCompression: true, IdleConnTimeout: time.Minute},
	}
	t.Cleanup(client.CloseIdleConnections)
	env := &benchEnv{g: g, client: client}

	all := map[string]mcpBenchScenario{
		"stateless": {"stateless", stateless, mcpDirectStateless(t, stateless.URL()), mcpViaGateway(t, g, "stateless")},
		"sessions":  {"sessions", sessions, mcpDirectSessions(t, client, sessions.URL()), mcpViaGateway(t, g, "sessions")},
	}
	var scenarios []mcpBenchScenario
	for _, name := range strings.Split(cmp.Or(os.Getenv("GW_BENCH_SCENARIOS"), "stateless,sessions"), ",") {
		sc, ok := all[strings.TrimSpace(name)]
		if !ok {
			t.Fatalf("GW_BENCH_SCENARIOS: no scenario %q (stateless, sessions)", name)
		}
		scenarios = append(scenarios, sc)
	}

	made := 0
	freshKey := func() []string {
		made++
		return []string{g.newAccountKey(t, map[string]any{"id": fmt.Sprintf("mcp-bench-%d", made), "plan": "paid", "cleared": true,
			"balance_usd": mcpBenchBalance})}
	}
	var phases []mcpBenchPhase
	for _, sc := range scenarios {
		// Warm: connections, the gateway's upstream session and its
		// tool list.
		sc.gw.keys = freshKey()
		for _, tg := range []benchTarget{sc.direct, sc.gw} {
			if _, _, err := env.load(context.Background(), tg, 8*conc, conc); err != nil {
				t.Fatalf("%s: warming up: %v", sc.name, err)
			}
		}
		sc.upstream.Reset()
		for _, c := range []int{1, conc} {
			sc.gw.keys = freshKey()
			phases = append(phases, mcpBenchMeasure(t, env, sc, n, c, batch, budget))
		}
	}

	md := mcpBenchTables(n, batch, phases)
	// Printed as is (not t.Log) so the tables can be copied.
	fmt.Print("\n" + md + "\n")
	if out := os.Getenv("GW_BENCH_OUT"); out != "" {
		if err := os.WriteFile(out+".mcp-gateway.md", []byte(md), 0o644); err != nil {
			t.Errorf("writing GW_BENCH_OUT: %v", err)
		}
	}
	if out := os.Getenv("GW_BENCH_PROFILE"); out != "" {
		sc := scenarios[0]
		sc.gw.keys = freshKey()
		benchProfile(t, g, out, benchEnvInt(t, "GW_BENCH_PROFILE_SECONDS", 10), func() (int, error) {
			_, _, err := env.load(context.Background(), sc.gw, batch, conc)
			sc.upstream.Reset()
			return batch, err
		})
	}
}

// mcpBenchMeasure sends n calls to each side of sc from conc clients, in
// interleaved batches, and returns both sides' figures with the gateway
// process's CPU and its commits over the phase.
func mcpBenchMeasure(t *testing.T, env *benchEnv, sc mcpBenchScenario, n, conc, batch int, budget time.Duration) mcpBenchPhase {
	t.Helper()
	commits0, requests0 := env.commits(t), sc.upstream.Requests()
	cpu0, _ := procCPU(env.g.pid(t))
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	var directS, gwS []benchSample
	var directWall, gwWall time.Duration
	for i := 0; len(directS) < n || len(gwS) < n; i++ {
		if ctx.Err() != nil {
			break
		}
		order := []bool{false, true} // direct first on even batches
		if i%2 == 1 {
			order = []bool{true, false}
		}
		for _, viaGW := range order {
			tg, have, wall := sc.direct, &directS, &directWall
			if viaGW {
				tg, have, wall = sc.gw, &gwS, &gwWall
			}
			k := min(batch, n-len(*have))
			if k <= 0 {
				continue
			}
			s, w, err := env.load(ctx, tg, k, conc)
			if err != nil {
				t.Fatalf("%s, %d connections: %v", sc.name, conc, err)
			}
			*have = append(*have, s...)
			*wall += w
		}
		// The fake keeps every request's headers; forget them as we go.
		sc.upstream.Reset()
	}
	p := mcpBenchPhase{scenario: sc.name, conc: conc, direct: benchSummarise(directS, directWall, false), gw: benchSummarise(gwS, gwWall, false)}
	p.direct.truncated, p.gw.truncated = len(directS) < n, len(gwS) < n
	if cpu1, ok := procCPU(env.g.pid(t)); ok {
		p.gwCPU = cpu1 - cpu0
	}
	p.batches, p.charges, p.commitP50, p.commitP99 = env.commits(t).since(commits0)
	// Each direct call is one request to the server.
	if p.gw.n > 0 {
		p.upstreamPerCall = float64(sc.upstream.Requests()-requests0-p.direct.n) / float64(p.gw.n)
	}
	return p
}

// mcpBenchTables are the report's Markdown tables.
func mcpBenchTables(n, batch int, phases []mcpBenchPhase) string {
	var md strings.Builder
	fmt.Fprintf(&md, "### MCP gateway vs the MCP server called directly (same fake server, same run)\n\n")
	fmt.Fprintf(&md, "tools/call echo, %d calls per side, scenario and number of connections, interleaved in batches of %d; "+
		"both sides raw JSON-RPC posts, to the gateway in the stateless era; through the gateway as <server>__echo at %s USD a call, "+
		"each phase on a fresh paid account; the gateway site's access log %s (GW_BENCH_ACCESS_LOG); loopback; %s/%s, %d CPUs, %s. Latencies in µs; ratio = gateway / direct; "+
		"added = gateway − direct. Scenario: the upstream's era (stateless: 2026-07-28, sessions: 2025-11-25 with one session).\n\n",
		n, batch, mcpBenchPrice, mcpBenchAccessLog(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
	fmt.Fprintf(&md, "| scenario | connections | direct p50 | gateway p50 | ratio | added | direct p99 | gateway p99 | ratio | added |\n")
	fmt.Fprintf(&md, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, p := range phases {
		d, g := p.direct, p.gw
		fmt.Fprintf(&md, "| %s | %d | %.0f | %.0f | %s | %+.0f | %.0f | %.0f | %s | %+.0f |\n", p.scenario, p.conc,
			benchMicros(d.lastP50), benchMicros(g.lastP50), benchRatio(benchMicros(g.lastP50), benchMicros(d.lastP50)), benchMicros(g.lastP50-d.lastP50),
			benchMicros(d.lastP99), benchMicros(g.lastP99), benchRatio(benchMicros(g.lastP99), benchMicros(d.lastP99)), benchMicros(g.lastP99-d.lastP99))
	}
	fmt.Fprintf(&md, "\nThroughput, the gateway process's CPU per call (user and system time from /proc over the phase, over its calls; "+
		"the direct side's server runs in the test's process), the HTTP requests that reached the server per call through the gateway, "+
		"and the gateway's own commit of its charges (gw_charge_commit_seconds) "+
		"with the latency added beyond it:\n\n")
	fmt.Fprintf(&md, "| scenario | connections | direct calls/s | gateway calls/s | ratio | gateway CPU per call | upstream requests per call | commit batches | commit p50 | commit p99 | added p50 beyond it |\n")
	fmt.Fprintf(&md, "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, p := range phases {
		note := ""
		if p.direct.truncated || p.gw.truncated {
			note = fmt.Sprintf(" (cut short by GW_BENCH_BUDGET: %d direct, %d gateway calls)", p.direct.n, p.gw.n)
		}
		cpu := "–"
		if p.gwCPU > 0 && p.gw.n > 0 {
			cpu = fmt.Sprintf("%.0f µs", benchMicros(p.gwCPU)/float64(p.gw.n))
		}
		fmt.Fprintf(&md, "| %s%s | %d | %.0f | %.0f | %s | %s | %.2f | %.0f | %.0f | %.0f | %+.0f |\n", p.scenario, note, p.conc,
			p.direct.perSecond, p.gw.perSecond, benchRatio(p.gw.perSecond, p.direct.perSecond), cpu, p.upstreamPerCall, p.batches,
			benchMicros(p.commitP50), benchMicros(p.commitP99), benchMicros(p.gw.lastP50-p.direct.lastP50-p.commitP50))
	}
	return md.String()
}

// mcpBenchAccessLog says whether the gateway site writes its access log
// (the MCP server called directly writes none).
func mcpBenchAccessLog() string {
	if os.Getenv("GW_BENCH_ACCESS_LOG") == "none" {
		return "off"
	}
	return "on"
}

// mcpCallRequest is a stateless-era tools/call of tool (echo of
// mcpBenchText) as a bench target's body and headers.
func mcpCallRequest(t *testing.T, url, tool string) benchTarget {
	t.Helper()
	body, h := statelessRequest(t, 1, "tools/call", statelessEra, map[string]any{"name": tool, "arguments": map[string]any{"text": mcpBenchText}})
	return benchTarget{url: url, header: headerOf(h), body: []byte(body), want: fake.EchoPrefix + mcpBenchText}
}

// headerOf is name, value pairs as a header.
func headerOf(pairs []string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(pairs); i += 2 {
		h.Add(pairs[i], pairs[i+1])
	}
	return h
}

// mcpDirectStateless posts tools/call echo straight to a stateless-era
// server.
func mcpDirectStateless(t *testing.T, url string) benchTarget {
	t.Helper()
	tg := mcpCallRequest(t, url, "echo")
	tg.check = func(body []byte) error { return mcpBenchCheck(body, "") }
	return tg
}

// mcpViaGateway posts tools/call <server>__echo to the gateway; each
// answer must carry the receipt of one call at mcpBenchPrice. The keys
// are set per phase.
func mcpViaGateway(t *testing.T, g *gateway, server string) benchTarget {
	t.Helper()
	tg := mcpCallRequest(t, g.BaseURL+"/mcp-gateway/", server+"__echo")
	tg.check = func(body []byte) error { return mcpBenchCheck(body, mcpBenchPrice) }
	return tg
}

// mcpDirectSessions opens a session with a sessions-era server (initialize,
// then notifications/initialized) and posts tools/call echo on it, each
// call with an id of its own, as one client's calls on one session are.
func mcpDirectSessions(t *testing.T, client *http.Client, url string) benchTarget {
	t.Helper()
	h := http.Header{"Content-Type": {"application/json"}, "Accept": {"application/json, text/event-stream"}}
	post := func(body string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		req.Header = h.Clone()
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode/100 != 2 {
			t.Fatalf("%.100s: %d %v %.500s", body, resp.StatusCode, err, b)
		}
		return resp
	}
	opened := post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + sessionsEra +
		`","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}`)
	id := opened.Header.Get("Mcp-Session-Id")
	if id == "" {
		t.Fatalf("initialize: no Mcp-Session-Id in %v", opened.Header)
	}
	h.Set("Mcp-Session-Id", id)
	h.Set("Mcp-Protocol-Version", sessionsEra)
	if r := post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); r.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: %d", r.StatusCode)
	}
	var next atomic.Int64
	return benchTarget{url: url, header: h, want: fake.EchoPrefix + mcpBenchText,
		newBody: func() []byte {
			return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":%q}}}`,
				next.Add(1), mcpBenchText)
		},
		check: func(body []byte) error { return mcpBenchCheck(body, "") }}
}

// mcpBenchCheck checks a tools/call answer (one event's data, or a JSON
// body): a result whose one content block is the echo's text, not an
// error; with cost set, a receipt of a request id and that cost.
func mcpBenchCheck(body []byte, cost string) error {
	msg := body
	if !bytes.HasPrefix(bytes.TrimSpace(body), []byte("{")) {
		msg = nil
		for _, line := range bytes.Split(body, []byte("\n")) {
			if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
				if msg != nil {
					return errors.New("more than one event")
				}
				msg = d
			}
		}
	}
	var m struct {
		Result *struct {
			Content []struct {
				Type, Text string
			} `json:"content"`
			IsError bool           `json:"isError"`
			Meta    map[string]any `json:"_meta"`
		} `json:"result"`
	}
	if err := json.Unmarshal(msg, &m); err != nil {
		return fmt.Errorf("not a JSON-RPC message: %w", err)
	}
	r := m.Result
	if r == nil || r.IsError || len(r.Content) != 1 || r.Content[0].Type != "text" || r.Content[0].Text != fake.EchoPrefix+mcpBenchText {
		return errors.New("not the echo's result")
	}
	if cost == "" {
		return nil
	}
	if id, _ := r.Meta[metaRequestID].(string); !strings.HasPrefix(id, "req-") || r.Meta[metaCostUSD] != cost {
		return fmt.Errorf("receipt %v, want a request id and cost %s", r.Meta, cost)
	}
	return nil
}

// The receipt's members in a tool result's _meta.
const (
	metaRequestID = "gw/request_id"
	metaCostUSD   = "gw/cost_usd"
)

package integration

// The gateway's added latency and throughput, measured against a bare Caddy
// reverse_proxy to the same fake upstream in the same run (the baseline in
// a Caddy process of its own, or the gateway's with GW_BENCH_BASELINE=shared).
// Nothing here asserts a time: speed is reported as ratios against the
// baseline.
//
//	GW_BENCH=1 go test -count=1 -run TestBenchReport -v ./integration
//	go test -run '^$' -bench . -benchtime 2000x ./integration
//
// or scripts/bench.sh. TestBenchReport is skipped unless GW_BENCH=1. Its
// knobs: GW_BENCH_SCENARIOS (a comma-separated subset of the scenario
// names, in the order to run them), GW_BENCH_SYNC_BIN (bin/caddy-bench,
// built with integration/benchsync: it serves the baselines, and the
// scenarios fsync-on-bare and same-format-beyond-fsync measure the gateway
// beyond the one fsync of a durable charge; scripts/hotpath.sh sets it),
// GW_BENCH_GATEWAY_CPUS (pin bin/caddy to these CPUs with
// taskset), GW_BENCH_N (requests per target and scenario, 2000),
// GW_BENCH_CONC (concurrent clients, 8), GW_BENCH_ACCESS_LOG (which sites
// write Caddyfile.example's access log: both, the default, gateway or
// none; see benchAccessLog), GW_BENCH_BASELINE (shared: the gateway's
// process serves the bare sites, as in the first measurements; by
// default a bin/caddy of their own does), GW_BENCH_ACCOUNTS (how many
// fresh accounts carry the gateway's load of a scenario, 1),
// GW_BENCH_CAPS (1: every key of the load has caps of its own, and every
// account is in an organization with caps), GW_BENCH_DURABILITY (the
// gateway's durability, as GW_DURABILITY: sync, the default, or
// "interval 5ms"),
// GW_BENCH_BATCH (requests per interleaved batch, 100), GW_BENCH_BUDGET
// (the most time one scenario may take, 90s; a scenario cut short
// reports what it measured), GW_BENCH_OUT (also write the table to this
// file) and GW_BENCH_PROFILE (after the report, load the gateway alone
// and write the gateway process's CPU profile, from Caddy's admin
// /debug/pprof/profile, to this file; GW_BENCH_PROFILE_SECONDS, 10;
// GW_BENCH_PROFILE_KIND=allocs takes the allocations instead, trace
// an execution trace for `go tool trace`; GW_BENCH_PROFILE_SITE=baseline
// loads the scenarios' baselines instead). The
// benchmarks read GW_BENCH_CONC and GW_BENCH_ACCOUNTS.
//
// Each measured gateway load uses accounts made for it: the money gate
// sums an account's whole ledger on every call, so the gateway slows down
// as an account's ledger grows (the report shows its p50 in the first and
// the last batch), and a shared account would make later scenarios pay
// for earlier ones.

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/integration/benchsync"
	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// benchKey is the gateway's bootstrap key in the benchmarks.
const benchKey = "sk-bench-bootstrap-0123456789abcdefghijkl"

// benchText is what the fakes answer; benchChunks is how many pieces a
// stream splits it into (about two dozen events per stream).
const (
	benchText = "The quick brown fox jumps over the lazy dog while the gateway " +
		"relays every token of this answer to a client that only wants to know " +
		"how long the relaying took, compared with a plain reverse proxy in " +
		"front of the very same fake upstream, in the very same process and run."
	benchChunks = 20
)

// benchTarget is one endpoint a scenario sends the same request to, over
// and over.
type benchTarget struct {
	url    string
	header http.Header
	// keys, when set, are the bearer keys of the gateway's accounts:
	// client i of a load sends keys[i%len(keys)].
	keys   []string
	body   []byte
	stream bool
	// want must occur in every answer's body.
	want string
	// bare marks a baseline target standing in for the gateway (the A/A
	// scenario): it gets no gateway accounts.
	bare bool
	// synced marks the bare proxy that makes one record durable per
	// request (gw_bench_sync).
	synced bool
	// newBody, when set, makes each request's body in place of body
	// (before the clock starts): a request that needs an id of its own.
	newBody func() []byte
	// check, when set, must accept every answer's body too (run after
	// the clock stopped).
	check func(body []byte) error
	// accounts, on a target of the gateway, says which fresh accounts
	// it gets: "" as GW_BENCH_CAPS says; "plain" (keys without caps, no
	// organization) or "caps" (as GW_BENCH_CAPS=1) whatever it says. A
	// scenario's baseline that names them is the gateway too, loaded
	// with such accounts (caps-vs-plain).
	accounts string
}

// benchScenario pairs a gateway request with the equivalent request sent
// to the baseline site, which reaches the same fake upstream.
type benchScenario struct {
	name     string
	gw, base benchTarget
}

// benchEnv is the gateway's process and the one serving the baseline
// sites (the same one when shared), and the fakes behind both.
type benchEnv struct {
	g         *gateway
	base      *gateway // the process serving the bare sites (g when shared)
	oa, an    *fake.Upstream
	client    *http.Client
	scenarios []benchScenario
	// accounts is how many accounts the gateway's load is spread over
	// (GW_BENCH_ACCOUNTS); made counts the accounts made so far.
	accounts int
	made     int
	// caps (GW_BENCH_CAPS=1) gives every key of the load caps of its own
	// and puts every account in an organization with caps, all far above
	// what the load spends, so each call is checked and settled against
	// them too.
	caps bool
}

// benchAccessLog sets up the access logs of the bench's sites as
// GW_BENCH_ACCESS_LOG says: "both" (the default) gives the baseline sites
// the very log block of Caddyfile.example's gateway site, so the sites
// differ only in their handler; "gateway" leaves the baselines without
// one (a bare reverse_proxy logs nothing unless told to); "none" takes the
// block out of the gateway site too. It returns the Caddyfile and the
// block to put in each baseline site.
func benchAccessLog(tb testing.TB, example string) (config, baseLog string) {
	tb.Helper()
	start := strings.Index(example, "\tlog {\n")
	end := strings.Index(example[max(start, 0):], "\n\t}\n")
	if start < 0 || end < 0 {
		tb.Fatal("Caddyfile.example: no access log block in the gateway site")
	}
	block := example[start : start+end+len("\n\t}\n")]
	switch mode := os.Getenv("GW_BENCH_ACCESS_LOG"); mode {
	case "", "both":
		return example, block
	case "gateway":
		return example, ""
	case "none":
		return strings.Replace(example, block, "", 1), ""
	default:
		tb.Fatalf("GW_BENCH_ACCESS_LOG=%q: want both, gateway or none", mode)
		return "", ""
	}
}

// benchLogSites says in words which sites write the access log.
func benchLogSites() string {
	switch os.Getenv("GW_BENCH_ACCESS_LOG") {
	case "gateway":
		return "the gateway site only"
	case "none":
		return "no site"
	}
	return "both sites"
}

// benchSharedBaseline reports GW_BENCH_BASELINE=shared: the bare sites
// are served by the gateway's own process (as the first measurements
// were), not by a bin/caddy of their own (the default).
func benchSharedBaseline() bool { return os.Getenv("GW_BENCH_BASELINE") == "shared" }

func benchBaselineWhere() string {
	if benchSharedBaseline() {
		return "the gateway's process"
	}
	return "a Caddy process of its own"
}

// startBenchEnv starts the fakes, one bin/caddy with the gateway site
// (Caddyfile.example's global gw block, providers pointed at the fakes)
// and another with a bare `reverse_proxy` site per fake, both pinned to
// GW_BENCH_GATEWAY_CPUS (with GW_BENCH_BASELINE=shared, the gateway's
// process serves the bare sites too).
func startBenchEnv(tb testing.TB) *benchEnv {
	tb.Helper()
	script := fake.Script{Text: benchText, Chunks: benchChunks, Usage: fake.Usage{Input: 24, Output: 64},
		// Only decision mode's questions ask for them.
		TopLogprobs: []fake.Logprob{{Token: "yes", Logprob: -0.2}, {Token: "no", Logprob: -1.7}}}
	oa, an := fake.NewOpenAI(), fake.NewAnthropic()
	oa.Default, an.Default = script, script
	tb.Cleanup(oa.Close)
	tb.Cleanup(an.Close)

	ports := freePorts(tb, 2)
	baseOA, baseAN := "127.0.0.1:"+ports[0], "127.0.0.1:"+ports[1]
	example, baseLog := benchAccessLog(tb, exampleCaddyfile(tb))
	baseSites := fmt.Sprintf(`
# Baselines: a bare reverse_proxy to the same fakes.
http://%s {
%s	reverse_proxy %s
}

http://%s {
%s	reverse_proxy %s
}
`, baseOA, baseLog, benchHostOf(tb, oa.URL), baseAN, baseLog, benchHostOf(tb, an.URL))
	// The bare proxy plus the one fsync a durable charge needs: a
	// site of bin/caddy-bench, when GW_BENCH_SYNC_BIN names it.
	syncBin := os.Getenv("GW_BENCH_SYNC_BIN")
	var baseSync string
	if syncBin != "" {
		if benchSharedBaseline() {
			tb.Fatal("GW_BENCH_SYNC_BIN needs a baseline process of its own (not GW_BENCH_BASELINE=shared)")
		}
		baseSync = "127.0.0.1:" + freePorts(tb, 1)[0]
		baseSites += fmt.Sprintf(`
# The bare proxy plus one durable record a request (integration/benchsync).
http://%s {
%s	route {
		gw_bench_sync {
			dir %s
		}
		reverse_proxy %s
	}
}
`, baseSync, baseLog, tb.TempDir(), benchHostOf(tb, oa.URL))
	}
	config := example
	var base *gateway
	if benchSharedBaseline() {
		config += baseSites
	} else {
		// A Caddy of its own, with no gw app: the process-wide tuning
		// of the gw app (GOMAXPROCS, the collector's floor) does not
		// reach it, and the gateway's heap is not its to collect.
		base = startGateway(tb, gwOptions{Caddyfile: "{\n\tadmin {$GW_ADMIN}\n}\n" + baseSites, Bin: syncBin})
	}

	gwEnv := map[string]string{"GW_OPENAI_BASE_URL": oa.URL, "GW_ANTHROPIC_BASE_URL": an.URL}
	if d := os.Getenv("GW_BENCH_DURABILITY"); d != "" {
		gwEnv["GW_DURABILITY"] = d // Caddyfile.example's durability
	}
	g := startGateway(tb, gwOptions{BootstrapKey: benchKey, Caddyfile: config, Env: gwEnv})

	conc := benchEnvInt(tb, "GW_BENCH_CONC", 8)
	client := &http.Client{
		Timeout: requestTimeout,
		Transport: &http.Transport{Proxy: nil, MaxIdleConns: 4 * conc, MaxIdleConnsPerHost: 2 * conc,
			DisableCompression: true, IdleConnTimeout: time.Minute},
	}
	tb.Cleanup(client.CloseIdleConnections)

	// The gateway's key is set per load (withFreshAccounts); the
	// bootstrap key only serves warming up.
	gwHeader := http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + benchKey}}
	gwAltHeader := http.Header{"Content-Type": {"application/json"}, "X-Api-Key": {benchKey}, "Anthropic-Version": {"2023-06-01"}}
	oaHeader := http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer sk-upstream-openai-test"}}
	anHeader := http.Header{"Content-Type": {"application/json"}, "X-Api-Key": {"sk-upstream-anthropic-test"},
		"Anthropic-Version": {"2023-06-01"}}
	const (
		chatMsgs = `"max_tokens":256,"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Say hello."}]`
		msgsMsgs = `"max_tokens":256,"system":"You are terse.","messages":[{"role":"user","content":"Say hello."}]`
		// The gateway asks a chat-completions upstream for the usage
		// chunk; the baseline's client asks for it itself, so the fake
		// does the same work for both.
		chatStream = `,"stream":true,"stream_options":{"include_usage":true}`
		msgsStream = `,"stream":true`
		embedBench = `"input":["The printer is jammed again.","Paper tray two is empty."],"encoding_format":"base64"`
	)
	gwURL := g.BaseURL + "/v1/chat/completions"
	body := func(model, rest string) []byte { return []byte(`{"model":"` + model + `",` + rest + `}`) }
	if base == nil {
		base = g
	}
	env := &benchEnv{g: g, base: base, oa: oa, an: an, client: client, accounts: benchEnvInt(tb, "GW_BENCH_ACCOUNTS", 1),
		caps: os.Getenv("GW_BENCH_CAPS") == "1"}
	aa := benchTarget{url: "http://" + baseOA + "/v1/chat/completions", header: oaHeader, body: body("gpt-4.1-mini", chatMsgs), want: benchText, bare: true}
	sameGW := benchTarget{url: gwURL, header: gwHeader, body: body("gw-pinned-gpt-4.1-mini", chatMsgs), want: benchText}
	sameBase := benchTarget{url: "http://" + baseOA + "/v1/chat/completions", header: oaHeader,
		body: body("gpt-4.1-mini", chatMsgs), want: benchText}
	env.scenarios = []benchScenario{
		{
			// A/A: the bare proxy against itself, so the noise of the
			// machine shows beside the real ratios.
			name: "aa-bare-vs-bare", gw: aa, base: aa,
		},
		{name: "same-format", gw: sameGW, base: sameBase},
		{
			// What caps cost, within one gateway: a key with caps of an
			// account in an organization with caps against a key without
			// caps of an account in none, batch for batch, so the machine's
			// drift between runs does not enter the ratio.
			name: "caps-vs-plain", gw: withAccounts(sameGW, "caps"), base: withAccounts(sameGW, "plain"),
		},
		{
			// The same with the places swapped: a bias of either place
			// in the interleaving cancels out of the two ratios' quotient
			// (caps against plain is the square root of caps-vs-plain over
			// plain-vs-caps).
			name: "plain-vs-caps", gw: withAccounts(sameGW, "plain"), base: withAccounts(sameGW, "caps"),
		},
		{
			// The same gateway load against itself: the noise of those
			// ratios.
			name: "plain-vs-plain", gw: withAccounts(sameGW, "plain"), base: withAccounts(sameGW, "plain"),
		},
		{
			name: "translated-chat-in",
			gw:   benchTarget{url: gwURL, header: gwHeader, body: body("gw-pinned-claude-sonnet-4-5", chatMsgs), want: benchText},
			base: benchTarget{url: "http://" + baseAN + "/v1/messages", header: anHeader,
				body: body("claude-sonnet-4-5", msgsMsgs), want: benchText},
		},
		{
			// The other direction: a messages client, a chat-completions
			// model.
			name: "translated-messages-in",
			gw: benchTarget{url: g.BaseURL + "/alt/v1/messages", header: gwAltHeader,
				body: body("gw-pinned-gpt-4.1-mini", msgsMsgs), want: benchText},
			base: benchTarget{url: "http://" + baseOA + "/v1/chat/completions", header: oaHeader,
				body: body("gpt-4.1-mini", chatMsgs), want: benchText},
		},
		{
			name: "same-format-stream",
			gw: benchTarget{url: gwURL, header: gwHeader, body: body("gw-pinned-gpt-4.1-mini", chatMsgs+chatStream),
				stream: true, want: "data: [DONE]"},
			base: benchTarget{url: "http://" + baseOA + "/v1/chat/completions", header: oaHeader,
				body: body("gpt-4.1-mini", chatMsgs+chatStream), stream: true, want: "data: [DONE]"},
		},
		{
			// Decision mode: ten questions, asked in parallel, against one
			// bare chat call.
			name: "decide-10",
			gw:   benchTarget{url: g.BaseURL + "/v1/decide", header: gwHeader, body: []byte(decideBenchBody), want: `"noul"`},
			base: benchTarget{url: "http://" + baseOA + "/v1/chat/completions", header: oaHeader,
				body: body("gpt-4.1-mini", chatMsgs), want: benchText},
		},
		{
			// Embeddings: two texts, base64 vectors, through the money
			// gate, against the same request to the bare proxy.
			name: "embeddings",
			gw: benchTarget{url: g.BaseURL + "/v1/embeddings", header: gwHeader, body: body("gw-embed", embedBench),
				want: `"object":"embedding"`},
			base: benchTarget{url: "http://" + baseOA + "/v1/embeddings", header: oaHeader, body: body("text-embedding-3-small", embedBench),
				want: `"object":"embedding"`},
		},
		{
			name: "translated-stream",
			gw: benchTarget{url: gwURL, header: gwHeader, body: body("gw-pinned-claude-sonnet-4-5", chatMsgs+chatStream),
				stream: true, want: "data: [DONE]"},
			base: benchTarget{url: "http://" + baseAN + "/v1/messages", header: anHeader,
				body: body("claude-sonnet-4-5", msgsMsgs+msgsStream), stream: true, want: "event: message_stop"},
		},
	}
	if baseSync != "" {
		synced := benchTarget{url: "http://" + baseSync + "/v1/chat/completions", header: oaHeader,
			body: body("gpt-4.1-mini", chatMsgs), want: benchText, bare: true, synced: true}
		env.scenarios = append(env.scenarios,
			// What the one fsync adds to the bare proxy, where the
			// gateway makes its charge durable (the upstream has answered).
			benchScenario{name: "fsync-on-bare", gw: synced, base: sameBase},
			// The gateway against that: what it adds beyond the fsync.
			benchScenario{name: "same-format-beyond-fsync", gw: sameGW, base: synced},
		)
	}
	if only := os.Getenv("GW_BENCH_SCENARIOS"); only != "" {
		var kept []benchScenario
		for name := range strings.SplitSeq(only, ",") {
			i := slices.IndexFunc(env.scenarios, func(sc benchScenario) bool { return sc.name == name })
			if i < 0 {
				tb.Fatalf("GW_BENCH_SCENARIOS: no scenario %q here (fsync-on-bare and same-format-beyond-fsync need GW_BENCH_SYNC_BIN, bin/caddy-bench)", name)
			}
			kept = append(kept, env.scenarios[i])
		}
		env.scenarios = kept
	}
	return env
}

// decideBenchBody is a decision call of ten yes/no questions.
var decideBenchBody = func() string {
	var q []string
	for i := range 10 {
		q = append(q, fmt.Sprintf(`"q%d":{"type":"noul","instructions":"Is point %d met?"}`, i, i))
	}
	return `{"model":"gw-decide","state":"A short ticket: the printer is jammed again.","questions":{` + strings.Join(q, ",") + `}}`
}()

// withFreshAccounts returns t with the keys of e.accounts new accounts
// (paid, cleared), made through the admin API. Every chat call reads the
// account's whole ledger (money.Gate sums it), so each measured load
// starts from an empty one: the scenarios do not slow each other down.
func (e *benchEnv) withFreshAccounts(tb testing.TB, t benchTarget) benchTarget {
	tb.Helper()
	t.keys = nil
	if t.bare {
		return t
	}
	caps := e.caps
	switch t.accounts {
	case "plain":
		caps = false
	case "caps":
		caps = true
	}
	for range e.accounts {
		e.made++
		id := fmt.Sprintf("bench-%d", e.made)
		if !caps {
			t.keys = append(t.keys, e.g.newAccountKey(tb, map[string]any{"id": id, "plan": "paid", "cleared": true}))
			continue
		}
		org := "bench-org-" + id
		e.g.adminJSON(tb, http.MethodPost, "/gw/orgs", map[string]any{"id": org, "daily_cap_usd": benchCap, "monthly_cap_usd": benchCap}, http.StatusCreated)
		e.g.createAccount(tb, map[string]any{"id": id, "plan": "paid", "cleared": true, "org": org})
		key, _ := e.g.createKey(tb, id, map[string]any{"name": "bench", "daily_cap_usd": benchCap, "monthly_cap_usd": benchCap, "total_cap_usd": benchCap})
		t.keys = append(t.keys, key)
	}
	return t
}

// withAccounts is t, a target of the gateway, with its accounts (see
// benchTarget.accounts).
func withAccounts(t benchTarget, accounts string) benchTarget {
	t.accounts = accounts
	return t
}

// benchCap is each cap GW_BENCH_CAPS sets: far above any load's spend.
const benchCap = "1000000"

// benchHostOf is the host:port of a fake's URL.
func benchHostOf(tb testing.TB, raw string) string {
	tb.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		tb.Fatal(err)
	}
	return u.Host
}

// benchSample is one request's timing: first is the first byte of the body,
// last the end of the body.
type benchSample struct{ first, last time.Duration }

// do sends one request and reads the whole answer into buf, timing it.
func (e *benchEnv) do(ctx context.Context, t benchTarget, client int, buf *bytes.Buffer) (benchSample, error) {
	body := t.body
	if t.newBody != nil {
		body = t.newBody()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return benchSample{}, err
	}
	for k, vs := range t.header {
		req.Header[k] = vs
	}
	if len(t.keys) > 0 && req.Header.Get("X-Api-Key") != "" {
		req.Header.Set("X-Api-Key", t.keys[client%len(t.keys)]) // a messages client's header
	} else if len(t.keys) > 0 {
		req.Header.Set("Authorization", "Bearer "+t.keys[client%len(t.keys)])
	}
	buf.Reset()
	start := time.Now()
	resp, err := e.client.Do(req)
	if err != nil {
		return benchSample{}, err
	}
	defer resp.Body.Close()
	var s benchSample
	var chunk [32 << 10]byte
	for {
		n, err := resp.Body.Read(chunk[:])
		if n > 0 {
			if s.first == 0 {
				s.first = time.Since(start)
			}
			buf.Write(chunk[:n])
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return benchSample{}, fmt.Errorf("POST %s: reading the body: %w", t.url, err)
		}
	}
	s.last = time.Since(start)
	if s.first == 0 {
		s.first = s.last
	}
	// Checked after the clock stopped.
	if resp.StatusCode != http.StatusOK {
		return benchSample{}, fmt.Errorf("POST %s: status %d: %.500s", t.url, resp.StatusCode, buf.Bytes())
	}
	if !bytes.Contains(buf.Bytes(), []byte(t.want)) {
		return benchSample{}, fmt.Errorf("POST %s: the answer lacks %q: %.2000s", t.url, t.want, buf.Bytes())
	}
	if t.stream && (bytes.Contains(buf.Bytes(), []byte(`"error"`)) || bytes.Contains(buf.Bytes(), []byte("event: error"))) {
		return benchSample{}, fmt.Errorf("POST %s: the stream carries an error: %.2000s", t.url, buf.Bytes())
	}
	if t.check != nil {
		if err := t.check(buf.Bytes()); err != nil {
			return benchSample{}, fmt.Errorf("POST %s: %w: %.2000s", t.url, err, buf.Bytes())
		}
	}
	return s, nil
}

// load sends n requests to t from conc concurrent clients and returns
// their samples and the wall time. Once ctx is done no new request is
// started; the samples then are fewer than n.
func (e *benchEnv) load(ctx context.Context, t benchTarget, n, conc int) ([]benchSample, time.Duration, error) {
	samples := make([]benchSample, n)
	var next atomic.Int64
	var firstErr error
	var errOnce sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for w := range min(conc, n) {
		wg.Go(func() {
			var buf bytes.Buffer
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				s, err := e.do(context.Background(), t, w, &buf)
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				samples[i] = s
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	if firstErr != nil {
		return nil, wall, firstErr
	}
	out := samples[:0]
	for _, s := range samples {
		if s.last > 0 {
			out = append(out, s)
		}
	}
	return out, wall, nil
}

// benchStats summarises the samples of one target in one scenario.
type benchStats struct {
	n                  int
	wall               time.Duration
	firstP50, firstP99 time.Duration
	lastP50, lastP99   time.Duration
	perSecond          float64
	stream             bool
	truncated          bool
}

func benchSummarise(samples []benchSample, wall time.Duration, stream bool) benchStats {
	firsts := make([]time.Duration, len(samples))
	lasts := make([]time.Duration, len(samples))
	for i, s := range samples {
		firsts[i], lasts[i] = s.first, s.last
	}
	slices.Sort(firsts)
	slices.Sort(lasts)
	st := benchStats{n: len(samples), wall: wall, stream: stream,
		firstP50: benchPercentile(firsts, 0.50), firstP99: benchPercentile(firsts, 0.99),
		lastP50: benchPercentile(lasts, 0.50), lastP99: benchPercentile(lasts, 0.99)}
	if wall > 0 {
		st.perSecond = float64(len(samples)) / wall.Seconds()
	}
	return st
}

// benchPercentile is the nearest-rank benchPercentile of sorted durations.
func benchPercentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// warm sends a few requests to each target of s, so connections, the
// store's caches and the routes are warm before anything is measured.
func (e *benchEnv) warm(tb testing.TB, targets ...benchTarget) {
	tb.Helper()
	conc := benchEnvInt(tb, "GW_BENCH_CONC", 8)
	for _, t := range targets {
		if _, _, err := e.load(context.Background(), t, 8*conc, conc); err != nil {
			tb.Fatalf("warming up: %v", err)
		}
	}
	e.oa.Reset()
	e.an.Reset()
}

func benchEnvInt(tb testing.TB, name string, def int) int {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		tb.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

func benchEnvDuration(tb testing.TB, name string, def time.Duration) time.Duration {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		tb.Fatalf("%s=%q: want a positive duration such as 90s", name, v)
	}
	return d
}

// BenchmarkGateway sends b.N requests per scenario through the gateway
// site from GW_BENCH_CONC (8) concurrent clients.
func BenchmarkGateway(b *testing.B) { benchTargets(b, true) }

// BenchmarkBaseline sends the same scenarios' requests to the bare
// reverse_proxy sites in front of the same fakes.
func BenchmarkBaseline(b *testing.B) { benchTargets(b, false) }

func benchTargets(b *testing.B, gateway bool) {
	env := startBenchEnv(b)
	conc := benchEnvInt(b, "GW_BENCH_CONC", 8)
	for _, sc := range env.scenarios {
		t := sc.base
		if gateway {
			t = sc.gw
		}
		b.Run(sc.name, func(b *testing.B) {
			env.warm(b, t)
			if gateway {
				// Every round (b.N) starts from empty ledgers.
				t = env.withFreshAccounts(b, t)
			}
			b.ResetTimer()
			samples, wall, err := env.load(context.Background(), t, b.N, conc)
			b.StopTimer()
			if err != nil {
				b.Fatal(err)
			}
			env.oa.Reset()
			env.an.Reset()
			st := benchSummarise(samples, wall, t.stream)
			if t.stream {
				b.ReportMetric(benchMicros(st.firstP50), "ttfb_p50_us")
				b.ReportMetric(benchMicros(st.firstP99), "ttfb_p99_us")
			}
			b.ReportMetric(benchMicros(st.lastP50), "p50_us")
			b.ReportMetric(benchMicros(st.lastP99), "p99_us")
			b.ReportMetric(st.perSecond, "req_per_s")
		})
	}
}

func benchMicros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// TestBenchReport measures every scenario against its baseline in one
// run, interleaving the two in small batches (which goes first drawn
// at random for each pair) so drift of the machine hits both alike, and prints a Markdown
// table of p50/p99 latency and throughput with the ratios gateway /
// baseline. It asserts no timing. Skipped unless GW_BENCH=1.
func TestBenchReport(t *testing.T) {
	if os.Getenv("GW_BENCH") != "1" {
		t.Skip("set GW_BENCH=1 to measure the gateway against a bare reverse_proxy (scripts/bench.sh)")
	}
	n := benchEnvInt(t, "GW_BENCH_N", 2000)
	conc := benchEnvInt(t, "GW_BENCH_CONC", 8)
	batch := benchEnvInt(t, "GW_BENCH_BATCH", 100)
	budget := benchEnvDuration(t, "GW_BENCH_BUDGET", 90*time.Second)
	env := startBenchEnv(t)

	type result struct {
		name     string
		gw, base benchStats
		// gwFirst and gwLast are the gateway's p50 latency (to the
		// last byte) in its first and its last batch.
		gwFirst, gwLast time.Duration
		// batches, charges and commitP50/P99: the gateway's own
		// measure of making its charges durable during the scenario
		// (gw_charge_commit_seconds).
		batches, charges     float64
		commitP50, commitP99 time.Duration
		// gwCPU and baseCPU: each process's CPU over the whole scenario
		// (its background work in the other's batches too); when both
		// targets are the gateway, the gateway's CPU in each target's
		// batches; zero when one process serves both targets otherwise.
		gwCPU, baseCPU time.Duration
		// pairs: each round's two full batches (their CPU where both
		// targets are the gateway).
		pairs []benchPair
		// baseSynced: the baseline makes a record durable per request.
		baseSynced bool
	}
	var results []result
	for _, sc := range env.scenarios {
		env.warm(t, sc.base, sc.gw)
		sc.gw = env.withFreshAccounts(t, sc.gw)
		gwBase := sc.base.accounts != "" // both targets are the gateway's
		if gwBase {
			sc.base = env.withFreshAccounts(t, sc.base)
		}
		commitsBefore := env.commits(t)
		split := !sc.gw.bare && !gwBase && env.base != env.g
		gwCPU0, _ := procCPU(env.g.pid(t))
		baseCPU0, _ := procCPU(env.base.pid(t))
		gwPID := env.g.pid(t)
		var gwBatchCPU, baseBatchCPU time.Duration
		var pairs []benchPair // the two targets' batches side by side
		var gwBatches []time.Duration
		ctx, cancel := context.WithTimeout(context.Background(), budget)
		var gwS, baseS []benchSample
		var gwWall, baseWall time.Duration
		for i := 0; len(gwS) < n || len(baseS) < n; i++ {
			if ctx.Err() != nil {
				break
			}
			// Which target goes first is drawn for each pair of
			// batches: work the gateway does every so many calls (a
			// collection, a sync, the applier's turn) then falls on
			// either target alike, where a fixed pattern of turns could
			// meet it in step and always hand it to the same one.
			order := []bool{false, true}
			if rand.N(2) == 1 {
				order = []bool{true, false}
			}
			var pair benchPair
			for _, isGW := range order {
				tg, have, wall := sc.base, &baseS, &baseWall
				if isGW {
					tg, have, wall = sc.gw, &gwS, &gwWall
				}
				k := min(batch, n-len(*have))
				if k <= 0 {
					continue
				}
				var cpu0 time.Duration
				if gwBase {
					cpu0, _ = threadsCPU(gwPID)
				}
				s, w, err := env.load(ctx, tg, k, conc)
				if err != nil {
					cancel()
					t.Fatalf("%s: %v", sc.name, err)
				}
				if cpu1, ok := threadsCPU(gwPID); ok && gwBase {
					// Both targets are the gateway: each batch's CPU is
					// its target's (what it leaves running into the next
					// batch is the next one's, either target's alike).
					if isGW {
						gwBatchCPU += cpu1 - cpu0
						pair.gwCPU = cpu1 - cpu0
					} else {
						baseBatchCPU += cpu1 - cpu0
						pair.baseCPU = cpu1 - cpu0
					}
				}
				if len(s) == batch {
					if isGW {
						pair.gwWall = w
					} else {
						pair.baseWall = w
					}
				}
				*have = append(*have, s...)
				*wall += w
				if isGW && len(s) > 0 {
					gwBatches = append(gwBatches, benchSummarise(s, w, false).lastP50)
				}
			}
			if pair.gwWall > 0 && pair.baseWall > 0 {
				pairs = append(pairs, pair)
			}
			// The fakes keep every request; forget them as we go.
			env.oa.Reset()
			env.an.Reset()
		}
		cancel()
		r := result{name: sc.name, gw: benchSummarise(gwS, gwWall, sc.gw.stream), base: benchSummarise(baseS, baseWall, sc.base.stream),
			baseSynced: sc.base.synced}
		if !gwBase { // else the commits are both targets'
			r.batches, r.charges, r.commitP50, r.commitP99 = env.commits(t).since(commitsBefore)
		}
		if gwCPU1, ok := procCPU(env.g.pid(t)); ok && split {
			baseCPU1, _ := procCPU(env.base.pid(t))
			r.gwCPU, r.baseCPU = gwCPU1-gwCPU0, baseCPU1-baseCPU0
		}
		r.pairs = pairs
		if gwBase {
			r.gwCPU, r.baseCPU = gwBatchCPU, baseBatchCPU
		}
		r.gw.truncated, r.base.truncated = len(gwS) < n, len(baseS) < n
		if len(gwBatches) > 0 {
			r.gwFirst, r.gwLast = gwBatches[0], gwBatches[len(gwBatches)-1]
		}
		results = append(results, r)
	}

	var md strings.Builder
	fmt.Fprintf(&md, "### Gateway vs bare reverse_proxy (same fake upstream, same run)\n\n")
	fmt.Fprintf(&md, "%d requests per target and scenario, %d concurrent clients, interleaved in batches of %d; "+
		"gateway calls spread over %d fresh account(s) per scenario; durability %s (GW_BENCH_DURABILITY); access log on %s (GW_BENCH_ACCESS_LOG); baseline in %s (GW_BENCH_BASELINE); loopback; %s/%s, %d CPUs (the load generator's GOMAXPROCS %d), %s.\n",
		n, conc, batch, env.accounts, cmp.Or(os.Getenv("GW_BENCH_DURABILITY"), "sync"), benchLogSites(), benchBaselineWhere(), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.Version())
	fmt.Fprintf(&md, "Latencies in µs (streams: to the first and to the last body byte); ratio = gateway / baseline; "+
		"added = gateway − baseline. CPU per call: each process's user and system time over the whole scenario (/proc; "+
		"work one does while the other's batch runs counts as its own), over its calls; where both targets are the gateway "+
		"(caps-vs-plain and the like), the gateway's CPU in each target's batches (its threads' run time), over that target's calls; "+
		"CPU ratio = baseline / gateway.")
	if slices.ContainsFunc(env.scenarios, func(sc benchScenario) bool { return sc.gw.synced || sc.base.synced }) {
		fmt.Fprintf(&md, " fsync-on-bare: the bare proxy that also makes one %d B record durable per request (pwrite over written blocks, "+
			"then fdatasync, when the upstream's answer starts: gw_bench_sync) against the bare proxy, so its added column is that fsync's cost "+
			"where a charge's is paid; same-format-beyond-fsync: the gateway against that proxy, so its added column is the gateway's latency "+
			"beyond the one fsync a durable charge needs.", benchsync.RecordSize)
	}
	md.WriteString("\n\n")
	fmt.Fprintf(&md, "| scenario | measure | baseline p50 | gateway p50 | ratio | added | baseline p99 | gateway p99 | ratio | added |\n")
	fmt.Fprintf(&md, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	row := func(name, measure string, b50, g50, b99, g99 time.Duration) {
		fmt.Fprintf(&md, "| %s | %s | %.0f | %.0f | %s | %+.0f | %.0f | %.0f | %s | %+.0f |\n", name, measure,
			benchMicros(b50), benchMicros(g50), benchRatio(benchMicros(g50), benchMicros(b50)), benchMicros(g50-b50),
			benchMicros(b99), benchMicros(g99), benchRatio(benchMicros(g99), benchMicros(b99)), benchMicros(g99-b99))
	}
	for _, r := range results {
		if r.gw.stream {
			row(r.name, "first byte", r.base.firstP50, r.gw.firstP50, r.base.firstP99, r.gw.firstP99)
			row(r.name, "last byte", r.base.lastP50, r.gw.lastP50, r.base.lastP99, r.gw.lastP99)
		} else {
			row(r.name, "latency", r.base.lastP50, r.gw.lastP50, r.base.lastP99, r.gw.lastP99)
		}
	}
	fmt.Fprintf(&md, "\n| scenario | baseline req/s | gateway req/s | ratio | gateway p50, first → last batch | baseline CPU per call | gateway CPU per call | CPU ratio |\n|---|--:|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range results {
		note := ""
		if r.gw.truncated || r.base.truncated {
			note = fmt.Sprintf(" (cut short by GW_BENCH_BUDGET: %d baseline, %d gateway requests)", r.base.n, r.gw.n)
		}
		cpu := "– | – | –"
		if r.gwCPU > 0 && r.baseCPU > 0 {
			b, g := benchMicros(r.baseCPU)/float64(r.base.n), benchMicros(r.gwCPU)/float64(r.gw.n)
			cpu = fmt.Sprintf("%.0f µs | %.0f µs | %s", b, g, benchRatio(b, g))
		}
		fmt.Fprintf(&md, "| %s%s | %.0f | %.0f | %s | %.0f → %.0f µs | %s |\n", r.name, note, r.base.perSecond, r.gw.perSecond,
			benchRatio(r.gw.perSecond, r.base.perSecond), benchMicros(r.gwFirst), benchMicros(r.gwLast), cpu)
	}
	fmt.Fprintf(&md, "\nBatch beside batch: over the rounds of two full batches (one to each target, in an order drawn at random), the median "+
		"of the baseline's batch time over the gateway's (a throughput ratio) and, where both targets are the gateway (caps-vs-plain and "+
		"the like), of the baseline's CPU over the gateway's (a CPU ratio). A stall of the machine or a burst of the gateway's own work "+
		"falls in one batch and moves the median little, where it moves the sums above by several hundredths.\n\n")
	fmt.Fprintf(&md, "| scenario | rounds of two batches | throughput ratio, median | CPU ratio, median |\n|---|--:|--:|--:|\n")
	for _, r := range results {
		wall := benchMedianRatio(r.pairs, func(p benchPair) (float64, float64) { return float64(p.baseWall), float64(p.gwWall) })
		cpu := "–"
		if m := benchMedianRatio(r.pairs, func(p benchPair) (float64, float64) { return float64(p.baseCPU), float64(p.gwCPU) }); m > 0 {
			cpu = fmt.Sprintf("%.3f×", m)
		}
		fmt.Fprintf(&md, "| %s | %d | %.3f× | %s |\n", r.name, len(r.pairs), wall, cpu)
	}
	fmt.Fprintf(&md, "\nThe gateway's own measure of making its charges durable (gw_charge_commit_seconds: a batch's write and sync; in durability interval, its write), "+
		"and the latency it added beyond that (added − commit):\n\n")
	fmt.Fprintf(&md, "| scenario | measure | batches | charges a batch | commit p50 | commit p99 | added p50 beyond it | added p99 beyond it |\n|---|---|--:|--:|--:|--:|--:|--:|\n")
	for _, r := range results {
		if r.batches == 0 || r.baseSynced {
			continue // a synced baseline has the fsync in it already
		}
		// A stream's charge is made durable before its last event (the
		// first byte waits for no disk).
		measure := "latency"
		if r.gw.stream {
			measure = "last byte"
		}
		b50, g50, b99, g99 := r.base.lastP50, r.gw.lastP50, r.base.lastP99, r.gw.lastP99
		fmt.Fprintf(&md, "| %s | %s | %.0f | %.1f | %.0f | %.0f | %+.0f | %+.0f |\n", r.name, measure, r.batches, r.charges/r.batches,
			benchMicros(r.commitP50), benchMicros(r.commitP99), benchMicros(g50-b50-r.commitP50), benchMicros(g99-b99-r.commitP99))
	}
	// Printed as is (not t.Log) so the table can be copied.
	fmt.Print("\n" + md.String() + "\n")
	if out := os.Getenv("GW_BENCH_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(md.String()), 0o644); err != nil {
			t.Errorf("writing GW_BENCH_OUT: %v", err)
		}
	}

	if out := os.Getenv("GW_BENCH_PROFILE"); out != "" {
		benchProfileGateway(t, env, out, benchEnvInt(t, "GW_BENCH_PROFILE_SECONDS", 10), conc, batch)
	}
}

// benchPair is one round of two full batches, one to each target, when
// both are the gateway: each batch's wall time and the gateway's CPU in it.
type benchPair struct {
	gwWall, baseWall time.Duration
	gwCPU, baseCPU   time.Duration
}

// benchMedianRatio is the median over pairs of num/den as of says (pairs
// whose den is not positive left out; 0 when none is left).
func benchMedianRatio(pairs []benchPair, of func(benchPair) (num, den float64)) float64 {
	var rs []float64
	for _, p := range pairs {
		if num, den := of(p); den > 0 {
			rs = append(rs, num/den)
		}
	}
	if len(rs) == 0 {
		return 0
	}
	slices.Sort(rs)
	if len(rs)%2 == 1 {
		return rs[len(rs)/2]
	}
	return (rs[len(rs)/2-1] + rs[len(rs)/2]) / 2
}

func benchRatio(a, b float64) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// benchProfileGateway loads the gateway site alone, cycling through the
// scenarios, while it takes a CPU profile of the bin/caddy process from
// Caddy's admin endpoint, and writes the profile to out (read it with
// `go tool pprof -top bin/caddy <out>`).
func benchProfileGateway(t *testing.T, env *benchEnv, out string, seconds, conc, batch int) {
	var targets []benchTarget
	for _, sc := range env.scenarios {
		switch {
		case os.Getenv("GW_BENCH_PROFILE_SITE") == "baseline":
			targets = append(targets, sc.base)
		case !sc.gw.bare: // the A/A scenario loads no gateway
			targets = append(targets, env.withFreshAccounts(t, sc.gw))
		}
	}
	if len(targets) == 0 {
		t.Fatal("GW_BENCH_PROFILE: no gateway scenario to load")
	}
	profiled := env.g
	if os.Getenv("GW_BENCH_PROFILE_SITE") == "baseline" {
		profiled = env.base
	}
	i := 0
	benchProfile(t, profiled, out, seconds, func() (int, error) {
		_, _, err := env.load(context.Background(), targets[i%len(targets)], batch, conc)
		i++
		env.oa.Reset()
		env.an.Reset()
		return batch, err
	})
}

// benchProfile takes a profile of the process p from Caddy's admin
// /debug/pprof/ for seconds (GW_BENCH_PROFILE_KIND: the CPU profile by
// default, allocs the allocations made meanwhile, trace an execution
// trace), calling load over and over meanwhile (it answers how many calls
// it made), and writes the profile to out.
func benchProfile(t *testing.T, p *gateway, out string, seconds int, load func() (int, error)) {
	type answer struct {
		body []byte
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		c := &http.Client{Timeout: time.Duration(seconds)*time.Second + 30*time.Second}
		kind := "profile"
		switch k := os.Getenv("GW_BENCH_PROFILE_KIND"); k {
		case "allocs", "trace": // the allocations made while loaded, or an execution trace
			kind = k
		}
		resp, err := c.Get(p.AdminURL + "/debug/pprof/" + kind + "?seconds=" + strconv.Itoa(seconds))
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %d: %.300s", resp.StatusCode, b)
		}
		got <- answer{body: b, err: err}
	}()
	var a answer
	calls, start := 0, time.Now()
	for {
		select {
		case a = <-got:
		default:
			n, err := load()
			if err != nil {
				t.Fatalf("profiling load: %v", err)
			}
			calls += n
			continue
		}
		break
	}
	if a.err != nil {
		t.Fatalf("CPU profile from %s: %v", p.AdminURL, a.err)
	}
	if err := os.WriteFile(out, a.body, 0o644); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("gateway CPU profile (%ds, gateway load only): %s; %d calls in %.1fs (the profile's CPU over the calls is the CPU per call)\n",
		seconds, out, calls, time.Since(start).Seconds())
}

package integration

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

const (
	// promScrapeInterval is how often the test's Prometheus scrapes the
	// gateway: short, so the workload is seen within moments.
	promScrapeInterval = "250ms"
	// promTimeout bounds every wait on Prometheus (its start, a scrape).
	promTimeout = 30 * time.Second
	// promPollEvery is how often a wait on Prometheus asks again.
	promPollEvery = 100 * time.Millisecond
	// dashboardRange stands in for Grafana's $__rate_interval, $__interval
	// and $__range when the panels' queries run here.
	dashboardRange = "1m"
)

// dashboardPath is the Grafana dashboard of the gateway's metrics.
var dashboardPath = filepath.Join("..", "dashboards", "caddy-gw.json")

// dashboardQuery is one query of one panel of the dashboard.
type dashboardQuery struct {
	Panel, RefID, Expr string
}

// dashboardQueries reads every panel's query from the dashboard, with
// Grafana's interval variables and the dashboard's template variables
// (their "all" value) put in.
func dashboardQueries(t *testing.T) []dashboardQuery {
	t.Helper()
	b, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Inputs []struct {
			Name, Type, PluginID string
		} `json:"__inputs"`
		Panels []struct {
			Title      string
			Datasource struct{ UID string }
			Targets    []struct {
				RefID string
				Expr  string
			}
		}
		Templating struct {
			List []struct {
				Name, AllValue string
			}
		}
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardPath, err)
	}
	if len(d.Inputs) != 1 || d.Inputs[0].Name != "DS_PROMETHEUS" || d.Inputs[0].PluginID != "prometheus" {
		t.Errorf("dashboard inputs %+v, want the one Prometheus datasource DS_PROMETHEUS", d.Inputs)
	}
	var subst []string
	for _, v := range []string{"$__rate_interval", "$__interval", "$__range"} {
		subst = append(subst, v, dashboardRange)
	}
	for _, v := range d.Templating.List {
		if v.AllValue == "" {
			t.Fatalf("template variable %s has no allValue to run the queries with", v.Name)
		}
		subst = append(subst, "${"+v.Name+"}", v.AllValue, "$"+v.Name, v.AllValue)
	}
	r := strings.NewReplacer(subst...)
	var qs []dashboardQuery
	for _, p := range d.Panels {
		if p.Datasource.UID != "${DS_PROMETHEUS}" {
			t.Errorf("panel %q: datasource %q, want ${DS_PROMETHEUS}", p.Title, p.Datasource.UID)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			q := r.Replace(tg.Expr)
			if strings.Contains(q, "$") {
				t.Errorf("panel %q query %s: a variable is left in %s", p.Title, tg.RefID, q)
			}
			qs = append(qs, dashboardQuery{Panel: p.Title, RefID: tg.RefID, Expr: q})
		}
	}
	if len(qs) == 0 {
		t.Fatal("the dashboard has no queries")
	}
	return qs
}

// prometheus is a Prometheus server the test started on loopback.
type prometheus struct {
	url string
	out *logBuffer
}

// prometheusBin finds Debian's prometheus binary. Without it the test is
// skipped, or fails under CI, which installs it.
func prometheusBin(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skip("no prometheus binary on this machine (apt-get install prometheus); CI runs this test")
		}
		t.Fatal("no prometheus binary on this machine, want Debian's prometheus package")
	}
	return bin
}

// startPrometheus starts the prometheus binary bin scraping the gateway's
// admin /metrics, with its storage in a temporary folder, and waits until
// it is ready.
func startPrometheus(t *testing.T, bin string, g *gateway) *prometheus {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
scrape_configs:
  - job_name: gw
    metrics_path: /metrics
    static_configs:
      - targets: [%[2]q]
`, promScrapeInterval, g.AdminAddr)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := "127.0.0.1:" + freePorts(t, 1)[0]
	p := &prometheus{url: "http://" + addr, out: newLogBuffer()}
	cmd := exec.Command(bin,
		"--config.file="+cfgPath,
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
	)
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			out, _ := p.out.snapshot()
			t.Logf("prometheus output:\n%s", out)
		}
	})
	p.waitFor(t, "to be ready", func() bool {
		resp, err := http.Get(p.url + "/-/ready")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return p
}

// waitFor asks cond again every promPollEvery until it holds, failing the
// test after promTimeout.
func (p *prometheus) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(promTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(promPollEvery)
	defer tick.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("prometheus: waited %s %s", promTimeout, what)
		}
	}
}

// promSample is one sample of an instant query's answer.
type promSample struct {
	Metric map[string]string
	Value  float64
}

// query runs an instant query through the HTTP API.
func (p *prometheus) query(t *testing.T, expr string) []promSample {
	t.Helper()
	resp, err := http.Get(p.url + "/api/v1/query?query=" + url.QueryEscape(expr))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a struct {
		Status string
		Error  string
		Data   struct {
			ResultType string
			Result     []struct {
				Metric map[string]string
				Value  [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatalf("query %s: %v", expr, err)
	}
	if resp.StatusCode != http.StatusOK || a.Status != "success" || a.Data.ResultType != "vector" {
		t.Fatalf("query %s: %d %s %s, result type %q; want 200, success and a vector", expr, resp.StatusCode, a.Status, a.Error, a.Data.ResultType)
	}
	out := make([]promSample, 0, len(a.Data.Result))
	for _, r := range a.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("query %s: value %v: %v", expr, r.Value[1], err)
		}
		out = append(out, promSample{Metric: r.Metric, Value: v})
	}
	return out
}

// waitValue waits until expr has a sample of value want.
func (p *prometheus) waitValue(t *testing.T, expr string, want float64) {
	t.Helper()
	p.waitFor(t, fmt.Sprintf("for %s to be %v", expr, want), func() bool {
		for _, s := range p.query(t, expr) {
			if s.Value == want {
				return true
			}
		}
		return false
	})
}

// TestDashboard runs every query of the Grafana dashboard against a real
// Prometheus that scraped the gateway after a workload of billed calls
// (streamed and not), an upstream failure, a cut stream, a cached answer
// and a refusal: each panel's query is valid and shows data.
func TestDashboard(t *testing.T) {
	t.Parallel()
	bin := prometheusBin(t)
	queries := dashboardQueries(t)
	e := newChatEnv(t, cacheCaddyfile(t))
	prom := startPrometheus(t, bin, e.gateway)
	prom.waitValue(t, `up{job="gw"}`, 1)

	key := e.account(t, "dashboard", map[string]any{"balance_usd": "50.00"})
	brokeKey := e.account(t, "dashboard-broke", map[string]any{"balance_usd": "0.00"})
	model := openaiBackend.model
	path, plainBody := rawChat(chatClient, model, false)
	_, streamBody := rawChat(chatClient, model, true)
	_, escalatedBody := rawChat(chatClient, "gw-standard", false)
	cached := cacheBody(chatClient, model, 0)
	call := func(what, body string, want int, header ...string) response {
		t.Helper()
		r := e.do(t, http.MethodPost, path, body, header...)
		if r.Status != want {
			t.Fatalf("%s: %d %s, want %d", what, r.Status, r.Body, want)
		}
		return r
	}
	// The workload runs twice, each round scraped after it ends, so every
	// series has grown between two samples and the panels' rates are more
	// than zero.
	for round := 1; round <= 2; round++ {
		e.OA.Push(fake.Script{Text: "Plain.", Usage: fakeUsage(false, tokenUsage{Input: 900, Cached: 100, Output: 80})})
		call("plain", plainBody, http.StatusOK, bearer(key)...)
		e.OA.Push(fake.Script{Text: "A streamed answer.", Usage: fakeUsage(false, tokenUsage{Input: 300, Output: 40})})
		call("stream", streamBody, http.StatusOK, bearer(key)...)
		e.OA.Push(fake.Script{Text: midStreamText, Chunks: 4, MidStreamError: true, Usage: fakeUsage(false, tokenUsage{Input: 50, Output: 20})})
		call("cut stream", streamBody, http.StatusOK, bearer(key)...)
		e.OA.Push(fake.Script{Status: http.StatusInternalServerError}, fake.Script{Text: "Escalated.", Usage: fakeUsage(false, tokenUsage{Input: 70, Output: 7})})
		call("escalated", escalatedBody, http.StatusOK, bearer(key)...)
		if round == 1 {
			call("to be cached", cached, http.StatusOK, bearer(key)...)
		}
		if hit := call("cache hit", cached, http.StatusOK, bearer(key)...); hit.Header.Get("X-Gw-Cache") != "hit" {
			t.Fatalf("round %d: second call X-Gw-Cache %q, want hit", round, hit.Header.Get("X-Gw-Cache"))
		}
		call("refused", plainBody, http.StatusPaymentRequired, bearer(brokeKey)...)
		// The refusal is the round's last answer: once Prometheus holds
		// its count, it has scraped the whole round.
		prom.waitValue(t, `gw_refusals_total{job="gw",family="chat",code="credit_exhausted"}`, float64(round))
	}

	for _, q := range queries {
		got := prom.query(t, q.Expr)
		if len(got) == 0 {
			t.Errorf("panel %q query %s returned no data: %s", q.Panel, q.RefID, q.Expr)
			continue
		}
		var shown bool
		for _, s := range got {
			if !math.IsNaN(s.Value) && s.Value > 0 {
				shown = true
			}
		}
		if !shown {
			t.Errorf("panel %q query %s: no sample above zero in %+v: %s", q.Panel, q.RefID, got, q.Expr)
		}
	}
	if t.Failed() {
		r := e.adminDo(t, http.MethodGet, "/metrics", nil)
		t.Logf("the gateway's metrics:\n%s", bytes.TrimSpace(r.Body))
	}
}

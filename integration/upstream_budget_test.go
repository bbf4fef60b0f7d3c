package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// Bounded upstream attempts: a call waits out at most two attempts that
// time out, across a provider's deployments and escalation together, and
// escalates after an empty answer at most once; every attempt the
// provider may bill that the caller does not pay for is counted in
// gw_upstream_unbilled_total.

// budgetHeaderTimeout is the header time-out of provider "slow": short,
// so that each attempt that times out costs the test little.
const budgetHeaderTimeout = 300 * time.Millisecond

// slowLines are gw block lines adding provider "slow" with the given
// deployment lines, and a model of it in each lane, cheaper than every
// model of Caddyfile.example: gw-fast picks slow-fast and escalates to
// slow-standard, then slow-reasoning.
func slowLines(deployments ...string) string {
	var b strings.Builder
	b.WriteString("\t\tprovider slow {\n\t\t\tformat openai\n\t\t\tapi_key sk-upstream-slow\n")
	b.WriteString("\t\t\theader_timeout " + budgetHeaderTimeout.String() + "\n")
	for _, d := range deployments {
		b.WriteString("\t\t\t" + d + "\n")
	}
	b.WriteString("\t\t}\n")
	for _, lane := range []string{"fast", "standard", "reasoning"} {
		fmt.Fprintf(&b, "\t\tmodel slow-%s {\n\t\t\tprovider slow\n\t\t\tlane %s\n\t\t\tprice 0.01 0.02\n\t\t}\n", lane, lane)
	}
	return b.String()
}

// budgetChat is a gw-fast chat request, non-streamed or streamed.
func budgetChat(stream bool) string {
	return fmt.Sprintf(`{"model":"gw-fast","stream":%t,"max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`, stream)
}

// chatTimeout is the chat family's time-out error.
const chatTimeout = `{"error":{"message":"<string>","type":"api_error","param":null,"code":"timeout"}}`

// expectMetrics checks that every gw_ series of the metrics whose name is
// one of names has exactly the value want gives it, and that want's series
// all exist.
func expectMetrics(t *testing.T, g *gateway, want map[string]float64, names ...string) {
	t.Helper()
	got := scrape(t, g)
	for series, v := range got {
		for _, n := range names {
			if strings.HasPrefix(series, n+"{") {
				if w, ok := want[series]; !ok || w != v {
					t.Errorf("%s %v, want %v", series, v, want[series])
				}
			}
		}
	}
	for series, w := range want {
		if _, ok := got[series]; !ok {
			t.Errorf("metrics lack %s (want %v)", series, w)
		}
	}
}

// A gw-fast call whose two deployments both wait past the header time-out
// is answered 504 in the chat shape after two requests in all, not one per
// deployment of each of the three models; both are counted as failed and
// as unbilled; nothing is charged. A streamed call is bounded alike.
func TestTimeoutsBoundedAcrossEscalation(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%t", stream), func(t *testing.T) {
			t.Parallel()
			f := fakes(t, 2)
			for _, u := range f {
				u.Default = fake.Script{Text: "too late", Usage: fake.Usage{Input: 9, Output: 2}, Delay: time.Minute}
			}
			g := startGateway(t, gwOptions{BootstrapKey: deployBootstrapKey, Caddyfile: withGW(t, slowLines("deployment "+f[0].URL, "deployment "+f[1].URL))})
			r := g.do(t, http.MethodPost, "/v1/chat/completions", budgetChat(stream), bearer(deployBootstrapKey)...)
			expectError(t, r, http.StatusGatewayTimeout, chatTimeout, "req-")
			if r.Header.Get("X-Gw-Escalated") != "" {
				t.Errorf("X-Gw-Escalated %q on a failed call", r.Header.Get("X-Gw-Escalated"))
			}
			if a, b := arrived(f[0]), arrived(f[1]); a != 1 || b != 1 {
				t.Errorf("the deployments received %d and %d requests, want one each (two time-outs in all)", a, b)
			}
			for _, u := range f {
				for _, req := range u.Requests() {
					if m := req.JSON()["model"]; m != "slow-fast" {
						t.Errorf("a request for %v: the call escalated after its time-outs were spent", m)
					}
				}
			}
			expectMetrics(t, g, map[string]float64{
				`gw_upstream_errors_total{family="chat",provider="slow",reason="timeout"}`:   2,
				`gw_upstream_unbilled_total{family="chat",provider="slow",reason="timeout"}`: 2,
			}, "gw_upstream_errors_total", "gw_upstream_unbilled_total")
			if l := g.ledger(t, "default"); len(l) != 0 {
				t.Errorf("ledger %+v, want nothing charged", l)
			}
		})
	}
}

// Fast failures do not spend the time-outs: with one deployment that
// times out and one that answers 500, a gw-fast call tries both for the
// first model, escalates, and stops at its second time-out: the slow
// deployment sees exactly two requests, the failing one as many as the
// 5xx counted, and the caller gets the time-out.
func TestTimeoutsBoundedWithFastFailures(t *testing.T) {
	t.Parallel()
	f := fakes(t, 2)
	slow, failing := f[0], f[1]
	slow.Default = fake.Script{Text: "too late", Usage: fake.Usage{Input: 9, Output: 2}, Delay: time.Minute}
	failing.Default = fake.Script{Status: http.StatusInternalServerError}
	g := startGateway(t, gwOptions{BootstrapKey: deployBootstrapKey, Caddyfile: withGW(t, slowLines("deployment "+slow.URL, "deployment "+failing.URL))})
	r := g.do(t, http.MethodPost, "/v1/chat/completions", budgetChat(false), bearer(deployBootstrapKey)...)
	expectError(t, r, http.StatusGatewayTimeout, chatTimeout, "req-")
	if n := arrived(slow); n != 2 {
		t.Errorf("the slow deployment received %d requests, want 2", n)
	}
	fails := arrived(failing)
	if fails != 1 && fails != 2 {
		t.Errorf("the failing deployment received %d requests, want 1 or 2 (tried by each model until the second time-out)", fails)
	}
	var models []any
	for _, u := range f {
		for _, req := range u.Requests() {
			models = append(models, req.JSON()["model"])
		}
	}
	for _, m := range models {
		if m == "slow-reasoning" {
			t.Errorf("requests for %v: the call went on after its second time-out", models)
		}
	}
	expectMetrics(t, g, map[string]float64{
		`gw_upstream_errors_total{family="chat",provider="slow",reason="timeout"}`:    2,
		`gw_upstream_errors_total{family="chat",provider="slow",reason="status_5xx"}`: float64(fails),
		`gw_upstream_unbilled_total{family="chat",provider="slow",reason="timeout"}`:  2,
	}, "gw_upstream_errors_total", "gw_upstream_unbilled_total")
}

// An empty answer escalates once: when the stronger model answers empty
// too, the call fails 502 without trying a third; both empty answers are
// counted as unbilled, nothing is charged.
func TestEmptyAnswerEscalatesOnce(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	key := e.account(t, "empty-once", nil)
	e.OA.Default = fake.Script{Usage: fake.Usage{Input: 12, Output: 1}}
	r := e.do(t, http.MethodPost, "/v1/chat/completions", `{"model":"gw-fast","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`, bearer(key)...)
	expectError(t, r, http.StatusBadGateway, `{"error":{"message":"<string>","type":"api_error","param":null,"code":"upstream_error"}}`, "req-")
	var models []any
	for _, req := range append(e.OA.Requests(), e.AN.Requests()...) {
		models = append(models, req.JSON()["model"])
	}
	if fmt.Sprint(models) != fmt.Sprint([]any{"gpt-4.1-nano", "gpt-4.1-mini"}) {
		t.Errorf("upstreams were asked for %v, want gpt-4.1-nano then gpt-4.1-mini (one escalation)", models)
	}
	expectMetrics(t, e.gateway, map[string]float64{
		`gw_upstream_errors_total{family="chat",provider="openai",reason="cut"}`:     2,
		`gw_upstream_unbilled_total{family="chat",provider="openai",reason="empty"}`: 2,
	}, "gw_upstream_errors_total", "gw_upstream_unbilled_total")
	e.expectNoCharge(t, "empty-once", "")
}

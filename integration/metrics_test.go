package integration

import (
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

func TestMetrics(t *testing.T) {
	t.Parallel()
	const boot = "sk-bootstrap-metrics-test-0123456789"
	oa, an := fake.NewOpenAI(), fake.NewAnthropic()
	t.Cleanup(oa.Close)
	t.Cleanup(an.Close)
	g := startGateway(t, gwOptions{BootstrapKey: boot, Env: map[string]string{"GW_OPENAI_BASE_URL": oa.URL, "GW_ANTHROPIC_BASE_URL": an.URL}})

	// A fresh process: the counters hold exactly these calls.
	for _, path := range []string{"/v1/models", "/models", "/v1/models"} {
		modelIDs(t, g.do(t, "GET", path, "", bearer(boot)...))
	}
	expectError(t, g.do(t, "GET", "/v1/models", ""), http.StatusUnauthorized, unauthChat, "req-")
	g.do(t, "POST", "/v1/chat/completions", `{}`, bearer(boot)...)
	// One charged call: one charge made durable, in one batch.
	key := g.newAccountKey(t, map[string]any{"id": "metrics", "plan": "paid", "cleared": true})
	if r := g.do(t, "POST", "/v1/chat/completions", `{"model":"gw-pinned-gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`, bearer(key)...); r.Status != http.StatusOK {
		t.Fatalf("chat: %d %s", r.Status, r.Body)
	}

	r := g.adminDo(t, "GET", "/metrics", nil)
	if r.Status != http.StatusOK {
		t.Fatalf("GET %s/metrics: %d %s", g.AdminURL, r.Status, r.Body)
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(string(r.Body), "\n") {
		lines[l] = true
	}
	for _, want := range []string{
		`gw_requests_total{code="200",family="models"} 3`,
		`gw_requests_total{code="401",family="models"} 1`,
		`gw_requests_total{code="400",family="chat"} 1`,
		`gw_request_duration_seconds_count{family="models"} 4`,
		`gw_requests_total{code="200",family="chat"} 1`,
		`gw_charges_committed_total 1`,
		`gw_charge_commit_seconds_count 1`,
	} {
		if !lines[want] {
			t.Errorf("metrics lack the line %s; gw lines:\n%s", want, grepLines(string(r.Body), "gw_"))
		}
	}
}

// grepLines returns the lines of s that start with prefix.
func grepLines(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

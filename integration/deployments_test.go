package integration

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// Several deployments of one provider: the gateway binary against several
// fake servers of one provider, each counted.

// poolModel is the backing model of provider "pool" whose deployments
// the tests list; a key allowed only this model never escalates to
// another provider, so a failure of the deployments reaches the client.
const poolModel = "gw-pinned-pool-mini"

// poolChat is a chat request to poolModel.
const poolChat = `{"model":"gw-pinned-pool-mini","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`

// poolLines are gw block lines adding provider "pool" (cooldown, then
// deployment lines) and its model.
func poolLines(cooldown string, deployments ...string) string {
	var b strings.Builder
	b.WriteString("\t\tprovider pool {\n\t\t\tformat openai\n\t\t\tapi_key sk-upstream-pool\n")
	if cooldown != "" {
		b.WriteString("\t\t\tcooldown " + cooldown + "\n")
	}
	for _, d := range deployments {
		b.WriteString("\t\t\t" + d + "\n")
	}
	b.WriteString("\t\t}\n\t\tmodel pool-mini {\n\t\t\tprovider pool\n\t\t\tlane standard\n\t\t\tprice 0.40 1.60\n\t\t}\n")
	return b.String()
}

// refusedURL is a loopback base URL on which nothing listens.
func refusedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + "/v1"
}

// fakes starts n chat-completions-style fakes.
func fakes(t *testing.T, n int) []*fake.Upstream {
	t.Helper()
	out := make([]*fake.Upstream, n)
	for i := range out {
		out[i] = fake.NewOpenAI()
		t.Cleanup(out[i].Close)
	}
	return out
}

// arrived is how many requests u received.
func arrived(u *fake.Upstream) int {
	n, _ := u.Arrived()
	return n
}

// poolKey makes a key of account default allowed only poolModel.
func poolKey(t testing.TB, g *gateway) string {
	t.Helper()
	key, _ := g.createKey(t, "default", map[string]any{"name": "pool", "models": []string{poolModel}})
	return key
}

const deployBootstrapKey = "sk-deploy-bootstrap-0123456789abcdefghijklm"

// One deployment answering 500, one refusing connections, one rate
// limited (429) and one slow: no client sees an error; every answer comes
// from the healthy ones, each failed deployment is tried once and then rests;
// every failed attempt is counted under the provider's name; the receipts
// and the ledger name the model, never a deployment.
func TestDeploymentsFailOver(t *testing.T) {
	t.Parallel()
	f := fakes(t, 4)
	failing, limited, slow, healthy := f[0], f[1], f[2], f[3]
	failing.Default = fake.Script{Status: http.StatusInternalServerError}
	limited.Default = fake.Script{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"3600"}}}
	slow.Default = fake.Script{Text: "slow", Usage: fake.Usage{Input: 9, Output: 2}, Delay: 150 * time.Millisecond}
	healthy.Default = fake.Script{Text: "fast", Usage: fake.Usage{Input: 9, Output: 2}}
	refused := refusedURL(t)
	g := startGateway(t, gwOptions{BootstrapKey: deployBootstrapKey, Caddyfile: withGW(t, poolLines("1h",
		"deployment "+failing.URL, "deployment "+refused, "deployment "+limited.URL, "deployment "+slow.URL, "deployment "+healthy.URL))})
	key := poolKey(t, g)
	chat := func() response {
		return g.do(t, http.MethodPost, "/v1/chat/completions", poolChat, bearer(key)...)
	}
	// One by one until each failing deployment has been tried (a call
	// tries them in a random order): each is then resting.
	var results []response
	connects := func() int {
		return int(scrape(t, g)[`gw_upstream_errors_total{family="chat",provider="pool",reason="connect"}`])
	}
	met := 0 // failing deployments tried so far
	for met < 3 {
		if len(results) == 200 {
			t.Fatalf("200 calls did not try every deployment: 500 %d, 429 %d", arrived(failing), arrived(limited))
		}
		r := chat()
		met = arrived(failing) + arrived(limited) + connects()
		if r.Status != http.StatusOK {
			t.Fatalf("a call failed while a healthy deployment was left: %d %s", r.Status, r.Body)
		}
		results = append(results, r)
	}
	const concurrent = 40
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range concurrent {
		wg.Go(func() {
			r := chat()
			mu.Lock()
			results = append(results, r)
			mu.Unlock()
		})
		if i%4 == 3 {
			wg.Wait() // a few at once, so the healthy ones carry load
		}
	}
	wg.Wait()
	calls := len(results)
	var hosts []string
	for _, u := range []string{failing.URL, limited.URL, slow.URL, healthy.URL, refused} {
		p, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, p.Host)
	}
	ids := map[string]bool{}
	for i, r := range results {
		if r.Status != http.StatusOK {
			t.Fatalf("call %d: %d %s", i, r.Status, r.Body)
		}
		text := contentText(get(r.JSON(t), "choices", 0, "message", "content"))
		if text != "fast" && text != "slow" {
			t.Fatalf("call %d answered %q", i, text)
		}
		if r.Header.Get("X-Gw-Escalated") != "" || r.Header.Get("X-Gw-Routed-Model") != "" && r.Header.Get("X-Gw-Routed-Model") != "pool-mini" {
			t.Fatalf("call %d left the provider: %v", i, r.Header)
		}
		for name, vs := range r.Header {
			for _, v := range vs {
				for _, h := range hosts {
					if strings.Contains(v, h) {
						t.Fatalf("header %s names a deployment: %s", name, v)
					}
				}
			}
		}
		ids[r.Header.Get("X-Gw-Request-Id")] = true
	}
	if arrived(failing) != 1 || arrived(limited) != 1 {
		t.Fatalf("the failed deployments were called %d (500) and %d (429) times: want once, then rest", arrived(failing), arrived(limited))
	}
	if n := arrived(slow) + arrived(healthy); n != calls {
		t.Fatalf("answers from the healthy deployments: %d, want %d", n, calls)
	}
	if arrived(healthy) <= arrived(slow) {
		t.Fatalf("the slow deployment took %d calls, the fast one %d: want fewer on the slow one", arrived(slow), arrived(healthy))
	}
	m := scrape(t, g)
	for reason, want := range map[string]float64{"status_5xx": 1, "status_429": 1, "connect": 1} {
		if got := m[`gw_upstream_errors_total{family="chat",provider="pool",reason="`+reason+`"}`]; got != want {
			t.Errorf("gw_upstream_errors_total %s: %v, want %v", reason, got, want)
		}
	}
	ledger := g.ledger(t, "default")
	if len(ledger) != calls {
		t.Fatalf("ledger: %d entries, want %d", len(ledger), calls)
	}
	for _, e := range ledger {
		if e.Model != "pool-mini" || !ids[e.RequestID] {
			t.Fatalf("ledger entry %+v: want model pool-mini and a served request", e)
		}
	}
}

// Calls spread by the deployments' weights: 1:3 over 400 calls within
// ten points.
func TestDeploymentsFollowWeights(t *testing.T) {
	t.Parallel()
	f := fakes(t, 2)
	g := startGateway(t, gwOptions{BootstrapKey: deployBootstrapKey, Caddyfile: withGW(t, poolLines("",
		"deployment "+f[0].URL, "deployment "+f[1].URL+" {\n\t\t\t\tweight 3\n\t\t\t}"))})
	key := poolKey(t, g)
	const calls = 400
	for i := range calls {
		if r := g.do(t, http.MethodPost, "/v1/chat/completions", poolChat, bearer(key)...); r.Status != http.StatusOK {
			t.Fatalf("call %d: %d %s", i, r.Status, r.Body)
		}
	}
	a, b := arrived(f[0]), arrived(f[1])
	if a+b != calls {
		t.Fatalf("calls %d + %d, want %d", a, b, calls)
	}
	if share := float64(a) / calls; share < 0.15 || share > 0.35 {
		t.Fatalf("weight 1 of 4 took %d of %d calls (%.2f), want 0.25 ± 0.10", a, calls, share)
	}
}

// A deployment that failed rests for the provider's cooldown (no call
// reaches it meanwhile), then gets calls again by itself.
func TestDeploymentRestsThenComesBack(t *testing.T) {
	t.Parallel()
	f := fakes(t, 2)
	flaky, steady := f[0], f[1]
	const cooldown = time.Second
	g := startGateway(t, gwOptions{BootstrapKey: deployBootstrapKey, Caddyfile: withGW(t, poolLines(cooldown.String(),
		"deployment "+flaky.URL, "deployment "+steady.URL))})
	key := poolKey(t, g)
	call := func() {
		t.Helper()
		if r := g.do(t, http.MethodPost, "/v1/chat/completions", poolChat, bearer(key)...); r.Status != http.StatusOK {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
	}
	flaky.Push(fake.Script{Status: http.StatusBadGateway})
	deadline := time.Now().Add(requestTimeout)
	for flaky.Pending() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the flaky deployment never got a call")
		}
		call()
	}
	failedBy := time.Now() // the failure happened before this
	before := arrived(flaky)
	for arrived(flaky) == before {
		if time.Now().After(deadline) {
			t.Fatal("the deployment never came back after its cooldown")
		}
		started := time.Now()
		call()
		if arrived(flaky) > before && started.Sub(failedBy) < cooldown-300*time.Millisecond {
			t.Fatalf("called again %v after it failed, within its cooldown of %v", started.Sub(failedBy), cooldown)
		}
	}
}

// A stream is served by one deployment: one that fails before the first
// byte passes it to another, which serves it whole; one that breaks after
// the first byte is never switched.
func TestDeploymentStreams(t *testing.T) {
	t.Parallel()
	f := fakes(t, 2)
	g := startGateway(t, gwOptions{BootstrapKey: deployBootstrapKey, Caddyfile: withGW(t, poolLines("1h",
		"deployment "+f[0].URL, "deployment "+f[1].URL))})
	key := poolKey(t, g)
	stream := `{"model":"gw-pinned-pool-mini","stream":true,"max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`

	f[0].SetDefault(fake.Script{Text: "broken", MidStreamError: true, Usage: fake.Usage{Input: 9, Output: 2}})
	f[1].SetDefault(fake.Script{Text: "broken", MidStreamError: true, Usage: fake.Usage{Input: 9, Output: 2}})
	r := g.do(t, http.MethodPost, "/v1/chat/completions", stream, bearer(key)...)
	if r.Status != http.StatusOK || arrived(f[0])+arrived(f[1]) != 1 {
		t.Fatalf("a stream broken after its first byte: %d, calls %d and %d (want one in all)", r.Status, arrived(f[0]), arrived(f[1]))
	}
	broken := 0
	if arrived(f[1]) == 1 {
		broken = 1
	}
	healthy := 1 - broken

	// The deployment whose stream broke is not resting (nothing failed
	// before a byte); now one fails before its first byte.
	f[broken].SetDefault(fake.Script{Status: http.StatusServiceUnavailable})
	f[healthy].SetDefault(fake.Script{Text: "the whole answer", Chunks: 4, Usage: fake.Usage{Input: 9, Output: 3}})
	for range 4 {
		r = g.do(t, http.MethodPost, "/v1/chat/completions", stream, bearer(key)...)
		if text := streamedText(t, r.Body); r.Status != http.StatusOK || text != "the whole answer" || !strings.HasSuffix(string(r.Body), "data: [DONE]\n\n") {
			t.Fatalf("a stream after a failure before its first byte: %d %q %s", r.Status, text, r.Body)
		}
	}
	if arrived(f[broken]) > 2 {
		t.Fatalf("the failed deployment got %d calls: want at most one failed attempt, then rest", arrived(f[broken]))
	}
}

// GW_OPENAI_BASE_URL may hold several base URLs: Caddyfile.example then
// spreads the provider's calls over them, and one that fails is passed
// over.
func TestDeploymentsFromBaseURLList(t *testing.T) {
	t.Parallel()
	f := fakes(t, 2)
	g := startGateway(t, gwOptions{BootstrapKey: deployBootstrapKey, Env: map[string]string{"GW_OPENAI_BASE_URL": f[0].URL + "," + f[1].URL}})
	key, _ := g.createKey(t, "default", map[string]any{"name": "mini", "models": []string{"gw-pinned-gpt-4.1-mini"}})
	body := `{"model":"gw-pinned-gpt-4.1-mini","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`
	for i := 0; arrived(f[0]) == 0 || arrived(f[1]) == 0; i++ {
		if i == 100 {
			t.Fatalf("100 calls did not reach both: %d and %d", arrived(f[0]), arrived(f[1]))
		}
		if r := g.do(t, http.MethodPost, "/v1/chat/completions", body, bearer(key)...); r.Status != http.StatusOK {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
	}
	for _, u := range f {
		if got := u.Requests()[0].Header.Get("Authorization"); got != "Bearer sk-upstream-openai-test" {
			t.Fatalf("key sent: %q, want the one OPENAI_API_KEY gives both", got)
		}
	}
	f[0].SetDefault(fake.Script{Status: http.StatusInternalServerError})
	for i := range 10 {
		if r := g.do(t, http.MethodPost, "/v1/chat/completions", body, bearer(key)...); r.Status != http.StatusOK || r.Header.Get("X-Gw-Escalated") != "" {
			t.Fatalf("call %d with one deployment failing: %d %v %s", i, r.Status, r.Header, r.Body)
		}
	}
}

// Per-deployment requests per minute hold across two nodes on one Redis:
// the deployments take exactly their limits in all, whichever node sends,
// and then a call is refused 429 in the chat shape with Retry-After,
// without reaching any.
func TestNodesDeploymentLimits(t *testing.T) {
	t.Parallel()
	f := fakes(t, 2)
	e := newNodes(t, 2, poolLines("", "deployment "+f[0].URL+" {\n\t\t\t\trequests_per_minute 3\n\t\t\t}",
		"deployment "+f[1].URL+" {\n\t\t\t\trequests_per_minute 2\n\t\t\t}"))
	key, _ := e.nodes[0].createKey(t, "default", map[string]any{"name": "pool", "models": []string{poolModel}})
	for i := range 5 {
		if r := e.nodes[i%2].do(t, http.MethodPost, "/v1/chat/completions", poolChat, bearer(key)...); r.Status != http.StatusOK {
			t.Fatalf("call %d on node %d within the limits: %d %s", i, i%2, r.Status, r.Body)
		}
	}
	if arrived(f[0]) != 3 || arrived(f[1]) != 2 {
		t.Fatalf("calls per deployment %d and %d, want 3 and 2", arrived(f[0]), arrived(f[1]))
	}
	for node := range 2 {
		r := e.nodes[node].do(t, http.MethodPost, "/v1/chat/completions", poolChat, bearer(key)...)
		retry, err := strconv.Atoi(r.Header.Get("Retry-After"))
		if r.Status != http.StatusTooManyRequests || err != nil || retry < 1 || retry > 60 {
			t.Fatalf("node %d past every deployment's limit: %d Retry-After %q %s", node, r.Status, r.Header.Get("Retry-After"), r.Body)
		}
		if typ, code := get(r.JSON(t), "error", "type"), get(r.JSON(t), "error", "code"); typ != "rate_limit_error" || code != "rate_limit_exceeded" {
			t.Fatalf("node %d: error %v/%v, want rate_limit_error/rate_limit_exceeded: %s", node, typ, code, r.Body)
		}
	}
	if arrived(f[0]) != 3 || arrived(f[1]) != 2 {
		t.Fatalf("a refused call reached a deployment: %d and %d", arrived(f[0]), arrived(f[1]))
	}
}

// streamedText joins the content deltas of a chat-completions stream.
func streamedText(t *testing.T, body []byte) string {
	t.Helper()
	var b strings.Builder
	for _, line := range strings.Split(string(body), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatalf("stream event %q: %v", data, err)
		}
		for _, c := range chunk.Choices {
			b.WriteString(c.Delta.Content)
		}
	}
	return b.String()
}

// A deployment's tokens per minute count the gateway's estimate of each
// chat prompt (a quarter of the body's bytes): a large prompt that does
// not fit what is left of the minute is refused 429 without reaching the
// provider, while a small one still fits.
func TestDeploymentTokensPerMinute(t *testing.T) {
	t.Parallel()
	f := fakes(t, 1)
	g := startGateway(t, gwOptions{BootstrapKey: deployBootstrapKey, Caddyfile: withGW(t, poolLines("",
		"deployment "+f[0].URL+" {\n\t\t\t\ttokens_per_minute 1000\n\t\t\t}"))})
	key := poolKey(t, g)
	large := `{"model":"gw-pinned-pool-mini","max_tokens":50,"messages":[{"role":"user","content":"` + strings.Repeat("word ", 480) + `"}]}`
	if r := g.do(t, http.MethodPost, "/v1/chat/completions", large, bearer(key)...); r.Status != http.StatusOK {
		t.Fatalf("a prompt of about %d tokens within 1000: %d %s", len(large)/4, r.Status, r.Body)
	}
	r := g.do(t, http.MethodPost, "/v1/chat/completions", large, bearer(key)...)
	if r.Status != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" || get(r.JSON(t), "error", "code") != "rate_limit_exceeded" {
		t.Fatalf("a second one past the minute's tokens: %d %v %s", r.Status, r.Header, r.Body)
	}
	if r := g.do(t, http.MethodPost, "/v1/chat/completions", poolChat, bearer(key)...); r.Status != http.StatusOK {
		t.Fatalf("a small prompt in what is left: %d %s", r.Status, r.Body)
	}
	if arrived(f[0]) != 2 {
		t.Fatalf("calls reaching the deployment: %d, want 2", arrived(f[0]))
	}
}

// A call passed from a failed deployment to another is traced as two
// attempt spans under the provider's name, the failed one with its
// status and reason, and no span names a deployment.
func TestDeploymentAttemptSpans(t *testing.T) {
	t.Parallel()
	f := fakes(t, 2)
	failing, healthy := f[0], f[1]
	failing.Default = fake.Script{Status: http.StatusInternalServerError}
	g, rcv := traced(t, gwOptions{BootstrapKey: deployBootstrapKey, Env: map[string]string{"GW_OPENAI_BASE_URL": failing.URL + "," + healthy.URL}})
	key, _ := g.createKey(t, "default", map[string]any{"name": "mini", "models": []string{"gw-pinned-gpt-4.1-mini"}})
	body := `{"model":"gw-pinned-gpt-4.1-mini","max_tokens":50,"messages":[{"role":"user","content":"hi"}]}`
	var traceID string
	for i := 0; arrived(failing) == 0; i++ {
		if i == 100 {
			t.Fatal("100 calls never tried the failing deployment")
		}
		traceID = fmt.Sprintf("4bf92f3577b34da6a3ce929d0e0e%04x", i)
		r := g.do(t, http.MethodPost, "/v1/chat/completions", body, append(bearer(key), "traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")...)
		if r.Status != http.StatusOK || r.Header.Get("X-Gw-Escalated") != "" {
			t.Fatalf("call %d: %d %v %s", i, r.Status, r.Header, r.Body)
		}
	}
	var statuses []string
	for _, s := range rcv.traceSpans(t, traceID, 3) {
		at := attrs(s)
		for k, v := range at {
			for _, u := range f {
				if strings.Contains(v, strings.TrimSuffix(strings.TrimPrefix(u.URL, "http://"), "/v1")) {
					t.Errorf("span %s attribute %s names a deployment: %s", s.Name, k, v)
				}
			}
		}
		if !strings.HasPrefix(s.Name, "upstream ") {
			continue
		}
		if s.Name != "upstream openai" || at["gen_ai.provider.name"] != "openai" {
			t.Errorf("attempt span %s, provider %q: want the provider's name", s.Name, at["gen_ai.provider.name"])
		}
		statuses = append(statuses, at["http.response.status_code"]+"/"+at["error.type"])
	}
	slices.Sort(statuses)
	if want := []string{"200/", "500/status_5xx"}; !slices.Equal(statuses, want) {
		t.Fatalf("attempt spans %v, want %v", statuses, want)
	}
}

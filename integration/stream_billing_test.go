package integration

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// withAccessLog adds Caddy's access log to the example's site, so a test
// can wait for a request to be finished (handled) without polling.
func withAccessLog(t *testing.T) string {
	t.Helper()
	c := exampleCaddyfile(t)
	if !strings.Contains(c, "\tlog {") {
		t.Fatal("Caddyfile.example writes no access log")
	}
	return c
}

// waitHandled waits for the access log line of the request with id.
func waitHandled(t *testing.T, g *gateway, id string) {
	t.Helper()
	g.waitLog(t, func(log string) bool {
		for _, l := range strings.Split(log, "\n") {
			if strings.Contains(l, `"handled request"`) && strings.Contains(l, id) {
				return true
			}
		}
		return false
	}, "the access log line of "+id)
}

func streamRequest(t *testing.T, g *gateway, key, model string) (*http.Response, *bufio.Scanner) {
	t.Helper()
	req, _ := http.NewRequest("POST", g.BaseURL+"/v1/chat/completions",
		strings.NewReader(`{"model":"`+model+`","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp, bufio.NewScanner(resp.Body)
}

// TestClientLeavingMidStreamStillPays: once a stream has started, a client
// that hangs up does not stop the answer it asked for: the gateway reads
// it to the end and bills it exactly.
func TestClientLeavingMidStreamStillPays(t *testing.T) {
	oa, an := fake.NewOpenAI(), fake.NewAnthropic()
	t.Cleanup(oa.Close)
	t.Cleanup(an.Close)
	g := startGateway(t, gwOptions{Caddyfile: withAccessLog(t), Env: map[string]string{"GW_OPENAI_BASE_URL": oa.URL, "GW_ANTHROPIC_BASE_URL": an.URL}})
	key := g.newAccountKey(t, map[string]any{"id": "leaver", "plan": "paid", "cleared": true, "balance_usd": "5.00"})
	gate := make(chan struct{})
	an.Push(fake.Script{Text: "a long answer the client will not wait for", Usage: fake.Usage{Input: 2000, Output: 3000}, Gate: gate})
	resp, sc := streamRequest(t, g, key, "gw-pinned-claude-sonnet-4-5")
	id := resp.Header.Get("X-Gw-Request-Id")
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "data: ") {
		t.Fatalf("first line %q", sc.Text())
	}
	resp.Body.Close() // the client hangs up mid-answer
	close(gate)       // the provider finishes
	waitHandled(t, g, id)
	want := pricing.Cost(false, pricing.Line{Units: 2000, Rate: pricing.PerMillion(usdOf(t, "3"))}, pricing.Line{Units: 3000, Rate: pricing.PerMillion(usdOf(t, "15"))})
	if got := ledgerOf(t, g, "leaver")[id]; got != want {
		t.Fatalf("ledger %s = %s, want %s", id, got, want)
	}
}

// TestTruncatedUpstreamStreamFails: an upstream stream that ends without
// its terminal event is an error for the client, and costs nothing.
func TestTruncatedUpstreamStreamFails(t *testing.T) {
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, ev := range []string{
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`,
			`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"half an ans"},"finish_reason":null}]}`,
		} {
			w.Write([]byte("data: " + ev + "\n\n"))
		}
	}))
	t.Cleanup(cut.Close)
	an := fake.NewAnthropic()
	t.Cleanup(an.Close)
	g := startGateway(t, gwOptions{Caddyfile: withAccessLog(t), Env: map[string]string{"GW_OPENAI_BASE_URL": cut.URL + "/v1", "GW_ANTHROPIC_BASE_URL": an.URL}})
	key := g.newAccountKey(t, map[string]any{"id": "cut", "plan": "paid", "cleared": true, "balance_usd": "5.00"})
	resp, sc := streamRequest(t, g, key, "gw-pinned-gpt-4.1-mini")
	defer resp.Body.Close()
	var lines []string
	for sc.Scan() {
		if l := strings.TrimPrefix(sc.Text(), "data: "); l != sc.Text() {
			lines = append(lines, l)
		}
	}
	if len(lines) < 3 || !gjson.Get(lines[len(lines)-2], "error.message").Exists() || lines[len(lines)-1] != "[DONE]" {
		t.Fatalf("stream %q: want the content, then an error chunk and [DONE]", lines)
	}
	// The delivered half is billed: no usage came, so the output is the
	// delivered text counted (3 tokens) and the prompt is counted locally.
	id := resp.Header.Get("X-Gw-Request-Id")
	waitHandled(t, g, id)
	l := ledgerOf(t, g, "cut")
	if len(l) != 1 || l[id] <= 0 {
		t.Fatalf("ledger %v: want the delivered part of %s billed", l, id)
	}
	if b := balanceOf(t, g, "cut"); b != pricing.USD(5)-l[id] {
		t.Fatalf("balance %s, want 5.00 less %s", b, l[id])
	}
}

// TestOutputLimitAlwaysSent: a request without an output limit reaches the
// provider with the one its reservation assumed, in each format.
func TestOutputLimitAlwaysSent(t *testing.T) {
	g, oa, an, key := chatGateway(t)
	for _, c := range []struct {
		path, body, field string
		up                *fake.Upstream
	}{
		{"/v1/chat/completions", `{"model":"gw-pinned-gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`, "max_completion_tokens", oa},
		{"/v1/chat/completions", `{"model":"gw-pinned-claude-sonnet-4-5","messages":[{"role":"user","content":"hi"}]}`, "max_tokens", an},
		{"/v1/responses", `{"model":"gw-pinned-gpt-4.1-mini","input":"hi"}`, "max_output_tokens", oa},
		{"/v1/chat/completions", `{"model":"gw-pinned-gpt-4.1-mini","max_tokens":12,"messages":[{"role":"user","content":"hi"}]}`, "max_tokens", oa},
	} {
		c.up.Reset()
		if r := g.do(t, "POST", c.path, c.body, bearer(key)...); r.Status != http.StatusOK {
			t.Fatalf("%s %s: %d %s", c.path, c.body, r.Status, r.Body)
		}
		reqs := c.up.Requests()
		got := gjson.GetBytes(reqs[len(reqs)-1].Body, c.field).Int()
		want := int64(4096)
		if strings.Contains(c.body, `"max_tokens":12`) {
			want = 12
		}
		if got != want {
			t.Errorf("%s %s: upstream %s = %d, want %d", c.path, c.body, c.field, got, want)
		}
	}
}

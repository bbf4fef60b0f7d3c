package integration

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// A client that reads slowly, pausing longer than the provider's idle
// time-out while the gateway is blocked writing to it, still gets the
// whole answer and is billed for it: the idle time-out counts only time
// spent waiting on the provider.
func TestSlowReaderStillBilled(t *testing.T) {
	t.Parallel()
	const chunks, size = 2000, 16 << 10 // 32 MB: far more than the sockets buffer
	piece := strings.Repeat("a", size)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i := range chunks {
			fmt.Fprintf(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":%q},"finish_reason":null}]}`+"\n\n", piece)
			if i%50 == 0 {
				_ = rc.Flush()
			}
		}
		fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
		fmt.Fprint(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":4000,"total_tokens":4010}}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(up.Close)
	an := fake.NewAnthropic()
	t.Cleanup(an.Close)
	// The OpenAI provider waits at most 1 s for the next chunk.
	config := strings.Replace(exampleCaddyfile(t), "\t\tprovider openai {\n", "\t\tprovider openai {\n\t\t\tidle_timeout 1s\n", 1)
	if !strings.Contains(config, "idle_timeout 1s") {
		t.Fatal("could not set the idle time-out")
	}
	g := startGateway(t, gwOptions{Caddyfile: config, Env: map[string]string{"GW_OPENAI_BASE_URL": up.URL + "/v1", "GW_ANTHROPIC_BASE_URL": an.URL}})
	key := g.newAccountKey(t, map[string]any{"id": "slow", "plan": "paid", "cleared": true, "balance_usd": "5.00"})
	resp, _ := streamRequest(t, g, key, "gw-pinned-gpt-4.1-mini")
	defer resp.Body.Close()
	head := make([]byte, 64<<10)
	if _, err := io.ReadFull(resp.Body, head); err != nil {
		t.Fatal(err)
	}
	// The slow client: it stops reading for twice the idle time-out, while
	// the gateway fills the socket and blocks writing.
	time.Sleep(2 * time.Second) // the behaviour under test: a client silent past the idle time-out
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	all := string(head) + string(rest)
	if strings.Contains(all, `"error"`) || !strings.Contains(all, `"cost_usd"`) || !strings.HasSuffix(strings.TrimSpace(all), "data: [DONE]") {
		t.Fatalf("the stream did not finish billed (%d bytes): ...%s", len(all), all[max(0, len(all)-400):])
	}
	if l := ledgerOf(t, g, "slow"); len(l) != 1 {
		t.Fatalf("ledger %v", l)
	}
}

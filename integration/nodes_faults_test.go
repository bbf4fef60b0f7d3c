package integration

import (
	"bufio"
	"context"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// Faults of the shared servers, with real servers stopped and started
// again: Redis down fails closed (billed calls 402 credit_unresolved, the
// rate budget and the account's lock being unknowable; unbilled routes
// still answer), PostgreSQL down refuses billed calls with 402
// credit_unresolved and key checks elsewhere with 503, never a free pass;
// both come back by themselves, and only answered calls are charged.
func TestNodesFaults(t *testing.T) {
	t.Parallel()
	s := startSharedNodes(t, 1, 1000)
	g, pg, rs := s.nodes[0], s.pg, s.rs
	s.oa.Default = fake.Script{Text: "ok", Usage: fake.Usage{Input: 10, Output: 100}}
	key := g.newAccountKey(t, map[string]any{"id": "faulty", "plan": "paid", "cleared": true, "balance_usd": "1.00"})
	chat := func() response { return g.do(t, http.MethodPost, "/v1/chat/completions", nodesChat, bearer(key)...) }
	answered := 0
	expectChat := func(status int, code string) {
		t.Helper()
		r := chat()
		if r.Status != status || (code != "" && !strings.Contains(string(r.Body), `"`+code+`"`)) {
			t.Fatalf("chat: %d %s, want %d %s", r.Status, r.Body, status, code)
		}
		if status == http.StatusOK {
			answered++
		} else if r.Header.Get("Retry-After") == "" {
			t.Errorf("%d without Retry-After", r.Status)
		}
	}
	// until retries a call while a restarted server's connections are
	// re-established (and, for Redis, while the nodes write their holds
	// back, when the refusal is credit_unresolved).
	until := func(what string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			r := chat()
			if r.Status == http.StatusOK {
				answered++
				return
			}
			if r.Status != http.StatusPaymentRequired || !strings.Contains(string(r.Body), `"credit_unresolved"`) {
				t.Fatalf("after %s came back: %d %s", what, r.Status, r.Body)
			}
			if time.Now().After(deadline) {
				t.Fatalf("no answer within 20 s after %s came back", what)
			}
			time.Sleep(50 * time.Millisecond) // polling the node's answer, an observable state
		}
	}
	expectChat(http.StatusOK, "")

	rs.Stop()
	expectChat(http.StatusPaymentRequired, "credit_unresolved")
	if r := g.do(t, http.MethodGet, "/v1/models", "", bearer(key)...); r.Status != http.StatusOK {
		t.Fatalf("models without Redis: %d %s", r.Status, r.Body)
	}
	rs.Start()
	until("Redis")

	pg.Stop()
	expectChat(http.StatusPaymentRequired, "credit_unresolved")
	if r := g.do(t, http.MethodGet, "/v1/models", "", bearer(key)...); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("models without PostgreSQL: %d %s", r.Status, r.Body)
	}
	pg.Start()
	until("PostgreSQL")

	if n := len(g.ledger(t, "faulty")); n != answered {
		t.Fatalf("%d ledger entries, %d answered calls", n, answered)
	}
}

// The database and Redis URLs carry passwords: a node that cannot reach
// them fails to start, and nothing it prints holds them.
func TestNodesURLsNotLogged(t *testing.T) {
	t.Parallel()
	for name, env := range map[string][]string{
		"database": {"GW_DATABASE_URL=postgres://gw:pg-s3cret-pw@127.0.0.1:1/gw?connect_timeout=2"},
		"redis":    {"GW_REDIS_URL=redis://:rd-s3cret-pw@127.0.0.1:1/0"},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(caddyBin, "run", "--config", "../Caddyfile.example", "--adapter", "caddyfile")
			cmd.Env = append([]string{"HOME=" + dir, "XDG_DATA_HOME=" + dir, "XDG_CONFIG_HOME=" + dir, "GW_DATA_DIR=" + dir,
				"GW_ADDRESS=127.0.0.1:" + freePorts(t, 1)[0], "GW_ADMIN=127.0.0.1:" + freePorts(t, 1)[0]}, env...)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("started without its %s:\n%s", name, out)
			}
			if strings.Contains(string(out), "s3cret") {
				t.Fatalf("the password is in the output:\n%s", out)
			}
			if !strings.Contains(string(out), map[string]string{"database": "PostgreSQL", "redis": "Redis"}[name]) {
				t.Errorf("the error does not say what failed:\n%s", out)
			}
		})
	}
}

// TestNodesRedisRestartedFromSnapshot: Redis restarted from a snapshot
// taken before a node's hold keeps its marks but not the hold. The other
// node's next call is not admitted against the money the hold covers: it
// is refused with credit_unresolved while the nodes write their holds
// back, then counts the hold again (credit_exhausted for a call that no
// longer fits).
func TestNodesRedisRestartedFromSnapshot(t *testing.T) {
	t.Parallel()
	s := startSharedNodes(t, 2, 1000)
	a, b := s.nodes[0], s.nodes[1]
	// One call's worst case is 500 output tokens at 1.60 USD a million
	// (0.0008 USD) and a few prompt tokens: the balance holds one, not two.
	key := a.newAccountKey(t, map[string]any{"id": "snapshot", "plan": "paid", "cleared": true, "balance_usd": "0.0012"})
	const body = `{"model":"gw-pinned-gpt-4.1-mini","stream":true,"max_tokens":500,"messages":[{"role":"user","content":"hi"}]}`
	opt, err := redis.ParseURL(s.rs.URL())
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(opt)
	ctx := context.Background()
	if err := rc.Save(ctx).Err(); err != nil { // the snapshot: the marks, no hold
		t.Fatal(err)
	}
	rc.Close()

	gate := make(chan struct{})
	s.oa.SetDefault(fake.Script{Text: "an answer streamed in several pieces", Chunks: 4, Usage: fake.Usage{Input: 12, Output: 40}, Gate: gate})
	started, done := make(chan struct{}), make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, a.BaseURL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := streamClient.Do(req)
		if err != nil {
			close(started)
			done <- 0
			return
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		first := true
		for sc.Scan() {
			if first && strings.Contains(sc.Text(), `"content":"`) {
				first = false
				close(started)
			}
		}
		if first {
			close(started)
		}
		done <- resp.StatusCode
	}()
	<-started
	s.rs.Stop()
	s.rs.Start() // from the snapshot

	call := func() response {
		return b.do(t, http.MethodPost, "/v1/chat/completions", strings.Replace(body, `"stream":true,`, "", 1), bearer(key)...)
	}
	r := call()
	if r.Status != http.StatusPaymentRequired || !strings.Contains(string(r.Body), `"credit_unresolved"`) {
		t.Fatalf("the first call after the restart: %d %s, want 402 credit_unresolved", r.Status, r.Body)
	}
	deadline := time.Now().Add(20 * time.Second)
	for strings.Contains(string(r.Body), `"credit_unresolved"`) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond) // polling the node's answer, an observable state
		r = call()
	}
	if r.Status != http.StatusPaymentRequired || r.Header.Get("X-Gw-Hold-Reason") != "credit_exhausted" {
		t.Fatalf("once the holds are back: %d %s, want 402 credit_exhausted (the other node's hold counted)", r.Status, r.Body)
	}
	close(gate)
	if status := <-done; status != http.StatusOK {
		t.Fatalf("the held stream: status %d", status)
	}
	if _, left := a.accountMoney(t, "snapshot"); mustUSD(t, left) < 0 {
		t.Fatalf("balance %s", left)
	}
	a.expectJournalOK(t)
}

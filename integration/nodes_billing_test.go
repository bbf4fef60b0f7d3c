package integration

import (
	"bufio"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// A stream delivered while Redis restarts or PostgreSQL is down is charged
// all the same: the charge is recorded without the account's lock, or kept
// in the node's spool until the database is back. Two nodes, one prepaid
// account, streams held open at their first content while the fault
// starts: every stream delivered whole is in the ledger exactly once at
// its receipt's cost once the servers are back, no client is told that
// nothing was charged, the journal checks out and the balance is the start
// less the ledger, never below zero.
func TestNodesStreamsChargedThroughOutages(t *testing.T) {
	t.Parallel()
	s := startSharedNodes(t, 2, 1000)
	nodes, oa, pg, rs := s.nodes, s.oa, s.pg, s.rs
	const start = "1.00"
	key := nodes[0].newAccountKey(t, map[string]any{"id": "streamer", "plan": "paid", "cleared": true, "balance_usd": start})

	const perNode = 3
	delivered := map[string]pricing.Money{} // request id → the cost its stream's usage names
	// During runs 2×perNode streams held at their first content, starts
	// the fault, lets the streams finish, waits for all of them and ends
	// the fault.
	// ready waits until every node answers a billed call again (a node
	// refuses with credit_unresolved while Redis's holds are restored);
	// the answered calls are charged as well.
	ready := func(name string) {
		t.Helper()
		oa.SetDefault(fake.Script{Text: "ok", Usage: fake.Usage{Input: 10, Output: 5}})
		for _, g := range nodes {
			deadline := time.Now().Add(20 * time.Second)
			for {
				r := g.do(t, http.MethodPost, "/v1/chat/completions", nodesChat, bearer(key)...)
				if r.Status == http.StatusOK {
					delivered[r.Header.Get("X-Gw-Request-Id")] = mustUSD(t, r.Header.Get("X-Gw-Cost-Usd"))
					break
				}
				if r.Status != http.StatusPaymentRequired || !strings.Contains(string(r.Body), `"credit_unresolved"`) || time.Now().After(deadline) {
					t.Fatalf("before %s on %s: %d %s", name, g.BaseURL, r.Status, r.Body)
				}
				time.Sleep(50 * time.Millisecond) // polling the node's answer, an observable state
			}
		}
	}
	during := func(name string, fault, end func()) {
		t.Helper()
		ready(name)
		gate := make(chan struct{})
		oa.SetDefault(fake.Script{Text: "an answer streamed in several pieces", Chunks: 4, Usage: fake.Usage{Input: 12, Output: 40}, Gate: gate})
		type result struct {
			id, body string
			status   int
			err      error
		}
		results := make(chan result, 2*perNode)
		started := make(chan struct{}, 2*perNode)
		var wg sync.WaitGroup
		for i := range 2 * perNode {
			g := nodes[i%2]
			wg.Go(func() {
				body := `{"model":"gw-pinned-gpt-4.1-mini","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`
				req, _ := http.NewRequest(http.MethodPost, g.BaseURL+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+key)
				resp, err := streamClient.Do(req)
				if err != nil {
					started <- struct{}{}
					results <- result{err: err}
					return
				}
				defer resp.Body.Close()
				var b strings.Builder
				sc := bufio.NewScanner(resp.Body)
				first := true
				for sc.Scan() {
					b.WriteString(sc.Text() + "\n")
					if first && strings.Contains(sc.Text(), `"content":"`) {
						first = false
						started <- struct{}{}
					}
				}
				if first {
					started <- struct{}{}
				}
				results <- result{id: resp.Header.Get("X-Gw-Request-Id"), body: b.String(), status: resp.StatusCode, err: sc.Err()}
			})
		}
		deadline := time.After(30 * time.Second)
		for range 2 * perNode {
			select {
			case <-started:
			case <-deadline:
				t.Fatalf("%s: the streams did not start within 30 s", name)
			}
		}
		fault()
		close(gate)
		wg.Wait()
		close(results)
		end()
		for r := range results {
			if r.err != nil || r.status != http.StatusOK {
				t.Fatalf("%s: stream %d %v:\n%s", name, r.status, r.err, r.body)
			}
			if strings.Contains(r.body, "nothing was charged") || strings.Contains(r.body, `"error"`) {
				t.Fatalf("%s: stream %s ended in an error:\n%s", name, r.id, r.body)
			}
			cost := sseCost([]byte(r.body))
			if !strings.HasSuffix(r.body, "data: [DONE]\n\n") || cost == "" || r.id == "" {
				t.Fatalf("%s: stream %q not delivered whole with its usage:\n%s", name, r.id, r.body)
			}
			delivered[r.id] = mustUSD(t, cost)
		}
	}
	during("Redis down", rs.Stop, rs.Start)
	during("Redis restarted", func() { rs.Stop(); rs.Start() }, func() {})
	during("PostgreSQL down", pg.Stop, pg.Start)
	ready("the end") // billing goes on on both nodes

	// Once the database is back, the spooled charges reach it.
	deadline := time.Now().Add(30 * time.Second)
	for len(nodes[1].ledger(t, "streamer")) < len(delivered) {
		if time.Now().After(deadline) {
			t.Fatalf("%d ledger entries after 30 s, want %d", len(nodes[1].ledger(t, "streamer")), len(delivered))
		}
		time.Sleep(50 * time.Millisecond) // polling the ledger, an observable state
	}
	var sum pricing.Money
	seen := map[string]int{}
	for _, le := range nodes[0].ledger(t, "streamer") {
		seen[le.RequestID]++
		want, ok := delivered[le.RequestID]
		if !ok || mustUSD(t, le.Cost) != want {
			t.Errorf("ledger entry %+v: delivered at %s (%v)", le, want, ok)
		}
		sum += mustUSD(t, le.Cost)
	}
	for id := range delivered {
		if seen[id] != 1 {
			t.Errorf("delivered stream %s is in the ledger %d times", id, seen[id])
		}
	}
	for _, g := range nodes {
		if _, bal := g.accountMoney(t, "streamer"); mustUSD(t, bal) < 0 || mustUSD(t, bal) != mustUSD(t, start)-sum {
			t.Fatalf("balance on %s: %s, start %s, ledger %s", g.BaseURL, bal, start, sum)
		}
	}
	if check := nodes[1].adminJSON(t, http.MethodGet, "/gw/journal/check", nil, http.StatusOK).JSON(t); check["ok"] != true {
		t.Fatalf("journal check %v", check)
	}
}

// streamClient sends the streamed calls of the outage tests.
var streamClient = &http.Client{Timeout: 60 * time.Second}

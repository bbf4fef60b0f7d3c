package integration

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/internal/testsvc"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// shortfallPrompt is about 4,000 characters of prose: the worst case
// reserves a token a byte, the gateway's own count of it is near 900.
var shortfallPrompt = strings.Repeat("the quick brown fox jumps over the lazy dog ", 91)

// shortfallBody is a chat call of shortfallPrompt with the client's own
// output limit of 64 tokens, which the gateway never lowers.
var shortfallBody = `{"model":"gw-pinned-gpt-4.1-mini","max_tokens":64,"messages":[{"role":"user","content":"` + shortfallPrompt + `"}]}`

// shortfallUsage is what the provider bills for shortfallBody: three
// times the gateway's count of the prompt, the output limit in full.
var shortfallUsage = tokenUsage{Input: 3000, Output: 64}

// shortfallMetric is the shortfall counted for the chat calls of
// gpt-4.1-mini in g's metrics.
func shortfallMetric(t *testing.T, g *gateway) pricing.Money {
	t.Helper()
	v := scrape(t, g)[`gw_shortfall_usd_total{family="chat",model="gpt-4.1-mini"}`]
	return pricing.Money(v*float64(pricing.NanoPerUSD) + 0.5)
}

// TestShortfallRecorded: a provider that bills three times the prompt the
// gateway counted (the tightened reservation, since the worst case does
// not fit) never takes the balance below zero. The call is charged what
// the balance held, the receipt, the ledger and the access log say so,
// the rest is the entry's shortfall_usd and in gw_shortfall_usd_total,
// the journal checks, and the next call is refused.
func TestShortfallRecorded(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	cost := listCost(t, "gpt-4.1-mini", shortfallUsage, false)
	balance := cost * 7 / 10 // less than the worst case, more than the tightened hold
	const account = "short"
	key := e.account(t, account, map[string]any{"balance_usd": balance.String()})
	e.OA.Push(fake.Script{Text: "Foxes.", Usage: fakeUsage(false, shortfallUsage), CapOutput: true})
	r := e.do(t, http.MethodPost, "/v1/chat/completions", shortfallBody, bearer(key)...)
	if r.Status != http.StatusOK {
		t.Fatalf("status %d %s", r.Status, r.Body)
	}
	if got := r.Header.Get("X-Gw-Cost-Usd"); got != balance.String() {
		t.Errorf("X-Gw-Cost-Usd %s, want the balance %s", got, balance)
	}
	id := r.Header.Get("X-Gw-Request-Id")
	e.expectLedger(t, account, ledgerEntry{RequestID: id, Endpoint: "chat", Model: "gpt-4.1-mini", Units: shortfallUsage.Units(), Unit: "token",
		Cost: balance.String(), Shortfall: (cost - balance).String()})
	if _, left := e.accountMoney(t, account); left != pricing.Money(0).String() {
		t.Errorf("balance %s, want 0", left)
	}
	if got := shortfallMetric(t, e.gateway); got != cost-balance {
		t.Errorf("gw_shortfall_usd_total %s, want %s", got, cost-balance)
	}
	if l := accessLog(t, e.gateway, []string{id})[id]; l.Cost != balance.String() || l.Shortfall != (cost-balance).String() {
		t.Errorf("access log cost %q shortfall %q, want %s and %s", l.Cost, l.Shortfall, balance, cost-balance)
	}
	e.waitLog(t, func(log string) bool {
		return strings.Contains(log, `"shortfall: the provider billed more than the account could pay"`) && strings.Contains(log, id)
	}, "the shortfall's warning")
	e.expectJournalOK(t)
	r = e.do(t, http.MethodPost, "/v1/chat/completions", shortfallBody, bearer(key)...)
	if r.Status != http.StatusPaymentRequired || r.Header.Get("X-Gw-Hold-Reason") != "credit_exhausted" {
		t.Fatalf("next call: %d %s, want 402 credit_exhausted", r.Status, r.Body)
	}
}

// TestShortfallConcurrent: a balance worth 5.5 calls and 24 calls at once
// against a provider that bills three times the gateway's count, on one
// node and on two nodes sharing PostgreSQL and Redis. No balance goes
// below zero; every entry's cost and shortfall add up to the provider's
// figure at list prices; the receipts add up to the ledger and the
// shortfall metrics to its shortfalls; the journal checks.
func TestShortfallConcurrent(t *testing.T) {
	t.Parallel()
	overbilledNodes(t, shortfallRun)
}

// overbilledNodes runs run on one node and on two sharing PostgreSQL and
// Redis, each against a provider that bills every chat call three times
// the gateway's count (cost at list prices), with limit: what 5.5 such
// calls cost.
func overbilledNodes(t *testing.T, run func(t *testing.T, nodes []*gateway, limit, cost pricing.Money)) {
	cost := listCost(t, "gpt-4.1-mini", shortfallUsage, false)
	limit := cost*11/2 + 1
	script := fake.Script{Text: "Foxes.", Usage: fakeUsage(false, shortfallUsage), CapOutput: true}
	t.Run("one node", func(t *testing.T) {
		t.Parallel()
		e := newChatEnv(t, "")
		e.OA.SetDefault(script)
		run(t, []*gateway{e.gateway}, limit, cost)
	})
	t.Run("two nodes", func(t *testing.T) {
		t.Parallel()
		s := startSharedNodes(t, 2, 1000)
		s.oa.SetDefault(script)
		run(t, s.nodes, limit, cost)
	})
}

// shortfallRun makes 24 calls at once, spread over nodes, on an account
// holding balance, each billed cost by the provider, and checks the money.
func shortfallRun(t *testing.T, nodes []*gateway, balance, cost pricing.Money) {
	const account, n = "crowd", 24
	key := nodes[0].newAccountKey(t, map[string]any{"id": account, "plan": "paid", "cleared": true, "balance_usd": balance.String()})
	var mu sync.Mutex
	var receipts pricing.Money
	served := 0
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r := nodes[i%len(nodes)].do(t, http.MethodPost, "/v1/chat/completions", shortfallBody, bearer(key)...)
			switch r.Status {
			case http.StatusOK:
				mu.Lock()
				receipts += mustUSD(t, r.Header.Get("X-Gw-Cost-Usd"))
				served++
				mu.Unlock()
			case http.StatusPaymentRequired:
			default:
				t.Errorf("status %d %s, want 200 or 402", r.Status, r.Body)
			}
		})
	}
	wg.Wait()
	g := nodes[0]
	spent, left := g.accountMoney(t, account)
	if mustUSD(t, left) < 0 || spent+mustUSD(t, left) != balance {
		t.Errorf("spent %s, left %s of %s: want no overdraft and the two adding up", spent, left, balance)
	}
	entries := g.ledger(t, account)
	if len(entries) != served || served == 0 {
		t.Fatalf("%d served, %d ledger entries", served, len(entries))
	}
	var ledger, short pricing.Money
	for _, l := range entries {
		c, s := mustUSD(t, l.Cost), mustUSD(t, l.Shortfall)
		if c < 0 || s < 0 || c+s != cost {
			t.Errorf("entry %s: cost %s + shortfall %s, want %s", l.RequestID, l.Cost, l.Shortfall, cost)
		}
		ledger += c
		short += s
	}
	if ledger != spent || receipts != ledger {
		t.Errorf("ledger %s, spend %s, receipts %s: want all equal", ledger, spent, receipts)
	}
	var counted pricing.Money
	for _, node := range nodes {
		counted += shortfallMetric(t, node)
	}
	if counted != short {
		t.Errorf("gw_shortfall_usd_total %s over the nodes, ledger shortfalls %s", counted, short)
	}
	g.expectJournalOK(t)
	t.Logf("%d of %d served, %s charged, %s short", served, n, ledger, short)
}

// TestNodeKilledDuringOutage: a node whose stream is charged while
// PostgreSQL is down keeps the charge in its spool and its money held in
// Redis as a kept hold; killed then, it leaves that hold standing (the
// other nodes keep counting the money, however long), and the next
// gateway on its data folder applies the spool once PostgreSQL is back and
// drops the hold: the charge is in the ledger once, at its receipt's cost.
// So in either durability: in interval mode the spool's write survives
// the kill whether or not its sync came first (the kernel keeps it).
func TestNodeKilledDuringOutage(t *testing.T) {
	t.Parallel()
	for _, durability := range []string{"sync", "interval 5ms"} {
		t.Run(durability, func(t *testing.T) {
			t.Parallel()
			nodeKilledDuringOutage(t, durability)
		})
	}
}

func nodeKilledDuringOutage(t *testing.T, durability string) {
	s := startSharedNodesWith(t, 1, 1000, map[string]string{"GW_DURABILITY": durability})
	a, oa, pg, rs := s.nodes[0], s.oa, s.pg, s.rs
	const account = "spooler"
	key := a.newAccountKey(t, map[string]any{"id": account, "plan": "paid", "cleared": true, "balance_usd": "1.00"})

	id, cost := spoolThroughOutage(t, a, oa, pg, key, `{"model":"gw-pinned-gpt-4.1-mini","stream":true,"max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`,
		fake.Usage{Input: 12, Output: 40})
	a.kill(t)

	// The dead node's spooled charge is held in Redis at its cost, with no
	// lease to end.
	opt, err := redis.ParseURL(rs.URL())
	if err != nil {
		t.Fatal(err)
	}
	rc := redis.NewClient(opt)
	t.Cleanup(func() { rc.Close() })
	ctx := context.Background()
	kept, err := rc.HGetAll(ctx, "gw:kept:{"+account+"}").Result()
	if err != nil || len(kept) != 1 {
		t.Fatalf("kept holds %v (%v), want the spooled charge's", kept, err)
	}
	for _, v := range kept {
		if v != strconv.FormatInt(int64(mustUSD(t, cost)), 10) {
			t.Fatalf("kept hold %s nano-dollars, want the charge's %s USD", v, cost)
		}
	}
	if ttl, err := rc.PTTL(ctx, "gw:kept:{"+account+"}").Result(); err != nil || ttl != -1 {
		t.Fatalf("the kept holds expire (%s, %v)", ttl, err)
	}

	// The next gateway on the node's data folder applies the spool and
	// drops the hold.
	pg.Start()
	a.start(t)
	for deadline := time.Now().Add(20 * time.Second); ; {
		n, err := rc.Exists(ctx, "gw:kept:{"+account+"}").Result()
		if err == nil && n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the kept hold is still there 20 s after the restart (%v)", err)
		}
		time.Sleep(50 * time.Millisecond) // polling Redis, an observable state
	}
	a.expectLedger(t, account, ledgerEntry{RequestID: id, Endpoint: "chat", Model: "gpt-4.1-mini", Units: 52, Unit: "token", Cost: cost})
	if spent, left := a.accountMoney(t, account); spent != mustUSD(t, cost) || mustUSD(t, left) != mustUSD(t, "1.00")-spent {
		t.Fatalf("spent %s, left %s; want %s charged once", spent, left, cost)
	}
	a.expectJournalOK(t)
}

// spoolThroughOutage streams a chat call of body (stream set) on g with
// key, its provider billing usage, and stops PostgreSQL once the first
// piece has arrived: the call settles into g's spool. It returns the
// request id and the cost the stream's usage block reported.
func spoolThroughOutage(t *testing.T, g *gateway, oa *fake.Upstream, pg *testsvc.PG, key, body string, usage fake.Usage) (id, cost string) {
	t.Helper()
	gate := make(chan struct{})
	oa.SetDefault(fake.Script{Text: "an answer streamed in several pieces", Chunks: 4, Usage: usage, Gate: gate})
	started := make(chan struct{})
	var got strings.Builder
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, g.BaseURL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := streamClient.Do(req)
		if err != nil {
			close(started)
			done <- err
			return
		}
		defer resp.Body.Close()
		id = resp.Header.Get("X-Gw-Request-Id")
		sc := bufio.NewScanner(resp.Body)
		first := true
		for sc.Scan() {
			got.WriteString(sc.Text() + "\n")
			if first && strings.Contains(sc.Text(), `"content":"`) {
				first = false
				close(started)
			}
		}
		if first {
			close(started)
		}
		done <- sc.Err()
	}()
	<-started
	pg.Stop()
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	cost = sseCost([]byte(got.String()))
	if cost == "" || id == "" || !strings.HasSuffix(got.String(), "data: [DONE]\n\n") {
		t.Fatalf("the stream was not delivered whole with its usage:\n%s", got.String())
	}
	return id, cost
}

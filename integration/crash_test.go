package integration

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// crashCall is the call the crash tests make, and the fake's answer to it.
const crashCall = `{"model":"gw-pinned-gpt-4.1-mini","max_tokens":300,"messages":[{"role":"user","content":"hi"}]}`

var crashAnswer = fake.Script{Text: "kept", Usage: fake.Usage{Input: 900, Output: 300}}

// A crash loses no charge whose answer completed: concurrent calls on one
// prepaid account, the process killed (SIGKILL, no shutdown) the moment the
// last answer arrives, then started again on the same data folder. Every
// answered call is in the ledger once, at its receipt's cost, and the
// balance is the start less their sum.
func TestKilledKeepsCharges(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	key := e.account(t, "crashy", map[string]any{"balance_usd": "5.00"})
	e.OA.Default = crashAnswer
	const calls, clients = 40, 8
	var mu sync.Mutex
	receipts := map[string]pricing.Money{}
	var wg sync.WaitGroup
	work := make(chan int, calls)
	for i := range calls {
		work <- i
	}
	close(work)
	for range clients {
		wg.Go(func() {
			for range work {
				r := e.do(t, http.MethodPost, "/v1/chat/completions", crashCall, bearer(key)...)
				if r.Status != http.StatusOK {
					t.Errorf("call: %d %s", r.Status, r.Body)
					continue
				}
				c := mustUSD(t, r.Header.Get("X-Gw-Cost-Usd"))
				mu.Lock()
				receipts[r.Header.Get("X-Gw-Request-Id")] = c
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	e.kill(t)
	if len(receipts) != calls {
		t.Fatalf("%d answers, want %d", len(receipts), calls)
	}
	e.start(t)
	expectKeptAfterKill(t, e.gateway, "crashy", mustUSD(t, "5.00"), receipts, 0)
}

// With durability interval 5ms the gateway is killed (SIGKILL) while
// eight clients keep calling, then started again on the same data folder:
// an answer waited only for its charge's write, which the kernel keeps
// when the process dies, so every answered call is in the ledger once at
// its receipt's cost, the calls the kill cut off are charged at most once
// each, the balance is the start less the ledger, and the journal checks.
func TestKilledUnderLoadInterval(t *testing.T) {
	t.Parallel()
	oa, an := fake.NewOpenAI(), fake.NewAnthropic()
	t.Cleanup(oa.Close)
	t.Cleanup(an.Close)
	const boot = "sk-crash-bootstrap-0123456789abcdefghijklm"
	g := startGateway(t, gwOptions{BootstrapKey: boot, Env: map[string]string{
		"GW_OPENAI_BASE_URL": oa.URL, "GW_ANTHROPIC_BASE_URL": an.URL, "GW_DURABILITY": "interval 5ms",
	}})
	if !strings.Contains(g.log.String(), `"msg":"durability interval: `) || !strings.Contains(g.log.String(), `"interval":0.005`) {
		t.Fatal("the gateway did not log that it runs in durability interval 5ms")
	}
	e := &chatEnv{gateway: g, OA: oa, AN: an, BootKey: boot}
	start := mustUSD(t, "50.00")
	key := e.account(t, "killed-interval", map[string]any{"balance_usd": start.String()})
	oa.Default = crashAnswer

	const clients, killAfter = 8, 120
	client := &http.Client{Timeout: requestTimeout, Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: clients}}
	t.Cleanup(client.CloseIdleConnections)
	var (
		mu       sync.Mutex
		receipts = map[string]pricing.Money{}
		sent     atomic.Int64
		killing  atomic.Bool
		enough   = make(chan struct{})
		once     sync.Once
		wg       sync.WaitGroup
	)
	for range clients {
		wg.Go(func() {
			for !killing.Load() {
				sent.Add(1)
				id, cost, err := crashPost(client, g.BaseURL, key)
				if err != nil {
					if !killing.Load() {
						t.Errorf("call before the kill: %v", err)
					}
					return
				}
				mu.Lock()
				receipts[id] = cost
				if len(receipts) >= killAfter {
					once.Do(func() { close(enough) })
				}
				mu.Unlock()
			}
		})
	}
	<-enough
	killing.Store(true)
	e.kill(t) // the clients are still calling
	wg.Wait()
	e.start(t)
	mu.Lock()
	defer mu.Unlock()
	// Each client may have had one call in flight when the process died.
	expectKeptAfterKill(t, e.gateway, "killed-interval", start, receipts, int(sent.Load())-len(receipts))
}

// crashPost makes the crash tests' call with key and returns the answer's
// request id and cost; an error when no whole 200 answer arrived.
func crashPost(client *http.Client, base, key string) (id string, cost pricing.Money, err error) {
	req, err := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(crashCall))
	if err != nil {
		return "", 0, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", 0, err
	}
	if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte(crashAnswer.Text)) {
		return "", 0, &callError{status: resp.StatusCode, body: string(body)}
	}
	cost, err = pricing.ParseUSD(resp.Header.Get("X-Gw-Cost-Usd"))
	return resp.Header.Get("X-Gw-Request-Id"), cost, err
}

// callError is an answer that was not a whole 200.
type callError struct {
	status int
	body   string
}

func (e *callError) Error() string { return http.StatusText(e.status) + ": " + e.body }

// expectKeptAfterKill checks an account's money after its gateway was
// killed and started again: every answered call (receipts: request id to
// the cost its answer showed) is in the ledger once at that cost; at most
// extra more entries (calls charged whose answers the kill cut off), each
// at the cost of an answered call; the balance is start less the ledger's
// sum; and the journal check is ok.
func expectKeptAfterKill(t *testing.T, g *gateway, account string, start pricing.Money, receipts map[string]pricing.Money, extra int) {
	t.Helper()
	var call pricing.Money
	for _, c := range receipts {
		if call != 0 && c != call {
			t.Fatalf("receipts of %s and %s for the same call", call, c)
		}
		call = c
	}
	ledger := g.ledger(t, account)
	seen := map[string]bool{}
	var sum pricing.Money
	cutOff := 0
	for _, le := range ledger {
		if seen[le.RequestID] {
			t.Errorf("%s is in the ledger twice", le.RequestID)
		}
		seen[le.RequestID] = true
		cost := mustUSD(t, le.Cost)
		sum += cost
		want, answered := receipts[le.RequestID]
		if !answered {
			cutOff++
			want = call
		}
		if cost != want {
			t.Errorf("ledger entry %+v: want cost %s (answered: %v)", le, want, answered)
		}
	}
	for id := range receipts {
		if !seen[id] {
			t.Errorf("the answered call %s is not in the ledger", id)
		}
	}
	if cutOff > extra {
		t.Errorf("%d ledger entries of calls that were not answered, want at most %d", cutOff, extra)
	}
	if _, balance := g.accountMoney(t, account); mustUSD(t, balance) != start-sum {
		t.Errorf("balance %s, want %s - %s", balance, start, sum)
	}
	g.expectJournalOK(t)
	t.Logf("%d answered calls kept, %d calls cut off by the kill charged", len(receipts), cutOff)
}

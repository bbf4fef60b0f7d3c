package integration

import (
	"net/http"
	"sync"
	"testing"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// A crash loses no charge whose answer completed: concurrent calls on one
// prepaid account, the process killed (SIGKILL, no shutdown) the moment the
// last answer arrives, then started again on the same data folder. Every
// answered call is in the ledger once, at its receipt's cost, and the
// balance is the start less their sum.
func TestKilledKeepsCharges(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	key := e.account(t, "crashy", map[string]any{"balance_usd": "5.00"})
	e.OA.Default = fake.Script{Text: "kept", Usage: fake.Usage{Input: 900, Output: 300}}
	const calls, clients = 40, 8
	body := `{"model":"gw-pinned-gpt-4.1-mini","max_tokens":300,"messages":[{"role":"user","content":"hi"}]}`
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
				r := e.do(t, http.MethodPost, "/v1/chat/completions", body, bearer(key)...)
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

	var sum pricing.Money
	ledger := e.ledger(t, "crashy")
	for _, le := range ledger {
		want, ok := receipts[le.RequestID]
		if !ok || mustUSD(t, le.Cost) != want {
			t.Errorf("ledger entry %+v: receipt %v (%v)", le, want, ok)
		}
		sum += mustUSD(t, le.Cost)
	}
	if len(ledger) != calls {
		t.Fatalf("%d ledger entries after the crash, want %d", len(ledger), calls)
	}
	if _, balance := e.accountMoney(t, "crashy"); mustUSD(t, balance) != mustUSD(t, "5.00")-sum {
		t.Fatalf("balance %s, want 5.00 - %s", balance, sum)
	}
}

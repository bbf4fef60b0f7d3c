package integration

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// TestReloadToAnotherStoreKeepsStreamsBilled: a reload that moves the store
// to another folder while a stream is in flight: the stream finishes and
// its charge lands in the store it started with.
func TestReloadToAnotherStoreKeepsStreamsBilled(t *testing.T) {
	g, oa, _, _ := chatGateway(t)
	key := g.newAccountKey(t, map[string]any{"id": "mover", "plan": "paid", "cleared": true, "balance_usd": "5.00"})
	gate := make(chan struct{})
	oa.Push(fake.Script{Text: "across a store move", Usage: fake.Usage{Input: 100, Output: 200}, Gate: gate})
	resp, sc := streamRequest(t, g, key, "gw-pinned-gpt-4.1-mini")
	defer resp.Body.Close()
	id := resp.Header.Get("X-Gw-Request-Id")
	if !sc.Scan() {
		t.Fatal("no first line")
	}
	if r := g.load(t, map[string]string{"GW_DATA_DIR": t.TempDir()}); r.Status != http.StatusOK {
		t.Fatalf("reload to another store: %d %s", r.Status, r.Body)
	}
	close(gate)
	var rest []string
	for sc.Scan() {
		rest = append(rest, sc.Text())
	}
	all := strings.Join(rest, "\n")
	if strings.Contains(all, `"error"`) || !strings.Contains(all, `"cost_usd"`) || !strings.Contains(all, "data: [DONE]") {
		t.Fatalf("the stream did not finish billed:\n%s", all)
	}
	// Back to the first store: the charge is there.
	if r := g.load(t, nil); r.Status != http.StatusOK {
		t.Fatalf("reload back: %d %s", r.Status, r.Body)
	}
	if _, ok := ledgerOf(t, g, "mover")[id]; !ok {
		t.Fatalf("the stream's charge %s is not in the ledger", id)
	}
}

// Reloads under concurrent traffic: every call is answered and billed
// once, none fails because of the reload. Run against a -race build
// (scripts/test.sh does) it also proves the reload bookkeeping race-free.
func TestReloadUnderTraffic(t *testing.T) {
	g, oa, _, _ := chatGateway(t)
	key := g.newAccountKey(t, map[string]any{"id": "busy", "plan": "paid", "cleared": true, "balance_usd": "50.00"})
	oa.SetDefault(fake.Script{Text: "steady", Usage: fake.Usage{Input: 10, Output: 5}})
	const clients, calls, reloads = 4, 15, 5
	var wg sync.WaitGroup
	ids := make(chan string, clients*calls)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				// A reload closes the old server's idle keep-alive
				// connections; a request racing that close is reset before
				// the gateway reads it. Go's transport (like the SDKs)
				// resends such a request when it may: Idempotency-Key says so.
				r := g.do(t, http.MethodPost, "/v1/chat/completions", `{"model":"gw-pinned-gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`,
					append(bearer(key), "Idempotency-Key", fmt.Sprint(c, "-", i))...)
				if r.Status != http.StatusOK {
					t.Errorf("call during reloads: %d %s", r.Status, r.Body)
					return
				}
				ids <- r.Header.Get("X-Gw-Request-Id")
			}
		}()
	}
	for range reloads {
		if r := g.load(t, nil); r.Status != http.StatusOK {
			t.Fatalf("reload: %d %s", r.Status, r.Body)
		}
	}
	wg.Wait()
	close(ids)
	ledger := ledgerOf(t, g, "busy")
	n := 0
	for id := range ids {
		n++
		if _, ok := ledger[id]; !ok {
			t.Errorf("call %s is not in the ledger", id)
		}
	}
	if n != clients*calls || len(ledger) != n {
		t.Fatalf("%d calls answered, %d ledger entries; want %d", n, len(ledger), clients*calls)
	}
}

// TestFailedReloadKeepsAdminAPI: a reload that fails to start (its site
// address is taken) leaves the running config, admin API included, serving.
func TestFailedReloadKeepsAdminAPI(t *testing.T) {
	const boot = "sk-failed-reload-bootstrap-0123456789abcdef"
	g := startGateway(t, gwOptions{BootstrapKey: boot})
	taken, err := net.Listen("tcp", "127.0.0.1:0") // a plain listener: no port sharing
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	if r := g.load(t, map[string]string{"GW_ADDRESS": taken.Addr().String()}); r.Status == http.StatusOK {
		t.Fatalf("a reload onto a taken port succeeded: %s", r.Body)
	}
	g.adminJSON(t, "GET", "/gw/accounts/default", nil, http.StatusOK)
	if r := g.do(t, "GET", "/v1/models", "", bearer(boot)...); r.Status != http.StatusOK {
		t.Fatalf("models after a failed reload: %d", r.Status)
	}
}

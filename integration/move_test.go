package integration

import (
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/internal/testsvc"
)

// The move from one node to two, as docs/several-nodes.md gives it: a gateway on the
// embedded store takes charges and is stopped; `caddy gw move-store`
// copies its store into PostgreSQL; two nodes on PostgreSQL and Redis then
// serve the same keys, balances and ledger, and charge on.
func TestMoveToNodes(t *testing.T) {
	t.Parallel()
	oa, an := fake.NewOpenAI(), fake.NewAnthropic()
	t.Cleanup(oa.Close)
	t.Cleanup(an.Close)
	oa.Default = fake.Script{Text: "moved", Usage: fake.Usage{Input: 10, Output: 100}}
	env := map[string]string{"GW_OPENAI_BASE_URL": oa.URL, "GW_ANTHROPIC_BASE_URL": an.URL}
	one := startGateway(t, gwOptions{BootstrapKey: nodesBootstrapKey, Env: env})
	key := one.newAccountKey(t, map[string]any{"id": "mover", "plan": "paid", "cleared": true, "balance_usd": "2.00"})
	for range 3 {
		if r := one.do(t, http.MethodPost, "/v1/chat/completions", nodesChat, bearer(key)...); r.Status != http.StatusOK {
			t.Fatalf("before the move: %d %s", r.Status, r.Body)
		}
	}
	before := one.ledger(t, "mover")
	_, balance := one.accountMoney(t, "mover")
	one.stop(t)

	db, rd := testsvc.Postgres(t), testsvc.Redis(t)
	out, err := exec.Command(caddyBin, "gw", "move-store", "--from", one.DataDir, "--to", db).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "copied 2 accounts") || strings.Contains(string(out), db) {
		t.Fatalf("gw move-store: %v\n%s", err, out)
	}
	env["GW_DATABASE_URL"], env["GW_REDIS_URL"] = db, rd
	var nodes []*gateway
	for range 2 {
		nodes = append(nodes, startGateway(t, gwOptions{BootstrapKey: nodesBootstrapKey, Env: env}))
	}
	for i, g := range nodes {
		if got := g.ledger(t, "mover"); len(got) != len(before) || got[0] != before[0] {
			t.Fatalf("node %d ledger %+v, before %+v", i, got, before)
		}
		if _, b := g.accountMoney(t, "mover"); b != balance {
			t.Fatalf("node %d balance %s, before %s", i, b, balance)
		}
	}
	for i, g := range nodes {
		if r := g.do(t, http.MethodPost, "/v1/chat/completions", nodesChat, bearer(key)...); r.Status != http.StatusOK {
			t.Fatalf("node %d after the move: %d %s", i, r.Status, r.Body)
		}
	}
	if n := len(nodes[0].ledger(t, "mover")); n != len(before)+2 {
		t.Fatalf("%d entries after two more calls, want %d", n, len(before)+2)
	}
	// Copying again into the same database is refused (under the command's
	// older name, kept).
	if out, err := exec.Command(caddyBin, "gw-move-store", "--from", one.DataDir, "--to", db).CombinedOutput(); err == nil ||
		!strings.Contains(string(out), "already holds accounts") {
		t.Fatalf("second move: %v %s", err, out)
	}
}

package integration

import (
	"bufio"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// ledgerOf reads an account's ledger through the admin API: request id →
// cost.
func ledgerOf(t *testing.T, g *gateway, account string) map[string]pricing.Money {
	t.Helper()
	r := g.adminJSON(t, "GET", "/gw/accounts/"+account+"/ledger?limit=1000", nil, http.StatusOK)
	out := map[string]pricing.Money{}
	for _, e := range r.JSON(t)["data"].([]any) {
		m := e.(map[string]any)
		c, err := pricing.ParseUSD(m["cost_usd"].(string))
		if err != nil {
			t.Fatal(err)
		}
		out[m["request_id"].(string)] = c
	}
	return out
}

func balanceOf(t *testing.T, g *gateway, account string) pricing.Money {
	t.Helper()
	b, err := pricing.ParseUSD(g.getAccount(t, account)["balance_usd"].(string))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestLedgerSurvivesReloadAndRestart: billed calls' ledger entries and the
// balance they drew down are the same after a reload and after a restart,
// and billing goes on after each; a stream in flight during a reload
// finishes and is billed.
func TestLedgerSurvivesReloadAndRestart(t *testing.T) {
	g, oa, _, _ := chatGateway(t)
	oa.SetDefault(fake.Script{Text: "ok", Usage: fake.Usage{Input: 1000, Output: 500}})
	key := g.newAccountKey(t, map[string]any{"id": "ledger", "plan": "paid", "cleared": true, "balance_usd": "10.00"})
	receipts := map[string]pricing.Money{}
	call := func() {
		t.Helper()
		r := g.do(t, "POST", "/v1/chat/completions", `{"model":"gw-pinned-gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`, bearer(key)...)
		if r.Status != http.StatusOK {
			t.Fatalf("chat: %d %s", r.Status, r.Body)
		}
		c, err := pricing.ParseUSD(r.Header.Get("X-Gw-Cost-Usd"))
		if err != nil || c <= 0 {
			t.Fatalf("receipt %q: %v", r.Header.Get("X-Gw-Cost-Usd"), err)
		}
		receipts[r.Header.Get("X-Gw-Request-Id")] = c
	}
	check := func(when string) {
		t.Helper()
		got := ledgerOf(t, g, "ledger")
		var sum pricing.Money
		for id, c := range receipts {
			if got[id] != c {
				t.Errorf("%s: ledger %s = %s, receipt %s", when, id, got[id], c)
			}
			sum += c
		}
		if len(got) != len(receipts) {
			t.Errorf("%s: %d ledger entries, %d receipts", when, len(got), len(receipts))
		}
		if b := balanceOf(t, g, "ledger"); b != pricing.USD(10)-sum {
			t.Errorf("%s: balance %s, want %s", when, b, pricing.USD(10)-sum)
		}
	}
	for range 3 {
		call()
	}
	check("before")

	// A stream in flight across a reload: it finishes and is billed.
	gate := make(chan struct{})
	oa.Push(fake.Script{Text: "streamed across a reload", Usage: fake.Usage{Input: 1000, Output: 500}, Gate: gate})
	req, _ := http.NewRequest("POST", g.BaseURL+"/v1/chat/completions",
		strings.NewReader(`{"model":"gw-pinned-gpt-4.1-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	if !sc.Scan() || !strings.HasPrefix(sc.Text(), "data: ") {
		t.Fatalf("first stream line %q", sc.Text())
	}
	g.reload(t)
	close(gate)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if !slices.Contains(lines, "data: [DONE]") {
		t.Fatalf("stream cut by the reload: %q", lines)
	}
	streamCost := pricing.Cost(false, pricing.Line{Units: 1000, Rate: pricing.PerMillion(usdOf(t, "0.40"))}, pricing.Line{Units: 500, Rate: pricing.PerMillion(usdOf(t, "1.60"))})
	receipts[resp.Header.Get("X-Gw-Request-Id")] = streamCost
	check("after a reload with a stream in flight")

	call()
	check("after a call following the reload")
	g.restart(t)
	check("after a restart")
	call()
	check("after a call following the restart")
}

func usdOf(t *testing.T, s string) pricing.Money {
	t.Helper()
	m, err := pricing.ParseUSD(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

package integration

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// Through the built gateway: every movement of a prepaid balance (the
// balance set at creation, a call's charge, a top-up, an adjustment with
// its reason) is in the journal, the amounts add up to the balance, and
// the check finds nothing wrong; refusals keep the balance above zero.
func TestBalanceJournal(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, "")
	key := e.account(t, "journaled", map[string]any{"balance_usd": "2.00"})
	e.OA.Push(fake.Script{Text: "ok", Usage: fake.Usage{Input: 1000, Output: 500}})
	r := e.do(t, http.MethodPost, "/v1/chat/completions", `{"model":"gw-pinned-gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`, bearer(key)...)
	if r.Status != http.StatusOK {
		t.Fatalf("call: %d %s", r.Status, r.Body)
	}
	id, cost := r.Header.Get("X-Gw-Request-Id"), mustUSD(t, r.Header.Get("X-Gw-Cost-Usd"))
	e.adminJSON(t, http.MethodPatch, "/gw/accounts/journaled", map[string]any{"add_balance_usd": "3"}, http.StatusOK)
	e.adminJSON(t, http.MethodPatch, "/gw/accounts/journaled", map[string]any{"add_balance_usd": "-1", "reason": "refund"}, http.StatusOK)
	e.adminJSON(t, http.MethodPatch, "/gw/accounts/journaled", map[string]any{"add_balance_usd": "-100", "reason": "too much"}, http.StatusBadRequest)
	e.adminJSON(t, http.MethodPatch, "/gw/accounts/journaled", map[string]any{"add_balance_usd": "-1"}, http.StatusBadRequest)
	e.adminJSON(t, http.MethodPost, "/gw/accounts", map[string]any{"id": "owes", "balance_usd": "-5"}, http.StatusBadRequest)

	data := e.adminJSON(t, http.MethodGet, "/gw/accounts/journaled/journal", nil, http.StatusOK).JSON(t)["data"].([]any)
	var sum pricing.Money
	var kinds []string
	for i := len(data) - 1; i >= 0; i-- {
		d := data[i].(map[string]any)
		sum += mustUSD(t, d["amount_usd"].(string))
		if mustUSD(t, d["balance_usd"].(string)) != sum {
			t.Fatalf("entry %v: balance after differs from the running sum %v", d, sum)
		}
		kinds = append(kinds, d["kind"].(string))
		if d["kind"] == "charge" && (d["request_id"] != id || mustUSD(t, d["amount_usd"].(string)) != -cost) {
			t.Fatalf("charge %v, want -%v under %s", d, cost, id)
		}
		if d["kind"] == "adjustment" && d["reason"] != "refund" {
			t.Fatalf("adjustment %v", d)
		}
	}
	if want := "[set charge top_up adjustment]"; fmt.Sprint(kinds) != want {
		t.Fatalf("kinds %v, want %s", kinds, want)
	}
	balance := mustUSD(t, e.getAccount(t, "journaled")["balance_usd"].(string))
	if sum != balance || balance != mustUSD(t, "4.00")-cost {
		t.Fatalf("journal %v, balance %v", sum, balance)
	}
	check := e.adminJSON(t, http.MethodGet, "/gw/journal/check", nil, http.StatusOK).JSON(t)
	if check["ok"] != true {
		t.Fatalf("check %v", check)
	}
}

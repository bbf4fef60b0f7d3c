package admin

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// settle charges the store directly, as a billed call would.
func (e *env) settle(id, account, key, model string, at time.Time, in, out int64, cost string) {
	e.t.Helper()
	c, err := pricing.ParseUSD(cost)
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := e.st.Settle(context.Background(), &store.Entry{RequestID: id, AccountID: account, KeyID: key, Model: model, Endpoint: "chat",
		Units: in + out, Unit: "token", InputTokens: in, OutputTokens: out, Cost: c, Time: at}); err != nil {
		e.t.Fatal(err)
	}
}

func TestUsage(t *testing.T) {
	e := newEnv(t)
	e.create(`{"id":"a","plan":"paid"}`)
	e.create(`{"id":"b","plan":"paid"}`)
	yesterday := now.AddDate(0, 0, -1)
	e.settle("r1", "a", "k1", "m1", yesterday, 100, 10, "0.25")
	e.settle("r2", "a", "k2", "m1", now, 200, 20, "0.000000001")
	e.settle("r3", "a", "k1", "m2", now, 300, 30, "1.5")
	e.settle("r4", "b", "k3", "m1", now, 400, 40, "2")
	e.settle("r5", "b", "k3", "m1", now.AddDate(0, 0, -40), 1, 1, "9") // outside the default 30 days

	row := func(fields map[string]any, req, in, out int, cost string) map[string]any {
		fields["requests"], fields["input_tokens"], fields["output_tokens"], fields["cost_usd"] = req, in, out, cost
		return fields
	}
	list := func(total int, cost string, rows ...map[string]any) map[string]any {
		if rows == nil {
			rows = []map[string]any{}
		}
		return map[string]any{"object": "list", "data": rows, "total": map[string]any{"requests": total, "cost_usd": cost}}
	}
	e.expect(e.do("GET", "/gw/usage", ""), http.StatusOK, list(4, "3.750000001",
		row(map[string]any{"day": "2026-03-03"}, 1, 100, 10, "0.25"),
		row(map[string]any{"day": "2026-03-04"}, 3, 900, 90, "3.500000001")))
	e.expect(e.do("GET", "/gw/usage?account=a&group_by=model,key", ""), http.StatusOK, list(3, "1.750000001",
		row(map[string]any{"model": "m1", "key_id": "k1"}, 1, 100, 10, "0.25"),
		row(map[string]any{"model": "m1", "key_id": "k2"}, 1, 200, 20, "0.000000001"),
		row(map[string]any{"model": "m2", "key_id": "k1"}, 1, 300, 30, "1.50")))
	e.expect(e.do("GET", "/gw/usage?group_by=account&from=2026-01-01&to=2026-03-04", ""), http.StatusOK, list(5, "12.750000001",
		row(map[string]any{"account": "a"}, 3, 600, 60, "1.750000001"),
		row(map[string]any{"account": "b"}, 2, 401, 41, "11.00")))
	e.expect(e.do("GET", "/gw/usage?account=b&from=2026-03-03&to=2026-03-03", ""), http.StatusOK, list(0, "0.00"))

	e.expectError(e.do("GET", "/gw/usage?account=nobody", ""), http.StatusNotFound, "not found")
	e.expectError(e.do("GET", "/gw/usage?from=2026-03-05&to=2026-03-04", ""), http.StatusBadRequest, "from: 2026-03-05 is after to (2026-03-04)")
	e.expectError(e.do("GET", "/gw/usage?group_by=hour", ""), http.StatusBadRequest, `group_by: "hour" is not a grouping (known: day, model, account, key, org, comma-separated)`)
	e.expectError(e.do("GET", "/gw/usage?since=2026-01-01", ""), http.StatusBadRequest, "since: unknown parameter (known: account, org, from, to, group_by)")
	e.expectError(e.do("POST", "/gw/usage", ""), http.StatusMethodNotAllowed, "method POST not allowed on /gw/usage")
}

func TestListAccounts(t *testing.T) {
	e := newEnv(t)
	for _, id := range []string{"c", "a", "b"} {
		e.create(`{"id":"` + id + `","balance_usd":"2"}`)
	}
	e.settle("r1", "b", "k", "m", now, 1, 1, "0.5")
	withMoney := func(id, balance, spent string) map[string]any {
		return account(id, map[string]any{"balance_usd": balance, "spend": map[string]any{"today_usd": spent, "month_usd": spent, "total_usd": spent}})
	}
	e.expect(e.do("GET", "/gw/accounts", ""), http.StatusOK, map[string]any{"object": "list", "has_more": false,
		"data": []any{withMoney("a", "2.00", "0.00"), withMoney("b", "1.50", "0.50"), withMoney("c", "2.00", "0.00")}})
	e.expect(e.do("GET", "/gw/accounts?limit=1&after=a", ""), http.StatusOK, map[string]any{"object": "list", "has_more": true,
		"data": []any{withMoney("b", "1.50", "0.50")}})
	e.expect(e.do("GET", "/gw/accounts?limit=2&after=b", ""), http.StatusOK, map[string]any{"object": "list", "has_more": false,
		"data": []any{withMoney("c", "2.00", "0.00")}})
	e.expectError(e.do("GET", "/gw/accounts?limit=0", ""), http.StatusBadRequest, "limit: must be a whole number from 1 to 1000")
	e.expectError(e.do("GET", "/gw/accounts?page=2", ""), http.StatusBadRequest, "page: unknown parameter (known: limit, after, org)")
}

// FuzzAdminUsageQuery sends arbitrary query strings to GET /gw/usage and
// GET /gw/accounts: never a 5xx, always one JSON object, and a usage
// answer's total is the sum of its rows.
func FuzzAdminUsageQuery(f *testing.F) {
	for _, seed := range []string{"", "account=a", "account=nobody", "group_by=day,model,account,key&from=2026-01-01",
		"from=2026-03-04&to=2026-03-04", "to=2261-12-31&from=2261-01-01", "group_by=%ff", "limit=1000&after=%00", "limit=-1", "from=%zz"} {
		f.Add(seed)
	}
	e := newEnv(f)
	e.create(`{"id":"a"}`)
	e.settle("r1", "a", "k", "m", now, 3, 4, "0.000000007")
	f.Fuzz(func(t *testing.T, query string) {
		for _, path := range []string{"/gw/usage", "/gw/accounts"} {
			req := httptest.NewRequest("GET", "/", nil)
			req.URL.Path, req.URL.RawQuery = path, query
			rec := httptest.NewRecorder()
			e.api.ServeHTTP(rec, req)
			if rec.Code >= 500 || rec.Header().Get("Content-Type") != "application/json" {
				t.Fatalf("GET %s?%s: %d %q", path, query, rec.Code, rec.Body)
			}
			var out struct {
				Error string `json:"error"`
				Data  []struct {
					Requests int64         `json:"requests"`
					Cost     pricing.Money `json:"cost_usd"`
				} `json:"data"`
				Total struct {
					Requests int64         `json:"requests"`
					Cost     pricing.Money `json:"cost_usd"`
				} `json:"total"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
				t.Fatalf("GET %s?%s: %v in %q", path, query, err, rec.Body)
			}
			if (rec.Code == http.StatusOK) == (out.Error != "") {
				t.Fatalf("GET %s?%s: %d with error %q", path, query, rec.Code, out.Error)
			}
			if path == "/gw/usage" && rec.Code == http.StatusOK {
				var req int64
				var cost pricing.Money
				for _, r := range out.Data {
					req, cost = req+r.Requests, cost+r.Cost
				}
				if req != out.Total.Requests || cost != out.Total.Cost {
					t.Fatalf("GET %s?%s: rows sum to %d, %s; total %+v", path, query, req, cost, out.Total)
				}
			}
		}
	})
}

package admin

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/store"
)

// orgJSON is the expected JSON of an organization: no name, no caps,
// nothing spent, with the given fields replaced.
func orgJSON(id string, fields map[string]any) map[string]any {
	m := map[string]any{"id": id, "name": "", "daily_cap_usd": nil, "monthly_cap_usd": nil, "created_at": nowJSON,
		"spend": map[string]any{"today_usd": "0.00", "month_usd": "0.00", "total_usd": "0.00"}}
	for k, v := range fields {
		m[k] = v
	}
	return m
}

// Organizations are made, listed by id, read with their spend, changed
// (null removes a cap) and deleted once no account belongs to them.
func TestOrgs(t *testing.T) {
	e := newEnv(t)
	acme := orgJSON("acme", map[string]any{"name": "Acme", "daily_cap_usd": "5.00", "monthly_cap_usd": "100.00"})
	e.expect(e.do("POST", "/gw/orgs", `{"id":"acme","name":"Acme","daily_cap_usd":"5","monthly_cap_usd":100}`), http.StatusCreated, acme)
	e.expect(e.do("POST", "/gw/orgs", `{"id":"Bee"}`), http.StatusCreated, orgJSON("Bee", nil))
	e.expectError(e.do("POST", "/gw/orgs", `{"id":"acme"}`), http.StatusConflict, `organization "acme" already exists`)
	e.expect(e.do("GET", "/gw/orgs/acme", ""), http.StatusOK, acme)
	e.expect(e.do("GET", "/gw/orgs", ""), http.StatusOK, map[string]any{"object": "list", "data": []any{orgJSON("Bee", nil), acme}})
	e.expectError(e.do("GET", "/gw/orgs/nobody", ""), http.StatusNotFound, "not found")

	// Accounts join with their org field; their charges are the
	// organization's spend.
	e.expect(e.do("POST", "/gw/accounts", `{"id":"a1","plan":"paid","org":"acme"}`), http.StatusCreated,
		account("a1", map[string]any{"plan": "paid", "org": "acme"}))
	e.create(`{"id":"a2","plan":"paid"}`)
	e.expect(e.do("PATCH", "/gw/accounts/a2", `{"org":"acme"}`), http.StatusOK, account("a2", map[string]any{"plan": "paid", "org": "acme"}))
	e.settle("r1", "a1", "k1", "m1", now, 10, 1, "1.25")
	e.settle("r2", "a2", "k2", "m1", now.AddDate(0, 0, -1), 10, 1, "2")
	spent := map[string]any{"today_usd": "1.25", "month_usd": "3.25", "total_usd": "3.25"}
	acme["spend"] = spent
	e.expect(e.do("GET", "/gw/orgs/acme", ""), http.StatusOK, acme)

	// PATCH: the name and caps; null removes a cap.
	acme["name"], acme["daily_cap_usd"], acme["monthly_cap_usd"] = "Acme Inc", nil, "50.00"
	e.expect(e.do("PATCH", "/gw/orgs/acme", `{"name":"Acme Inc","daily_cap_usd":null,"monthly_cap_usd":"50"}`), http.StatusOK, acme)
	e.expect(e.do("GET", "/gw/orgs/acme", ""), http.StatusOK, acme)
	e.expect(e.do("PATCH", "/gw/orgs/acme", `{}`), http.StatusOK, acme)
	e.expectError(e.do("PATCH", "/gw/orgs/nobody", `{"name":"x"}`), http.StatusNotFound, "not found")

	// An organization that accounts belong to is not deleted.
	e.expectError(e.do("DELETE", "/gw/orgs/acme", ""), http.StatusConflict, `organization "acme" still has accounts; move them out first`)
	e.expect(e.do("PATCH", "/gw/accounts/a1", `{"org":null}`), http.StatusOK,
		account("a1", map[string]any{"plan": "paid", "spend": map[string]any{"today_usd": "1.25", "month_usd": "1.25", "total_usd": "1.25"}}))
	e.expect(e.do("PATCH", "/gw/accounts/a2", `{"org":"Bee"}`), http.StatusOK,
		account("a2", map[string]any{"plan": "paid", "org": "Bee", "spend": map[string]any{"today_usd": "0.00", "month_usd": "2.00", "total_usd": "2.00"}}))
	// What its accounts spent while they belonged to it stays its spend.
	e.expect(e.do("GET", "/gw/orgs/acme", ""), http.StatusOK, acme)
	e.expect(e.do("GET", "/gw/orgs/Bee", ""), http.StatusOK, orgJSON("Bee", nil))
	if r := e.do("DELETE", "/gw/orgs/acme", ""); r.status != http.StatusNoContent || r.raw != "" {
		t.Fatalf("DELETE: %d %q", r.status, r.raw)
	}
	e.expectError(e.do("GET", "/gw/orgs/acme", ""), http.StatusNotFound, "not found")
	e.expectError(e.do("DELETE", "/gw/orgs/acme", ""), http.StatusNotFound, "not found")
	e.expect(e.do("GET", "/gw/orgs", ""), http.StatusOK, map[string]any{"object": "list", "data": []any{orgJSON("Bee", nil)}})
	// A new organization of the same id starts from nothing.
	e.expect(e.do("POST", "/gw/orgs", `{"id":"acme"}`), http.StatusCreated, orgJSON("acme", nil))
}

// What POST and PATCH of an organization, and an account's org, refuse:
// 400 naming the field, nothing changed.
func TestOrgRefusals(t *testing.T) {
	e := newEnv(t)
	e.expect(e.do("POST", "/gw/orgs", `{"id":"acme","daily_cap_usd":"1"}`), http.StatusCreated, orgJSON("acme", map[string]any{"daily_cap_usd": "1.00"}))
	e.create(`{"id":"a","org":"acme"}`)
	idRule := "id: required, 1 to 64 letters, digits, '.', '_' or '-'"
	for _, c := range []struct {
		method, path, body string
		status             int
		msg                string
	}{
		{"POST", "/gw/orgs", `{}`, 400, idRule},
		{"POST", "/gw/orgs", `{"id":"-x"}`, 400, idRule},
		{"POST", "/gw/orgs", `{"id":"` + strings.Repeat("x", 65) + `"}`, 400, idRule},
		{"POST", "/gw/orgs", `{"id":"x","colour":"red"}`, 400, "colour: unknown field"},
		{"POST", "/gw/orgs", `{"id":"x","name":5}`, 400, "name: must be a string"},
		{"POST", "/gw/orgs", `{"id":"x","name":"a\u001bb"}`, 400, "name: must be printable text: no control characters (line breaks, tabs, escapes) and valid UTF-8"},
		{"POST", "/gw/orgs", `{"id":"x","name":"` + strings.Repeat("n", 129) + `"}`, 400, "name: at most 128 characters"},
		{"POST", "/gw/orgs", `{"id":"x","daily_cap_usd":"-1"}`, 400, "daily_cap_usd: must not be negative"},
		{"POST", "/gw/orgs", `{"id":"x","monthly_cap_usd":"lots"}`, 400, "monthly_cap_usd: amount must be a decimal number of US dollars with at most 9 decimals"},
		{"POST", "/gw/orgs", `[]`, 400, "body: must be a JSON object"},
		{"PATCH", "/gw/orgs/acme", `{"id":"other"}`, 400, "id: unknown field"},
		{"PATCH", "/gw/orgs/acme", `{"daily_cap_usd":"-0.01"}`, 400, "daily_cap_usd: must not be negative"},
		{"PATCH", "/gw/orgs/acme", `{"name":null}`, 400, "name: must be a string"},
		{"POST", "/gw/accounts", `{"id":"b","org":"nobody"}`, 400, "org: no such organization"},
		{"POST", "/gw/accounts", `{"id":"b","org":5}`, 400, "org: must be an organization's id, or null for none"},
		{"POST", "/gw/accounts", `{"id":"b","org":""}`, 400, "org: must be an organization's id, or null for none"},
		{"PATCH", "/gw/accounts/a", `{"org":"nobody"}`, 400, "org: no such organization"},
		{"PATCH", "/gw/accounts/a", `{"org":"a b"}`, 400, "org: must be an organization's id, or null for none"},
		{"PATCH", "/gw/accounts/nobody", `{"org":"acme"}`, 404, "not found"},
	} {
		e.expectError(e.do(c.method, c.path, c.body), c.status, c.msg)
	}
	e.expect(e.do("GET", "/gw/orgs", ""), http.StatusOK, map[string]any{"object": "list", "data": []any{orgJSON("acme", map[string]any{"daily_cap_usd": "1.00"})}})
	e.expect(e.do("GET", "/gw/accounts/a", ""), http.StatusOK, account("a", map[string]any{"org": "acme"}))
	e.expectError(e.do("GET", "/gw/accounts/b", ""), http.StatusNotFound, "not found")
}

// GET /gw/usage takes org as a filter (the charges of its accounts while
// they belonged to it; 404 for an unknown one) and as a grouping.
func TestUsageByOrg(t *testing.T) {
	e := newEnv(t)
	e.expect(e.do("POST", "/gw/orgs", `{"id":"acme"}`), http.StatusCreated, orgJSON("acme", nil))
	e.create(`{"id":"a","plan":"paid","org":"acme"}`)
	e.create(`{"id":"b","plan":"paid"}`)
	e.settle("r1", "a", "k1", "m1", now, 100, 10, "0.25")
	e.settle("r2", "b", "k2", "m1", now, 200, 20, "1")
	e.expect(e.do("PATCH", "/gw/accounts/a", `{"org":null}`), http.StatusOK,
		account("a", map[string]any{"plan": "paid", "spend": map[string]any{"today_usd": "0.25", "month_usd": "0.25", "total_usd": "0.25"}}))
	e.settle("r3", "a", "k1", "m1", now, 300, 30, "2")
	row := func(fields map[string]any, req, in, out int, cost string) map[string]any {
		fields["requests"], fields["input_tokens"], fields["output_tokens"], fields["cost_usd"] = req, in, out, cost
		return fields
	}
	list := func(total int, cost string, rows ...map[string]any) map[string]any {
		return map[string]any{"object": "list", "data": rows, "total": map[string]any{"requests": total, "cost_usd": cost}}
	}
	e.expect(e.do("GET", "/gw/usage?org=acme&group_by=account", ""), http.StatusOK, list(1, "0.25",
		row(map[string]any{"account": "a"}, 1, 100, 10, "0.25")))
	e.expect(e.do("GET", "/gw/usage?group_by=account,org", ""), http.StatusOK, list(3, "3.25",
		row(map[string]any{"account": "a", "org": ""}, 1, 300, 30, "2.00"),
		row(map[string]any{"account": "a", "org": "acme"}, 1, 100, 10, "0.25"),
		row(map[string]any{"account": "b", "org": ""}, 1, 200, 20, "1.00")))
	e.expect(e.do("GET", "/gw/usage?org=acme&account=b", ""), http.StatusOK, map[string]any{"object": "list", "data": []any{},
		"total": map[string]any{"requests": 0, "cost_usd": "0.00"}})
	e.expectError(e.do("GET", "/gw/usage?org=nobody", ""), http.StatusNotFound, "not found")
	e.expectError(e.do("GET", "/gw/usage?org=", ""), http.StatusBadRequest, "org: empty; leave it out for every organization")
}

// GET /gw/accounts?org= lists only the organization's accounts, a page at
// a time: found past a whole store page of other accounts, with has_more
// and after as without the filter; an unknown organization is a 404.
func TestListAccountsOfOrg(t *testing.T) {
	e := newEnv(t)
	e.expect(e.do("POST", "/gw/orgs", `{"id":"acme"}`), http.StatusCreated, orgJSON("acme", nil))
	e.expect(e.do("POST", "/gw/orgs", `{"id":"empty"}`), http.StatusCreated, orgJSON("empty", nil))
	e.create(`{"id":"a1","org":"acme"}`)
	e.create(`{"id":"a2","org":"acme"}`)
	// More accounts outside it than one store read holds, between its
	// accounts in the order of ids.
	ctx := context.Background()
	for i := range orgScanPage + 2 {
		if err := e.st.CreateAccount(ctx, store.Account{ID: fmt.Sprintf("m%04d", i), Plan: store.PlanFree, CreatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	e.create(`{"id":"z1","org":"acme"}`)
	member := func(id string) map[string]any { return account(id, map[string]any{"org": "acme"}) }
	page := func(more bool, rows ...any) map[string]any {
		if rows == nil {
			rows = []any{}
		}
		return map[string]any{"object": "list", "has_more": more, "data": rows}
	}
	e.expect(e.do("GET", "/gw/accounts?org=acme", ""), http.StatusOK, page(false, member("a1"), member("a2"), member("z1")))
	e.expect(e.do("GET", "/gw/accounts?org=acme&limit=2", ""), http.StatusOK, page(true, member("a1"), member("a2")))
	e.expect(e.do("GET", "/gw/accounts?org=acme&limit=2&after=a2", ""), http.StatusOK, page(false, member("z1")))
	e.expect(e.do("GET", "/gw/accounts?org=acme&after=z1", ""), http.StatusOK, page(false))
	e.expect(e.do("GET", "/gw/accounts?org=empty", ""), http.StatusOK, page(false))
	e.expectError(e.do("GET", "/gw/accounts?org=nobody", ""), http.StatusNotFound, "not found")
	e.expectError(e.do("GET", "/gw/accounts?org=", ""), http.StatusBadRequest, "org: empty; leave it out for every account")
}

package admin

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/printable"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// keyJSON is the expected JSON of a key as listed: no caps, every model,
// no expiry, every MCP tool, with the given fields replaced.
func keyJSON(id, name string, fields map[string]any) map[string]any {
	m := map[string]any{"id": id, "name": name, "models": nil, "expires_at": nil, "created_at": nowJSON,
		"daily_cap_usd": nil, "monthly_cap_usd": nil, "total_cap_usd": nil, "mcp_tools": nil}
	for k, v := range fields {
		m[k] = v
	}
	return m
}

// noSpend is the spend of a key nothing was charged with.
var noSpend = map[string]any{"today_usd": "0.00", "month_usd": "0.00", "total_usd": "0.00"}

// makeKey creates a key of account with body and returns its id and
// secret.
func (e *env) makeKey(account, body string) (id, secret string) {
	e.t.Helper()
	r := e.do("POST", "/gw/accounts/"+account+"/keys", body)
	if r.status != http.StatusCreated {
		e.t.Fatalf("create key %s: %d %s", body, r.status, r.raw)
	}
	m := r.body.(map[string]any)
	return m["id"].(string), m["key"].(string)
}

// A key's caps are set when it is made, shown wherever it is, changed and
// removed by PATCH; GET of one key shows what was charged with it.
func TestKeyCaps(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.create(`{"id":"acme","plan":"paid","cleared":true}`)

	// Made with caps: the answer shows them with the secret.
	r := e.do("POST", "/gw/accounts/acme/keys", `{"name":"bot","daily_cap_usd":"1.5","monthly_cap_usd":20,"total_cap_usd":"0.000000001"}`)
	m, _ := r.body.(map[string]any)
	id, _ := m["id"].(string)
	secret, _ := m["key"].(string)
	capped := keyJSON(id, "bot", map[string]any{"daily_cap_usd": "1.50", "monthly_cap_usd": "20.00", "total_cap_usd": "0.000000001"})
	made := keyJSON(id, "bot", capped)
	made["key"] = secret
	e.expect(r, http.StatusCreated, made)
	k, err := e.st.Key(ctx, id)
	if err != nil || *k.DailyCap != pricing.Micro(1_500_000) || *k.MonthlyCap != pricing.USD(20) || *k.TotalCap != 1 {
		t.Fatalf("stored key %+v, %v", k, err)
	}
	// Made with null caps and without: none.
	nulls, _ := e.makeKey("acme", `{"name":"nulls","daily_cap_usd":null,"monthly_cap_usd":null,"total_cap_usd":null}`)
	plain, _ := e.makeKey("acme", `{"name":"plain"}`)

	// The list shows the caps, never a secret or a hash.
	r = e.do("GET", "/gw/accounts/acme/keys", "")
	e.expect(r, http.StatusOK, map[string]any{"object": "list", "data": []any{capped, keyJSON(nulls, "nulls", nil), keyJSON(plain, "plain", nil)}})
	if strings.Contains(r.raw, secret) || strings.Contains(r.raw, store.HashSecret(secret)) {
		t.Fatal("the list shows a secret or its hash")
	}

	// GET of one key: as listed, with its spend today, this month and in
	// all (its own charges only, not the account's other keys').
	withSpend := func(k map[string]any, spend map[string]any) map[string]any {
		out := keyJSON(k["id"].(string), k["name"].(string), k)
		out["spend"] = spend
		return out
	}
	e.expect(e.do("GET", "/gw/keys/"+id, ""), http.StatusOK, withSpend(capped, noSpend))
	for _, en := range []store.Entry{
		{RequestID: "r1", AccountID: "acme", KeyID: id, Cost: pricing.Micro(1_250_000), Time: now.Add(-time.Hour)},
		{RequestID: "r2", AccountID: "acme", KeyID: id, Cost: pricing.Micro(500_000), Time: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)},
		{RequestID: "r3", AccountID: "acme", KeyID: id, Cost: pricing.USD(2), Time: time.Date(2026, 2, 28, 23, 59, 59, 0, time.UTC)},
		{RequestID: "r4", AccountID: "acme", KeyID: plain, Cost: pricing.USD(7), Time: now},
	} {
		if ok, err := e.st.Settle(ctx, &en); err != nil || !ok {
			t.Fatalf("Settle %s: %v %v", en.RequestID, ok, err)
		}
	}
	// The total cap of 0.000000001 held the first charge to it, and the
	// others to nothing.
	e.expect(e.do("GET", "/gw/keys/"+id, ""), http.StatusOK, withSpend(capped,
		map[string]any{"today_usd": "0.000000001", "month_usd": "0.000000001", "total_usd": "0.000000001"}))
	e.expect(e.do("GET", "/gw/keys/"+plain, ""), http.StatusOK, withSpend(keyJSON(plain, "plain", nil),
		map[string]any{"today_usd": "7.00", "month_usd": "7.00", "total_usd": "7.00"}))

	// PATCH: each cap, a cap removed, the name; absent fields stay.
	steps := []struct {
		patch string
		set   map[string]any
	}{
		{`{"total_cap_usd":null}`, map[string]any{"total_cap_usd": nil}},
		{`{"daily_cap_usd":"0"}`, map[string]any{"daily_cap_usd": "0.00"}},
		{`{"monthly_cap_usd":3.25,"name":"renamed"}`, map[string]any{"monthly_cap_usd": "3.25", "name": "renamed"}},
		{`{}`, nil},
		{``, nil},
		{`{"daily_cap_usd":null,"monthly_cap_usd":null,"total_cap_usd":"100"}`, map[string]any{"daily_cap_usd": nil, "monthly_cap_usd": nil, "total_cap_usd": "100.00"}},
	}
	spent := map[string]any{"today_usd": "0.000000001", "month_usd": "0.000000001", "total_usd": "0.000000001"}
	for _, step := range steps {
		for f, v := range step.set {
			capped[f] = v
		}
		want := withSpend(capped, spent)
		e.expect(e.do("PATCH", "/gw/keys/"+id, step.patch), http.StatusOK, want)
		e.expect(e.do("GET", "/gw/keys/"+id, ""), http.StatusOK, want)
	}
	// The raised cap lets the key spend again.
	en := store.Entry{RequestID: "r5", AccountID: "acme", KeyID: id, Cost: pricing.USD(1), Time: now}
	if ok, err := e.st.Settle(ctx, &en); err != nil || !ok || en.Cost != pricing.USD(1) {
		t.Fatalf("Settle after the raise: %v %v, charged %s", ok, err, en.Cost)
	}
	// The secret still works, with the new caps.
	if k, err := e.st.KeyByHash(ctx, store.HashSecret(secret)); err != nil || k.Name != "renamed" || *k.TotalCap != pricing.USD(100) || k.DailyCap != nil {
		t.Fatalf("key by its secret after PATCH: %+v, %v", k, err)
	}

	// A revoked key is gone: GET and PATCH are 404.
	if r := e.do("DELETE", "/gw/keys/"+id, ""); r.status != http.StatusNoContent {
		t.Fatalf("DELETE: %d %s", r.status, r.raw)
	}
	e.expectError(e.do("GET", "/gw/keys/"+id, ""), http.StatusNotFound, "not found")
	e.expectError(e.do("PATCH", "/gw/keys/"+id, `{"total_cap_usd":"1"}`), http.StatusNotFound, "not found")
	e.expectError(e.do("GET", "/gw/keys/key_nope", ""), http.StatusNotFound, "not found")
}

func TestKeyCapErrors(t *testing.T) {
	e := newEnv(t)
	e.create(`{"id":"acme"}`)
	id, _ := e.makeKey("acme", `{"name":"k","daily_cap_usd":"2"}`)
	const amountMsg = "amount must be a decimal number of US dollars with at most 9 decimals"
	cases := []struct {
		name, method, path, body string
		status                   int
		msg                      string
	}{
		{"create: negative daily cap", "POST", "/gw/accounts/acme/keys", `{"name":"k","daily_cap_usd":"-1"}`, 400, "daily_cap_usd: must not be negative"},
		{"create: negative monthly cap", "POST", "/gw/accounts/acme/keys", `{"name":"k","monthly_cap_usd":-0.01}`, 400, "monthly_cap_usd: must not be negative"},
		{"create: total cap abc", "POST", "/gw/accounts/acme/keys", `{"name":"k","total_cap_usd":"abc"}`, 400, "total_cap_usd: " + amountMsg},
		{"create: total cap too precise", "POST", "/gw/accounts/acme/keys", `{"name":"k","total_cap_usd":"0.0000000001"}`, 400, "total_cap_usd: " + amountMsg},
		{"create: daily cap an object", "POST", "/gw/accounts/acme/keys", `{"name":"k","daily_cap_usd":{}}`, 400, "daily_cap_usd: " + amountMsg},
		{"create: caps of an unknown account", "POST", "/gw/accounts/nope/keys", `{"name":"k","daily_cap_usd":"1"}`, 404, "not found"},
		{"patch: negative daily cap", "PATCH", "/gw/keys/" + id, `{"daily_cap_usd":"-1"}`, 400, "daily_cap_usd: must not be negative"},
		{"patch: monthly cap abc", "PATCH", "/gw/keys/" + id, `{"monthly_cap_usd":"abc"}`, 400, "monthly_cap_usd: " + amountMsg},
		{"patch: total cap too large", "PATCH", "/gw/keys/" + id, `{"total_cap_usd":"99999999999"}`, 400, "total_cap_usd: " + amountMsg},
		{"patch: total cap exponent", "PATCH", "/gw/keys/" + id, `{"total_cap_usd":1e3}`, 400, "total_cap_usd: " + amountMsg},
		{"patch: a good cap with a bad one", "PATCH", "/gw/keys/" + id, `{"daily_cap_usd":"5","total_cap_usd":"-5"}`, 400, "total_cap_usd: must not be negative"},
		{"patch: name empty", "PATCH", "/gw/keys/" + id, `{"name":""}`, 400, "name: required, a non-empty string"},
		{"patch: name null", "PATCH", "/gw/keys/" + id, `{"name":null}`, 400, "name: required, a non-empty string"},
		{"patch: name a number", "PATCH", "/gw/keys/" + id, `{"name":3}`, 400, "name: required, a non-empty string"},
		{"patch: name with an escape", "PATCH", "/gw/keys/" + id, `{"name":"lap\u001b[2Jtop"}`, 400, "name: " + printable.ErrNotShown.Error()},
		{"patch: name too long", "PATCH", "/gw/keys/" + id, `{"name":"` + strings.Repeat("k", MaxKeyName+1) + `"}`, 400, "name: at most 128 characters"},
		{"patch: models are not patchable", "PATCH", "/gw/keys/" + id, `{"models":["gw-auto"]}`, 400, "models: unknown field"},
		{"patch: expires_at is not patchable", "PATCH", "/gw/keys/" + id, `{"expires_at":null}`, 400, "expires_at: unknown field"},
		{"patch: the secret is not patchable", "PATCH", "/gw/keys/" + id, `{"key":"sk-mine"}`, 400, "key: unknown field"},
		{"patch: spend is not patchable", "PATCH", "/gw/keys/" + id, `{"spend":{}}`, 400, "spend: unknown field"},
		{"patch: body an array", "PATCH", "/gw/keys/" + id, `[]`, 400, "body: must be a JSON object"},
		{"patch: body truncated", "PATCH", "/gw/keys/" + id, `{"name":"x"`, 400, "body: must be a JSON object"},
		{"patch: unknown key", "PATCH", "/gw/keys/key_nope", `{"daily_cap_usd":"1"}`, 404, "not found"},
		{"patch: unknown key, empty body", "PATCH", "/gw/keys/key_nope", ``, 404, "not found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			e.expectError(e.do(tc.method, tc.path, tc.body), tc.status, tc.msg)
		})
	}
	e.t = t
	// Nothing changed, and no key was made.
	want := keyJSON(id, "k", map[string]any{"daily_cap_usd": "2.00"})
	e.expect(e.do("GET", "/gw/accounts/acme/keys", ""), http.StatusOK, map[string]any{"object": "list", "data": []any{want}})
	want["spend"] = noSpend
	e.expect(e.do("GET", "/gw/keys/"+id, ""), http.StatusOK, want)
}

package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/printable"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/internal/store/sqlite"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// now is the API's fixed clock; it carries nanoseconds to check exact
// round trips.
var now = time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.UTC)

const nowJSON = "2026-03-04T05:06:07.123456789Z"

var allAbilities = []any{"transcription", "speech", "images", "search", "fetch", "decide", "apps", "mcp_gateway"}

type env struct {
	t   testing.TB
	st  store.Store
	api *API
	srv *httptest.Server
}

func newEnv(t testing.TB) *env {
	t.Helper()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	api := New(st)
	api.Now = func() time.Time { return now }
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return &env{t: t, st: st, api: api, srv: srv}
}

type resp struct {
	status int
	header http.Header
	raw    string
	body   any
}

// do sends a request; body is sent as is ("" for none).
func (e *env) do(method, path, body string) resp {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	r := resp{status: res.StatusCode, header: res.Header, raw: string(b)}
	if len(b) > 0 {
		if ct := res.Header.Get("Content-Type"); ct != "application/json" {
			e.t.Errorf("%s %s: Content-Type = %q, want application/json", method, path, ct)
		}
		if err := json.Unmarshal(b, &r.body); err != nil {
			e.t.Errorf("%s %s: body %q is not JSON: %v", method, path, b, err)
		}
	}
	return r
}

// expect checks status and the whole decoded body.
func (e *env) expect(r resp, status int, want any) {
	e.t.Helper()
	if r.status != status {
		e.t.Errorf("status = %d, want %d (body %s)", r.status, status, r.raw)
	}
	if want = normalize(e.t, want); !reflect.DeepEqual(r.body, want) {
		g, _ := json.Marshal(r.body)
		w, _ := json.Marshal(want)
		e.t.Errorf("body =\n %s\nwant\n %s", g, w)
	}
}

// expectError checks an error answer: {"error": msg}.
func (e *env) expectError(r resp, status int, msg string) {
	e.t.Helper()
	e.expect(r, status, map[string]any{"error": msg})
}

// normalize round-trips v through JSON so that it compares with decoded bodies.
func normalize(t testing.TB, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// account is the expected account JSON: the defaults of a new free
// account, with the given fields replaced.
func account(id string, fields map[string]any) map[string]any {
	m := map[string]any{
		"id": id, "plan": "free", "cleared": false, "payg": false, "lane_billing": false,
		"balance_usd": nil, "daily_cap_usd": nil, "monthly_cap_usd": nil,
		"abilities": allAbilities, "org": nil, "low_balance_usd": nil, "created_at": nowJSON,
		"spend": map[string]any{"today_usd": "0.00", "month_usd": "0.00", "total_usd": "0.00"},
	}
	for k, v := range fields {
		m[k] = v
	}
	return m
}

func (e *env) create(body string) {
	e.t.Helper()
	if r := e.do("POST", "/gw/accounts", body); r.status != http.StatusCreated {
		e.t.Fatalf("create %s: %d %s", body, r.status, r.raw)
	}
}

func TestCreateAccount(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		name string
		body string
		want map[string]any
	}{
		{"minimal", `{"id":"min"}`, account("min", nil)},
		{"every field", `{"id":"acme","plan":"paid","cleared":true,"payg":true,"lane_billing":true,"low_balance_usd":null,
			"balance_usd":"12.5","daily_cap_usd":5,"monthly_cap_usd":"100","abilities":["speech","images","speech"]}`,
			account("acme", map[string]any{"plan": "paid", "cleared": true, "payg": true, "lane_billing": true,
				"balance_usd": "12.50", "daily_cap_usd": "5.00", "monthly_cap_usd": "100.00", "abilities": []any{"speech", "images"}})},
		{"explicit nulls", `{"id":"nulls","balance_usd":null,"daily_cap_usd":null,"monthly_cap_usd":null,"abilities":null}`,
			account("nulls", nil)},
		{"no abilities", `{"id":"none","abilities":[]}`, account("none", map[string]any{"abilities": []any{}})},
		{"fine amounts", `{"id":"fine.1_a-b","balance_usd":"0.000000001","monthly_cap_usd":"0"}`,
			account("fine.1_a-b", map[string]any{"balance_usd": "0.000000001", "monthly_cap_usd": "0.00"})},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			id := tc.want["id"].(string)
			e.expect(e.do("POST", "/gw/accounts", tc.body), http.StatusCreated, tc.want)
			e.expect(e.do("GET", "/gw/accounts/"+id, ""), http.StatusOK, tc.want)
		})
	}
	t.Run("duplicate id", func(t *testing.T) {
		e.t = t
		e.expectError(e.do("POST", "/gw/accounts", `{"id":"acme","plan":"free"}`), http.StatusConflict, `account "acme" already exists`)
		// The first account is unchanged.
		e.expect(e.do("GET", "/gw/accounts/acme", ""), http.StatusOK, account("acme", map[string]any{"plan": "paid", "cleared": true,
			"payg": true, "lane_billing": true, "balance_usd": "12.50", "daily_cap_usd": "5.00", "monthly_cap_usd": "100.00",
			"abilities": []any{"speech", "images"}}))
	})
}

func TestCreateAccountErrors(t *testing.T) {
	e := newEnv(t)
	const idMsg = "id: required, 1 to 64 letters, digits, '.', '_' or '-'"
	const amountMsg = "amount must be a decimal number of US dollars with at most 9 decimals"
	cases := []struct {
		name   string
		body   string
		status int
		msg    string
	}{
		{"bad plan", `{"id":"a","plan":"gold"}`, 400, `plan: must be "free" or "paid"`},
		{"null plan", `{"id":"a","plan":null}`, 400, `plan: must be "free" or "paid"`},
		{"plan not a string", `{"id":"a","plan":1}`, 400, "plan: must be a string"},
		{"cleared not a bool", `{"id":"a","cleared":"yes"}`, 400, "cleared: must be a bool"},
		{"payg not a bool", `{"id":"a","payg":1}`, 400, "payg: must be a bool"},
		{"lane_billing not a bool", `{"id":"a","lane_billing":[]}`, 400, "lane_billing: must be a bool"},
		{"balance abc", `{"id":"a","balance_usd":"abc"}`, 400, "balance_usd: " + amountMsg},
		{"balance too precise", `{"id":"a","balance_usd":"0.0000000001"}`, 400, "balance_usd: " + amountMsg},
		{"balance exponent", `{"id":"a","balance_usd":1e3}`, 400, "balance_usd: " + amountMsg},
		{"balance object", `{"id":"a","balance_usd":{}}`, 400, "balance_usd: " + amountMsg},
		{"balance too large", `{"id":"a","balance_usd":"99999999999"}`, 400, "balance_usd: " + amountMsg},
		{"negative balance", `{"id":"owes","balance_usd":"-5"}`, 400, "balance_usd: must not be negative"},
		{"negative daily cap", `{"id":"a","daily_cap_usd":"-1"}`, 400, "daily_cap_usd: must not be negative"},
		{"negative monthly cap", `{"id":"a","monthly_cap_usd":-0.01}`, 400, "monthly_cap_usd: must not be negative"},
		{"unknown ability", `{"id":"a","abilities":["speech","teleport"]}`, 400,
			`abilities: unknown ability "teleport" (known: [transcription speech images search fetch decide apps mcp_gateway])`},
		{"abilities not a list", `{"id":"a","abilities":"all"}`, 400, "abilities: must be a list of ability names"},
		{"unknown field", `{"id":"a","colour":"red"}`, 400, "colour: unknown field"},
		{"add_balance_usd on create", `{"id":"a","add_balance_usd":"1"}`, 400, "add_balance_usd: unknown field"},
		{"missing id", `{"plan":"paid"}`, 400, idMsg},
		{"empty object", `{}`, 400, idMsg},
		{"empty body", ``, 400, idMsg},
		{"empty id", `{"id":""}`, 400, idMsg},
		{"id with a space", `{"id":"a b"}`, 400, idMsg},
		{"id with a slash", `{"id":"a/b"}`, 400, idMsg},
		{"id starting with a dot", `{"id":".a"}`, 400, idMsg},
		{"id too long", `{"id":"` + strings.Repeat("x", 65) + `"}`, 400, idMsg},
		{"id a number", `{"id":7}`, 400, idMsg},
		{"id with an escape", `{"id":"a\u001b[2J"}`, 400, idMsg},
		{"id with a line break", `{"id":"a\nb"}`, 400, idMsg},
		{"body an array", `[{"id":"a"}]`, 400, "body: must be a JSON object"},
		{"body a string", `"a"`, 400, "body: must be a JSON object"},
		{"body null", `null`, 400, "body: must be a JSON object"},
		{"body truncated", `{"id":"a"`, 400, "body: must be a JSON object"},
		{"body too large", `{"id":"a","pad":"` + strings.Repeat("x", MaxBody) + `"}`, 413, fmt.Sprintf("body: larger than %d bytes", MaxBody)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			e.expectError(e.do("POST", "/gw/accounts", tc.body), tc.status, tc.msg)
		})
	}
	e.t = t
	// None of them created the account.
	e.expectError(e.do("GET", "/gw/accounts/a", ""), http.StatusNotFound, "not found")
	// A 64-character id is fine.
	long := strings.Repeat("y", 64)
	e.expect(e.do("POST", "/gw/accounts", `{"id":"`+long+`"}`), http.StatusCreated, account(long, nil))
}

func TestGetAccount(t *testing.T) {
	e := newEnv(t)
	e.expectError(e.do("GET", "/gw/accounts/nope", ""), http.StatusNotFound, "not found")
	e.create(`{"id":"pre","plan":"paid","cleared":true,"balance_usd":"10"}`)
	ctx := context.Background()
	// Spend today, earlier this month, and last month.
	for _, en := range []store.Entry{
		{RequestID: "r1", AccountID: "pre", Endpoint: "chat", Model: "gw-fast", Units: 100, Unit: "token", Cost: pricing.Micro(1_250_000), Time: now.Add(-time.Hour)},
		{RequestID: "r2", AccountID: "pre", Endpoint: "images", Model: "gw-image", Units: 1, Unit: "image", Cost: pricing.Micro(500_000), Time: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)},
		{RequestID: "r3", AccountID: "pre", Endpoint: "speech", Model: "gw-voice-speak", Units: 10, Unit: "character", Cost: pricing.USD(2), Time: time.Date(2026, 2, 28, 23, 59, 59, 0, time.UTC)},
	} {
		if ok, err := e.st.Settle(ctx, &en); err != nil || !ok {
			t.Fatalf("Settle %s: %v %v", en.RequestID, ok, err)
		}
	}
	e.expect(e.do("GET", "/gw/accounts/pre", ""), http.StatusOK, account("pre", map[string]any{
		"plan": "paid", "cleared": true, "balance_usd": "6.25",
		"spend": map[string]any{"today_usd": "1.25", "month_usd": "1.75", "total_usd": "3.75"},
	}))
}

func TestPatchAccount(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		name  string
		start string // creation body without id
		patch string
		want  map[string]any
	}{
		{"plan", `{}`, `{"plan":"paid"}`, map[string]any{"plan": "paid"}},
		{"plan back to free", `{"plan":"paid"}`, `{"plan":"free"}`, nil},
		{"cleared", `{}`, `{"cleared":true}`, map[string]any{"cleared": true}},
		{"payg", `{}`, `{"payg":true}`, map[string]any{"payg": true}},
		{"lane_billing", `{}`, `{"lane_billing":true}`, map[string]any{"lane_billing": true}},
		{"balance set", `{}`, `{"balance_usd":"20"}`, map[string]any{"balance_usd": "20.00"}},
		{"balance null makes postpaid", `{"balance_usd":"5"}`, `{"balance_usd":null}`, nil},
		{"daily cap", `{}`, `{"daily_cap_usd":"3.5"}`, map[string]any{"daily_cap_usd": "3.50"}},
		{"daily cap cleared", `{"daily_cap_usd":"3"}`, `{"daily_cap_usd":null}`, nil},
		{"monthly cap", `{}`, `{"monthly_cap_usd":250}`, map[string]any{"monthly_cap_usd": "250.00"}},
		{"monthly cap cleared", `{"monthly_cap_usd":"1"}`, `{"monthly_cap_usd":null}`, nil},
		{"abilities", `{}`, `{"abilities":["fetch","decide"]}`, map[string]any{"abilities": []any{"fetch", "decide"}}},
		{"abilities none", `{}`, `{"abilities":[]}`, map[string]any{"abilities": []any{}}},
		{"abilities back to all", `{"abilities":["fetch"]}`, `{"abilities":null}`, nil},
		{"add balance", `{"balance_usd":"10.00"}`, `{"add_balance_usd":"2.50"}`, map[string]any{"balance_usd": "12.50"}},
		{"add balance as a number", `{"balance_usd":"10.00"}`, `{"add_balance_usd":0.1}`, map[string]any{"balance_usd": "10.10"}},
		{"subtract balance", `{"balance_usd":"10.00"}`, `{"add_balance_usd":"-2.50","reason":"refund of a duplicate top-up"}`, map[string]any{"balance_usd": "7.50"}},
		{"subtract to zero", `{"balance_usd":"10.00"}`, `{"add_balance_usd":"-10","reason":"closing"}`, map[string]any{"balance_usd": "0.00"}},
		{"set then add", `{}`, `{"balance_usd":"1","add_balance_usd":"0.25"}`, map[string]any{"balance_usd": "1.25"}},
		{"empty object changes nothing", `{"plan":"paid"}`, `{}`, map[string]any{"plan": "paid"}},
		{"empty body changes nothing", `{"payg":true}`, ``, map[string]any{"payg": true}},
		{"several fields", `{}`, `{"plan":"paid","cleared":true,"payg":true,"daily_cap_usd":"1","monthly_cap_usd":"2"}`,
			map[string]any{"plan": "paid", "cleared": true, "payg": true, "daily_cap_usd": "1.00", "monthly_cap_usd": "2.00"}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			id := fmt.Sprintf("p%d", i)
			start := strings.Replace(tc.start, "{", `{"id":"`+id+`",`, 1)
			start = strings.Replace(start, ",}", "}", 1)
			e.create(start)
			want := account(id, tc.want)
			e.expect(e.do("PATCH", "/gw/accounts/"+id, tc.patch), http.StatusOK, want)
			e.expect(e.do("GET", "/gw/accounts/"+id, ""), http.StatusOK, want)
		})
	}
}

func TestPatchAccountErrors(t *testing.T) {
	e := newEnv(t)
	const amountMsg = "amount must be a decimal number of US dollars with at most 9 decimals"
	e.create(`{"id":"post","plan":"free"}`)
	e.create(`{"id":"pre","balance_usd":"10"}`)
	e.create(`{"id":"rich","balance_usd":"9223372036.854775807"}`)
	cases := []struct {
		name   string
		id     string
		patch  string
		status int
		msg    string
	}{
		{"add balance on postpaid", "post", `{"add_balance_usd":"1"}`, 400,
			"add_balance_usd: the account is billed afterwards (balance_usd is null); set balance_usd to make it prepaid"},
		{"add balance on postpaid rolls back other fields", "post", `{"plan":"paid","cleared":true,"add_balance_usd":"1"}`, 400,
			"add_balance_usd: the account is billed afterwards (balance_usd is null); set balance_usd to make it prepaid"},
		{"null balance and add", "pre", `{"balance_usd":null,"add_balance_usd":"1"}`, 400,
			"add_balance_usd: the account is billed afterwards (balance_usd is null); set balance_usd to make it prepaid"},
		{"add balance null", "pre", `{"add_balance_usd":null}`, 400, "add_balance_usd: " + amountMsg},
		{"add balance abc", "pre", `{"add_balance_usd":"abc"}`, 400, "add_balance_usd: " + amountMsg},
		{"add balance overflows", "rich", `{"add_balance_usd":"0.000000001"}`, 400, "add_balance_usd: the new balance is out of range"},
		{"subtract without a reason", "pre", `{"add_balance_usd":"-1"}`, 400, "reason: required (a non-empty string) when add_balance_usd is below zero"},
		{"subtract with a blank reason", "pre", `{"add_balance_usd":"-1","reason":"  "}`, 400, "reason: required (a non-empty string) when add_balance_usd is below zero"},
		{"subtract below zero", "pre", `{"add_balance_usd":"-100","reason":"chargeback"}`, 400, "add_balance_usd: the balance would go below zero (it is 10.00)"},
		{"reason without a subtraction", "pre", `{"add_balance_usd":"1","reason":"gift"}`, 400, "reason: only with an add_balance_usd below zero"},
		{"reason with an escape", "pre", `{"add_balance_usd":"-1","reason":"refund\u001b[2J"}`, 400, "reason: " + printable.ErrNotShown.Error()},
		{"reason with a line break", "pre", `{"add_balance_usd":"-1","reason":"refund\nFORGED"}`, 400, "reason: " + printable.ErrNotShown.Error()},
		{"reason with a direction override", "pre", `{"add_balance_usd":"-1","reason":"refund\u202e"}`, 400, "reason: " + printable.ErrNotShown.Error()},
		{"reason too long", "pre", `{"add_balance_usd":"-1","reason":"` + strings.Repeat("é", MaxReason+1) + `"}`, 400, "reason: at most 500 characters"},
		{"negative balance", "pre", `{"balance_usd":"-5"}`, 400, "balance_usd: must not be negative"},
		{"bad plan", "pre", `{"plan":"gold"}`, 400, `plan: must be "free" or "paid"`},
		{"balance abc", "pre", `{"balance_usd":"abc"}`, 400, "balance_usd: " + amountMsg},
		{"negative daily cap", "pre", `{"daily_cap_usd":"-1"}`, 400, "daily_cap_usd: must not be negative"},
		{"unknown ability", "pre", `{"abilities":["x"]}`, 400, `abilities: unknown ability "x" (known: [transcription speech images search fetch decide apps mcp_gateway])`},
		{"id is not patchable", "pre", `{"id":"other"}`, 400, "id: unknown field"},
		{"unknown field", "pre", `{"balance":"1"}`, 400, "balance: unknown field"},
		{"body an array", "pre", `[]`, 400, "body: must be a JSON object"},
		{"unknown id", "nope", `{"plan":"paid"}`, 404, "not found"},
		{"unknown id, empty body", "nope", ``, 404, "not found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			e.expectError(e.do("PATCH", "/gw/accounts/"+tc.id, tc.patch), tc.status, tc.msg)
		})
	}
	e.t = t
	// Nothing changed.
	e.expect(e.do("GET", "/gw/accounts/post", ""), http.StatusOK, account("post", nil))
	e.expect(e.do("GET", "/gw/accounts/pre", ""), http.StatusOK, account("pre", map[string]any{"balance_usd": "10.00"}))
	e.expect(e.do("GET", "/gw/accounts/rich", ""), http.StatusOK, account("rich", map[string]any{"balance_usd": "9223372036.854775807"}))
	e.expectError(e.do("GET", "/gw/accounts/nope", ""), http.StatusNotFound, "not found")
}

func keySet(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func TestKeys(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.create(`{"id":"acme","plan":"paid","cleared":true}`)
	e.create(`{"id":"other"}`)
	e.expect(e.do("GET", "/gw/accounts/acme/keys", ""), http.StatusOK, map[string]any{"object": "list", "data": []any{}})

	cases := []struct {
		name    string
		body    string
		models  any
		expires any
	}{
		{"all models, no expiry", `{"name":"ci"}`, nil, nil},
		{"allowlist and expiry", `{"name":"bot","models":["gw-auto","gw-image"],"expires_at":"2030-01-02T03:04:05+02:00"}`,
			[]any{"gw-auto", "gw-image"}, "2030-01-02T01:04:05Z"},
		{"empty allowlist, null expiry", `{"name":"locked","models":[],"expires_at":null}`, []any{}, nil},
		{"null models", `{"name":"nulls","models":null}`, nil, nil},
	}
	type made struct {
		id, secret string
		listed     map[string]any
	}
	var keys []made
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			r := e.do("POST", "/gw/accounts/acme/keys", tc.body)
			if r.status != http.StatusCreated {
				t.Fatalf("status %d: %s", r.status, r.raw)
			}
			got := r.body.(map[string]any)
			if k := keySet(got); !reflect.DeepEqual(k, []string{"created_at", "daily_cap_usd", "expires_at", "id", "key", "mcp_tools", "models", "monthly_cap_usd", "name", "total_cap_usd"}) {
				t.Errorf("keys of the answer = %v", k)
			}
			secret, _ := got["key"].(string)
			id, _ := got["id"].(string)
			if !strings.HasPrefix(secret, "sk-") || !strings.HasPrefix(secret, store.SecretPrefix) || len(secret) != len(store.SecretPrefix)+43 {
				t.Errorf("key = %q", secret)
			}
			if !strings.HasPrefix(id, "key_") {
				t.Errorf("id = %q", id)
			}
			var name string
			_ = json.Unmarshal([]byte(tc.body), &struct{ Name *string }{&name})
			want := map[string]any{"id": id, "key": secret, "name": name, "models": tc.models, "expires_at": tc.expires, "created_at": nowJSON,
				"daily_cap_usd": nil, "monthly_cap_usd": nil, "total_cap_usd": nil, "mcp_tools": nil}
			e.expect(r, http.StatusCreated, want)

			// Only the hash is stored; it finds the key.
			k, err := e.st.KeyByHash(ctx, store.HashSecret(secret))
			if err != nil {
				t.Fatal(err)
			}
			if k.ID != id || k.AccountID != "acme" || k.Name != name || k.Hash != store.HashSecret(secret) {
				t.Errorf("stored key = %+v", k)
			}
			delete(want, "key")
			keys = append(keys, made{id, secret, want})
		})
	}
	e.t = t
	if len(keys) != len(cases) {
		t.Fatal("a key was not made")
	}
	if keys[0].secret == keys[1].secret || keys[0].id == keys[1].id {
		t.Error("two keys share a secret or an id")
	}

	// The list never shows a secret, and nothing in it is the secret.
	r := e.do("GET", "/gw/accounts/acme/keys", "")
	listed := make([]any, len(keys))
	for i, k := range keys {
		listed[i] = k.listed
		if strings.Contains(r.raw, k.secret) || strings.Contains(r.raw, store.HashSecret(k.secret)) {
			t.Errorf("the list shows the secret or hash of %s", k.id)
		}
	}
	e.expect(r, http.StatusOK, map[string]any{"object": "list", "data": listed})
	for _, row := range r.body.(map[string]any)["data"].([]any) {
		if _, ok := row.(map[string]any)["key"]; ok {
			t.Errorf("listed key has a key field: %v", row)
		}
	}
	e.expect(e.do("GET", "/gw/accounts/other/keys", ""), http.StatusOK, map[string]any{"object": "list", "data": []any{}})

	// DELETE: 204 with no body, then 404; the secret stops resolving.
	r = e.do("DELETE", "/gw/keys/"+keys[0].id, "")
	if r.status != http.StatusNoContent || r.raw != "" {
		t.Errorf("DELETE = %d %q, want 204 and no body", r.status, r.raw)
	}
	if _, err := e.st.KeyByHash(ctx, store.HashSecret(keys[0].secret)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleted key still found: %v", err)
	}
	e.expectError(e.do("DELETE", "/gw/keys/"+keys[0].id, ""), http.StatusNotFound, "not found")
	e.expectError(e.do("DELETE", "/gw/keys/key_nope", ""), http.StatusNotFound, "not found")
	e.expect(e.do("GET", "/gw/accounts/acme/keys", ""), http.StatusOK, map[string]any{"object": "list", "data": listed[1:]})
}

// Names and reasons at their longest, in any script, are accepted as
// they are.
func TestPrintableAtTheBound(t *testing.T) {
	e := newEnv(t)
	e.create(`{"id":"acme","balance_usd":"10"}`)
	name := strings.Repeat("é", MaxKeyName-2) + " ☕"
	r := e.do("POST", "/gw/accounts/acme/keys", `{"name":"`+name+`"}`)
	if got := r.body.(map[string]any)["name"]; r.status != http.StatusCreated || got != name {
		t.Fatalf("a name of %d characters: %d %s", MaxKeyName, r.status, r.raw)
	}
	reason := strings.Repeat("r", MaxReason-6) + " café!"
	e.expect(e.do("PATCH", "/gw/accounts/acme", `{"add_balance_usd":"-1","reason":"`+reason+`"}`), http.StatusOK,
		account("acme", map[string]any{"balance_usd": "9.00"}))
	j, err := e.st.Journal(context.Background(), "acme", 1)
	if err != nil || len(j) != 1 || j[0].Reason != reason {
		t.Fatalf("journal %v, %v", j, err)
	}
}

func TestKeyErrors(t *testing.T) {
	e := newEnv(t)
	e.create(`{"id":"acme"}`)
	cases := []struct {
		name   string
		path   string
		body   string
		status int
		msg    string
	}{
		{"name missing", "/gw/accounts/acme/keys", `{"models":["gw-auto"]}`, 400, "name: required, a non-empty string"},
		{"name empty", "/gw/accounts/acme/keys", `{"name":""}`, 400, "name: required, a non-empty string"},
		{"name null", "/gw/accounts/acme/keys", `{"name":null}`, 400, "name: required, a non-empty string"},
		{"name a number", "/gw/accounts/acme/keys", `{"name":3}`, 400, "name: required, a non-empty string"},
		{"empty body", "/gw/accounts/acme/keys", ``, 400, "name: required, a non-empty string"},
		{"models a string", "/gw/accounts/acme/keys", `{"name":"k","models":"gw-auto"}`, 400, "models: must be a list of model ids"},
		{"models with an empty id", "/gw/accounts/acme/keys", `{"name":"k","models":["gw-auto",""]}`, 400, "models: must be a list of model ids"},
		{"name with an escape", "/gw/accounts/acme/keys", `{"name":"lap\u001b[2Jtop"}`, 400, "name: " + printable.ErrNotShown.Error()},
		{"name with a line break", "/gw/accounts/acme/keys", `{"name":"lap\ntop"}`, 400, "name: " + printable.ErrNotShown.Error()},
		{"name with a tab", "/gw/accounts/acme/keys", `{"name":"lap\ttop"}`, 400, "name: " + printable.ErrNotShown.Error()},
		{"name with a C1 control", "/gw/accounts/acme/keys", `{"name":"lap\u009btop"}`, 400, "name: " + printable.ErrNotShown.Error()},
		{"name too long", "/gw/accounts/acme/keys", `{"name":"` + strings.Repeat("k", MaxKeyName+1) + `"}`, 400, "name: at most 128 characters"},
		{"name with an escape, unknown account", "/gw/accounts/nope/keys", `{"name":"\u001b"}`, 400, "name: " + printable.ErrNotShown.Error()},
		{"models with an escape", "/gw/accounts/acme/keys", `{"name":"k","models":["gw-auto\u001b[2J"]}`, 400, `models: "gw-auto\x1b[2J": ` + printable.ErrNotShown.Error()},
		{"models too long", "/gw/accounts/acme/keys", `{"name":"k","models":["` + strings.Repeat("m", MaxModelID+1) + `"]}`, 400, `models: "` + strings.Repeat("m", MaxModelID+1) + `": at most 256 characters`},
		{"expires_at not RFC 3339", "/gw/accounts/acme/keys", `{"name":"k","expires_at":"2030-01-02"}`, 400, "expires_at: must be an RFC 3339 time"},
		{"expires_at words", "/gw/accounts/acme/keys", `{"name":"k","expires_at":"tomorrow"}`, 400, "expires_at: must be an RFC 3339 time"},
		{"expires_at a number", "/gw/accounts/acme/keys", `{"name":"k","expires_at":1893456000}`, 400, "expires_at: must be an RFC 3339 time"},
		{"expires_at too late", "/gw/accounts/acme/keys", `{"name":"k","expires_at":"9999-12-31T23:59:59Z"}`, 400, "expires_at: must be an RFC 3339 time from 1678-01-01 to before 2262-01-01"},
		{"expires_at at the upper bound", "/gw/accounts/acme/keys", `{"name":"k","expires_at":"2262-01-01T00:00:00Z"}`, 400, "expires_at: must be an RFC 3339 time from 1678-01-01 to before 2262-01-01"},
		{"expires_at too early", "/gw/accounts/acme/keys", `{"name":"k","expires_at":"0001-01-01T00:00:00Z"}`, 400, "expires_at: must be an RFC 3339 time from 1678-01-01 to before 2262-01-01"},
		{"unknown field", "/gw/accounts/acme/keys", `{"name":"k","secret":"sk-mine"}`, 400, "secret: unknown field"},
		{"body not an object", "/gw/accounts/acme/keys", `["k"]`, 400, "body: must be a JSON object"},
		{"unknown account", "/gw/accounts/nope/keys", `{"name":"k"}`, 404, "not found"},
		{"list for an unknown account", "/gw/accounts/nope/keys", "", 404, "not found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			method := "POST"
			if tc.body == "" && strings.Contains(tc.name, "list") {
				method = "GET"
			}
			e.expectError(e.do(method, tc.path, tc.body), tc.status, tc.msg)
		})
	}
	e.t = t
	e.expect(e.do("GET", "/gw/accounts/acme/keys", ""), http.StatusOK, map[string]any{"object": "list", "data": []any{}})
}

func TestLedger(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.create(`{"id":"acme","balance_usd":"5"}`)
	e.create(`{"id":"other"}`)
	e.expect(e.do("GET", "/gw/accounts/acme/ledger", ""), http.StatusOK, map[string]any{"object": "list", "data": []any{}})
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	entries := []store.Entry{
		{RequestID: "req-1", AccountID: "acme", Endpoint: "chat", Model: "gw-fast", Units: 1200, Unit: "token", Cost: 150, Time: t0},
		{RequestID: "req-2", AccountID: "acme", Endpoint: "images", Model: "gw-image", Units: 2, Unit: "image", Cost: pricing.Micro(20_000), Time: t0.Add(time.Minute)},
		{RequestID: "req-other", AccountID: "other", Endpoint: "search", Model: "", Units: 1, Unit: "search", Cost: pricing.USD(1), Time: t0.Add(90 * time.Second)},
		{RequestID: "req-3", AccountID: "acme", Endpoint: "transcription", Model: "gw-voice-fast", Units: 10, Unit: "audio_second", Cost: pricing.Micro(16_667), Time: t0.Add(2*time.Minute + 123456789)},
	}
	for _, en := range entries {
		if ok, err := e.st.Settle(ctx, &en); err != nil || !ok {
			t.Fatalf("Settle %s: %v %v", en.RequestID, ok, err)
		}
	}
	// Settling req-2 again changes nothing.
	if ok, err := e.st.Settle(ctx, &entries[1]); err != nil || ok {
		t.Fatalf("second Settle: %v %v", ok, err)
	}
	row1 := map[string]any{"request_id": "req-1", "endpoint": "chat", "model": "gw-fast", "units": 1200, "unit": "token", "cost_usd": "0.00000015", "shortfall_usd": "0", "time": "2026-03-01T10:00:00Z"}
	row2 := map[string]any{"request_id": "req-2", "endpoint": "images", "model": "gw-image", "units": 2, "unit": "image", "cost_usd": "0.02", "shortfall_usd": "0", "time": "2026-03-01T10:01:00Z"}
	row3 := map[string]any{"request_id": "req-3", "endpoint": "transcription", "model": "gw-voice-fast", "units": 10, "unit": "audio_second", "cost_usd": "0.016667", "shortfall_usd": "0", "time": "2026-03-01T10:02:00.123456789Z"}

	cases := []struct {
		query string
		want  []any
	}{
		{"?limit=2", []any{row3, row2}},
		{"?limit=1", []any{row3}},
		{"?limit=3", []any{row3, row2, row1}},
		{"?limit=1000", []any{row3, row2, row1}},
		{"", []any{row3, row2, row1}},
		{"?limit=", []any{row3, row2, row1}},
	}
	for _, tc := range cases {
		t.Run("query"+tc.query, func(t *testing.T) {
			e.t = t
			e.expect(e.do("GET", "/gw/accounts/acme/ledger"+tc.query, ""), http.StatusOK, map[string]any{"object": "list", "data": tc.want})
		})
	}
	e.t = t
	r := e.do("GET", "/gw/accounts/acme/ledger?limit=2", "")
	for _, row := range r.body.(map[string]any)["data"].([]any) {
		if k := keySet(row.(map[string]any)); !reflect.DeepEqual(k, []string{"cost_usd", "endpoint", "model", "request_id", "shortfall_usd", "time", "unit", "units"}) {
			t.Errorf("entry keys = %v", k)
		}
	}
	// The balance was drawn down by exactly the ledger's sum.
	e.expect(e.do("GET", "/gw/accounts/acme", ""), http.StatusOK, account("acme", map[string]any{
		"balance_usd": "4.96333285",
		"spend":       map[string]any{"today_usd": "0.00", "month_usd": "0.03666715", "total_usd": "0.03666715"},
	}))

	const limitMsg = "limit: must be a whole number from 1 to 1000"
	for _, q := range []string{"limit=0", "limit=abc", "limit=-1", "limit=1001", "limit=1.5", "limit=%202"} {
		t.Run(q, func(t *testing.T) {
			e.t = t
			e.expectError(e.do("GET", "/gw/accounts/acme/ledger?"+q, ""), http.StatusBadRequest, limitMsg)
		})
	}
	e.t = t
	e.expectError(e.do("GET", "/gw/accounts/nope/ledger", ""), http.StatusNotFound, "not found")
	e.expectError(e.do("GET", "/gw/accounts/nope/ledger?limit=0", ""), http.StatusBadRequest, limitMsg)
}

func TestRouting(t *testing.T) {
	e := newEnv(t)
	e.create(`{"id":"acme"}`)
	cases := []struct {
		method, path string
		status       int
		allow        string
		msg          string
	}{
		{"GET", "/gw/nope", 404, "", "no admin route GET /gw/nope"},
		{"PUT", "/gw/accounts", 405, "GET, HEAD, POST", "method PUT not allowed on /gw/accounts"},
		{"GET", "/gw/", 404, "", "no admin route GET /gw/"},
		{"POST", "/gw/accounts/acme/ledger", 405, "GET, HEAD", "method POST not allowed on /gw/accounts/acme/ledger"},
		{"DELETE", "/gw/accounts/acme", 405, "GET, HEAD, PATCH", "method DELETE not allowed on /gw/accounts/acme"},
		{"PUT", "/gw/accounts/acme/keys", 405, "GET, HEAD, POST", "method PUT not allowed on /gw/accounts/acme/keys"},
		{"POST", "/gw/keys/key_1", 405, "DELETE, GET, HEAD, PATCH", "method POST not allowed on /gw/keys/key_1"},
		{"GET", "/gw/accounts/acme/keys/extra", 404, "", "no admin route GET /gw/accounts/acme/keys/extra"},
		{"DELETE", "/gw/keys", 404, "", "no admin route DELETE /gw/keys"},
	}
	for _, tc := range cases {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			e.t = t
			r := e.do(tc.method, tc.path, "")
			e.expectError(r, tc.status, tc.msg)
			if got := r.header.Get("Allow"); got != tc.allow {
				t.Errorf("Allow = %q, want %q", got, tc.allow)
			}
		})
	}
}

// GET /gw/accounts/{id}/journal lists every balance movement, newest
// first, with the balance after it; GET /gw/journal/check finds nothing
// wrong when the journal adds up.
func TestJournal(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.create(`{"id":"acme","plan":"paid","balance_usd":"5"}`)
	if r := e.do("PATCH", "/gw/accounts/acme", `{"add_balance_usd":"2.50"}`); r.status != http.StatusOK {
		t.Fatalf("PATCH: %d %s", r.status, r.raw)
	}
	if r := e.do("PATCH", "/gw/accounts/acme", `{"add_balance_usd":"-1","reason":"goodwill reversal"}`); r.status != http.StatusOK {
		t.Fatalf("PATCH: %d %s", r.status, r.raw)
	}
	if _, err := e.st.Settle(ctx, &store.Entry{RequestID: "req-1", AccountID: "acme", Cost: pricing.Micro(250_000)}); err != nil {
		t.Fatal(err)
	}
	if r := e.do("PATCH", "/gw/accounts/acme", `{"balance_usd":"10"}`); r.status != http.StatusOK {
		t.Fatalf("PATCH: %d %s", r.status, r.raw)
	}
	r := e.do("GET", "/gw/accounts/acme/journal", "")
	var body struct {
		Object string
		Data   []map[string]any
	}
	if err := json.Unmarshal([]byte(r.raw), &body); err != nil || r.status != http.StatusOK || body.Object != "list" {
		t.Fatalf("journal: %d %s", r.status, r.raw)
	}
	var got []string
	for _, d := range body.Data {
		got = append(got, fmt.Sprintf("%s %s %s %v %v", d["kind"], d["amount_usd"], d["balance_usd"], d["request_id"], d["reason"]))
		if _, err := time.Parse(time.RFC3339Nano, d["time"].(string)); err != nil {
			t.Errorf("time %v", d["time"])
		}
	}
	want := []string{
		"set 3.75 10.00 <nil> <nil>",
		"charge -0.25 6.25 req-1 <nil>",
		"adjustment -1.00 6.50 <nil> goodwill reversal",
		"top_up 2.50 7.50 <nil> <nil>",
		"set 5.00 5.00 <nil> <nil>",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("journal\n%q\nwant\n%q", got, want)
	}
	if r := e.do("GET", "/gw/accounts/acme/journal?limit=2", ""); r.status != http.StatusOK || strings.Count(r.raw, `"kind"`) != 2 {
		t.Fatalf("limit 2: %s", r.raw)
	}
	e.expectError(e.do("GET", "/gw/accounts/nope/journal", ""), http.StatusNotFound, "not found")
	e.expectError(e.do("GET", "/gw/accounts/acme/journal?limit=0", ""), http.StatusBadRequest, "limit: must be a whole number from 1 to 1000")
	e.expect(e.do("GET", "/gw/journal/check", ""), http.StatusOK, map[string]any{"ok": true, "problems": []any{}})
}

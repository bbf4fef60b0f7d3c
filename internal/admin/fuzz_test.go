package admin

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/printable"
	"github.com/caddy-gw/caddy-gw/internal/store/sqlite"
)

// FuzzAdminAccountBody sends arbitrary bodies to POST /gw/accounts, PATCH
// /gw/accounts/{id} (a prepaid and a postpaid account), POST
// /gw/accounts/{id}/keys, PATCH /gw/keys/{key_id}, POST /gw/orgs,
// PATCH /gw/orgs/{id} and POST /gw/webhooks: the API never
// panics, never answers 5xx, always answers JSON, and what it answers on
// success is what it stored.
func FuzzAdminAccountBody(f *testing.F) {
	for _, seed := range []string{
		``, `{}`, `null`, `[]`, `"x"`, `{`, `{"id":"a"}`, `{"id":"fz"}`,
		`{"id":"b","plan":"paid","cleared":true,"payg":true,"lane_billing":true,"low_balance_usd":null,"balance_usd":"12.50","daily_cap_usd":"1","monthly_cap_usd":2,"abilities":["speech"]}`,
		`{"id":"c","balance_usd":"9223372036.854775807"}`,
		`{"id":"d","balance_usd":"-9223372036.854775808"}`,
		`{"add_balance_usd":"9223372036.854775807"}`,
		`{"add_balance_usd":"-9223372036.854775808"}`,
		`{"add_balance_usd":"2.50"}`, `{"add_balance_usd":null}`, `{"balance_usd":null,"add_balance_usd":"1"}`,
		`{"plan":"gold"}`, `{"plan":null}`, `{"cleared":"yes"}`, `{"abilities":["x"]}`, `{"abilities":[null]}`,
		`{"daily_cap_usd":"-1"}`, `{"balance_usd":1e309}`, `{"balance_usd":"0.0000000001"}`, `{"id":"e","id":"f"}`,
		`{"name":"k"}`, `{"name":"k","models":[],"expires_at":"2030-01-01T00:00:00Z"}`,
		`{"name":"k","expires_at":"9999-12-31T23:59:59Z"}`, `{"name":"k","expires_at":"0001-01-01T00:00:00Z"}`,
		`{"name":"k","models":["gw-auto",""]}`, `{"name":"\u0000"}`, "{\"id\":\"\xff\"}",
		`{"name":"lap\u001b[2Jtop"}`, "{\"name\":\"k\x7f\"}", `{"name":"k","models":["m\u202e"]}`,
		`{"add_balance_usd":"-1","reason":"why\nnot"}`, "{\"add_balance_usd\":\"-1\",\"reason\":\"\xff\"}",
		`{"name":"k","daily_cap_usd":"1","monthly_cap_usd":2,"total_cap_usd":"0.000000001"}`,
		`{"daily_cap_usd":null,"monthly_cap_usd":null,"total_cap_usd":null}`, `{"total_cap_usd":"-1"}`,
		`{"monthly_cap_usd":"9223372036.854775807"}`, `{"name":"k","total_cap_usd":1e309}`, `{"name":"","daily_cap_usd":"1"}`,
		`{"org":"fzo"}`, `{"org":null}`, `{"org":"nobody"}`, `{"org":""}`, `{"org":7}`, `{"id":"g","org":"fzo","balance_usd":"1"}`,
		`{"id":"o2","name":"Org","daily_cap_usd":"1","monthly_cap_usd":"2"}`, `{"name":null}`, `{"name":"o\u0000"}`,
		`{"id":"o3","monthly_cap_usd":null}`,
		`{"url":"https://h.test/x","events":["cap.threshold"]}`, `{"url":"http://127.0.0.1:1/","secret":"0123456789abcdef","events":["key.revoked","balance.low"]}`,
		`{"url":"https://h.test/","events":["nope"]}`, `{"url":"https://u:p@h.test/","events":["key.revoked"]}`,
		`{"url":"https://h.test/","secret":"\u0000123456789abcdef","events":["key.revoked"]}`, `{"url":"javascript:x","events":["key.revoked"]}`,
		`{"name":"k","mcp_tools":["github__*","*__read_*"]}`, `{"mcp_tools":[]}`, `{"mcp_tools":null}`, `{"mcp_tools":["github__["]}`,
		`{"mcp_tools":[""]}`, `{"mcp_tools":[null]}`, `{"mcp_tools":"github__*"}`, `{"mcp_tools":["a__\u001b"]}`, `{"mcp_tools":["a__\\"]}`,
		`{"name":"k","mcp_tools":["[!a-z]__?"],"models":[]}`,
	} {
		f.Add(seed)
	}
	st, err := sqlite.Open(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	api := New(st)
	api.Now = func() time.Time { return now }
	serve := func(t *testing.T, method, path, body string) (int, map[string]any) {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s %q: %d %s", method, path, body, rec.Code, rec.Body)
		}
		if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
			t.Fatalf("%s %s %q: Content-Type %q", method, path, body, ct)
		}
		var out map[string]any
		dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
		if err := dec.Decode(&out); err != nil || out == nil || dec.More() {
			t.Fatalf("%s %s %q: body %q is not one JSON object: %v", method, path, body, rec.Body, err)
		}
		if rec.Code >= 400 {
			if msg, ok := out["error"].(string); !ok || msg == "" || len(out) != 1 {
				t.Fatalf("%s %s %q: %d with body %s", method, path, body, rec.Code, rec.Body)
			}
		}
		return rec.Code, out
	}
	for _, body := range []string{`{"id":"fz","balance_usd":"10"}`, `{"id":"fz-post"}`} {
		rec := httptest.NewRecorder()
		api.ServeHTTP(rec, httptest.NewRequest("POST", "/gw/accounts", strings.NewReader(body)))
		if rec.Code != http.StatusCreated {
			f.Fatalf("setup %s: %d %s", body, rec.Code, rec.Body)
		}
	}
	rec := httptest.NewRecorder()
	api.ServeHTTP(rec, httptest.NewRequest("POST", "/gw/accounts/fz/keys", strings.NewReader(`{"name":"fuzzed","daily_cap_usd":"1"}`)))
	var made struct{ ID string }
	if err := json.Unmarshal(rec.Body.Bytes(), &made); rec.Code != http.StatusCreated || err != nil {
		f.Fatalf("setup key: %d %s", rec.Code, rec.Body)
	}
	keyPath := "/gw/keys/" + made.ID
	rec = httptest.NewRecorder()
	api.ServeHTTP(rec, httptest.NewRequest("POST", "/gw/orgs", strings.NewReader(`{"id":"fzo","name":"fuzzed","daily_cap_usd":"1"}`)))
	if rec.Code != http.StatusCreated {
		f.Fatalf("setup org: %d %s", rec.Code, rec.Body)
	}
	const orgPath = "/gw/orgs/fzo"

	f.Fuzz(func(t *testing.T, body string) {
		// POST /gw/accounts: a 201 shows what GET then shows.
		status, got := serve(t, "POST", "/gw/accounts", body)
		if status == http.StatusCreated {
			id, _ := got["id"].(string)
			if _, again := serve(t, "GET", "/gw/accounts/"+id, ""); !jsonEqual(got, again) {
				t.Fatalf("POST answered %v, GET %v", got, again)
			}
		}
		// PATCH: a 200 shows what GET then shows; a refusal changes nothing.
		for _, id := range []string{"fz", "fz-post"} {
			_, before := serve(t, "GET", "/gw/accounts/"+id, "")
			status, got := serve(t, "PATCH", "/gw/accounts/"+id, body)
			_, after := serve(t, "GET", "/gw/accounts/"+id, "")
			switch {
			case status == http.StatusOK && !jsonEqual(got, after):
				t.Fatalf("PATCH answered %v, GET %v", got, after)
			case status != http.StatusOK && !jsonEqual(before, after):
				t.Fatalf("refused PATCH (%d) changed %v into %v", status, before, after)
			}
		}
		// PATCH of a key: a 200 shows what GET then shows; a refusal
		// changes nothing; what is stored prints as itself.
		_, before := serve(t, "GET", keyPath, "")
		status, got = serve(t, "PATCH", keyPath, body)
		_, after := serve(t, "GET", keyPath, "")
		switch {
		case status == http.StatusOK && !jsonEqual(got, after):
			t.Fatalf("PATCH of the key answered %v, GET %v", got, after)
		case status != http.StatusOK && !jsonEqual(before, after):
			t.Fatalf("refused PATCH of the key (%d) changed %v into %v", status, before, after)
		}
		if name, _ := after["name"].(string); printable.Check(name, MaxKeyName) != nil {
			t.Fatalf("stored key name %q", name)
		}
		for _, f := range keyCapFields {
			if m, ok := after[f].(string); ok && strings.HasPrefix(m, "-") {
				t.Fatalf("stored %s %s", f, m)
			}
		}
		checkMCPTools(t, after)
		// POST /gw/orgs: a 201 shows what GET then shows.
		if status, got := serve(t, "POST", "/gw/orgs", body); status == http.StatusCreated {
			id, _ := got["id"].(string)
			if _, again := serve(t, "GET", "/gw/orgs/"+id, ""); !jsonEqual(got, again) {
				t.Fatalf("POST of an org answered %v, GET %v", got, again)
			}
		}
		// POST /gw/webhooks: a 201 shows its secret once, and then is
		// listed as it was made, without it; what is stored prints as
		// itself.
		if status, got := serve(t, "POST", "/gw/webhooks", body); status == http.StatusCreated {
			id, _ := got["id"].(string)
			secret, _ := got["secret"].(string)
			delete(got, "secret")
			if _, again := serve(t, "GET", "/gw/webhooks/"+id, ""); !jsonEqual(got, again) {
				t.Fatalf("POST of a webhook answered %v, GET %v", got, again)
			}
			if len(secret) < MinWebhookSecret || printable.Check(secret, MaxWebhookSecret) != nil {
				t.Fatalf("stored secret %q", secret)
			}
			rec := httptest.NewRecorder()
			api.ServeHTTP(rec, httptest.NewRequest("DELETE", "/gw/webhooks/"+id, nil))
			if rec.Code != http.StatusNoContent {
				t.Fatalf("DELETE of a webhook: %d %s", rec.Code, rec.Body)
			}
		}
		// PATCH of an org: a 200 shows what GET then shows; a refusal
		// changes nothing; what is stored prints as itself.
		_, before = serve(t, "GET", orgPath, "")
		status, got = serve(t, "PATCH", orgPath, body)
		_, after = serve(t, "GET", orgPath, "")
		switch {
		case status == http.StatusOK && !jsonEqual(got, after):
			t.Fatalf("PATCH of the org answered %v, GET %v", got, after)
		case status != http.StatusOK && !jsonEqual(before, after):
			t.Fatalf("refused PATCH of the org (%d) changed %v into %v", status, before, after)
		}
		if name, _ := after["name"].(string); printable.Check(name, MaxOrgName) != nil {
			t.Fatalf("stored org name %q", name)
		}
		// POST keys: a 201 carries a secret the list never shows.
		status, got = serve(t, "POST", "/gw/accounts/fz/keys", body)
		if status == http.StatusCreated {
			secret, _ := got["key"].(string)
			if !strings.HasPrefix(secret, "sk-") {
				t.Fatalf("key %q", secret)
			}
			// What is stored prints as itself.
			name, _ := got["name"].(string)
			if printable.Check(name, MaxKeyName) != nil {
				t.Fatalf("stored name %q", name)
			}
			checkMCPTools(t, got)
			models, _ := got["models"].([]any)
			for _, m := range models {
				if s, _ := m.(string); printable.Check(s, MaxModelID) != nil {
					t.Fatalf("stored model %q", s)
				}
			}
			req := httptest.NewRequest("GET", "/gw/accounts/fz/keys", nil)
			rec := httptest.NewRecorder()
			api.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), secret) {
				t.Fatalf("key list %d shows the secret or failed", rec.Code)
			}
		}
	})
}

// checkMCPTools fails t unless a key's mcp_tools as the API shows it are
// null or at most MaxMCPTools globs, each printable, at most
// MaxMCPToolGlob characters and well formed.
func checkMCPTools(t *testing.T, key map[string]any) {
	t.Helper()
	raw, ok := key["mcp_tools"]
	if !ok {
		t.Fatalf("key without mcp_tools: %v", key)
	}
	if raw == nil {
		return
	}
	list, ok := raw.([]any)
	if !ok || len(list) > MaxMCPTools {
		t.Fatalf("stored mcp_tools %v", raw)
	}
	for _, g := range list {
		s, _ := g.(string)
		if _, err := path.Match(s, ""); s == "" || err != nil || printable.Check(s, MaxMCPToolGlob) != nil {
			t.Fatalf("stored glob %q", s)
		}
	}
}

func jsonEqual(a, b any) bool {
	ja, err1 := json.Marshal(a)
	jb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ja, jb)
}

package admin

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

// Webhooks are made (with a secret made for them when none is given),
// listed and read without their secret, and deleted; each event of their
// types that a charge raises waits in their delivery log.
func TestWebhooks(t *testing.T) {
	e := newEnv(t)
	made := e.do("POST", "/gw/webhooks", `{"url":"https://hooks.example.test/gw","events":["cap.threshold","key.revoked"]}`)
	if made.status != http.StatusCreated {
		t.Fatalf("POST /gw/webhooks: %d %s", made.status, made.raw)
	}
	body := made.body.(map[string]any)
	id, secret := body["id"].(string), body["secret"].(string)
	if !regexp.MustCompile(`^wh_[0-9a-f]{24}$`).MatchString(id) || !regexp.MustCompile(`^whsec_[A-Za-z0-9_-]{43}$`).MatchString(secret) {
		t.Fatalf("made %s", made.raw)
	}
	hook := map[string]any{"id": id, "url": "https://hooks.example.test/gw", "events": []any{"cap.threshold", "key.revoked"}, "created_at": nowJSON}
	e.expect(made, http.StatusCreated, merge(hook, map[string]any{"secret": secret}))
	own := e.do("POST", "/gw/webhooks", `{"url":"http://127.0.0.1:9/x","secret":"0123456789abcdef","events":["balance.low"]}`)
	if own.status != http.StatusCreated || own.body.(map[string]any)["secret"] != "0123456789abcdef" {
		t.Fatalf("POST with a secret: %d %s", own.status, own.raw)
	}
	ownID := own.body.(map[string]any)["id"].(string)
	hook2 := map[string]any{"id": ownID, "url": "http://127.0.0.1:9/x", "events": []any{"balance.low"}, "created_at": nowJSON}
	// Made at the same instant (the test's clock), they are listed by id.
	listed := []any{hook, hook2}
	if ownID < id {
		listed = []any{hook2, hook}
	}
	e.expect(e.do("GET", "/gw/webhooks", ""), http.StatusOK, map[string]any{"object": "list", "data": listed})
	e.expect(e.do("GET", "/gw/webhooks/"+id, ""), http.StatusOK, hook)
	e.expectError(e.do("GET", "/gw/webhooks/wh_nobody", ""), http.StatusNotFound, "not found")

	// A charge across half of a daily cap, and a low balance.
	e.expect(e.do("POST", "/gw/accounts", `{"id":"a","plan":"paid","daily_cap_usd":"2","balance_usd":"10","low_balance_usd":"9.5"}`),
		http.StatusCreated, account("a", map[string]any{"plan": "paid", "daily_cap_usd": "2.00", "balance_usd": "10.00", "low_balance_usd": "9.50"}))
	e.settle("r1", "a", "", "m", now, 1, 1, "1")
	e.expect(e.do("GET", "/gw/webhooks/"+id+"/deliveries", ""), http.StatusOK, map[string]any{"object": "list", "data": []any{
		map[string]any{"event_id": deliveryID(t, e, id, 0), "type": "cap.threshold", "account": "a", "status": "pending", "attempts": 0,
			"last_status": nil, "last_error": nil, "next_attempt_at": nowJSON, "delivered_at": nil, "created_at": nowJSON,
			"event": map[string]any{"id": deliveryID(t, e, id, 0), "type": "cap.threshold", "time": nowJSON, "account": "a",
				"cap": "daily_cap", "threshold": float64(50), "spend_usd": "1.00", "limit_usd": "2.00"}},
	}})
	low := e.do("GET", "/gw/webhooks/"+ownID+"/deliveries?limit=1", "")
	if ev := low.body.(map[string]any)["data"].([]any)[0].(map[string]any)["event"].(map[string]any); ev["type"] != "balance.low" ||
		ev["balance_usd"] != "9.00" || ev["limit_usd"] != "9.50" {
		t.Fatalf("balance.low delivery %s", low.raw)
	}
	e.expectError(e.do("GET", "/gw/webhooks/"+id+"/deliveries?limit=0", ""), http.StatusBadRequest, "limit: must be a whole number from 1 to 1000")
	e.expectError(e.do("GET", "/gw/webhooks/wh_nobody/deliveries", ""), http.StatusNotFound, "not found")

	if r := e.do("DELETE", "/gw/webhooks/"+id, ""); r.status != http.StatusNoContent || r.raw != "" {
		t.Fatalf("DELETE: %d %s", r.status, r.raw)
	}
	e.expectError(e.do("DELETE", "/gw/webhooks/"+id, ""), http.StatusNotFound, "not found")
	e.expectError(e.do("GET", "/gw/webhooks/"+id+"/deliveries", ""), http.StatusNotFound, "not found")
	e.expect(e.do("GET", "/gw/webhooks", ""), http.StatusOK, map[string]any{"object": "list", "data": []any{hook2}})
}

// deliveryID is the event id of the i-th newest delivery of webhook id.
func deliveryID(t *testing.T, e *env, id string, i int) string {
	t.Helper()
	ds, err := e.st.Deliveries(context.Background(), id, 100)
	if err != nil || len(ds) <= i {
		t.Fatalf("deliveries of %s: %v, %v", id, ds, err)
	}
	return ds[i].EventID
}

// merge is a with b's fields added.
func merge(a, b map[string]any) map[string]any {
	m := map[string]any{}
	for k, v := range a {
		m[k] = v
	}
	for k, v := range b {
		m[k] = v
	}
	return m
}

// A webhook's fields are checked: each mistake is a 400 naming it, and
// nothing is made.
func TestWebhookRefusals(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct{ body, msg string }{
		{`{"events":["key.revoked"]}`, "url: required, an http or https URL"},
		{`{"url":"ftp://x.test/","events":["key.revoked"]}`, "url: required, an http or https URL"},
		{`{"url":"/relative","events":["key.revoked"]}`, "url: required, an http or https URL"},
		{`{"url":"https://u:p@x.test/","events":["key.revoked"]}`, "url: must not hold credentials; the signature authenticates the gateway"},
		{`{"url":"https://x.test/` + strings.Repeat("a", MaxWebhookURL) + `","events":["key.revoked"]}`, "url: longer than 2048 bytes"},
		{`{"url":"https://x.test/","secret":"short","events":["key.revoked"]}`, "secret: at least 16 characters, or leave it out for one made for you"},
		{`{"url":"https://x.test/","secret":7,"events":["key.revoked"]}`, "secret: must be a string"},
		{`{"url":"https://x.test/"}`, "events: required, a list of event types (known: cap.threshold, balance.low, key.revoked)"},
		{`{"url":"https://x.test/","events":[]}`, "events: required, a list of event types (known: cap.threshold, balance.low, key.revoked)"},
		{`{"url":"https://x.test/","events":["cap.reached"]}`, `events: "cap.reached" is not an event type (known: cap.threshold, balance.low, key.revoked)`},
		{`{"url":"https://x.test/","events":["key.revoked","key.revoked"]}`, `events: "key.revoked" is listed twice`},
		{`{"url":"https://x.test/","events":["key.revoked"],"filter":"x"}`, "filter: unknown field"},
	} {
		e.expectError(e.do("POST", "/gw/webhooks", c.body), http.StatusBadRequest, c.msg)
	}
	e.expect(e.do("GET", "/gw/webhooks", ""), http.StatusOK, map[string]any{"object": "list", "data": []any{}})
}

package gwcli

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/admin"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/internal/store/sqlite"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// A webhook's list and card show its URL and events, never a secret; a
// new one shows its secret once, with how deliveries are signed.
func TestWebhookTables(t *testing.T) {
	at := time.Now().Add(-2 * time.Hour)
	h := admin.Webhook{ID: "wh_1", URL: "https://ops.example.test/gw", Events: []string{"cap.threshold", "balance.low"}, CreatedAt: at}
	var b bytes.Buffer
	if err := webhookTable(&b, []admin.Webhook{h, {ID: "wh_2", URL: "http://127.0.0.1:9/x", Events: []string{"key.revoked"}, CreatedAt: at}}); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"WEBHOOK  URL                          EVENTS                      CREATED\n" +
		"wh_1     https://ops.example.test/gw  cap.threshold, balance.low  2 hours ago\n" +
		"wh_2     http://127.0.0.1:9/x         key.revoked                 2 hours ago\n"
	if b.String() != want {
		t.Errorf("webhook table:\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	if err := webhookTable(&b, nil); err != nil || b.String() != "No webhooks.\n" {
		t.Errorf("no webhooks: %q, %v", b.String(), err)
	}
	b.Reset()
	if err := webhookCard(&b, h); err != nil {
		t.Fatal(err)
	}
	want = "" +
		"Webhook  wh_1\n" +
		"URL      https://ops.example.test/gw\n" +
		"Events   cap.threshold, balance.low\n" +
		"Created  2 hours ago\n"
	if b.String() != want {
		t.Errorf("webhook card:\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	h.Secret = "whsec_abc"
	if err := webhookCreated(&b, h); err != nil {
		t.Fatal(err)
	}
	want = "Webhook wh_1 sends cap.threshold, balance.low to https://ops.example.test/gw, signed with the secret:\n\n" +
		"  whsec_abc\n\n" +
		"This is the only time the secret is shown: store it now. Each delivery's X-Gw-Signature\n" +
		"header is \"sha256=\" and the hex HMAC-SHA256 of the body keyed with it.\n"
	if b.String() != want {
		t.Errorf("new webhook:\n%s\nwant\n%s", b.String(), want)
	}
}

// The delivery log says of each delivery what event it carries, whether
// it arrived, how its last attempt went and when the next one is.
func TestDeliveryTable(t *testing.T) {
	at := time.Now().Add(-3 * time.Hour)
	later, done := time.Now().Add(90*time.Minute), at.Add(time.Minute)
	s500, s204, refused, none := 500, 204, "HTTP 500: not now", ""
	var b bytes.Buffer
	if err := deliveryTable(&b, []admin.Delivery{
		{Type: "key.revoked", Account: "acme", Status: "pending", NextAttemptAt: &at, CreatedAt: at, Event: json.RawMessage(`{"key_id":"key_1"}`)},
		{Type: "balance.low", Account: "acme", Status: "pending", Attempts: 2, LastStatus: &s500, LastError: &refused, NextAttemptAt: &later, CreatedAt: at,
			Event: json.RawMessage(`{"balance_usd":"8.400000001","limit_usd":"9.50"}`)},
		{Type: "cap.threshold", Account: "acme", Status: "delivered", Attempts: 1, LastStatus: &s204, LastError: &none, DeliveredAt: &done, CreatedAt: at,
			Event: json.RawMessage(`{"cap":"key_daily_cap","key_id":"key_1","threshold":80}`)},
		{Type: "new.kind", Account: "acme", Status: "pending", Attempts: 1, LastStatus: new(int), LastError: &refused, NextAttemptAt: &at, CreatedAt: at},
	}); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"WHEN         EVENT                                 ACCOUNT  STATUS     ATTEMPTS  LAST ANSWER        NEXT ATTEMPT\n" +
		"3 hours ago  key.revoked (key_1)                   acme     pending    0         none               now\n" +
		"3 hours ago  balance.low ($8.400000001 left)       acme     pending    2         HTTP 500: not now  1 hour from now\n" +
		"3 hours ago  cap.threshold (80% of key_daily_cap)  acme     delivered  1         HTTP 204           none\n" +
		"3 hours ago  new.kind                              acme     pending    1         HTTP 500: not now  now\n"
	if b.String() != want {
		t.Errorf("delivery table:\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	if err := deliveryTable(&b, nil); err != nil || b.String() != "No deliveries.\n" {
		t.Errorf("no deliveries: %q, %v", b.String(), err)
	}
}

// webhookAnswer is the admin API's answer for a new webhook.
const webhookAnswer = `{"id":"wh_1","url":"https://ops.example.test/gw","events":["cap.threshold"],"secret":"whsec_abc","created_at":"2026-01-02T03:04:05Z"}`

// The webhook commands send what is given, the events as a list and the
// secret only when given; an id is one path segment; --low-balance on
// the account commands sends its amount, or null for "none".
func TestWebhookCommandsSend(t *testing.T) {
	for _, c := range []struct {
		args []string
		want sent
	}{
		{[]string{"webhooks", "create", "--url", "https://ops.example.test/gw", "--events", "cap.threshold,balance.low"},
			sent{"POST", "/gw/webhooks", map[string]any{"url": "https://ops.example.test/gw", "events": []any{"cap.threshold", "balance.low"}}}},
		{[]string{"webhooks", "create", "--url", "https://ops.example.test/gw", "--events", "key.revoked", "--events", "balance.low", "--secret", "0123456789abcdef"},
			sent{"POST", "/gw/webhooks", map[string]any{"url": "https://ops.example.test/gw", "events": []any{"key.revoked", "balance.low"}, "secret": "0123456789abcdef"}}},
		{[]string{"webhooks", "list"}, sent{"GET", "/gw/webhooks", nil}},
		{[]string{"webhooks", "show", "wh/../1"}, sent{"GET", "/gw/webhooks/wh%2F..%2F1", nil}},
		{[]string{"webhooks", "deliveries", "wh_1"}, sent{"GET", "/gw/webhooks/wh_1/deliveries", nil}},
		{[]string{"webhooks", "deliveries", "wh_1", "--limit", "7"}, sent{"GET", "/gw/webhooks/wh_1/deliveries", nil}},
		{[]string{"webhooks", "delete", "wh_1"}, sent{"DELETE", "/gw/webhooks/wh_1", nil}},
		{[]string{"accounts", "create", "acme", "--plan", "paid", "--low-balance", "9.5"}, sent{"POST", "/gw/accounts", map[string]any{"id": "acme", "plan": "paid", "low_balance_usd": "9.5"}}},
		{[]string{"accounts", "update", "acme", "--low-balance", "none"}, sent{"PATCH", "/gw/accounts/acme", map[string]any{"low_balance_usd": nil}}},
	} {
		answer := webhookAnswer
		if c.args[0] == "accounts" {
			answer = accountAnswer
		} else if c.args[1] == "list" || c.args[1] == "deliveries" {
			answer = `{"object":"list","data":[]}`
		}
		addr, got := fakeAdmin(t, http.StatusOK, answer)
		if _, err := runGW(addr, c.args...); err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		if len(*got) != 1 || !sameSent((*got)[0], c.want) {
			t.Errorf("%q sent %+v, want %+v", c.args, *got, c.want)
		}
	}
	// The limit is a query parameter.
	var query string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		query = r.URL.RawQuery
		w.Write([]byte(`{"object":"list","data":[]}`))
	}))
	t.Cleanup(srv.Close)
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, c := range []struct {
		args []string
		want string
	}{{nil, "limit=100"}, {[]string{"--limit", "7"}, "limit=7"}} {
		if _, err := runGW(addr, append([]string{"webhooks", "deliveries", "wh_1"}, c.args...)...); err != nil || query != c.want {
			t.Errorf("deliveries %q: query %q, %v; want %q", c.args, query, err, c.want)
		}
	}
	if _, err := runGW(addr, "webhooks", "create", "--url", "https://ops.example.test/gw"); err == nil || err.Error() != `required flag(s) "events" not set` {
		t.Errorf("create without events: %v", err)
	}
}

// realAdmin is the admin API over a fresh embedded store, its clock a
// second past at and a second later at each reading (so what is made
// later reads later); it returns its address and the store.
func realAdmin(t *testing.T, at time.Time) (string, *sqlite.DB) {
	t.Helper()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	api := admin.New(st)
	var ticks atomic.Int64
	api.Now = func() time.Time { return at.Add(time.Duration(ticks.Add(1)) * time.Second) }
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), st
}

// Against the admin API itself: an account's low-balance mark is set,
// shown and removed; a webhook is made (its secret shown once), listed,
// shown, refused with the flag named, and deleted; a charge that crosses
// half and four fifths of a daily cap and the low-balance mark fills its
// delivery log, which shows each delivery's state as the sender left it.
func TestWebhooksAgainstAdminAPI(t *testing.T) {
	ctx := context.Background()
	at := time.Now().Add(-time.Hour - time.Minute)
	addr, st := realAdmin(t, at)

	out, err := runGW(addr, "accounts", "create", "acme", "--plan", "paid", "--balance", "10", "--daily-cap", "2", "--low-balance", "9.5")
	want := "" +
		"Account      acme\n" +
		"Plan         paid\n" +
		"Org          none\n" +
		"Balance      $10.00\n" +
		"Low balance  $9.50\n" +
		"Daily cap    $2.00\n" +
		"Monthly cap  none\n" +
		"Abilities    transcription, speech, images, search, fetch, decide, apps, mcp_gateway\n" +
		"Billing      list prices\n" +
		"Spent        $0.00 today, $0.00 this month, $0.00 in all\n" +
		"Created      1 hour ago\n"
	if err != nil || out != want {
		t.Fatalf("accounts create --low-balance:\n%s\n%v\nwant\n%s", out, err, want)
	}

	out, err = runGW(addr, "webhooks", "create", "--url", "https://ops.example.test/gw", "--events", "cap.threshold,balance.low", "--secret", "0123456789abcdef")
	m := regexp.MustCompile(`^Webhook (wh_[0-9a-f]{24}) sends`).FindStringSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("webhooks create: %q, %v", out, err)
	}
	id := m[1]
	want = "Webhook " + id + " sends cap.threshold, balance.low to https://ops.example.test/gw, signed with the secret:\n\n" +
		"  0123456789abcdef\n\n" +
		"This is the only time the secret is shown: store it now. Each delivery's X-Gw-Signature\n" +
		"header is \"sha256=\" and the hex HMAC-SHA256 of the body keyed with it.\n"
	if out != want {
		t.Errorf("webhooks create:\n%s\nwant\n%s", out, want)
	}
	out, err = runGW(addr, "webhooks", "create", "--url", "http://127.0.0.1:9/x", "--events", "key.revoked", "--json")
	var made admin.Webhook
	if err != nil || json.Unmarshal([]byte(out), &made) != nil || !regexp.MustCompile(`^whsec_[A-Za-z0-9_-]{43}$`).MatchString(made.Secret) ||
		made.URL != "http://127.0.0.1:9/x" || len(made.Events) != 1 || made.Events[0] != "key.revoked" {
		t.Errorf("webhooks create --json with a secret made: %q, %v", out, err)
	}

	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--url", "https://ops.example.test/gw", "--events", "cap.reached"},
			`creating a webhook: --events: "cap.reached" is not an event type (known: cap.threshold, balance.low, key.revoked)`},
		{[]string{"--url", "https://ops.example.test/gw", "--events", "key.revoked,key.revoked"}, `creating a webhook: --events: "key.revoked" is listed twice`},
		{[]string{"--url", "ftp://ops.example.test/", "--events", "key.revoked"}, "creating a webhook: --url: required, an http or https URL"},
		{[]string{"--url", "https://ops.example.test/gw", "--events", "key.revoked", "--secret", "short"},
			"creating a webhook: --secret: at least 16 characters, or leave it out for one made for you"},
	} {
		if out, err := runGW(addr, append([]string{"webhooks", "create"}, c.args...)...); err == nil || err.Error() != c.msg || out != "" {
			t.Errorf("webhooks create %q: %q, %v; want %q", c.args, out, err, c.msg)
		}
	}

	out, err = runGW(addr, "webhooks", "list")
	want = "" +
		"WEBHOOK                      URL                          EVENTS                      CREATED\n" +
		id + "  https://ops.example.test/gw  cap.threshold, balance.low  1 hour ago\n" +
		made.ID + "  http://127.0.0.1:9/x         key.revoked                 1 hour ago\n"
	if err != nil || out != want {
		t.Errorf("webhooks list:\n%s\n%v\nwant\n%s", out, err, want)
	}
	out, err = runGW(addr, "webhooks", "show", id)
	want = "" +
		"Webhook  " + id + "\n" +
		"URL      https://ops.example.test/gw\n" +
		"Events   cap.threshold, balance.low\n" +
		"Created  1 hour ago\n"
	if err != nil || out != want {
		t.Errorf("webhooks show:\n%s\n%v\nwant\n%s", out, err, want)
	}
	if out, err := runGW(addr, "webhooks", "deliveries", id); err != nil || out != "No deliveries.\n" {
		t.Errorf("deliveries before any event: %q, %v", out, err)
	}

	// $1.60 of a $2.00 daily cap and from a $10.00 balance: 50 % and 80 %
	// of the cap, and below the $9.50 mark.
	cost, _ := pricing.ParseUSD("1.6")
	if _, err := st.Settle(ctx, &store.Entry{RequestID: "req_1", AccountID: "acme", Endpoint: "chat", Model: "m", Units: 1, Unit: "call", Cost: cost, Time: at}); err != nil {
		t.Fatal(err)
	}
	// The sender's part: the oldest arrives at the first attempt, the
	// next is refused and tried again later, the newest is not tried yet.
	attempt := func(status int, msg string, next time.Time) {
		t.Helper()
		due, err := st.Due(ctx, time.Now(), 10)
		if err != nil || len(due) != 1 {
			t.Fatalf("due: %+v, %v", due, err)
		}
		if ok, err := st.Claim(ctx, &due[0], time.Now().Add(time.Minute)); !ok || err != nil {
			t.Fatalf("claim: %v, %v", ok, err)
		}
		if err := st.Attempted(ctx, due[0].Seq, at.Add(time.Second), next, status, msg); err != nil {
			t.Fatal(err)
		}
	}
	attempt(http.StatusNoContent, "", time.Time{})
	attempt(http.StatusInternalServerError, "HTTP 500: not now", time.Now().Add(90*time.Minute))

	out, err = runGW(addr, "webhooks", "deliveries", id)
	want = "" +
		"WHEN        EVENT                             ACCOUNT  STATUS     ATTEMPTS  LAST ANSWER        NEXT ATTEMPT\n" +
		"1 hour ago  balance.low ($8.40 left)          acme     pending    0         none               now\n" +
		"1 hour ago  cap.threshold (80% of daily_cap)  acme     pending    1         HTTP 500: not now  1 hour from now\n" +
		"1 hour ago  cap.threshold (50% of daily_cap)  acme     delivered  1         HTTP 204           none\n"
	if err != nil || out != want {
		t.Errorf("webhooks deliveries:\n%s\n%v\nwant\n%s", out, err, want)
	}
	if out, err := runGW(addr, "webhooks", "deliveries", id, "--limit", "1"); err != nil || strings.Count(out, "\n") != 2 || !strings.Contains(out, "balance.low") {
		t.Errorf("webhooks deliveries --limit 1:\n%s\n%v", out, err)
	}
	out, err = runGW(addr, "webhooks", "deliveries", id, "--json")
	var list struct {
		Object string           `json:"object"`
		Data   []admin.Delivery `json:"data"`
	}
	if err != nil || json.Unmarshal([]byte(out), &list) != nil || list.Object != "list" || len(list.Data) != 3 ||
		list.Data[2].Status != "delivered" || *list.Data[2].LastStatus != http.StatusNoContent {
		t.Errorf("webhooks deliveries --json: %s, %v", out, err)
	}
	if _, err := runGW(addr, "webhooks", "deliveries", id, "--limit", "0"); err == nil ||
		err.Error() != "deliveries of webhook "+id+": limit: must be a whole number from 1 to 1000" {
		t.Errorf("deliveries --limit 0: %v", err)
	}

	out, err = runGW(addr, "accounts", "update", "acme", "--low-balance", "none")
	if err != nil || !strings.Contains(out, "Balance      $8.40\nLow balance  none\n") {
		t.Errorf("accounts update --low-balance none:\n%s\n%v", out, err)
	}
	if _, err := runGW(addr, "accounts", "update", "acme", "--low-balance", "lots"); err == nil ||
		err.Error() != "account acme: low_balance_usd: amount must be a decimal number of US dollars with at most 9 decimals" {
		t.Errorf("a low-balance mark in words: %v", err)
	}

	if out, err := runGW(addr, "webhooks", "delete", id); err != nil || out != "Deleted webhook "+id+": its pending deliveries will not be sent.\n" {
		t.Errorf("webhooks delete: %q, %v", out, err)
	}
	for _, args := range [][]string{{"delete", id}, {"show", id}} {
		if _, err := runGW(addr, append([]string{"webhooks"}, args...)...); err == nil || err.Error() != "webhook "+id+": not found" {
			t.Errorf("webhooks %s of a deleted webhook: %v", args[0], err)
		}
	}
	if _, err := runGW(addr, "webhooks", "deliveries", id); err == nil || err.Error() != "deliveries of webhook "+id+": not found" {
		t.Errorf("deliveries of a deleted webhook: %v", err)
	}
	if out, err := runGW(addr, "webhooks", "delete", made.ID, "--json"); err != nil || out != `{"deleted":true,"id":"`+made.ID+`"}`+"\n" {
		t.Errorf("webhooks delete --json: %q, %v", out, err)
	}
	if out, err := runGW(addr, "webhooks", "list"); err != nil || out != "No webhooks.\n" {
		t.Errorf("webhooks list of none: %q, %v", out, err)
	}
}

// Whatever a delivery's event holds, its row is one line of text.
func FuzzDeliveryTable(f *testing.F) {
	f.Add("cap.threshold", `{"cap":"daily_cap","threshold":50}`, "HTTP 500: nope")
	f.Add("balance.low", `{"balance_usd":"8.40"}`, "")
	f.Add("key.revoked", `{"key_id":"key_1\u001b[2J"}`, "\x1b[2J\n")
	f.Add("x", `{"balance_usd":"not money","cap":7}`, "\xff")
	f.Add("x", `not json`, "")
	f.Fuzz(func(t *testing.T, typ, event, lastError string) {
		status := 500
		var b bytes.Buffer
		if err := deliveryTable(&b, []admin.Delivery{{Type: typ, Account: typ, Status: typ, Attempts: 1, LastStatus: &status, LastError: &lastError,
			CreatedAt: time.Now(), Event: json.RawMessage(event)}}); err != nil {
			t.Fatal(err)
		}
		if out := b.String(); strings.Count(out, "\n") != 2 || strings.ContainsAny(strings.ReplaceAll(out, "\n", ""), "\x1b\x7f\u202e\r\t") {
			t.Errorf("delivery table of %q, %q, %q:\n%q", typ, event, lastError, out)
		}
	})
}

package integration

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/integration/fake"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// webhookConfig is the example Caddyfile with alert deliveries tuned for
// a test: a quick poll, a short time-out and short retries.
func webhookConfig(t *testing.T) string {
	t.Helper()
	cfg := exampleCaddyfile(t)
	const marker = "\tgw {\n"
	if !strings.Contains(cfg, marker) {
		t.Fatal("the example Caddyfile has no gw block")
	}
	return strings.Replace(cfg, marker, marker+"\t\twebhooks {\n\t\t\tpoll 20ms\n\t\t\ttimeout 300ms\n\t\t\tretry_min 50ms\n\t\t\tretry_max 200ms\n\t\t}\n", 1)
}

// hookEvent is an alert as a receiver reads it.
type hookEvent struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Time      string `json:"time"`
	Account   string `json:"account"`
	KeyID     string `json:"key_id"`
	Org       string `json:"org"`
	Cap       string `json:"cap"`
	Threshold int    `json:"threshold"`
	Spend     string `json:"spend_usd"`
	Limit     string `json:"limit_usd"`
	Balance   string `json:"balance_usd"`
}

// hookReceiver is a webhook endpoint on a fixed loopback port that can be
// taken down and brought back, answering each delivery as fail says
// (0: 204; -1: no answer until the sender gives up; another status with
// the answer text). It checks every delivery's signature once its secret
// is known (setSecret) and keeps the events it accepted, in order.
type hookReceiver struct {
	t      *testing.T
	addr   string
	fail   func(attempt int, ev hookEvent) int
	answer string

	mu       sync.Mutex
	secret   string
	srv      *http.Server
	attempts int
	accepted []hookEvent
	changed  chan struct{}
}

// setSecret is the secret the deliveries from now on must be signed with.
func (r *hookReceiver) setSecret(s string) {
	r.mu.Lock()
	r.secret = s
	r.mu.Unlock()
}

func newHookReceiver(t *testing.T, secret string, fail func(attempt int, ev hookEvent) int) *hookReceiver {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &hookReceiver{t: t, addr: l.Addr().String(), secret: secret, fail: fail, changed: make(chan struct{})}
	r.serve(l)
	t.Cleanup(r.down)
	return r
}

func (r *hookReceiver) url() string { return "http://" + r.addr + "/hooks/gw" }

// serve answers on l until down.
func (r *hookReceiver) serve(l net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(r.handle)}
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	go srv.Serve(l)
}

// down closes the receiver: deliveries meet a refused connection.
func (r *hookReceiver) down() {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// up opens the receiver again on its port.
func (r *hookReceiver) up() {
	l, err := net.Listen("tcp", r.addr)
	if err != nil {
		r.t.Fatalf("reopening the receiver on %s: %v", r.addr, err)
	}
	r.serve(l)
}

func (r *hookReceiver) handle(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	secret := r.secret
	r.mu.Unlock()
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	if want := "sha256=" + hex.EncodeToString(m.Sum(nil)); secret == "" || req.Header.Get("X-Gw-Signature") != want {
		r.t.Errorf("delivery signed %q, want %q with the secret %q (body %s)", req.Header.Get("X-Gw-Signature"), want, secret, body)
	}
	var ev hookEvent
	if err := json.Unmarshal(body, &ev); err != nil {
		r.t.Errorf("delivery body %q: %v", body, err)
	}
	if req.Header.Get("X-Gw-Event") != ev.Type || req.Header.Get("X-Gw-Event-Id") != ev.ID {
		r.t.Errorf("delivery headers %v for %s", req.Header, body)
	}
	r.mu.Lock()
	r.attempts++
	status := 0
	if r.fail != nil {
		status = r.fail(r.attempts, ev)
	}
	r.mu.Unlock()
	switch status {
	case 0:
		r.mu.Lock()
		r.accepted = append(r.accepted, ev)
		close(r.changed)
		r.changed = make(chan struct{})
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	case -1:
		<-req.Context().Done()
	default:
		w.WriteHeader(status)
		io.WriteString(w, r.answer)
	}
}

// waitAccepted waits until the receiver accepted n events and returns
// them.
func (r *hookReceiver) waitAccepted(t *testing.T, n int) []hookEvent {
	t.Helper()
	deadline := time.NewTimer(20 * time.Second)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		got, changed := slices.Clone(r.accepted), r.changed
		r.mu.Unlock()
		if len(got) >= n {
			return got
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("the receiver accepted %d events in 20s, want %d: %+v", len(got), n, got)
		}
	}
}

// hookDelivery is a line of GET /gw/webhooks/{id}/deliveries.
type hookDelivery struct {
	EventID    string    `json:"event_id"`
	Type       string    `json:"type"`
	Status     string    `json:"status"`
	Attempts   int       `json:"attempts"`
	LastStatus *int      `json:"last_status"`
	LastError  *string   `json:"last_error"`
	Event      hookEvent `json:"event"`
}

// deliveries returns webhook id's delivery log, newest first.
func (g *gateway) deliveries(t *testing.T, id string) []hookDelivery {
	t.Helper()
	r := g.adminJSON(t, http.MethodGet, "/gw/webhooks/"+id+"/deliveries?limit=1000", nil, http.StatusOK)
	var l struct {
		Data []hookDelivery `json:"data"`
	}
	if err := json.Unmarshal(r.Body, &l); err != nil {
		t.Fatalf("deliveries: %s (%v)", r.Body, err)
	}
	return l.Data
}

// describe shows events as "type cap threshold spend/limit balance" lines.
func describe(evs []hookEvent) []string {
	var out []string
	for _, ev := range evs {
		out = append(out, strings.Join(strings.Fields(ev.Type+" "+ev.Cap+" "+itoa(ev.Threshold)+" "+ev.Spend+"/"+ev.Limit+" "+ev.Balance+" "+ev.KeyID), " "))
	}
	return out
}

// An account's calls cross half, 80 % and all of its daily cap and its
// low-balance mark, then its key is revoked: a receiver that fails, then
// hangs past the time-out, then is closed and reopened gets each of the
// five events, signed, once accepted, in the order they happened; the
// delivery log says each was delivered and how many attempts it took.
func TestWebhooks(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, webhookConfig(t))
	// The provider bills past the reservation (a large prompt count), so
	// a cap of five calls admits five.
	e.OA.Default = fake.Script{Text: "billed", Usage: fake.Usage{Input: 900, Output: 300}}
	const secret = "a-secret-of-sixteen-chars-or-more"
	rc := newHookReceiver(t, secret, func(attempt int, ev hookEvent) int {
		switch attempt {
		case 1:
			return http.StatusInternalServerError
		case 2:
			return -1 // past the 300 ms time-out
		}
		return 0
	})
	made := e.adminJSON(t, http.MethodPost, "/gw/webhooks", map[string]any{"url": rc.url(), "secret": secret,
		"events": []string{"cap.threshold", "balance.low", "key.revoked"}}, http.StatusCreated).JSON(t)
	hookID := made["id"].(string)

	// What one call costs, learnt on another account.
	probe := e.account(t, "probe", nil)
	r := e.do(t, http.MethodPost, "/v1/chat/completions", shortfallBody, bearer(probe)...)
	if r.Status != http.StatusOK {
		t.Fatalf("probe call: %d %s", r.Status, r.Body)
	}
	c := mustUSD(t, r.Header.Get("X-Gw-Cost-Usd"))
	usd := func(m pricing.Money) string { return m.String() }

	// A daily cap of five calls, and a low-balance mark two and a half
	// calls below the balance.
	balance := pricing.USD(1)
	low := balance - 5*c/2
	e.createAccount(t, map[string]any{"id": "alerted", "plan": "paid", "cleared": true,
		"daily_cap_usd": usd(5 * c), "balance_usd": usd(balance), "low_balance_usd": usd(low)})
	key, keyID := e.createKey(t, "alerted", map[string]any{"name": "alerted"})
	for i := range 5 {
		if r := e.do(t, http.MethodPost, "/v1/chat/completions", shortfallBody, bearer(key)...); r.Status != http.StatusOK {
			t.Fatalf("call %d: %d %s", i+1, r.Status, r.Body)
		}
	}
	if r := e.do(t, http.MethodPost, "/v1/chat/completions", shortfallBody, bearer(key)...); r.Status != http.StatusPaymentRequired ||
		r.Header.Get("X-Gw-Hold-Reason") != "daily_cap" {
		t.Fatalf("a sixth call: %d %s, want 402 daily_cap", r.Status, r.Body)
	}
	rc.waitAccepted(t, 4)

	// The receiver goes away; the key's revocation waits for it.
	rc.down()
	e.deleteKey(t, keyID)
	waitRefused(t, e.gateway, 2)
	if d := e.deliveries(t, hookID)[0]; d.Type != "key.revoked" || d.Status != "pending" || d.Attempts < 2 || *d.LastStatus != 0 ||
		!strings.Contains(*d.LastError, "connection refused") {
		t.Fatalf("the revocation's delivery while the receiver is down: %+v", d)
	}
	rc.up()
	got := rc.waitAccepted(t, 5)
	waitLogged(t, e.gateway, "webhook delivered", hookID, 5)

	want := []string{
		"cap.threshold daily_cap 50 " + usd(3*c) + "/" + usd(5*c),
		"balance.low 0 /" + usd(low) + " " + usd(balance-3*c),
		"cap.threshold daily_cap 80 " + usd(4*c) + "/" + usd(5*c),
		"cap.threshold daily_cap 100 " + usd(5*c) + "/" + usd(5*c),
		"key.revoked 0 / " + keyID,
	}
	if d := describe(got); !slices.Equal(d, want) {
		t.Fatalf("events accepted\n%s\nwant\n%s", strings.Join(d, "\n"), strings.Join(want, "\n"))
	}
	for _, ev := range got {
		if ev.Account != "alerted" || !strings.HasPrefix(ev.ID, "evt_") {
			t.Errorf("event %+v", ev)
		}
	}
	log := e.deliveries(t, hookID)
	if len(log) != 5 {
		t.Fatalf("%d deliveries logged, want 5: %+v", len(log), log)
	}
	for i, d := range log {
		ev := got[len(got)-1-i]
		if d.EventID != ev.ID || d.Status != "delivered" || d.Event != ev || *d.LastStatus != http.StatusNoContent || *d.LastError != "" {
			t.Errorf("delivery %d: %+v, want %s delivered", i, d, ev.ID)
		}
	}
	if first := log[len(log)-1]; first.Attempts != 3 {
		t.Errorf("the first event took %d attempts, want 3 (a 500, a time-out, a 204)", first.Attempts)
	}
	if last := log[0]; last.Attempts < 2 {
		t.Errorf("the revocation took %d attempts while the receiver was down, want at least 2", last.Attempts)
	}
	// Every attempt is counted: five delivered, and as many failed as
	// were logged.
	failed := 0
	for _, line := range strings.Split(e.log.String(), "\n") {
		if logMsg([]byte(line)) == "webhook delivery failed" {
			failed++
		}
	}
	m := scrape(t, e.gateway)
	if d, f := m[`gw_webhook_attempts_total{outcome="delivered"}`], m[`gw_webhook_attempts_total{outcome="failed"}`]; d != 5 || int(f) != failed || failed < 4 {
		t.Errorf("gw_webhook_attempts_total delivered %v, failed %v; want 5 and the %d failures logged (at least 4)", d, f, failed)
	}
}

// waitRefused waits until the gateway logged n failed deliveries to a
// receiver that refused the connection.
func waitRefused(t *testing.T, g *gateway, n int) {
	t.Helper()
	waitLogged(t, g, "webhook delivery failed", "connection refused", n)
}

// waitLogged waits until the gateway logged n lines of message msg that
// hold with.
func waitLogged(t *testing.T, g *gateway, msg, with string, n int) {
	t.Helper()
	g.waitLog(t, func(log string) bool {
		count := 0
		for _, line := range strings.Split(log, "\n") {
			if logMsg([]byte(line)) == msg && strings.Contains(line, with) {
				count++
			}
		}
		return count >= n
	}, itoa(n)+" lines "+msg)
}

// A gateway killed with alerts undelivered (its receiver down) delivers
// them after it starts again: the events live in the store with the
// charges that raised them.
func TestWebhooksOutliveKill(t *testing.T) {
	t.Parallel()
	e := newChatEnv(t, webhookConfig(t))
	const secret = "another-secret-of-sixteen-chars"
	rc := newHookReceiver(t, secret, nil)
	rc.down()
	made := e.adminJSON(t, http.MethodPost, "/gw/webhooks", map[string]any{"url": rc.url(), "secret": secret,
		"events": []string{"key.revoked"}}, http.StatusCreated).JSON(t)
	hookID := made["id"].(string)
	e.createAccount(t, map[string]any{"id": "revoker", "plan": "paid", "cleared": true})
	var ids []string
	for i := range 3 {
		_, id := e.createKey(t, "revoker", map[string]any{"name": "k" + itoa(i)})
		e.deleteKey(t, id)
		ids = append(ids, id)
	}
	waitRefused(t, e.gateway, 1)
	e.kill(t)
	rc.up()
	e.start(t)
	got := rc.waitAccepted(t, 3)
	waitLogged(t, e.gateway, "webhook delivered", hookID, 3)
	var keys []string
	for _, ev := range got {
		keys = append(keys, ev.KeyID)
	}
	if !slices.Equal(keys, ids) {
		t.Fatalf("revocations delivered %q, want %q in order", keys, ids)
	}
	for _, d := range e.deliveries(t, hookID) {
		if d.Status != "delivered" {
			t.Errorf("delivery %+v after the restart", d)
		}
	}
}

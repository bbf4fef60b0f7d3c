package alerts

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/internal/store/sqlite"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// got is a delivery as a receiver saw it.
type got struct {
	event     store.Event
	body      []byte
	signature string
	header    http.Header
}

// receiver is a webhook endpoint whose answer to each delivery answer
// decides (nil: 204), and which reports each one it saw.
type receiver struct {
	*httptest.Server
	seen   chan got
	mu     sync.Mutex
	answer func(n int, ev store.Event, w http.ResponseWriter, r *http.Request)
	n      int
}

func newReceiver(t *testing.T, answer func(n int, ev store.Event, w http.ResponseWriter, r *http.Request)) *receiver {
	rc := &receiver{seen: make(chan got, 100), answer: answer}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var ev store.Event
		if err := json.Unmarshal(b, &ev); err != nil {
			t.Errorf("body %q: %v", b, err)
		}
		rc.mu.Lock()
		rc.n++
		n := rc.n
		rc.mu.Unlock()
		rc.seen <- got{event: ev, body: b, signature: r.Header.Get(SignatureHeader), header: r.Header.Clone()}
		if rc.answer != nil {
			rc.answer(n, ev, w, r)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(rc.Close)
	return rc
}

// next waits for the receiver's next delivery.
func (rc *receiver) next(t *testing.T) got {
	t.Helper()
	select {
	case g := <-rc.seen:
		return g
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery within 10s")
		return got{}
	}
}

// fixture is a store with accounts a and b, and a webhook of every event
// type to url.
func fixture(t *testing.T, url string) *sqlite.DB {
	t.Helper()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := context.Background()
	if err := st.CreateWebhook(ctx, store.Webhook{ID: "wh", URL: url, Secret: "0123456789abcdef", Events: store.EventTypes}); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"a", "b"} {
		if err := st.CreateAccount(ctx, store.Account{ID: a, Plan: store.PlanPaid}); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

// revoke raises a key.revoked event of account a's key id.
func revoke(t *testing.T, st store.Store, account, id string) {
	t.Helper()
	ctx := context.Background()
	if err := st.CreateKey(ctx, store.Key{ID: id, AccountID: account, Hash: "h" + id}); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteKey(ctx, id); err != nil {
		t.Fatal(err)
	}
}

// sender is a running Sender and the attempts it recorded.
type sender struct {
	*Sender
	attempts chan store.Delivery
}

// start runs a sender over st with short waits.
func start(t *testing.T, st store.Webhooks) sender {
	return startWith(t, &Sender{Store: st, Poll: 10 * time.Millisecond, Timeout: 200 * time.Millisecond,
		RetryMin: 20 * time.Millisecond, RetryMax: 80 * time.Millisecond})
}

// startWith runs s, reporting its recorded attempts.
func startWith(t *testing.T, s *Sender) sender {
	r := sender{Sender: s, attempts: make(chan store.Delivery, 100)}
	s.OnAttempt = func(d store.Delivery) { r.attempts <- d }
	s.Start()
	t.Cleanup(s.Stop)
	return r
}

// recorded waits for the sender's next recorded attempt.
func (s sender) recorded(t *testing.T) store.Delivery {
	t.Helper()
	select {
	case d := <-s.attempts:
		return d
	case <-time.After(10 * time.Second):
		t.Fatal("no attempt recorded within 10s")
		return store.Delivery{}
	}
}

// log returns webhook wh's deliveries, oldest first, once every one is
// delivered.
func log(t *testing.T, st store.Webhooks) []store.Delivery {
	t.Helper()
	ds, err := st.Deliveries(context.Background(), "wh", 100)
	if err != nil {
		t.Fatal(err)
	}
	for i, j := 0, len(ds)-1; i < j; i, j = i+1, j-1 {
		ds[i], ds[j] = ds[j], ds[i]
	}
	return ds
}

// A delivery is the event's JSON, POSTed with its signature, type and id
// in headers; its log line says delivered after one attempt.
func TestDeliverSigned(t *testing.T) {
	rc := newReceiver(t, nil)
	st := fixture(t, rc.URL+"/hook?t=1")
	revoke(t, st, "a", "k1")
	s := start(t, st)
	g := rc.next(t)
	if g.event.Type != store.EventKeyRevoked || g.event.KeyID != "k1" || g.event.Account != "a" || !strings.HasPrefix(g.event.ID, "evt_") {
		t.Fatalf("event %s", g.body)
	}
	if want := Sign("0123456789abcdef", g.body); g.signature != want || !strings.HasPrefix(want, "sha256=") || len(want) != 7+64 {
		t.Fatalf("signature %q, want %q", g.signature, want)
	}
	if g.header.Get(EventHeader) != "key.revoked" || g.header.Get(EventIDHeader) != g.event.ID || g.header.Get("Content-Type") != "application/json" {
		t.Fatalf("headers %v", g.header)
	}
	if d := s.recorded(t); d.Delivered == nil || d.LastStatus != 204 {
		t.Fatalf("recorded %+v", d)
	}
	ds := log(t, st)
	if len(ds) != 1 || ds[0].Delivered == nil || ds[0].Attempts != 1 || ds[0].LastStatus != 204 || ds[0].LastError != "" {
		t.Fatalf("log %+v", ds)
	}
}

// The signature is HMAC-SHA256 of the body under the secret, in hex: the
// value of a published test vector.
func TestSign(t *testing.T) {
	// RFC 4231 test case 2.
	if got := Sign("Jefe", []byte("what do ya want for nothing?")); got != "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843" {
		t.Fatalf("Sign = %s", got)
	}
}

// A receiver that fails, then times out, then answers gets the event
// three times; the log keeps each failure's reason until the success.
func TestRetryUntil2xx(t *testing.T) {
	rc := newReceiver(t, func(n int, ev store.Event, w http.ResponseWriter, r *http.Request) {
		switch n {
		case 1:
			http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		case 2:
			<-r.Context().Done() // past the sender's time-out
		default:
			w.WriteHeader(http.StatusOK)
		}
	})
	st := fixture(t, rc.URL)
	revoke(t, st, "a", "k1")
	s := start(t, st)
	first, second, third := rc.next(t), rc.next(t), rc.next(t)
	if first.event.ID != second.event.ID || second.event.ID != third.event.ID || string(first.body) != string(third.body) {
		t.Fatalf("attempts carried %s, %s, %s", first.body, second.body, third.body)
	}
	for _, want := range []string{"HTTP 503: down for maintenance", "no answer within 200ms", ""} {
		if d := s.recorded(t); d.LastError != want {
			t.Fatalf("recorded %+v, want error %q", d, want)
		}
	}
	ds := log(t, st)
	if len(ds) != 1 || ds[0].Attempts != 3 || ds[0].Delivered == nil || ds[0].LastStatus != 200 {
		t.Fatalf("log %+v", ds)
	}
}

// What the log says of a failure: the receiver's status and answer, or
// that it did not answer in time.
func TestFailureRecorded(t *testing.T) {
	for _, c := range []struct {
		name   string
		answer func(n int, ev store.Event, w http.ResponseWriter, r *http.Request)
		status int
		msg    string
	}{
		{"refused", func(n int, ev store.Event, w http.ResponseWriter, r *http.Request) {
			http.Error(w, strings.Repeat("x", 1000), http.StatusInternalServerError)
		}, 500, "HTTP 500: " + strings.Repeat("x", maxAnswer)},
		{"garbled", func(n int, ev store.Event, w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusBadRequest)
			w.Write([]byte("bad\x00\xff\nbody"))
		}, 400, `HTTP 400: bad\u0000\xff\nbody`},
		{"redirected", func(n int, ev store.Event, w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/elsewhere", http.StatusFound)
		}, 302, "HTTP 302"},
		{"silent", func(n int, ev store.Event, w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }, 0, "no answer within 200ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rc := newReceiver(t, c.answer)
			st := fixture(t, rc.URL)
			revoke(t, st, "a", "k1")
			s := startWith(t, &Sender{Store: st, Poll: 10 * time.Millisecond, Timeout: 200 * time.Millisecond, RetryMin: time.Hour})
			rc.next(t)
			s.recorded(t)
			ds := log(t, st)
			if len(ds) != 1 || ds[0].Delivered != nil || ds[0].Attempts != 1 || ds[0].LastStatus != c.status || ds[0].LastError != c.msg {
				t.Fatalf("log %+v", ds)
			}
			if wait := time.Until(ds[0].NextAt); wait < 59*time.Minute || wait > time.Hour {
				t.Fatalf("next attempt in %s, want an hour", wait)
			}
		})
	}
}

// One account's events reach a webhook in their order, its later ones
// waiting while an earlier one fails; another account's do not wait.
func TestOrderPerAccount(t *testing.T) {
	var (
		mu    sync.Mutex
		tries = map[string]int{}
	)
	rc := newReceiver(t, func(n int, ev store.Event, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		tries[ev.KeyID]++
		fail := ev.KeyID == "a1" && tries[ev.KeyID] <= 2
		mu.Unlock()
		if fail {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	st := fixture(t, rc.URL)
	for _, k := range []string{"a1", "a2", "a3"} {
		revoke(t, st, "a", k)
	}
	revoke(t, st, "b", "b1")
	s := start(t, st)
	var order []string
	for range 6 {
		order = append(order, rc.next(t).event.KeyID)
		s.recorded(t)
	}
	var a []string
	for _, k := range order {
		if k != "b1" {
			a = append(a, k)
		}
	}
	if got := strings.Join(a, " "); got != "a1 a1 a1 a2 a3" {
		t.Fatalf("a's deliveries in order %q (all: %q)", got, order)
	}
	if b := slices.Index(order, "b1"); b < 0 || b > slices.Index(order, "a2") {
		t.Fatalf("b's event waited for a's: %q", order)
	}
}

// Two senders over one store (two nodes) deliver each event once.
func TestTwoSendersDeliverOnce(t *testing.T) {
	rc := newReceiver(t, nil)
	st := fixture(t, rc.URL)
	const n = 30
	for i := range n {
		revoke(t, st, []string{"a", "b"}[i%2], "k"+strconv.Itoa(i))
	}
	s1, s2 := start(t, st), start(t, st)
	seen := map[string]bool{}
	for range n {
		g := rc.next(t)
		if seen[g.event.KeyID] {
			t.Fatalf("%s delivered twice", g.event.KeyID)
		}
		seen[g.event.KeyID] = true
	}
	for range n {
		select {
		case <-s1.attempts:
		case <-s2.attempts:
		case <-time.After(10 * time.Second):
			t.Fatal("attempts unrecorded")
		}
	}
	s1.Stop()
	s2.Stop()
	if len(rc.seen) != 0 {
		t.Fatalf("%d deliveries past the %d events", len(rc.seen), n)
	}
	for _, d := range log(t, st) {
		if d.Attempts != 1 || d.Delivered == nil {
			t.Fatalf("delivery %+v", d)
		}
	}
}

// A sender stopped with deliveries pending leaves them in the outbox; the
// next one sends them, in order.
func TestPendingOutlivesSender(t *testing.T) {
	var (
		mu   sync.Mutex
		down = true
	)
	rc := newReceiver(t, func(n int, ev store.Event, w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if down {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	st := fixture(t, rc.URL)
	limit := pricing.USD(1)
	if _, err := st.UpdateAccount(context.Background(), "a", func(a *store.Account) error { a.DailyCap = &limit; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Settle(context.Background(), &store.Entry{RequestID: "r1", AccountID: "a", Cost: limit}); err != nil {
		t.Fatal(err)
	}
	s := start(t, st)
	for range 2 { // 50, 80 and 100 %: the first is tried again and again, the others wait
		if g := rc.next(t); g.event.Threshold != 50 {
			t.Fatalf("tried %s first", g.body)
		}
		s.recorded(t)
	}
	s.Stop()
	for len(rc.seen) > 0 {
		if g := <-rc.seen; g.event.Threshold != 50 {
			t.Fatalf("tried %s while 50 %% failed", g.body)
		}
	}
	mu.Lock()
	down = false
	mu.Unlock()
	start(t, st)
	var th []int
	for len(th) < 3 {
		th = append(th, rc.next(t).event.Threshold)
	}
	if !slices.Equal(th, []int{50, 80, 100}) {
		t.Fatalf("thresholds delivered in order %v", th)
	}
}

// Backoff doubles from RetryMin up to RetryMax.
func TestBackoff(t *testing.T) {
	s := &Sender{RetryMin: time.Second, RetryMax: 10 * time.Second}
	var got []time.Duration
	for a := 1; a <= 6; a++ {
		got = append(got, s.Backoff(a))
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("backoffs %v, want %v", got, want)
		}
	}
}

// Stopping a sender cuts its attempt under way short: the delivery is due
// again at once, and the next sender delivers it.
func TestStopCutsAttempt(t *testing.T) {
	hang := make(chan struct{})
	rc := newReceiver(t, func(n int, ev store.Event, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			<-r.Context().Done()
			close(hang)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	st := fixture(t, rc.URL)
	revoke(t, st, "a", "k1")
	s := startWith(t, &Sender{Store: st, Poll: 10 * time.Millisecond, Timeout: time.Hour})
	rc.next(t)
	s.Stop()
	<-hang
	d := s.recorded(t)
	if d.Delivered != nil || d.LastError != "the sender stopped before an answer" || d.NextAt.After(time.Now()) {
		t.Fatalf("recorded %+v", d)
	}
	s2 := start(t, st)
	rc.next(t)
	if d := s2.recorded(t); d.Delivered == nil || d.Attempts != 2 {
		t.Fatalf("delivered %+v", d)
	}
}

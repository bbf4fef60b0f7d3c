package upstream

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/obs"
)

// budgetTimeout is the header and idle time-out of the providers of these
// tests: short, so that each time-out costs the tests little.
const budgetTimeout = 100 * time.Millisecond

// server is a test provider that counts the requests it got.
type server struct {
	URL  string
	hits atomic.Int64
}

// newServer starts a server whose handler h runs after the body was read.
func newServer(t *testing.T, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		s.hits.Add(1)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	s.URL = srv.URL + "/v1"
	return s
}

// silent answers nothing until the gateway gives up.
func silent(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }

// failing answers 500.
func failing(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusInternalServerError) }

// answering answers a small JSON body.
func answering(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, `{}`) }

// named is provider name of a catalogue with deployments at urls, whose
// header and idle time-outs are budgetTimeout.
func named(t *testing.T, name string, urls ...string) *catalog.Provider {
	t.Helper()
	var deps []catalog.Deployment
	for _, u := range urls {
		deps = append(deps, catalog.Deployment{BaseURL: u})
	}
	cat, err := catalog.New([]catalog.Provider{{Name: name, Format: catalog.FormatOpenAI, APIKey: "k", Deployments: deps,
		DialTimeout: time.Second, HeaderTimeout: budgetTimeout, IdleTimeout: budgetTimeout}}, nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	return cat.Providers[name]
}

// count is how many of list are want.
func count(list []string, want string) int {
	n := 0
	for _, s := range list {
		if s == want {
			n++
		}
	}
	return n
}

// The time-outs are a budget of the client's call, not of one Do: a call
// whose first provider timed out once waits out one more attempt on the
// next provider (its fast failures aside), and once two are spent no
// request is sent, to any provider, from this call or a call made inside
// it; the caller gets a time-out that no other model may follow. Each
// attempt that timed out after its request was sent is unpaid; a 500 is
// not.
func TestTimeoutBudgetSpansCalls(t *testing.T) {
	slowX, slowY1, slowY2 := newServer(t, silent), newServer(t, silent), newServer(t, silent)
	bad, good := newServer(t, failing), newServer(t, answering)
	c := New()
	var f failures
	rec := f.record()
	ctx := obs.With(context.Background(), rec)
	req := func(p *catalog.Provider) Request { return Request{Provider: p, Path: PathChat, Body: []byte(`{}`)} }

	_, err := c.Do(ctx, req(named(t, "x", slowX.URL)))
	if gwerr.As(err).Kind != gwerr.Timeout || !Retryable(err) || rec.Timeouts() != 1 || TimeoutsSpent(ctx) {
		t.Fatalf("first provider: %v, %d time-outs spent; want a retryable time-out, 1 spent", err, rec.Timeouts())
	}

	_, err = c.Do(ctx, req(named(t, "y", slowY1.URL, bad.URL, slowY2.URL)))
	if gwerr.As(err).Kind != gwerr.Timeout || rec.Timeouts() != 2 || !TimeoutsSpent(ctx) {
		t.Fatalf("second provider: %v, %d time-outs spent; want a time-out, 2 spent", err, rec.Timeouts())
	}
	if n := slowY1.hits.Load() + slowY2.hits.Load(); n != 1 {
		t.Fatalf("the second provider's slow deployments got %d requests, want 1 (one time-out was left)", n)
	}

	inner := &obs.Record{Parent: rec} // a call made inside this one
	_, err = c.Do(obs.With(context.Background(), inner), req(named(t, "z", good.URL)))
	if gwerr.As(err).Kind != gwerr.Timeout || Retryable(err) || good.hits.Load() != 0 {
		t.Fatalf("once spent: %v and %d requests sent; want a time-out no model may follow, nothing sent", err, good.hits.Load())
	}

	failed, unbilled := f.reported()
	if count(failed, "x/timeout") != 1 || count(failed, "y/timeout") != 1 || count(failed, "y/status_5xx") != int(bad.hits.Load()) ||
		len(failed) != 2+int(bad.hits.Load()) {
		t.Errorf("failures %v, want one time-out each of x and y, and the 500s (%d)", failed, bad.hits.Load())
	}
	if want := []string{"x/timeout", "y/timeout"}; !slices.Equal(unbilled, want) {
		t.Errorf("unpaid %v, want %v", unbilled, want)
	}
}

// A call outside the pipeline (no record in its context) has a budget of
// its own for each Do.
func TestTimeoutBudgetWithoutRecord(t *testing.T) {
	slow := []*server{newServer(t, silent), newServer(t, silent), newServer(t, silent)}
	p := named(t, "p", slow[0].URL, slow[1].URL, slow[2].URL)
	c := New()
	for call := 1; call <= 2; call++ {
		_, err := c.Do(context.Background(), Request{Provider: p, Path: PathChat, Body: []byte(`{}`)})
		if n := slow[0].hits.Load() + slow[1].hits.Load() + slow[2].hits.Load(); gwerr.As(err).Kind != gwerr.Timeout || n != int64(call*MaxTimeouts) {
			t.Fatalf("call %d: %v after %d requests in all, want a time-out after %d", call, err, n, call*MaxTimeouts)
		}
	}
}

// Each way an attempt ends is reported as a failure and, when the provider
// may bill it and the caller did not pay for it, as unpaid, with its
// reason; time-outs count against the call's budget.
func TestUnbilledAttempts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch r.URL.Path {
		case "/v1/slow":
			<-r.Context().Done()
		case "/v1/500":
			w.WriteHeader(http.StatusInternalServerError)
		case "/v1/cut":
			w.Header().Set("Content-Length", "100")
			_, _ = w.Write([]byte("partial"))
		case "/v1/stall":
			w.WriteHeader(http.StatusOK)
			http.NewResponseController(w).Flush()
			<-r.Context().Done()
		default:
			_, _ = io.WriteString(w, `{"ok":true}`)
		}
	}))
	defer srv.Close()
	p := named(t, "p", srv.URL+"/v1")
	// whenSent cancels ctx once the request was written whole (a hook
	// of the test's own, run after the client's).
	whenSent := func(ctx context.Context, cancel context.CancelFunc) context.Context {
		return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { cancel() }})
	}
	readAll := func(resp *http.Response) { _, _ = io.ReadAll(resp.Body) }
	for _, tc := range []struct {
		name, path string
		// client, when set, changes the call's context.
		client func(ctx context.Context, cancel context.CancelFunc) context.Context
		// then is done with the answer (nil: the call fails).
		then             func(resp *http.Response)
		failed, unbilled []string
		timeouts         int
	}{
		{name: "header time-out", path: "/slow", failed: []string{"p/timeout"}, unbilled: []string{"p/timeout"}, timeouts: 1},
		{name: "provider error", path: "/500", failed: []string{"p/status_5xx"}},
		{name: "client left after sending", path: "/slow", client: whenSent, unbilled: []string{"p/client_left"}},
		{name: "answer cut", path: "/cut", then: readAll, failed: []string{"p/cut"}, unbilled: []string{"p/cut"}},
		{name: "answer silent past the idle time-out", path: "/stall", then: readAll, failed: []string{"p/timeout"}, unbilled: []string{"p/timeout"}, timeouts: 1},
		{name: "answer empty", path: "/ok", then: func(resp *http.Response) { readAll(resp); Empty(resp.Body) }, failed: []string{"p/cut"}, unbilled: []string{"p/empty"}},
		{name: "answer broken", path: "/ok", then: func(resp *http.Response) { Broke(resp.Body); Broke(resp.Body) }, failed: []string{"p/cut"}, unbilled: []string{"p/cut"}},
		{name: "answer paid, then broken", path: "/ok", then: func(resp *http.Response) { Paid(resp.Body); Broke(resp.Body) }, failed: []string{"p/cut"}},
		{name: "answer stalled by the caller's clock", path: "/ok", then: func(resp *http.Response) { Stalled(resp.Body) }, failed: []string{"p/timeout"}, unbilled: []string{"p/timeout"}, timeouts: 1},
		{name: "answer served", path: "/ok", then: readAll},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var f failures
			rec := f.record()
			ctx, cancel := context.WithCancel(obs.With(context.Background(), rec))
			defer cancel()
			if tc.client != nil {
				ctx = tc.client(ctx, cancel)
			}
			resp, err := New().Do(ctx, Request{Provider: p, Path: tc.path, Body: []byte(`{"model":"m"}`)})
			if (err == nil) != (tc.then != nil) {
				t.Fatalf("Do: %v", err)
			}
			if err == nil {
				tc.then(resp)
				resp.Body.Close()
				Broke(resp.Body) // closed by the gateway: nothing more
			}
			failed, unbilled := f.reported()
			if !slices.Equal(failed, tc.failed) || !slices.Equal(unbilled, tc.unbilled) || rec.Timeouts() != tc.timeouts {
				t.Errorf("failed %v, unpaid %v, %d time-outs; want %v, %v, %d", failed, unbilled, rec.Timeouts(), tc.failed, tc.unbilled, tc.timeouts)
			}
		})
	}

	// A begun answer whose call's context was cancelled while it was read:
	// the client's leaving, counted when the body is closed, unless the
	// caller says its own clock cancelled it (Stalled).
	for _, stalled := range []bool{false, true} {
		var f failures
		rec := f.record()
		ctx, cancel := context.WithCancel(obs.With(context.Background(), rec))
		resp, err := New().Do(ctx, Request{Provider: p, Path: "/stall", Body: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		if _, err := io.ReadAll(resp.Body); !errors.Is(err, context.Canceled) {
			t.Fatalf("reading after the context ended: %v", err)
		}
		Broke(resp.Body)
		if failed, unbilled := f.reported(); len(failed)+len(unbilled) != 0 {
			t.Errorf("before Close: failed %v, unpaid %v; want nothing yet", failed, unbilled)
		}
		if stalled {
			Stalled(resp.Body)
		}
		resp.Body.Close()
		wantFailed, wantUnbilled, timeouts := []string(nil), []string{"p/client_left"}, 0
		if stalled {
			wantFailed, wantUnbilled, timeouts = []string{"p/timeout"}, []string{"p/timeout"}, 1
		}
		if failed, unbilled := f.reported(); !slices.Equal(failed, wantFailed) || !slices.Equal(unbilled, wantUnbilled) || rec.Timeouts() != timeouts {
			t.Errorf("stalled=%t: failed %v, unpaid %v, %d time-outs; want %v, %v, %d", stalled, failed, unbilled, rec.Timeouts(), wantFailed, wantUnbilled, timeouts)
		}
	}
}

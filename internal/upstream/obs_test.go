package upstream

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/obs"
)

// failures collects the failed attempts a call's record is told of (got)
// and the unpaid ones (unbilled).
type failures struct {
	mu            sync.Mutex
	got, unbilled []string
}

func (f *failures) record() *obs.Record {
	return &obs.Record{Reporter: obs.Funcs{
		Failed: func(provider, reason string) {
			f.mu.Lock()
			f.got = append(f.got, provider+"/"+reason)
			f.mu.Unlock()
		},
		Unbilled: func(provider, reason string) {
			f.mu.Lock()
			f.unbilled = append(f.unbilled, provider+"/"+reason)
			f.mu.Unlock()
		},
	}}
}

// reported is what f was told of so far.
func (f *failures) reported() (failed, unbilled []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.got), slices.Clone(f.unbilled)
}

// TestAttemptFailuresReported: each failed attempt reaches the call's
// record once, with its reason; a success, a client that left and a
// body the gateway closed report nothing; the time waited is recorded.
func TestAttemptFailuresReported(t *testing.T) {
	statuses := map[string]int{"/400": 400, "/404": 404, "/429": 429, "/500": 500, "/529": 529, "/ok": 200}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/cut" {
			w.Header().Set("Content-Length", "100")
			_, _ = w.Write([]byte("partial"))
			return // the connection ends short of its length
		}
		w.WriteHeader(statuses[r.URL.Path])
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	c := New()
	p := provider(catalog.FormatOpenAI, srv.URL)
	for path, want := range map[string][]string{
		"/400": {"p/status_4xx"}, "/404": {"p/status_4xx"}, "/429": {"p/status_429"},
		"/500": {"p/status_5xx"}, "/529": {"p/status_5xx"}, "/ok": nil, "/cut": {"p/cut"},
	} {
		var f failures
		rec := f.record()
		resp, err := c.Do(obs.With(context.Background(), rec), Request{Provider: p, Path: path})
		if err == nil {
			if _, err := io.ReadAll(resp.Body); err != nil {
				Broke(resp.Body) // the read reported it already: still once
			}
			resp.Body.Close()
		}
		if !slices.Equal(f.got, want) {
			t.Errorf("%s: reported %v, want %v", path, f.got, want)
		}
		if rec.Upstream() <= 0 {
			t.Errorf("%s: no upstream time recorded", path)
		}
	}

	// A body closed by the gateway, then reported broken: nothing.
	var f failures
	resp, err := c.Do(obs.With(context.Background(), f.record()), Request{Provider: p, Path: "/ok"})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	Broke(resp.Body)
	if len(f.got) != 0 {
		t.Errorf("a closed body reported %v", f.got)
	}

	// A client that left before the provider answered: nothing.
	ctx, cancel := context.WithCancel(obs.With(context.Background(), f.record()))
	cancel()
	if _, err := c.Do(ctx, Request{Provider: p, Path: "/ok"}); err == nil {
		t.Fatal("a cancelled call succeeded")
	}
	if len(f.got) != 0 {
		t.Errorf("a cancelled call reported %v", f.got)
	}
}

// TestConnectFailureReported: a provider that cannot be reached is a
// connect failure, and no unpaid attempt (it got no request).
func TestConnectFailureReported(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	p := &catalog.Provider{Name: "gone", Format: catalog.FormatOpenAI, BaseURL: "http://" + addr,
		DialTimeout: time.Second, HeaderTimeout: time.Second}
	var f failures
	if _, err := New().Do(obs.With(context.Background(), f.record()), Request{Provider: p, Path: "/x"}); err == nil {
		t.Fatal("a call to a closed port succeeded")
	}
	if !slices.Equal(f.got, []string{"gone/connect"}) || len(f.unbilled) != 0 {
		t.Errorf("reported %v, unpaid %v; want [gone/connect] and none (nothing was sent)", f.got, f.unbilled)
	}
}

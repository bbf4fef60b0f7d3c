package caddymodule

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/routes"
)

// unstarted is an App as Provision leaves it: not started yet.
func unstarted() *App {
	return &App{started: make(chan struct{}), startOnce: new(sync.Once), inflight: newInflight()}
}

// A request that reaches the gw handler before its app has started (Caddy
// starts apps in no fixed order) waits for the start, then is served.
func TestHandlerWaitsForStart(t *testing.T) {
	a := unstarted()
	h := &Handler{app: a}
	reached := make(chan struct{})
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { close(reached); return nil })
	served := make(chan error)
	go func() {
		served <- h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/elsewhere", nil), next)
	}()
	select {
	case <-served:
		t.Fatal("served before the app started")
	default:
	}
	a.router = routes.New(&pipeline.Gateway{}, routes.Options{})
	a.markStarted()
	if err := <-served; err != nil {
		t.Fatal(err)
	}
	select {
	case <-reached:
	default:
		t.Fatal("a path that is not the gateway's did not go to the next handler")
	}
}

// A config cleaned up without starting (its start failed, or another
// app's did) answers what waited with 503.
func TestHandlerOfUnstartedConfig(t *testing.T) {
	a := unstarted()
	h := &Handler{app: a}
	if err := a.Cleanup(); err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	next := caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { t.Error("went to the next handler"); return nil })
	if err := h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/models", nil), next); err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503", rec.Code)
	}
}

// An own path that is not a route goes to the next handler; what it
// serves goes out as written, and a 404 (written or returned) or no
// answer at all becomes the gateway's 404, without the next handler's
// headers.
func TestServeOrNotFound(t *testing.T) {
	const gateway404 = `{"error":"gateway 404"}`
	for _, tc := range []struct {
		name       string
		next       caddyhttp.HandlerFunc
		status     int
		body       string
		wantErr    bool
		wantHeader string
	}{
		{"served", func(w http.ResponseWriter, _ *http.Request) error {
			w.Header().Set("X-Next", "1")
			_, err := w.Write([]byte("file"))
			return err
		}, http.StatusOK, "file", false, "1"},
		{"refused", func(w http.ResponseWriter, _ *http.Request) error {
			w.WriteHeader(http.StatusForbidden)
			return nil
		}, http.StatusForbidden, "", false, ""},
		{"written 404", func(w http.ResponseWriter, _ *http.Request) error {
			w.Header().Set("X-Next", "1")
			w.WriteHeader(http.StatusNotFound)
			_, err := w.Write([]byte("Not Found"))
			return err
		}, http.StatusNotFound, gateway404, false, ""},
		{"returned 404", func(http.ResponseWriter, *http.Request) error {
			return caddyhttp.Error(http.StatusNotFound, nil)
		}, http.StatusNotFound, gateway404, false, ""},
		{"nothing", func(http.ResponseWriter, *http.Request) error { return nil }, http.StatusNotFound, gateway404, false, ""},
		{"returned 500", func(http.ResponseWriter, *http.Request) error {
			return caddyhttp.Error(http.StatusInternalServerError, nil)
		}, http.StatusOK, "", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			notFound := func() {
				rec.Header().Set("Content-Type", "application/json")
				rec.WriteHeader(http.StatusNotFound)
				rec.WriteString(gateway404)
			}
			err := serveOrNotFound(rec, httptest.NewRequest(http.MethodGet, "/images/logo.png", nil), tc.next, notFound)
			if (err != nil) != tc.wantErr || rec.Code != tc.status || rec.Body.String() != tc.body || rec.Header().Get("X-Next") != tc.wantHeader {
				t.Fatalf("got %v, %d %q (X-Next %q); want error %v, %d %q (X-Next %q)", err, rec.Code, rec.Body, rec.Header().Get("X-Next"),
					tc.wantErr, tc.status, tc.body, tc.wantHeader)
			}
		})
	}
}

// A family handler serves its own family's paths only; the next handler
// runs outside the config's count of requests in flight (a proxied stream
// beside the gateway never holds a reload's clean-up); and a config that
// is not running answers 503 for the gateway's own paths only.
func TestFamilyHandler(t *testing.T) {
	a := unstarted()
	a.router = routes.New(&pipeline.Gateway{}, routes.Options{})
	a.markStarted()
	h := &Handler{app: a, family: routes.Models, hosts: new(siteHosts)}
	var inFlight int
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) error {
		a.inflight.mu.Lock()
		inFlight = a.inflight.n
		a.inflight.mu.Unlock()
		w.WriteHeader(http.StatusTeapot)
		return nil
	})
	for _, tc := range []struct {
		path   string
		status int
	}{
		{"/v1/chat/completions", http.StatusTeapot}, // another family's
		{"/v1/unknown", http.StatusTeapot},          // no family's: no gateway 404 from a family handler
		{"/elsewhere", http.StatusTeapot},
	} {
		rec := httptest.NewRecorder()
		inFlight = -1
		if err := h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, tc.path, nil), next); err != nil || rec.Code != tc.status || inFlight != 0 {
			t.Errorf("%s: %v, %d (in flight in next: %d), want %d with none in flight", tc.path, err, rec.Code, inFlight, tc.status)
		}
	}
	stopped := unstarted()
	if err := stopped.Cleanup(); err != nil {
		t.Fatal(err)
	}
	h = &Handler{app: stopped, family: routes.Models, hosts: new(siteHosts)}
	for path, status := range map[string]int{"/v1/models": http.StatusServiceUnavailable, "/elsewhere": http.StatusTeapot} {
		rec := httptest.NewRecorder()
		if err := h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil), next); err != nil || rec.Code != status {
			t.Errorf("not running, %s: %v, %d, want %d", path, err, rec.Code, status)
		}
	}
}

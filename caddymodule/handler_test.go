package caddymodule

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/routes"
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

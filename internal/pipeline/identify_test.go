package pipeline_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/store"
)

// TestIdentify: the call's identity reaches Identify once its key is
// checked, before the handler runs (so a header the host writes with the
// answer can use it), a refused key's with no account, and a call made
// inside another (Invoke) leaves the outer call's identity alone.
func TestIdentify(t *testing.T) {
	f := newFixture(t, store.Account{Plan: store.PlanPaid, Cleared: true})
	var seen []pipeline.Annotation
	f.gw.Identify = func(_ context.Context, a *pipeline.Annotation) { seen = append(seen, *a) }
	var atHandler int
	outer := &pipeline.Endpoint{Name: "outer", Methods: []string{http.MethodPost}, Family: gwerr.Chat,
		Handler: func(c *pipeline.Call) error {
			atHandler = len(seen)
			inner := httptest.NewRequestWithContext(c.R.Context(), http.MethodPost, "/test", nil)
			inner.Header.Set("Authorization", "Bearer "+f.key)
			if rec, refused := c.Gateway.Invoke(inner, f.ep); refused != nil || rec.Status != http.StatusOK {
				t.Errorf("inner call: %+v, %v", rec, refused)
			}
			c.W.WriteHeader(http.StatusNoContent)
			return nil
		}}
	r := httptest.NewRequest(http.MethodPost, "/outer", nil)
	r.Header.Set("Authorization", "Bearer "+f.key)
	w := httptest.NewRecorder()
	f.gw.Serve(w, r, outer)
	if w.Code != http.StatusNoContent {
		t.Fatalf("outer call: %d %s", w.Code, w.Body)
	}
	want := pipeline.Annotation{RequestID: w.Header().Get(pipeline.HeaderRequestID), Account: "a", KeyID: "k"}
	if len(seen) != 1 || seen[0] != want || atHandler != 1 {
		t.Errorf("Identify saw %+v (%d before the handler), want only %+v, before it", seen, atHandler, want)
	}

	seen = nil
	r = httptest.NewRequest(http.MethodPost, "/test", nil)
	r.Header.Set("Authorization", "Bearer sk-unknown")
	w = httptest.NewRecorder()
	f.gw.Serve(w, r, f.ep)
	want = pipeline.Annotation{RequestID: w.Header().Get(pipeline.HeaderRequestID)}
	if w.Code != http.StatusUnauthorized || len(seen) != 1 || seen[0] != want {
		t.Errorf("refused key: %d, Identify saw %+v, want %+v", w.Code, seen, want)
	}
}

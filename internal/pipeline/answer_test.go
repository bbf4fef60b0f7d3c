package pipeline_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/store"
)

// TestWholeAnswerLeavesFirst: an answer written whole (its length set and
// written in full) is flushed to the client when the pipeline is done with
// the call, after it was counted and its log fields set (Annotate), not
// before; one of unknown length, or whose length a wrapper took away, is
// left to net/http, which sends it whole at the end instead of chunked; a
// refusal is whole too.
func TestWholeAnswerLeavesFirst(t *testing.T) {
	f := newFixture(t, store.Account{Plan: store.PlanPaid, Cleared: true})
	body := []byte(`{"ok":true}`)
	for _, tc := range []struct {
		name    string
		handler func(c *pipeline.Call) error
		status  int
		flushed bool
		length  string
	}{
		{"whole", func(c *pipeline.Call) error {
			pipeline.WriteWhole(c.W, http.StatusOK, "application/json", body)
			return nil
		}, http.StatusOK, true, strconv.Itoa(len(body))},
		{"json", func(c *pipeline.Call) error {
			return pipeline.WriteJSON(c.W, http.StatusCreated, map[string]bool{"ok": true})
		}, http.StatusCreated, true, strconv.Itoa(len(body) + 1)},
		{"unknown length", func(c *pipeline.Call) error {
			c.W.WriteHeader(http.StatusOK)
			_, _ = c.W.Write(body)
			return nil
		}, http.StatusOK, false, ""},
		{"length taken away", func(c *pipeline.Call) error {
			h := c.W.Header()
			h.Set("Content-Length", strconv.Itoa(len(body)))
			h.Del("Content-Length") // as Caddy's encode does when it compresses
			c.W.WriteHeader(http.StatusOK)
			_, _ = c.W.Write(body)
			return nil
		}, http.StatusOK, false, ""},
		{"cut short", func(c *pipeline.Call) error {
			c.W.Header().Set("Content-Length", strconv.Itoa(len(body)))
			c.W.WriteHeader(http.StatusOK)
			_, _ = c.W.Write(body[:3])
			return nil
		}, http.StatusOK, false, strconv.Itoa(len(body))},
		{"refusal", func(c *pipeline.Call) error {
			return gwerr.New(gwerr.Invalid, "no")
		}, http.StatusBadRequest, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			flushedAtLog := false
			f.gw.Annotate = func(context.Context, *pipeline.Annotation) { flushedAtLog = w.Flushed }
			ep := &pipeline.Endpoint{Name: "whole", Methods: []string{http.MethodPost}, Family: gwerr.Chat, Handler: tc.handler}
			r := httptest.NewRequest(http.MethodPost, "/whole", nil)
			r.Header.Set("Authorization", "Bearer "+f.key)
			f.gw.Serve(w, r, ep)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			if flushedAtLog {
				t.Error("flushed before the call was counted and its log fields set")
			}
			if w.Flushed != tc.flushed {
				t.Errorf("flushed when the pipeline was done: %v, want %v", w.Flushed, tc.flushed)
			}
			got := w.Header().Get("Content-Length")
			if tc.name == "refusal" {
				tc.length = strconv.Itoa(w.Body.Len())
			}
			if got != tc.length {
				t.Errorf("Content-Length %q, want %q", got, tc.length)
			}
		})
	}
}

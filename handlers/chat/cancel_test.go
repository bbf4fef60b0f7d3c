package chat

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/gwtest"
	"github.com/caddy-gw/caddy-gw/internal/lanes"
	"github.com/caddy-gw/caddy-gw/internal/money"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/internal/upstream"
)

// TestClientCancelIsNotAModelFailure: clients that give up while a stream
// is starting (the provider's headers came, no content yet) cancel the
// upstream call, and their cancellations never mark the model unhealthy
// (which would move traffic to dearer models).
func TestClientCancelIsNotAModelFailure(t *testing.T) {
	arrived := make(chan struct{}, 1)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // the server sees a closed connection only once the body is read
		// A stream that starts (headers out) and then sends nothing until
		// the gateway gives up.
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		http.NewResponseController(w).Flush()
		arrived <- struct{}{}
		<-r.Context().Done()
	}))
	defer slow.Close()
	cat, err := catalog.New([]catalog.Provider{{Name: "o", Format: "openai", BaseURL: slow.URL + "/v1", HeaderTimeout: time.Minute}},
		[]catalog.Model{{ID: "m-fast", Provider: "o", Lane: "fast"}, {ID: "m-std", Provider: "o", Lane: "standard"}}, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	gw := gwtest.New(t, gwtest.Options{Catalog: cat}).Gateway
	ctx := context.Background()
	health := lanes.NewHealth()
	h := &Handler{Picker: &lanes.Picker{Catalog: cat, Health: health}, Upstream: upstream.New()}
	chatSpend := money.Chat
	ep := &pipeline.Endpoint{Name: "chat", Family: gwerr.Chat, Billing: &chatSpend}
	for i := range lanes.DefaultFailThreshold + 1 {
		cctx, cancel := context.WithCancel(ctx)
		r := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(`{"model":"gw-fast","stream":true,"messages":[{"role":"user","content":"hi"}]}`)).WithContext(cctx)
		c := &pipeline.Call{W: httptest.NewRecorder(), R: r, Endpoint: ep, RequestID: "r", Account: store.Account{ID: "a", Plan: store.PlanPaid, Cleared: true}, Gateway: gw}
		go func() { <-arrived; cancel() }()
		err := h.ChatCompletions(c)
		c.Release()
		if gwerr.As(err).Kind != gwerr.Unavailable {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if !health.Healthy("m-fast") {
		t.Fatal("client cancellations marked the model unhealthy")
	}
}

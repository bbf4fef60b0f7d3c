package search

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/gwtest"
	"github.com/caddy-gw/caddy-gw/internal/money"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/internal/store/storetest"
	"github.com/caddy-gw/caddy-gw/internal/upstream"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// The rows the fake provider cannot show through the built gateway: no
// usage to price, a charge that cannot be recorded, and no answer in time;
// each a 502 with its code, and nothing billed.
func TestServeFailures(t *testing.T) {
	answer := `{"status":"completed","output":[{"type":"web_search_call"},{"type":"message","content":[{"type":"output_text","text":"A","annotations":[]}]}]%s}`
	var body string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(up.Close)
	balance := pricing.USD(1)
	fx := gwtest.New(t, gwtest.Options{Faulty: true, Account: store.Account{Plan: store.PlanPaid, Cleared: true, Balance: &balance}})
	st, secret, gw := fx.Faulty, fx.Key, fx.Gateway
	st.Fail = storetest.OpSettle
	p := &catalog.Provider{Name: "s", Format: catalog.FormatOpenAI, BaseURL: up.URL + "/v1", DialTimeout: time.Second,
		HeaderTimeout: time.Minute, IdleTimeout: time.Minute}
	h := &Handler{Upstream: upstream.New(), Provider: p, Model: "m", PerSearch: pricing.Micro(25_000)}
	kind := money.Ability
	ep := &pipeline.Endpoint{Name: "search", Family: gwerr.Ability, Billing: &kind, Handler: h.Serve}
	call := func(timeout time.Duration) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/v1/search", strings.NewReader(`{"query":"q"}`))
		r.Header.Set("Authorization", "Bearer "+secret)
		c, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		w := httptest.NewRecorder()
		gw.Serve(w, r.WithContext(c), ep)
		return w
	}
	body = strings.Replace(answer, "%s", "", 1)
	if w := call(time.Minute); w.Code != 502 || gjson.Get(w.Body.String(), "error.code").String() != CodeUsageUnavailable {
		t.Fatalf("no usage: %d %s", w.Code, w.Body)
	}
	body = strings.Replace(answer, "%s", `,"usage":{"input_tokens":5,"output_tokens":2}`, 1)
	st.Down.Store(true)
	if w := call(time.Minute); w.Code != 502 || gjson.Get(w.Body.String(), "error.code").String() != CodeSettlementUnavailable {
		t.Fatalf("settlement down: %d %s", w.Code, w.Body)
	}
	st.Down.Store(false)

	// A provider that accepts the connection and never answers: after the
	// time-out (30 s by default, shortened here) a 502, unbilled.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { silent.Close() })
	go func() {
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { conn.Close() })
		}
	}()
	p.BaseURL = "http://" + silent.Addr().String() + "/v1"
	h.Timeout = 300 * time.Millisecond
	if w := call(time.Minute); w.Code != 502 || gjson.Get(w.Body.String(), "error.code").String() != CodeCapabilityUnavailable {
		t.Fatalf("no answer in time: %d %s", w.Code, w.Body)
	}
	if e, _ := fx.DB.Entries(context.Background(), "a", 10); len(e) != 0 {
		t.Fatalf("failures billed: %+v", e)
	}
}

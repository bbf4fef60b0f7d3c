package pipeline_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/gwtest"
	"github.com/caddy-gw/caddy-gw/internal/limits"
	"github.com/caddy-gw/caddy-gw/internal/money"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/internal/store/storetest"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// callCost is what the test endpoint charges per call.
var callCost = pricing.Cost(false, pricing.Line{Units: 1234, Rate: pricing.PerMillion(3 * pricing.NanoPerUSD)},
	pricing.Line{Units: 567, Rate: pricing.PerMillion(15 * pricing.NanoPerUSD)})

// billedEndpoint reserves the cost, does its work, settles it and sends
// the receipt headers.
func billedEndpoint() *pipeline.Endpoint {
	chat := money.Chat
	return &pipeline.Endpoint{Name: "test", Methods: []string{http.MethodPost}, Family: gwerr.Chat, Billing: &chat,
		Handler: func(c *pipeline.Call) error {
			if err := c.Reserve(callCost); err != nil {
				return err
			}
			if _, err := c.Charge(pipeline.Bill{Units: 1801, Unit: pricing.UnitToken, Model: "m", Cost: callCost, Receipt: pipeline.AbilityReceipt}); err != nil {
				return err
			}
			c.W.WriteHeader(http.StatusOK)
			return nil
		}}
}

type fixture struct {
	fx    *gwtest.Fixture
	gw    *pipeline.Gateway
	store *storetest.Faulty
	ep    *pipeline.Endpoint
	key   string
}

func newFixture(t *testing.T, acc store.Account) *fixture {
	t.Helper()
	acc.ID = "a"
	fx := gwtest.New(t, gwtest.Options{Account: acc, Faulty: true})
	return &fixture{fx: fx, store: fx.Faulty, ep: billedEndpoint(), gw: fx.Gateway, key: fx.Key}
}

func (f *fixture) call() *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/test", nil)
	r.Header.Set("Authorization", "Bearer "+f.key)
	w := httptest.NewRecorder()
	f.gw.Serve(w, r, f.ep)
	return w
}

func (f *fixture) ledger(t *testing.T) (sum pricing.Money, n int) {
	t.Helper()
	entries, err := f.store.Entries(context.Background(), "a", 1000)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		sum += e.Cost
	}
	return sum, len(entries)
}

// held is what the money locks hold for scope.
func (f *fixture) held(t *testing.T, scope string) pricing.Money {
	t.Helper()
	var held [1]pricing.Money
	if err := f.gw.Money.Locks.Held(context.Background(), []string{scope}, held[:]); err != nil {
		t.Fatal(err)
	}
	return held[0]
}

func errorCode(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var b struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
		t.Fatalf("body %q: %v", w.Body, err)
	}
	return b.Error.Code
}

// TestParallelBilledCalls: N parallel calls against a balance that covers
// k of them: exactly k succeed, the balance never goes below zero, and the
// ledger's sum equals the sum of the receipts.
func TestParallelBilledCalls(t *testing.T) {
	const n, k = 48, 11
	balance := callCost*k + callCost/2 // k calls fit, the (k+1)th does not
	f := newFixture(t, store.Account{Plan: store.PlanPaid, Cleared: true, Balance: &balance})
	var mu sync.Mutex
	var receipts pricing.Money
	codes := map[int]int{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			w := f.call()
			mu.Lock()
			defer mu.Unlock()
			codes[w.Code]++
			switch w.Code {
			case http.StatusOK:
				c, err := pricing.ParseUSD(w.Header().Get("X-Gw-Cost-Usd"))
				if err != nil {
					t.Errorf("receipt: %v", err)
				}
				receipts += c
			case http.StatusPaymentRequired:
				if code := errorCode(t, w); code != gwerr.CodeCreditExhausted || w.Header().Get("X-Gw-Hold-Reason") != code {
					t.Errorf("refusal code %q hold %q", code, w.Header().Get("X-Gw-Hold-Reason"))
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	if codes[200] != k || codes[402] != n-k {
		t.Fatalf("statuses %v, want %d×200 and %d×402", codes, k, n-k)
	}
	sum, entries := f.ledger(t)
	if sum != receipts || entries != k || sum != callCost*k {
		t.Fatalf("ledger %s in %d entries, receipts %s, want %s", sum, entries, receipts, callCost*k)
	}
	acc, _ := f.store.Account(context.Background(), "a")
	if *acc.Balance != balance-sum || *acc.Balance < 0 {
		t.Fatalf("balance %s, want %s", acc.Balance, balance-sum)
	}
}

// TestStoreFailsMidFlight: the store fails between the reservation and the
// settlement: 402 credit_unresolved, nothing charged, nothing held; the
// gateway recovers when the store does.
func TestStoreFailsMidFlight(t *testing.T) {
	balance := usd(t, "1")
	f := newFixture(t, store.Account{Plan: store.PlanPaid, Cleared: true, Balance: &balance})
	f.store.Fail = storetest.OpSettle
	f.store.Down.Store(true)
	w := f.call()
	if w.Code != http.StatusPaymentRequired || errorCode(t, w) != gwerr.CodeCreditUnresolved ||
		w.Header().Get("X-Gw-Hold-Reason") != gwerr.CodeCreditUnresolved || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("status %d headers %v body %s", w.Code, w.Header(), w.Body)
	}
	if sum, n := f.ledger(t); sum != 0 || n != 0 {
		t.Fatalf("charged %s in %d entries", sum, n)
	}
	if held := f.held(t, "a"); held != 0 {
		t.Fatalf("%s still held", held)
	}
	f.store.Down.Store(false)
	if w := f.call(); w.Code != http.StatusOK {
		t.Fatalf("after recovery: %d %s", w.Code, w.Body)
	}
	if sum, n := f.ledger(t); sum != callCost || n != 1 {
		t.Fatalf("after recovery: %s in %d entries", sum, n)
	}
}

// TestFailedCallReleases: a handler that fails after reserving charges
// nothing and leaves nothing held.
func TestFailedCallReleases(t *testing.T) {
	balance := usd(t, "1")
	f := newFixture(t, store.Account{Plan: store.PlanPaid, Cleared: true, Balance: &balance})
	f.ep.Handler = func(c *pipeline.Call) error {
		if err := c.Reserve(usd(t, "0.9")); err != nil {
			return err
		}
		return gwerr.New(gwerr.Upstream, "upstream failed")
	}
	if w := f.call(); w.Code != http.StatusBadGateway {
		t.Fatalf("status %d", w.Code)
	}
	if held := f.held(t, "a"); held != 0 {
		t.Fatalf("%s still held", held)
	}
	if sum, _ := f.ledger(t); sum != 0 {
		t.Fatalf("charged %s", sum)
	}
}

func usd(t *testing.T, s string) pricing.Money {
	t.Helper()
	m, err := pricing.ParseUSD(s)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestAllowModel: the key's allowlist refuses other models in the family's
// status and code.
func TestAllowModel(t *testing.T) {
	for _, tc := range []struct {
		family gwerr.Family
		status int
		code   string
	}{
		{gwerr.Chat, 401, "model_not_allowed"},
		{gwerr.Ability, 401, ""},
		{gwerr.Images, 403, "permission_error"},
		{gwerr.Decide, 403, "model_not_allowed"},
	} {
		f := newFixture(t, store.Account{Plan: store.PlanPaid, Cleared: true})
		f.key = f.fx.AddKey(t, store.Key{ID: "k2", AccountID: "a", Models: []string{"gw-image", "gpt-x"}})
		f.ep.Family = tc.family
		f.ep.Handler = func(c *pipeline.Call) error {
			for _, ok := range []string{"gw-image", "gw-pinned-gpt-x"} {
				if err := c.AllowModel(ok); err != nil {
					t.Errorf("%s refused: %v", ok, err)
				}
			}
			return c.AllowModel("gw-decide")
		}
		w := f.call()
		if w.Code != tc.status || errorCode(t, w) != tc.code {
			t.Errorf("family %d: %d %s, want %d code %q", tc.family, w.Code, w.Body, tc.status, tc.code)
		}
	}
}

// AbilityCost prices an ability alias per unit with the pay-as-you-go
// markup once, refuses unpublished prices, and WriteReceipt writes what
// was charged.
func TestAbilityCostAndReceipt(t *testing.T) {
	price := int64(1667)
	for _, tc := range []struct {
		name  string
		payg  bool
		alias string
		units int64
		want  string // "" means not priced
	}{
		{"plan price", false, "gw-voice", 10, "0.01667"},
		{"pay as you go", true, "gw-voice", 10, "0.0186704"},
		{"unpublished", false, "gw-image", 1, ""},
		{"unknown alias", false, "gw-nothing", 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cat, err := catalog.New([]catalog.Provider{{Name: "p", Format: catalog.FormatOpenAI, BaseURL: "http://127.0.0.1:1/v1"}}, nil,
				[]catalog.Ability{{Alias: "gw-voice", Provider: "p", Model: "m", PriceMicrocents: &price}, {Alias: "gw-image", Provider: "p", Model: "i"}}, nil, "")
			if err != nil {
				t.Fatal(err)
			}
			w := httptest.NewRecorder()
			c := &pipeline.Call{W: w, Gateway: &pipeline.Gateway{Catalog: cat}, Account: store.Account{PAYG: tc.payg}}
			cost, ok := c.AbilityCost(tc.alias, tc.units)
			if tc.want == "" {
				if ok {
					t.Fatalf("AbilityCost = %v, true; want not priced", cost)
				}
				return
			}
			if !ok || cost.String() != tc.want {
				t.Fatalf("AbilityCost = %v, %v; want %s", cost, ok, tc.want)
			}
			c.WriteReceipt(pipeline.Bill{Receipt: pipeline.AbilityReceipt, Model: "gw-voice-fast", Cost: cost})
			if got := w.Header().Get(pipeline.HeaderCost); got != tc.want {
				t.Fatalf("%s = %q", pipeline.HeaderCost, got)
			}
			if got := w.Header().Get(pipeline.HeaderRoutedModel); got != "gw-voice-fast" {
				t.Fatalf("%s = %q", pipeline.HeaderRoutedModel, got)
			}
		})
	}
}

// Invoke serves an endpoint as Serve does (key, money, ledger) but hands
// back the answer and any refusal unrendered.
func TestInvoke(t *testing.T) {
	f := newFixture(t, store.Account{Plan: store.PlanPaid, Cleared: true})
	r := httptest.NewRequest(http.MethodPost, "/test", nil)
	r.Header.Set("Authorization", "Bearer "+f.key)
	rec, refused := f.gw.Invoke(r, f.ep)
	if refused != nil || rec.Status != http.StatusOK || rec.Header.Get("X-Gw-Cost-Usd") != callCost.String() ||
		rec.Header.Get(pipeline.HeaderRequestID) == "" {
		t.Fatalf("Invoke = %+v, %v", rec, refused)
	}
	entries, err := f.store.Entries(context.Background(), "a", 10)
	if err != nil || len(entries) != 1 || entries[0].Cost != callCost {
		t.Fatalf("ledger after Invoke: %+v, %v", entries, err)
	}

	r = httptest.NewRequest(http.MethodPost, "/test", nil)
	r.Header.Set("Authorization", "Bearer sk-wrong")
	rec, refused = f.gw.Invoke(r, f.ep)
	if refused == nil || refused.Kind != gwerr.Unauthenticated || rec.Status != http.StatusUnauthorized || rec.Body.Len() != 0 {
		t.Fatalf("Invoke with a wrong key = %+v, %v", rec, refused)
	}
}

// TestAnswersRefusedKeys: an endpoint that answers refused keys itself
// runs its handler with the refusal and no account, without the ability
// and plan checks; an accepted key runs it as usual; other endpoints
// refuse before the handler.
func TestAnswersRefusedKeys(t *testing.T) {
	f := newFixture(t, store.Account{Plan: store.PlanFree})
	var seen []string
	ep := &pipeline.Endpoint{Name: "tools", Methods: []string{http.MethodPost}, Family: gwerr.Tools, Auth: pipeline.BearerOnly,
		Ability: store.AbilitySearch, AnswersRefusedKeys: true, Handler: func(c *pipeline.Call) error {
			got := "account " + c.Account.ID
			if c.KeyRefusal != nil {
				got = "refused " + c.KeyRefusal.Message
			}
			seen = append(seen, got)
			c.W.WriteHeader(http.StatusOK)
			return nil
		}}
	for _, header := range [][2]string{{"", ""}, {"Authorization", "Bearer sk-wrong"}, {"X-Api-Key", f.key}} {
		r := httptest.NewRequest(http.MethodPost, "/tools", nil)
		if header[0] != "" {
			r.Header.Set(header[0], header[1])
		}
		w := httptest.NewRecorder()
		f.gw.Serve(w, r, ep)
		if w.Code != http.StatusOK {
			t.Fatalf("%v: %d %s", header, w.Code, w.Body)
		}
	}
	// A valid key on a free account meets the plan check as ever.
	r := httptest.NewRequest(http.MethodPost, "/tools", nil)
	r.Header.Set("Authorization", "Bearer "+f.key)
	w := httptest.NewRecorder()
	f.gw.Serve(w, r, ep)
	if w.Code != http.StatusPaymentRequired {
		t.Fatalf("free account: %d %s", w.Code, w.Body)
	}
	if want := []string{"refused missing API key", "refused invalid API key", "refused missing API key"}; !slices.Equal(seen, want) {
		t.Fatalf("handler saw %q, want %q", seen, want)
	}
	ep.AnswersRefusedKeys = false
	w = httptest.NewRecorder()
	f.gw.Serve(w, httptest.NewRequest(http.MethodPost, "/tools", nil), ep)
	if w.Code != http.StatusUnauthorized || len(seen) != 3 {
		t.Fatalf("without AnswersRefusedKeys: %d, handler ran %d times", w.Code, len(seen))
	}
}

// A route with a Concurrency bound refuses the account's call over it
// (429, Retry-After 1), counts apart from billed calls (a billed call made
// while the bounded calls are held still runs), and frees the slot when a
// call ends.
func TestConcurrencyBound(t *testing.T) {
	f := newFixture(t, store.Account{Plan: store.PlanPaid, Cleared: true})
	f.gw.InFlight = limits.NewInFlight()
	f.gw.MaxInFlight = 1
	entered, leave := make(chan struct{}), make(chan struct{})
	bounded := &pipeline.Endpoint{Name: "bounded", Family: gwerr.RPC, Concurrency: &limits.Bound{Name: "mcp", Max: 2},
		Handler: func(c *pipeline.Call) error {
			entered <- struct{}{}
			<-leave
			c.W.WriteHeader(http.StatusOK)
			return nil
		}}
	serve := func(ep *pipeline.Endpoint) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodPost, "/test", nil)
		r.Header.Set("Authorization", "Bearer "+f.key)
		w := httptest.NewRecorder()
		f.gw.Serve(w, r, ep)
		return w
	}
	done := make(chan int, 2)
	for range 2 {
		go func() { done <- serve(bounded).Code }()
		<-entered
	}
	w := serve(bounded)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" || !strings.Contains(w.Body.String(), `"code":-32003`) {
		t.Fatalf("a third call: %d %v %s", w.Code, w.Header(), w.Body)
	}
	if w := f.call(); w.Code != http.StatusOK {
		t.Fatalf("a billed call beside them: %d %s", w.Code, w.Body)
	}
	leave <- struct{}{}
	if code := <-done; code != http.StatusOK {
		t.Fatalf("a held call: %d", code)
	}
	go func() { done <- serve(bounded).Code }()
	<-entered
	close(leave)
	for range 2 {
		if code := <-done; code != http.StatusOK {
			t.Fatalf("a call after one ended: %d", code)
		}
	}
}

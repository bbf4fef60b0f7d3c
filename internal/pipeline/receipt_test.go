package pipeline_test

import (
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/money"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// WriteReceipt sets exactly the headers of the bill's receipt, with the
// values the bill carries.
func TestReceiptFromBill(t *testing.T) {
	cost := pricing.Micro(1234)
	for _, tc := range []struct {
		name   string
		bill   pipeline.Bill
		cached bool
		want   http.Header
	}{
		{"chat routed, escalated, lane billed", pipeline.Bill{Receipt: pipeline.ChatReceipt, Model: "m-standard", Alias: "gw-auto", Routed: true,
			Escalated: true, Lane: "standard", Cost: cost}, false,
			http.Header{"X-Gw-Model": {"m-standard"}, "X-Gw-Original-Model": {"gw-auto"}, "X-Gw-Routed": {"true"}, "X-Gw-Cost-Usd": {"0.001234"},
				"X-Gw-Routed-Model": {"m-standard"}, "X-Gw-Escalated": {"true"}, "X-Gw-Billed-Lane": {"standard"}}},
		{"chat pinned", pipeline.Bill{Receipt: pipeline.ChatReceipt, Model: "m", Alias: "gw-pinned-m", Cost: cost}, false,
			http.Header{"X-Gw-Model": {"m"}, "X-Gw-Original-Model": {"gw-pinned-m"}, "X-Gw-Routed": {"false"}, "X-Gw-Cost-Usd": {"0.001234"},
				"X-Gw-Routed-Model": {"m"}}},
		{"chat cache hit", pipeline.Bill{Receipt: pipeline.ChatReceipt, Model: "m", Alias: "gw-auto", Routed: true}, true,
			http.Header{"X-Gw-Model": {"m"}, "X-Gw-Original-Model": {"gw-auto"}, "X-Gw-Routed": {"true"}, "X-Gw-Cost-Usd": {"0.00"},
				"X-Gw-Cache": {"hit"}}},
		{"chat stream", pipeline.Bill{Receipt: pipeline.ChatStreamReceipt, Model: "m", Alias: "gw-auto"}, false,
			http.Header{"X-Gw-Alias": {"gw-auto"}}},
		{"transcription", pipeline.Bill{Receipt: pipeline.AbilityReceipt, Model: "whisper", Alias: "gw-voice", Units: 10,
			Unit: pricing.UnitAudioSecond, Cost: cost}, false,
			http.Header{"X-Gw-Routed-Model": {"whisper"}, "X-Gw-Cost-Usd": {"0.001234"}, "X-Gw-Billed-Seconds": {"10"}}},
		{"speech", pipeline.Bill{Receipt: pipeline.AbilityReceipt, Model: "tts", Alias: "gw-voice-speak", Units: 5,
			Unit: pricing.UnitCharacter, Cost: cost}, false,
			http.Header{"X-Gw-Routed-Model": {"tts"}, "X-Gw-Cost-Usd": {"0.001234"}, "X-Gw-Billed-Chars": {"5"}}},
		{"ability cache hit", pipeline.Bill{Receipt: pipeline.AbilityReceipt, Model: "reader"}, true,
			http.Header{"X-Gw-Routed-Model": {"reader"}, "X-Gw-Cost-Usd": {"0.00"}}},
		{"ability stream", pipeline.Bill{Receipt: pipeline.AbilityStreamReceipt, Model: "img", Alias: "gw-image"}, false,
			http.Header{"X-Gw-Routed-Model": {"img"}}},
		{"decision", pipeline.Bill{Receipt: pipeline.DecisionReceipt, Model: "gw-decide", Unit: pricing.UnitToken,
			Units: 900, Cost: cost}, false,
			http.Header{"X-Gw-Alias": {"gw-decide"}, "X-Gw-Routed-Model": {"gw-decide"}, "X-Gw-Cost-Usd": {"0.001234"}}},
		{"none", pipeline.Bill{Model: "m", Cost: cost}, false, http.Header{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			c := &pipeline.Call{W: w}
			if tc.cached {
				c.CacheHit()
			}
			c.WriteReceipt(tc.bill)
			if got := w.Header(); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("headers = %v\nwant %v", got, tc.want)
			}
			if got, want := tc.bill.CostUSD(), tc.bill.Cost.String(); got != want {
				t.Fatalf("CostUSD = %q, want %q", got, want)
			}
		})
	}
}

// The answer Invoke collects carries the call's bills: the cost an MCP
// server reports is the cost the receipt header shows, both charges of a
// call that makes two, and what was charged (held to what the account
// could pay).
func TestRecordedCarriesTheCost(t *testing.T) {
	chat := money.Chat
	first, second := pricing.Micro(700_000), pricing.Micro(5_000)
	f := newFixture(t, store.Account{Plan: store.PlanPaid, Cleared: true})
	ep := &pipeline.Endpoint{Name: "test", Family: gwerr.Chat, Billing: &chat, Handler: func(c *pipeline.Call) error {
		if err := c.Reserve(pricing.Micro(1_000)); err != nil {
			return err
		}
		bill := pipeline.Bill{Units: 10, Unit: pricing.UnitToken, Model: "m-fast", Alias: "gw-auto", Routed: true, Cost: first}
		var err error
		if bill.Cost, err = c.Charge(bill); err != nil {
			return err
		}
		if err := c.Reserve(pricing.Micro(1)); err != nil {
			return err
		}
		check, err := c.Charge(pipeline.Bill{ID: c.RequestID + "-so", Units: 3, Unit: pricing.UnitToken, Model: "m-check", Cost: second})
		if err != nil {
			return err
		}
		bill.Cost += check
		bill.Receipt = pipeline.ChatReceipt
		c.WriteReceipt(bill)
		c.W.WriteHeader(http.StatusOK)
		return nil
	}}
	r := httptest.NewRequest(http.MethodPost, "/test", nil)
	r.Header.Set("Authorization", "Bearer "+f.key)
	rec, refused := f.gw.Invoke(r, ep)
	if refused != nil || rec.Status != http.StatusOK {
		t.Fatalf("Invoke = %+v, %v", rec, refused)
	}
	if len(rec.Bills) != 2 || rec.Bills[0].Cost != first || rec.Bills[0].Model != "m-fast" ||
		rec.Bills[1].Cost != second || rec.Bills[1].ID != rec.Header.Get(pipeline.HeaderRequestID)+"-so" {
		t.Fatalf("bills = %+v", rec.Bills)
	}
	if rec.Cost() != first+second || rec.Model() != "m-fast" {
		t.Fatalf("Cost, Model = %v, %q; want %v, m-fast", rec.Cost(), rec.Model(), first+second)
	}
	if got := rec.Header.Get(pipeline.HeaderCost); got != "0.705" || got != rec.Cost().String() {
		t.Fatalf("%s = %q, recorded cost %s", pipeline.HeaderCost, got, rec.Cost())
	}
	if got := rec.Header.Get(pipeline.HeaderRoutedModel); got != rec.Model() {
		t.Fatalf("%s = %q, recorded model %q", pipeline.HeaderRoutedModel, got, rec.Model())
	}
	sum, n := f.ledger(t)
	if sum != rec.Cost() || n != 2 {
		t.Fatalf("ledger: %d entries adding to %v; recorded %v", n, sum, rec.Cost())
	}

	// Charge writes a bill's receipt with the cost charged: the 0.002 the
	// account could still pay of 0.003.
	ep.Handler = func(c *pipeline.Call) error {
		if err := c.Reserve(pricing.Micro(1)); err != nil {
			return err
		}
		_, err := c.Charge(pipeline.Bill{Units: 1, Unit: "page", Model: "reader", Cost: pricing.Micro(3_000), Receipt: pipeline.AbilityReceipt})
		return err
	}
	balance := pricing.Micro(2_000)
	f2 := newFixture(t, store.Account{Plan: store.PlanPaid, Cleared: true, Balance: &balance})
	r = httptest.NewRequest(http.MethodPost, "/test", nil)
	r.Header.Set("Authorization", "Bearer "+f2.key)
	rec, refused = f2.gw.Invoke(r, ep)
	if refused != nil || len(rec.Bills) != 1 || rec.Bills[0].Shortfall != pricing.Micro(1_000) || rec.Cost() != balance || rec.Model() != "reader" ||
		rec.Header.Get(pipeline.HeaderCost) != "0.002" || rec.Header.Get(pipeline.HeaderRoutedModel) != "reader" {
		t.Fatalf("Invoke = %+v (cost %v), %v", rec, rec.Cost(), refused)
	}

	// A refusal charged nothing.
	r = httptest.NewRequest(http.MethodPost, "/test", nil)
	r.Header.Set("Authorization", "Bearer sk-wrong")
	rec, refused = f2.gw.Invoke(r, ep)
	if refused == nil || len(rec.Bills) != 0 || rec.Cost() != 0 || rec.Model() != "" {
		t.Fatalf("refused Invoke = %+v, %v", rec, refused)
	}
}

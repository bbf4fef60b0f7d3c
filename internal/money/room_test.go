package money

import (
	"context"
	"math"
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// TestRoom: the room is the least any rule leaves after what is spent and
// held, the refusal of the first rule that leaves nothing, and exactly
// what Reserve then accepts (a cent more is refused).
func TestRoom(t *testing.T) {
	paid := func(a store.Account) store.Account { a.Plan, a.Cleared = store.PlanPaid, true; return a }
	for _, tc := range []struct {
		name   string
		policy Policy
		acc    store.Account
		kind   Kind
		before []string
		held   string
		room   string // "" with code: refused
		code   string
	}{
		{"postpaid, no cap", Policy{}, paid(store.Account{}), Chat, []string{"3"}, "0", "", ""},
		{"prepaid", Policy{}, paid(store.Account{Balance: ptr(usd("1"))}), Ability, []string{"0.25"}, "0.5", "0.25", ""},
		{"prepaid with free credit", Policy{FreeMonthlyCredit: usd("0.5")}, paid(store.Account{Balance: ptr(usd("1"))}), Ability, []string{"0.25"}, "0", "1.25", ""},
		{"prepaid used up", Policy{}, paid(store.Account{Balance: ptr(usd("1"))}), Ability, []string{"0.5"}, "0.5", "", gwerr.CodeCreditExhausted},
		{"free chat stop", Policy{}, store.Account{Plan: store.PlanFree}, Chat, []string{"0.97"}, "0.01", "0.02", ""},
		{"daily cap below balance", Policy{}, paid(store.Account{Balance: ptr(usd("5")), DailyCap: ptr(usd("1"))}), Chat, []string{"0.4"}, "0", "0.6", ""},
		{"monthly cap reached", Policy{}, paid(store.Account{MonthlyCap: ptr(usd("2"))}), Chat, []string{"2"}, "0", "", gwerr.CodeMonthlyCap},
		{"ceiling", Policy{Ceiling: Ceiling{Base: usd("10")}}, paid(store.Account{}), Ability, []string{"9"}, "0", "1", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.policy)
			tc.acc.ID = "a"
			f.account(t, tc.acc)
			for _, c := range tc.before {
				f.spend(t, "a", tc.kind, usd(c), usd(c))
			}
			ctx := context.Background()
			if h := usd(tc.held); h > 0 {
				if _, err := f.gate.Reserve(ctx, "a", tc.kind, h); err != nil {
					t.Fatal(err)
				}
			}
			room, err := f.gate.Room(ctx, Payer{Account: "a"}, tc.kind)
			if code(t, err) != tc.code {
				t.Fatalf("refusal %v, want %q", err, tc.code)
			}
			if tc.code != "" {
				return
			}
			want := pricing.Money(math.MaxInt64)
			if tc.room != "" {
				want = usd(tc.room)
			}
			if room != want {
				t.Fatalf("room %s, want %s", room, want)
			}
			if tc.room == "" {
				return
			}
			if _, err := f.gate.Reserve(ctx, "a", tc.kind, room+1); err == nil {
				t.Errorf("reserving the room and a nano-dollar more was accepted")
			}
			if _, err := f.gate.Reserve(ctx, "a", tc.kind, room); err != nil {
				t.Errorf("reserving exactly the room: %v", err)
			}
			if _, err := f.gate.Room(ctx, Payer{Account: "a"}, tc.kind); code(t, err) == "" {
				t.Errorf("room left after reserving all of it")
			}
		})
	}
}

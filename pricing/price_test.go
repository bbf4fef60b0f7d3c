package pricing

import (
	"math"
	"math/big"
	"testing"
)

func TestCost(t *testing.T) {
	in3 := PerMillion(USD(3))    // 3 USD per million input tokens
	out15 := PerMillion(USD(15)) // 15 USD per million output tokens
	// 0.0375 nano-dollars per token (37.5 microdollars per million): a rate
	// whose per-unit price is a fraction of the Money unit.
	frac := PerMillion(37_500)
	half := PerMillion(500_000)             // 0.5 nano per token
	fortyFive := PerMillion(450_000)        // 0.45 nano per token
	fortyNine := Rate{Amount: 49, Per: 100} // 0.49 nano per unit

	tests := []struct {
		name  string
		payg  bool
		lines []Line
		want  Money
		str   string
	}{
		{
			name:  "input plus output",
			lines: []Line{{1234, in3}, {567, out15}},
			want:  12_207_000, // 0.003702 + 0.008505
			str:   "0.012207",
		},
		{
			name:  "input plus output, payg rounded once",
			payg:  true,
			lines: []Line{{1234, in3}, {567, out15}},
			want:  13_671_840, // 0.012207 × 1.12
			str:   "0.01367184",
		},
		{name: "input only", lines: []Line{{1234, in3}}, want: 3_702_000, str: "0.003702"},
		{name: "output only", lines: []Line{{567, out15}}, want: 8_505_000, str: "0.008505"},
		{name: "no lines", want: 0, str: "0.00"},
		{name: "no lines payg", payg: true, want: 0, str: "0.00"},
		{name: "zero units", lines: []Line{{0, in3}, {0, out15}}, want: 0, str: "0.00"},
		{name: "zero units beside a priced line", lines: []Line{{0, in3}, {567, out15}}, want: 8_505_000, str: "0.008505"},
		{name: "zero-per rate is ignored", lines: []Line{{10, Rate{Amount: USD(1), Per: 0}}, {1234, in3}}, want: 3_702_000, str: "0.003702"},
		{name: "fraction of a nano rounds to 0", lines: []Line{{1, frac}}, want: 0, str: "0.00"},
		{name: "3.75 nano rounds to 4", lines: []Line{{100, frac}}, want: 4, str: "0.000000004"},
		{name: "37.5 nano rounds half away from zero", lines: []Line{{1000, frac}}, want: 38, str: "0.000000038"},
		{name: "one million at frac", lines: []Line{{1_000_000, frac}}, want: 37_500, str: "0.0000375"},
		{
			// Per line: 0.75 → 1, ten times = 10. Whole call: 7.5 → 8.
			name: "rounded once, not per line",
			lines: []Line{
				{20, frac}, {20, frac}, {20, frac}, {20, frac}, {20, frac},
				{20, frac}, {20, frac}, {20, frac}, {20, frac}, {20, frac},
			},
			want: 8,
			str:  "0.000000008",
		},
		{
			// Per line: 0.5 → 1 and 0.5 → 1 = 2. Whole call: 1.
			name:  "two halves make one",
			lines: []Line{{1, half}, {1, half}},
			want:  1,
		},
		{
			// Per line: 0.49 → 0, three times = 0. Whole call: 1.47 → 1.
			name:  "fractions below a half add up",
			lines: []Line{{1, fortyNine}, {1, fortyNine}, {1, fortyNine}},
			want:  1,
		},
		{
			// Rounding before the markup: 0.45 → 0, × 1.12 = 0.
			// Markup then rounding: 0.504 → 1.
			name:  "markup applied before the single rounding",
			payg:  true,
			lines: []Line{{1, fortyFive}},
			want:  1,
		},
		{name: "same without markup", lines: []Line{{1, fortyFive}}, want: 0},
		{
			name:  "many kinds of lines",
			lines: []Line{{1234, in3}, {567, out15}, {3, PerUnit(Micro(10_000))}, {100, frac}},
			want:  12_207_000 + 30_000_000 + 4,
			str:   "0.042207004",
		},
		{
			name:  "many kinds of lines payg",
			payg:  true,
			lines: []Line{{1234, in3}, {567, out15}, {3, PerUnit(Micro(10_000))}, {100, frac}},
			// (12,207,000 + 30,000,000 + 3.75) × 1.12 = 47,271,844.2
			want: 47_271_844,
			str:  "0.047271844",
		},
		{
			name:  "decision mode",
			lines: []Line{{1234, PerMillion(100_800_000)}}, // 100.8 nano per token
			want:  124_387,                                 // 124,387.2
		},
		{name: "negative units (refund) round away from zero", lines: []Line{{-100, frac}}, want: -4},
		{
			name:  "saturates instead of wrapping",
			lines: []Line{{math.MaxInt64, PerUnit(USD(1))}},
			want:  math.MaxInt64,
		},
		{
			name:  "saturates negative",
			lines: []Line{{math.MinInt64, PerUnit(USD(1))}},
			want:  math.MinInt64,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Cost(tt.payg, tt.lines...)
			if got != tt.want {
				t.Errorf("Cost(%v, %v) = %d, want %d", tt.payg, tt.lines, int64(got), int64(tt.want))
			}
			if tt.str != "" && got.String() != tt.str {
				t.Errorf("Cost(...).String() = %q, want %q", got.String(), tt.str)
			}
		})
	}
}

// TestCostOrderIndependent checks that the order of lines cannot change a
// call's cost, which per-line rounding with carried remainders could.
func TestCostOrderIndependent(t *testing.T) {
	a := Line{7, Rate{Amount: 1, Per: 3}}
	b := Line{5, Rate{Amount: 2, Per: 7}}
	c := Line{11, PerMillion(37_500)}
	for _, payg := range []bool{false, true} {
		want := Cost(payg, a, b, c)
		for _, order := range [][]Line{{a, c, b}, {b, a, c}, {b, c, a}, {c, a, b}, {c, b, a}} {
			if got := Cost(payg, order...); got != want {
				t.Errorf("payg=%v order %v: %d, want %d", payg, order, int64(got), int64(want))
			}
		}
	}
	// 7/3 + 10/7 + 0.4125 = 4.17... → 4; payg 4.67... → 5
	if got := Cost(false, a, b, c); got != 4 {
		t.Errorf("Cost = %d, want 4", int64(got))
	}
	if got := Cost(true, a, b, c); got != 5 {
		t.Errorf("Cost payg = %d, want 5", int64(got))
	}
}

func TestRateConstructors(t *testing.T) {
	if r := PerMillion(USD(3)); r.Amount != USD(3) || r.Per != 1_000_000 {
		t.Errorf("PerMillion = %+v", r)
	}
	if r := PerUnit(Micro(26)); r.Amount != Micro(26) || r.Per != 1 {
		t.Errorf("PerUnit = %+v", r)
	}
	if PAYGMarkupPercent != 12 {
		t.Errorf("PAYGMarkupPercent = %d, want 12", PAYGMarkupPercent)
	}
}

// costBig is Cost with big numbers only, the reference costInt64 must
// equal.
func costBig(payg bool, lines []Line) Money {
	num := new(big.Rat)
	for _, l := range lines {
		if l.Rate.Per <= 0 || l.Units == 0 {
			continue
		}
		num.Add(num, new(big.Rat).SetFrac(new(big.Int).Mul(big.NewInt(l.Units), big.NewInt(int64(l.Rate.Amount))), big.NewInt(l.Rate.Per)))
	}
	if payg {
		num.Mul(num, big.NewRat(100+PAYGMarkupPercent, 100))
	}
	return Money(roundDiv(new(big.Int).Set(num.Num()), new(big.Int).Set(num.Denom())))
}

// The int64 path of Cost gives exactly the big-number result whenever it
// answers, rounding ties away from zero included.
func FuzzCostInt64(f *testing.F) {
	f.Add(int64(1000), int64(400_000_000), int64(1_000_000), int64(200), int64(1_600_000_000), int64(1_000_000), true)
	f.Add(int64(1), int64(5), int64(2), int64(-1), int64(5), int64(2), false)
	f.Add(int64(math.MaxInt64), int64(2), int64(1), int64(1), int64(1), int64(3), true)
	f.Fuzz(func(t *testing.T, u1, a1, p1, u2, a2, p2 int64, payg bool) {
		lines := []Line{{Units: u1, Rate: Rate{Amount: Money(a1), Per: p1}}, {Units: u2, Rate: Rate{Amount: Money(a2), Per: p2}}}
		if got, ok := costInt64(payg, lines); ok {
			if want := costBig(payg, lines); got != want {
				t.Fatalf("%+v payg %v: %d, want %d", lines, payg, got, want)
			}
		}
	})
}

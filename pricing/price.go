package pricing

import "math/big"

// Rate is a price: Amount of Money for every Per units (Per 1,000,000 for a
// price per million tokens, 1 for a price per image). Keeping the divisor
// apart lets a cost be computed exactly and rounded once.
type Rate struct {
	Amount Money
	Per    int64
}

// PerMillion is a rate of usd dollars per million units.
func PerMillion(amount Money) Rate { return Rate{Amount: amount, Per: 1_000_000} }

// PerUnit is a rate of amount per single unit.
func PerUnit(amount Money) Rate { return Rate{Amount: amount, Per: 1} }

// PAYGMarkupPercent is the pay-as-you-go markup over plan (list) prices,
// applied once to a call's total before rounding.
const PAYGMarkupPercent = 12

// Line is one priced quantity of a call: units at a rate.
type Line struct {
	Units int64
	Rate  Rate
}

// Cost returns the exact cost of a call made of lines, with the
// pay-as-you-go markup when payg is set, rounded once (half away from zero)
// to Money. Every billed call's cost goes through here.
func Cost(payg bool, lines ...Line) Money {
	// Sum the lines over a common denominator so nothing is rounded early.
	num := new(big.Rat)
	for _, l := range lines {
		if l.Rate.Per <= 0 || l.Units == 0 {
			continue
		}
		t := new(big.Rat).SetFrac(
			new(big.Int).Mul(big.NewInt(l.Units), big.NewInt(int64(l.Rate.Amount))),
			big.NewInt(l.Rate.Per))
		num.Add(num, t)
	}
	if payg {
		num.Mul(num, big.NewRat(100+PAYGMarkupPercent, 100))
	}
	return Money(roundDiv(new(big.Int).Set(num.Num()), new(big.Int).Set(num.Denom())))
}

package pricing

import (
	"math"
	"math/big"
)

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
	if m, ok := costInt64(payg, lines); ok {
		return m
	}
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

// costInt64 is Cost in int64 arithmetic, the same value when nothing
// overflows (ok false then: Cost does it with big numbers).
func costInt64(payg bool, lines []Line) (Money, bool) {
	den := int64(1)
	for _, l := range lines {
		if l.Rate.Per > 0 && l.Units != 0 {
			g := gcd(den, l.Rate.Per)
			d, ok := mulInt64(den/g, l.Rate.Per)
			if !ok {
				return 0, false
			}
			den = d
		}
	}
	var num int64
	for _, l := range lines {
		if l.Rate.Per <= 0 || l.Units == 0 {
			continue
		}
		t, ok := mulInt64(l.Units, int64(l.Rate.Amount))
		if ok {
			t, ok = mulInt64(t, den/l.Rate.Per)
		}
		if ok {
			num, ok = addInt64(num, t)
		}
		if !ok {
			return 0, false
		}
	}
	if payg {
		var ok1, ok2 bool
		num, ok1 = mulInt64(num, 100+PAYGMarkupPercent)
		den, ok2 = mulInt64(den, 100)
		if !ok1 || !ok2 {
			return 0, false
		}
	}
	if den > math.MaxInt64/2 {
		return 0, false
	}
	q, r := num/den, num%den
	if r < 0 {
		r = -r
	}
	if 2*r >= den {
		if num < 0 {
			q--
		} else {
			q++
		}
	}
	return Money(q), true
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// mulInt64 is a*b, ok false when it overflows.
func mulInt64(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	if (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return 0, false
	}
	c := a * b
	return c, c/b == a
}

// addInt64 is a+b, ok false when it overflows.
func addInt64(a, b int64) (int64, bool) {
	c := a + b
	return c, (c > a) == (b > 0)
}

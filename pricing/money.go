// Package pricing holds the gateway's money: the integer unit every amount is
// kept in, prices and how a call's cost is computed from them, the
// pay-as-you-go markup and the formatting of cost headers.
package pricing

import (
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Money is an amount of US dollars in nano-dollars (1e-9 USD). The unit is fine
// enough that per-token, per-second and per-character prices multiply out
// without loss; a call's cost is rounded to it exactly once.
type Money int64

// Decimals is how many decimal places of a dollar one Money unit spans.
const Decimals = 9

const (
	// NanoPerUSD is the number of Money units in one US dollar.
	NanoPerUSD Money = 1_000_000_000
	// NanoPerMicro is the number of Money units in one millionth of a dollar,
	// the unit of the list_price_microcents and cost_microcents fields.
	NanoPerMicro Money = 1_000
)

// USD returns whole dollars as Money.
func USD(d int64) Money { return Money(d) * NanoPerUSD }

// Micro returns millionths of a dollar as Money.
func Micro(m int64) Money { return Money(m) * NanoPerMicro }

// Microcents returns the amount in millionths of a dollar (the unit of
// the *_microcents fields), rounded half away from zero.
func (m Money) Microcents() int64 {
	return roundDiv(big.NewInt(int64(m)), big.NewInt(int64(NanoPerMicro)))
}

// String formats the amount as a decimal string of US dollars with at least
// two decimals and as many more as the amount needs: 12.5 USD is "12.50",
// 150 nano-dollars "0.00000015". This is the format of x-gw-cost-usd, of
// cost_usd fields and of the admin API, so receipts add up to the ledger.
func (m Money) String() string {
	var b [24]byte // "-9223372036.854775808" is the longest
	return string(m.appendTo(b[:0]))
}

// appendTo appends the amount as String formats it to b.
func (m Money) appendTo(b []byte) []byte {
	u := uint64(m)
	if m < 0 {
		b = append(b, '-')
		u = -u // two's complement magnitude; right for math.MinInt64 too
	}
	b = strconv.AppendUint(b, u/uint64(NanoPerUSD), 10)
	frac := u % uint64(NanoPerUSD)
	digits := Decimals
	for digits > 2 && frac%10 == 0 {
		frac /= 10
		digits--
	}
	b = append(b, '.')
	for p := digits - 1; p >= 0; p-- {
		b = append(b, byte('0'+frac/pow10[p]%10))
	}
	return b
}

// pow10 are the powers of ten up to a Money unit's decimals.
var pow10 = [Decimals]uint64{1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000}

// ErrBadAmount is returned by ParseUSD for anything but a plain decimal.
var ErrBadAmount = errors.New("amount must be a decimal number of US dollars with at most 9 decimals")

// ParseUSD reads a decimal string of US dollars ("12.50", "0.000001", "-3",
// ".5", "+2") exactly. Surrounding white space is ignored. More than Decimals
// decimals, exponents, separators, or values beyond the range of Money are
// refused rather than rounded. Every string String returns parses back to the
// same amount, from math.MinInt64 to math.MaxInt64 nano-dollars.
func ParseUSD(s string) (Money, error) {
	s = strings.TrimSpace(s)
	neg := false
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	} else if strings.HasPrefix(s, "+") {
		s = s[1:]
	}
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" && frac == "" || len(frac) > Decimals {
		return 0, ErrBadAmount
	}
	if whole == "" {
		whole = "0"
	}
	for _, part := range []string{whole, frac} {
		for _, c := range part {
			if c < '0' || c > '9' {
				return 0, ErrBadAmount
			}
		}
	}
	// The magnitude is summed in uint64 so that the full range of Money is
	// readable, including math.MinInt64, whose magnitude is 1<<63.
	limit := uint64(math.MaxInt64)
	if neg {
		limit++
	}
	w, err := strconv.ParseUint(whole, 10, 64)
	if err != nil || w > limit/uint64(NanoPerUSD) {
		return 0, ErrBadAmount
	}
	frac += strings.Repeat("0", Decimals-len(frac))
	f, _ := strconv.ParseUint(frac, 10, 64)
	u := w*uint64(NanoPerUSD) + f // w <= 9223372036, so no wrap-around
	if u > limit {
		return 0, ErrBadAmount
	}
	if neg {
		return Money(-int64(u)), nil // 1<<63 wraps to math.MinInt64, as it should
	}
	return Money(u), nil
}

// MarshalJSON writes the amount as a decimal string of US dollars.
func (m Money) MarshalJSON() ([]byte, error) { return []byte(strconv.Quote(m.String())), nil }

// UnmarshalJSON reads a decimal string ("12.50") or a JSON number (12.5) of
// US dollars. A JSON null leaves the amount unchanged, as encoding/json does
// for its own types.
func (m *Money) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == "null" {
		return nil
	}
	if uq, err := strconv.Unquote(s); err == nil {
		s = uq
	}
	v, err := ParseUSD(s)
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// roundDiv returns n/d rounded half away from zero. d must be positive.
func roundDiv(n, d *big.Int) int64 {
	q, r := new(big.Int).QuoRem(n, d, new(big.Int))
	r2 := new(big.Int).Abs(r)
	r2.Lsh(r2, 1)
	if r2.Cmp(d) >= 0 {
		if n.Sign() < 0 {
			q.Sub(q, big.NewInt(1))
		} else {
			q.Add(q, big.NewInt(1))
		}
	}
	if !q.IsInt64() {
		if q.Sign() < 0 {
			return math.MinInt64
		}
		return math.MaxInt64
	}
	return q.Int64()
}

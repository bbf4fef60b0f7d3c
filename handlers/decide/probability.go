package decide

import (
	"math"
	"strings"
)

// FloorProbability is the probability an option gets when the model gave
// it no log-probability among its top choices: small, never zero, so every
// option keeps a probability and renormalisation never divides by zero.
const FloorProbability = 1e-6

// Decimals the probabilities are rounded to: answers carry them already
// normalised to four decimals.
const scale = 10_000

// logprob is one of the model's top tokens.
type logprob struct {
	Token   string
	Logprob float64
}

// optionProbabilities maps the model's top tokens to the options by label
// (surrounding spaces and case ignored; a label seen as several tokens adds
// up) and renormalises over the options. found is false when no option
// was among the tokens: the model answered off the options.
func optionProbabilities(opts []option, top []logprob) (p []float64, found bool) {
	p = make([]float64, len(opts))
	index := make(map[string]int, len(opts))
	for i, o := range opts {
		index[strings.ToLower(o.Label)] = i
	}
	for _, t := range top {
		if i, ok := index[strings.ToLower(strings.TrimSpace(t.Token))]; ok && !math.IsNaN(t.Logprob) {
			p[i] += math.Exp(min(t.Logprob, 0))
			found = true
		}
	}
	var sum float64
	for i := range p {
		if p[i] < FloorProbability {
			p[i] = FloorProbability
		}
		sum += p[i]
	}
	for i := range p {
		p[i] /= sum
	}
	return p, found
}

// round4 rounds probabilities that sum to 1 to four decimals that still sum
// to exactly 1: each is floored to ten-thousandths and the units left are
// given to the largest remainders (ties to the earlier option).
func round4(p []float64) []float64 {
	units := make([]int, len(p))
	rem := make([]float64, len(p))
	left := scale
	for i, x := range p {
		v := x * scale
		units[i] = int(math.Floor(v))
		rem[i] = v - float64(units[i])
		left -= units[i]
	}
	for ; left > 0; left-- {
		best := 0
		for i := range rem {
			if rem[i] > rem[best] {
				best = i
			}
		}
		units[best]++
		rem[best] = -1
	}
	for ; left < 0; left++ { // float error pushed the floors past the total
		worst := -1
		for i := range rem {
			if units[i] > 0 && (worst < 0 || rem[i] < rem[worst]) {
				worst = i
			}
		}
		units[worst]--
		rem[worst] = 2
	}
	out := make([]float64, len(p))
	for i, u := range units {
		out[i] = float64(u) / scale
	}
	return out
}

// roundTo4 rounds x to four decimals.
func roundTo4(x float64) float64 { return math.Round(x*scale) / scale }

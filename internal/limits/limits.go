// Package limits holds the per-account rate limits and shared budgets of the
// abilities (docs/abilities.md), and the limiter that enforces them.
//
// The algorithm is GCRA (generic cell rate algorithm), the one
// github.com/go-redis/redis_rate runs as an atomic Redis script: each key keeps
// one number, its theoretical arrival time (TAT). A budget of Limit units per
// Period allows a burst of Limit units at once and then refills one unit every
// Period/Limit. The in-memory Limiter here serves a single node; a Redis one
// with the same semantics can serve several nodes (DESIGN.md "State").
//
// A refusal maps to HTTP 429 (`rate_limit_error` / `rate_limit_exceeded`) with
// a Retry-After header of RetryAfterSeconds(d.RetryAfter).
package limits

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"time"
)

// Budget is a limit shared by the endpoints that name it.
//
// Endpoints that use the same Budget (same Name) for one account draw from the
// same allowance; different names, or different accounts, never interact.
type Budget struct {
	Name   string        // key part: "requests", "audio_seconds", "chat_requests"
	Limit  int64         // units per Period; must be > 0
	Period time.Duration // must be > 0
}

// RequestsPerMinute is each account's shared request budget: 60 per minute
// per account, shared by transcription, speech and search. Image calls and
// page reads are outside it.
const RequestsPerMinute = 60

// AudioSecondsPerHour is each account's shared audio budget: 36,000 seconds
// of audio per hour per account, shared by transcription and speech (speech
// counts an estimate from the input length).
const AudioSecondsPerHour = 36000

// Requests is the shared per-minute request budget (one unit per request).
var Requests = Budget{Name: "requests", Limit: RequestsPerMinute, Period: time.Minute}

// AudioSeconds is the shared hourly audio budget (one unit per audio second).
var AudioSeconds = Budget{Name: "audio_seconds", Limit: AudioSecondsPerHour, Period: time.Hour}

// Decision is the answer to one Allow.
type Decision struct {
	Allowed bool
	// RetryAfter is > 0 exactly when refused: how long until the same n units
	// would be allowed (n > Limit: the whole Period, although they never will be).
	RetryAfter time.Duration
	// Remaining is the number of units still allowed right now after this
	// decision (0 <= Remaining <= Limit).
	Remaining int64
}

// Limiter takes units from an account's budget.
type Limiter interface {
	// Allow takes n units from account's budget b if they are all available,
	// and otherwise takes nothing. n <= 0 is allowed and takes nothing (it
	// reports Remaining). An error means the limit could not be checked (an
	// invalid Budget, or a store failure).
	Allow(ctx context.Context, account string, b Budget, n int64) (Decision, error)
}

// ErrInvalidBudget is returned (wrapped) for a Budget whose Limit or Period is not positive.
var ErrInvalidBudget = errors.New("limits: invalid budget")

// Validate reports whether b can be enforced.
func (b Budget) Validate() error {
	if b.Limit <= 0 || b.Period <= 0 {
		return fmt.Errorf("%w %q: limit %d per %v", ErrInvalidBudget, b.Name, b.Limit, b.Period)
	}
	return nil
}

// RetryAfterSeconds rounds a Decision's wait up to whole seconds, at least 1
// (for the Retry-After header).
func RetryAfterSeconds(d time.Duration) int {
	if d <= 0 {
		return 1
	}
	s := d / time.Second
	if d%time.Second != 0 {
		s++
	}
	return int(s)
}

// Key is the storage key of account's budget b: account + "\x00" + b.Name.
func Key(account string, b Budget) string {
	return account + "\x00" + b.Name
}

// minSweep is the map size below which Memory never sweeps.
const minSweep = 1024

// Memory is an in-memory GCRA Limiter for one node. It is safe for concurrent
// use, never blocks, and can be kept in a caddy.UsagePool across reloads (it is
// a caddy.Destructor).
//
// Time is exact: a key's TAT is kept as whole nanoseconds plus a fraction in
// units of 1/Limit ns, so Period/Limit need not divide evenly and no rounding
// accumulates. Memory drops keys whose TAT has passed (they are equivalent to
// absent keys) whenever the map has doubled since the last sweep.
type Memory struct {
	now  func() time.Time
	base time.Time

	mu       sync.Mutex
	high     uint64 // latest clock reading, ns since base; time never runs backwards
	m        map[string]entry
	sweepAt  int // sweep when a new key would make len(m) reach this
	minSweep int // never sweep below this size (minSweep; tests lower it)
}

// entry is one key's TAT: tat + frac/den ns since Memory.base.
type entry struct {
	tat  uint64
	frac uint64 // 0 <= frac < den
	den  uint64 // the Limit the fraction is counted in
}

var _ Limiter = (*Memory)(nil)

// NewMemory returns an empty in-memory limiter reading the clock now
// (nil: time.Now).
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{now: now, base: now(), m: make(map[string]entry), sweepAt: minSweep, minSweep: minSweep}
}

// Destruct makes Memory a caddy.Destructor for a caddy.UsagePool; there is
// nothing to release.
func (l *Memory) Destruct() error { return nil }

// Allow implements Limiter. ctx is not used: Memory never blocks.
func (l *Memory) Allow(_ context.Context, account string, b Budget, n int64) (Decision, error) {
	if err := b.Validate(); err != nil {
		return Decision{}, err
	}
	key := Key(account, b)
	d := l.now().Sub(l.base)
	if d < 0 {
		d = 0
	}
	now := uint64(d)
	P := uint64(b.Period)
	L := uint64(b.Limit)

	l.mu.Lock()
	defer l.mu.Unlock()
	if now < l.high {
		now = l.high
	} else {
		l.high = now
	}

	// start = max(TAT, now), kept relative to now as rel + frac/L ns.
	e, ok := l.m[key]
	var rel, frac uint64
	if ok && (e.tat > now || (e.tat == now && e.frac > 0)) {
		rel, frac = e.tat-now, e.frac
		if e.den != L { // the Limit changed: round the TAT up to a whole ns
			if frac > 0 {
				rel++
			}
			frac = 0
		}
		if rel > P || (rel == P && frac > 0) { // the Period shrank: at most fully used
			rel, frac = P, 0
		}
	}

	if n <= 0 {
		return Decision{Allowed: true, Remaining: remaining(rel, frac, P, L)}, nil
	}
	if uint64(n) > L {
		return Decision{RetryAfter: b.Period, Remaining: remaining(rel, frac, P, L)}, nil
	}

	// cost = n*P/L = q + r/L ns, exactly (n <= L, so the high word is < L).
	hi, lo := bits.Mul64(uint64(n), P)
	q, r := bits.Div64(hi, lo, L)
	newFrac := frac + r
	newRel := rel + q // <= 2P < 2^64
	if newFrac >= L {
		newFrac -= L
		newRel++
	}

	// Allowed iff the new TAT is at most now + Period (burst tolerance = Period).
	if newRel > P || (newRel == P && newFrac > 0) {
		wait := newRel - P // exact wait is wait + newFrac/L > 0, and <= cost <= P
		if newFrac > 0 {
			wait++
		}
		return Decision{RetryAfter: time.Duration(wait), Remaining: remaining(rel, frac, P, L)}, nil
	}

	if !ok && len(l.m)+1 >= l.sweepAt {
		l.sweep(now)
	}
	l.m[key] = entry{tat: now + newRel, frac: newFrac, den: L} // now < 2^63, newRel <= P < 2^63
	return Decision{Allowed: true, Remaining: remaining(newRel, newFrac, P, L)}, nil
}

// remaining is how many whole units fit between a TAT of now + rel + frac/L and
// now + P: floor((P - rel - frac/L) * L / P).
func remaining(rel, frac, P, L uint64) int64 {
	if rel >= P {
		return 0
	}
	hi, lo := bits.Mul64(P-rel, L) // (P-rel)*L < P*2^64, so hi < P
	lo, borrow := bits.Sub64(lo, frac, 0)
	hi -= borrow // frac < L <= (P-rel)*L: no underflow
	q, _ := bits.Div64(hi, lo, P)
	return int64(q) // <= L
}

// sweep drops the keys whose TAT is not after now (they hold nothing) and sets
// the size at which the next sweep happens. l.mu must be held.
func (l *Memory) sweep(now uint64) {
	for k, e := range l.m {
		if e.tat < now || (e.tat == now && e.frac == 0) {
			delete(l.m, k)
		}
	}
	l.sweepAt = max(2*len(l.m), l.minSweep)
}

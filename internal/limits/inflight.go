package limits

import "sync"

// DefaultMaxInFlight is how many billed calls one account may have in
// flight at once unless the config says otherwise. Each call reserves its
// own upper bound, so this bounds what concurrency can hold against an
// account's balance and caps at any moment.
const DefaultMaxInFlight = 32

// InFlightRetryAfter is the Retry-After, in seconds, of a call refused for
// too many calls in flight.
const InFlightRetryAfter = 1

// Bound caps how many calls of the routes that name it one account may
// have in flight at once, for routes that are not billed but hold work
// open. Each name is counted apart from the others and from billed calls,
// so a call of a bounded route may itself make a billed call.
type Bound struct {
	Name string // key part: "mcp"
	Max  int    // calls in flight; must be > 0
}

// Key is the counting key of account's calls under b.
func (b Bound) Key(account string) string { return account + "\x00" + b.Name }

// InFlight counts each account's calls in flight (one node).
type InFlight struct {
	mu sync.Mutex
	n  map[string]int
}

// NewInFlight returns empty counters.
func NewInFlight() *InFlight { return &InFlight{n: map[string]int{}} }

// Acquire counts a call of account in, unless max calls are in flight
// already; release counts it out.
func (f *InFlight) Acquire(account string, max int) (release func(), ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n[account] >= max {
		return nil, false
	}
	f.n[account]++
	var once sync.Once
	return func() {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.n[account]--; f.n[account] <= 0 {
				delete(f.n, account)
			}
		})
	}, true
}

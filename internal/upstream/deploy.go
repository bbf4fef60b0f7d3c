package upstream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/limits"
)

// Tuning of the choice among a provider's deployments.
const (
	// latencyFloor is the time to the answer's headers below which two
	// deployments count as equally fast: differences of loopback noise
	// never steer traffic away from the weights.
	latencyFloor = 50 * time.Millisecond
	// slowFactor is how many times slower a deployment's recent latency
	// must be than another's for it to lose a tie on load.
	slowFactor = 2
	// ewmaShift makes the latency average move a quarter of the way to
	// each new sample.
	ewmaShift = 2
	// maxRest bounds how long a 429 or 529's Retry-After rests a
	// deployment.
	maxRest = 10 * time.Minute
	// maxSets bounds the providers whose deployment sets are kept (each
	// reload's catalogue adds its own).
	maxSets = 1024
	// maxStates bounds the deployments whose state is kept.
	maxStates = 4096
)

// Budget names of a deployment's per-minute limits; the limiter's account
// part is limitKey's, never the deployment's URL or key.
const (
	deploymentRequests = "deployment_requests"
	deploymentTokens   = "deployment_tokens"
)

// The tried and open masks of a call hold a bit per deployment.
var _ [64 - catalog.MaxDeployments]struct{}

// deployState is what this node knows of one deployment: its calls in
// flight, its recent latency, and until when it rests after a failure or
// is known to be at its per-minute limits (Unix nanoseconds).
type deployState struct {
	inflight  atomic.Int64
	ewma      atomic.Int64 // nanoseconds to the headers; 0: none yet
	restUntil atomic.Int64
	fullUntil atomic.Int64
}

// observe folds one time to the headers into the latency average; samples
// arriving together are each folded in.
func (s *deployState) observe(d time.Duration) {
	for {
		old := s.ewma.Load()
		next := int64(d)
		if old != 0 {
			next = old + (int64(d)-old)>>ewmaShift
		}
		if s.ewma.CompareAndSwap(old, next) {
			return
		}
	}
}

// stateKey names a deployment's state: a reload that keeps a deployment
// keeps what is known of it (its rest, its load).
type stateKey struct{ provider, baseURL, apiKey string }

// deploySet is a provider's deployments as the client calls them.
type deploySet struct {
	// base, key and count are the provider's base URL, key and number of
	// listed deployments when the set was made: a provider changed since
	// gets a new set.
	base, key string
	count     int
	// views are the deployments, each as a provider of its own (the
	// provider with the deployment's base URL and key).
	views   []catalog.Provider
	weights []int64
	states  []*deployState
	// rpm and tpm are the per-minute budgets (Limit 0: none), limitKey
	// the limiter's account part of each deployment.
	rpm, tpm []limits.Budget
	limitKey []string
}

// deployments returns p's set, made on first use.
func (c *Client) deployments(p *catalog.Provider) *deploySet {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.sets[p]; ok && s.base == p.BaseURL && s.key == p.APIKey && s.count == len(p.Deployments) {
		return s
	}
	deps := p.Deployments
	if len(deps) == 0 { // a provider made by hand, outside a catalogue
		deps = []catalog.Deployment{{BaseURL: p.BaseURL, APIKey: p.APIKey, Weight: 1}}
	}
	// The tried and open masks hold a bit per deployment: a provider made
	// by hand with more than a catalogue allows keeps the first ones.
	deps = deps[:min(len(deps), catalog.MaxDeployments)]
	s := &deploySet{base: p.BaseURL, key: p.APIKey, count: len(p.Deployments)}
	if len(c.states) >= maxStates {
		clear(c.states)
	}
	same := map[string]int{} // deployments so far per base URL
	for _, d := range deps {
		v := *p
		v.BaseURL, v.APIKey, v.Deployments = d.BaseURL, d.APIKey, nil
		s.views = append(s.views, v)
		s.weights = append(s.weights, int64(max(d.Weight, 1)))
		k := stateKey{p.Name, d.BaseURL, d.APIKey}
		st, ok := c.states[k]
		if !ok {
			st = new(deployState)
			c.states[k] = st
		}
		s.states = append(s.states, st)
		s.rpm = append(s.rpm, limits.Budget{Name: deploymentRequests, Limit: d.RequestsPerMinute, Period: time.Minute})
		s.tpm = append(s.tpm, limits.Budget{Name: deploymentTokens, Limit: d.TokensPerMinute, Period: time.Minute})
		s.limitKey = append(s.limitKey, limitKey(p.Name, d.BaseURL, same[d.BaseURL]))
		same[d.BaseURL]++
	}
	if len(c.sets) >= maxSets {
		clear(c.sets)
	}
	c.sets[p] = s
	return s
}

// limitKey is the limiter's account part of the n-th (from 0) of
// provider's deployments at baseURL: the same deployment keeps its counts
// whatever its position in the list, on every node and across reloads,
// and another never inherits them. The URL is hashed (it may hold a
// secret in its query); the key is not part of it.
func limitKey(provider, baseURL string, n int) string {
	sum := sha256.Sum256([]byte(baseURL))
	return "deployment:" + provider + ":" + hex.EncodeToString(sum[:8]) + ":" + strconv.Itoa(n)
}

// choose picks the deployment for the next attempt at time now (Unix
// nanoseconds) among those not in tried (a bit per deployment), or -1
// when none is left. Of the deployments neither resting nor at their
// limits it draws two by weight and takes the one with less work
// outstanding for its weight (see better); on a tie, the first drawn
// unless the second is clearly faster. When every one left rests, the one whose rest ends
// first is tried: a provider is never refused for its own failures alone.
func (s *deploySet) choose(now int64, tried uint64) int {
	var open uint64
	var total int64
	for i, st := range s.states {
		if tried&(1<<i) != 0 || st.fullUntil.Load() > now || st.restUntil.Load() > now {
			continue
		}
		open |= 1 << i
		total += s.weights[i]
	}
	if open == 0 {
		return s.soonestAwake(now, tried)
	}
	a := s.draw(open, total)
	rest := open &^ (1 << a)
	if rest == 0 {
		return a
	}
	b := s.draw(rest, total-s.weights[a])
	if s.better(b, a) {
		return b
	}
	return a
}

// draw picks one deployment of mask by weight; total is their sum.
func (s *deploySet) draw(mask uint64, total int64) int {
	r := rand.Int64N(total)
	last := 0
	for i, w := range s.weights {
		if mask&(1<<i) == 0 {
			continue
		}
		if r -= w; r < 0 {
			return i
		}
		last = i
	}
	return last
}

// better reports whether b should take the call rather than a: less
// work outstanding for its weight (calls in flight times recent latency),
// or, on a tie (both idle), clearly faster lately.
func (s *deploySet) better(b, a int) bool {
	eb := float64(max(s.states[b].ewma.Load(), int64(latencyFloor)))
	ea := float64(max(s.states[a].ewma.Load(), int64(latencyFloor)))
	lb := float64(s.states[b].inflight.Load()) * eb * float64(s.weights[a])
	la := float64(s.states[a].inflight.Load()) * ea * float64(s.weights[b])
	if lb != la {
		return lb < la
	}
	return eb*slowFactor < ea
}

// soonestAwake is the deployment outside tried and within its limits
// whose rest ends first, or -1.
func (s *deploySet) soonestAwake(now int64, tried uint64) int {
	pick, until := -1, int64(0)
	for i, st := range s.states {
		if tried&(1<<i) != 0 || st.fullUntil.Load() > now {
			continue
		}
		if r := st.restUntil.Load(); pick < 0 || r < until {
			pick, until = i, r
		}
	}
	return pick
}

// fullWait is how long until the first deployment at its limits is
// within them again (0: none is at them).
func (s *deploySet) fullWait(now int64) time.Duration {
	var wait int64
	for _, st := range s.states {
		if f := st.fullUntil.Load() - now; f > 0 && (wait == 0 || f < wait) {
			wait = f
		}
	}
	return time.Duration(wait)
}

// admit takes one request, and tokens of the prompt, from deployment i's
// per-minute limits on l, or neither. When they do not fit it returns how
// long until they would; a deployment out of requests is marked full for
// that long (no call fits it), one out of tokens is not (a smaller prompt
// may fit). The tokens are taken before the request, once a look has
// found a request left: a prompt refused for its tokens takes no request.
// Only a call racing this one for the minute's last request can leave
// its tokens taken unsent.
func (s *deploySet) admit(ctx context.Context, l limits.Limiter, i int, tokens int64, now int64) (ok bool, wait time.Duration, err error) {
	rpm, tpm := s.rpm[i], s.tpm[i]
	countTokens := tpm.Limit > 0 && tokens > 0
	took := false
	if rpm.Limit > 0 && countTokens {
		// Taking nothing, Allow tells what is left.
		d, err := l.Allow(ctx, s.limitKey[i], rpm, 0)
		if err != nil {
			return false, 0, err
		}
		if d.Remaining < 1 {
			// Refused, this tells the wait; one freed since is taken.
			if ok, wait, err := s.takeRequest(ctx, l, i, now); !ok {
				return false, wait, err
			}
			took = true
		}
	}
	if countTokens {
		// A prompt above the limit takes the whole minute's tokens.
		d, err := l.Allow(ctx, s.limitKey[i], tpm, min(tokens, tpm.Limit))
		if err != nil {
			return false, 0, err
		}
		if !d.Allowed {
			return false, d.RetryAfter, nil
		}
	}
	if rpm.Limit > 0 && !took {
		return s.takeRequest(ctx, l, i, now)
	}
	return true, 0, nil
}

// takeRequest takes one request from deployment i's requests per minute,
// marking it full until one fits when none is left.
func (s *deploySet) takeRequest(ctx context.Context, l limits.Limiter, i int, now int64) (ok bool, wait time.Duration, err error) {
	d, err := l.Allow(ctx, s.limitKey[i], s.rpm[i], 1)
	if err != nil {
		return false, 0, err
	}
	if !d.Allowed {
		s.states[i].fullUntil.Store(now + int64(d.RetryAfter))
		return false, d.RetryAfter, nil
	}
	return true, 0, nil
}

// rest sets deployment i aside for d from now.
func (s *deploySet) rest(i int, now int64, d time.Duration) {
	s.states[i].restUntil.Store(now + int64(d))
}

// SetLimiter makes l hold the deployments' per-minute limits (the
// gateway's limiter: Redis when nodes share one). Default: a limiter in
// this process's memory.
func (c *Client) SetLimiter(l limits.Limiter) {
	c.limiter.Store(&l)
}

// limits is the limiter of the deployments' per-minute limits.
func (c *Client) limits() limits.Limiter {
	if l := c.limiter.Load(); l != nil {
		return *l
	}
	return c.memory
}

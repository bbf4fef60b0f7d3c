package upstream

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/limits"
	"github.com/caddy-gw/caddy-gw/internal/obs"
)

// deployed returns provider "p" of a catalogue with these deployments.
func deployed(t testing.TB, deps ...catalog.Deployment) *catalog.Provider {
	t.Helper()
	cat, err := catalog.New([]catalog.Provider{{Name: "p", Format: catalog.FormatOpenAI, APIKey: "k", Deployments: deps,
		DialTimeout: time.Second, HeaderTimeout: 5 * time.Second, IdleTimeout: 5 * time.Second}}, nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	return cat.Providers["p"]
}

// shares draws n choices from s and counts each deployment's.
func shares(s *deploySet, n int) []int {
	got := make([]int, len(s.states))
	now := time.Now().UnixNano()
	for range n {
		got[s.choose(now, 0)]++
	}
	return got
}

// Calls spread by weight while every deployment is idle and as fast.
func TestChooseFollowsWeights(t *testing.T) {
	s := New().deployments(deployed(t, catalog.Deployment{BaseURL: "http://a/v1"}, catalog.Deployment{BaseURL: "http://b/v1", Weight: 3},
		catalog.Deployment{BaseURL: "http://c/v1", Weight: 6}))
	const n = 100000
	got := shares(s, n)
	for i, want := range []float64{0.1, 0.3, 0.6} {
		if share := float64(got[i]) / n; share < want-0.01 || share > want+0.01 {
			t.Errorf("deployment %d: share %.3f, want %.2f (counts %v)", i, share, want, got)
		}
	}
}

// A deployment with more calls in flight for its weight loses the pair;
// in-flight calls in proportion to the weights keep the weights; a
// clearly slower one loses a tie, a little slower one does not; in-flight
// calls count by their latency.
func TestChooseByLoadAndLatency(t *testing.T) {
	s := New().deployments(deployed(t, catalog.Deployment{BaseURL: "http://a/v1"}, catalog.Deployment{BaseURL: "http://b/v1"}))
	s.states[0].inflight.Store(2)
	s.states[1].inflight.Store(1)
	if got := shares(s, 1000); got[1] != 1000 {
		t.Fatalf("the less loaded one: %v", got)
	}

	w := New().deployments(deployed(t, catalog.Deployment{BaseURL: "http://a/v1"}, catalog.Deployment{BaseURL: "http://b/v1", Weight: 3}))
	w.states[0].inflight.Store(1)
	w.states[1].inflight.Store(3)
	if got := shares(w, 40000); got[0] < 9000 || got[0] > 11000 {
		t.Fatalf("load in proportion to the weights: %v, want about 10000:30000", got)
	}

	s.states[0].inflight.Store(0)
	s.states[1].inflight.Store(0)
	s.states[0].ewma.Store(int64(time.Second))
	s.states[1].ewma.Store(int64(200 * time.Millisecond))
	if got := shares(s, 1000); got[1] != 1000 {
		t.Fatalf("the clearly faster one: %v", got)
	}
	s.states[0].ewma.Store(int64(300 * time.Millisecond))
	if got := shares(s, 20000); got[0] < 9000 || got[0] > 11000 {
		t.Fatalf("a little slower keeps its share: %v", got)
	}
	s.states[0].ewma.Store(int64(2 * time.Millisecond)) // both under the floor: equal
	s.states[1].ewma.Store(int64(40 * time.Millisecond))
	if got := shares(s, 20000); got[0] < 9000 || got[0] > 11000 {
		t.Fatalf("fast ones differing by noise keep their shares: %v", got)
	}
	// Busy, a slow one's calls weigh more: one call of a second outweighs
	// two of 50 ms, while an idle slow one still beats a busy fast one.
	s.states[0].ewma.Store(int64(time.Second))
	s.states[0].inflight.Store(1)
	s.states[1].inflight.Store(2)
	if got := shares(s, 1000); got[1] != 1000 {
		t.Fatalf("the busy slow one: %v", got)
	}
	s.states[0].inflight.Store(0)
	if got := shares(s, 1000); got[0] != 1000 {
		t.Fatalf("the idle slow one against a busy fast one: %v", got)
	}
}

// A resting deployment and one at its limits get no call while another is
// open; when every one left rests, the one awake soonest is tried; one at
// its limits never is; each is tried once per call.
func TestChooseSkipsRestingAndFull(t *testing.T) {
	s := New().deployments(deployed(t, catalog.Deployment{BaseURL: "http://a/v1"}, catalog.Deployment{BaseURL: "http://b/v1"},
		catalog.Deployment{BaseURL: "http://c/v1"}))
	now := time.Now().UnixNano()
	s.rest(0, now, time.Minute)
	s.states[1].fullUntil.Store(now + int64(time.Minute))
	if got := shares(s, 1000); got[2] != 1000 {
		t.Fatalf("only the open one: %v", got)
	}
	s.rest(2, now, time.Second)
	if got := s.choose(now, 0); got != 2 {
		t.Fatalf("every one resting or full: got %d, want the one awake soonest (2)", got)
	}
	if got := s.choose(now, 1<<2); got != 0 {
		t.Fatalf("after it was tried: got %d, want 0", got)
	}
	if got := s.choose(now, 1<<2|1); got != -1 {
		t.Fatalf("the full one is never a last resort: got %d", got)
	}
	if got := s.fullWait(now); got != time.Minute {
		t.Fatalf("fullWait: %v", got)
	}
	// Its rest over, a deployment is chosen again by itself.
	later := now + int64(2*time.Minute)
	seen := map[int]bool{}
	for range 1000 {
		seen[s.choose(later, 0)] = true
	}
	if !seen[0] || !seen[1] || !seen[2] {
		t.Fatalf("after the rest and the limit: chosen %v", seen)
	}
}

// upstreamServers starts servers answering each status (0: refused
// connection) and counts the calls of each.
func upstreamServers(t *testing.T, statuses ...int) ([]catalog.Deployment, []*atomic.Int64) {
	t.Helper()
	var deps []catalog.Deployment
	var counts []*atomic.Int64
	for _, status := range statuses {
		n := new(atomic.Int64)
		counts = append(counts, n)
		if status == 0 {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := l.Addr().String()
			l.Close()
			deps = append(deps, catalog.Deployment{BaseURL: "http://" + addr + "/v1"})
			continue
		}
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n.Add(1)
			if status == http.StatusTooManyRequests {
				w.Header().Set("Retry-After", "7")
			}
			w.WriteHeader(status)
			_, _ = io.WriteString(w, `{"id":"x"}`)
		}))
		t.Cleanup(srv.Close)
		deps = append(deps, catalog.Deployment{BaseURL: srv.URL + "/v1"})
	}
	return deps, counts
}

// A call that fails before its answer on one deployment goes on to the
// next within the same Do: a caller sees no error while a healthy
// deployment is left. Each failed attempt
// is reported once under the provider's name; the failed deployments rest
// (a 429 as long as its Retry-After) and come back once their rest is
// over.
func TestDoRetriesOnAnotherDeployment(t *testing.T) {
	deps, counts := upstreamServers(t, http.StatusInternalServerError, 0, http.StatusTooManyRequests, http.StatusOK)
	p := deployed(t, deps...)
	c := New()
	var f failures
	ctx := obs.With(context.Background(), f.record())
	served := 0
	for i := range 20 {
		before := len(f.got)
		resp, err := c.Do(ctx, Request{Provider: p, Path: PathChat, Body: []byte(`{}`)})
		if err != nil {
			t.Fatalf("call %d: %v after %d failed attempts", i, err, len(f.got)-before)
		}
		served++
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != `{"id":"x"}` {
			t.Fatalf("call %d answered %q", i, b)
		}
	}
	slices.Sort(f.got)
	if want := []string{"p/connect", "p/status_429", "p/status_5xx"}; !slices.Equal(f.got, want) {
		t.Fatalf("failed attempts %v, want %v (each once: then it rests)", f.got, want)
	}
	if counts[0].Load() != 1 || counts[2].Load() != 1 || counts[3].Load() != int64(served) || served != 20 {
		t.Fatalf("calls per deployment: 500 %d, 429 %d, ok %d", counts[0].Load(), counts[2].Load(), counts[3].Load())
	}
	s := c.deployments(p)
	now := time.Now().UnixNano()
	if r := time.Duration(s.states[2].restUntil.Load() - now); r < 6*time.Second || r > 7*time.Second {
		t.Fatalf("the 429 rests %v, want its Retry-After (7s)", r)
	}
	if r := time.Duration(s.states[0].restUntil.Load() - now); r < catalog.DefaultCooldown-time.Second || r > catalog.DefaultCooldown {
		t.Fatalf("the 500 rests %v, want the cooldown", r)
	}
	for _, st := range s.states {
		if st.inflight.Load() != 0 {
			t.Fatalf("in flight after every body closed: %d", st.inflight.Load())
		}
	}
	// The rests over, the failing deployment is called again.
	s.states[0].restUntil.Store(0)
	for counts[0].Load() == 1 {
		resp, err := c.Do(ctx, Request{Provider: p, Path: PathChat, Body: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
}

// Only when every deployment failed does Do fail, with the last failure;
// a request the provider calls faulty is not sent again.
func TestDoFailsWhenEveryDeploymentFails(t *testing.T) {
	deps, counts := upstreamServers(t, http.StatusInternalServerError, http.StatusBadGateway, 0)
	p := deployed(t, deps...)
	c := New()
	_, err := c.Do(context.Background(), Request{Provider: p, Path: PathChat, Body: []byte(`{}`)})
	if !Retryable(err) || counts[0].Load() != 1 || counts[1].Load() != 1 {
		t.Fatalf("every deployment failing: %v, calls %d %d", err, counts[0].Load(), counts[1].Load())
	}
	// All resting: the next call still tries them (the soonest first).
	_, err = c.Do(context.Background(), Request{Provider: p, Path: PathChat, Body: []byte(`{}`)})
	if err == nil || counts[0].Load() != 2 || counts[1].Load() != 2 {
		t.Fatalf("every deployment resting: %v, calls %d %d", err, counts[0].Load(), counts[1].Load())
	}

	bad, badCounts := upstreamServers(t, http.StatusBadRequest, http.StatusBadRequest)
	_, err = c.Do(context.Background(), Request{Provider: deployed(t, bad...), Path: PathChat, Body: []byte(`{}`)})
	if gwerr.As(err).Kind != gwerr.Invalid || Retryable(err) || badCounts[0].Load()+badCounts[1].Load() != 1 {
		t.Fatalf("a 400: %v, calls %d %d", err, badCounts[0].Load(), badCounts[1].Load())
	}
}

// doTokens sends one call of tokens prompt tokens to p through c and
// closes its answer.
func doTokens(c *Client, p *catalog.Provider, tokens int64) error {
	resp, err := c.Do(context.Background(), Request{Provider: p, Path: PathChat, Body: []byte(`{}`), Tokens: tokens})
	if err == nil {
		resp.Body.Close()
	}
	return err
}

// A deployment at its requests or tokens per minute is skipped; when
// every one is, the call is refused 429 with a Retry-After, without an
// upstream call.
func TestDoDeploymentLimits(t *testing.T) {
	deps, counts := upstreamServers(t, http.StatusOK, http.StatusOK)
	deps[0].RequestsPerMinute, deps[1].RequestsPerMinute = 2, 3
	p := deployed(t, deps...)
	c := New()
	call := func(tokens int64) error { return doTokens(c, p, tokens) }
	for i := range 5 {
		if err := call(0); err != nil {
			t.Fatalf("call %d within the limits: %v", i, err)
		}
	}
	if counts[0].Load() != 2 || counts[1].Load() != 3 {
		t.Fatalf("calls %d %d, want 2 3", counts[0].Load(), counts[1].Load())
	}
	err := call(0)
	g := gwerr.As(err)
	if g.Kind != gwerr.RateLimited || g.RetryAfter < 1 || g.RetryAfter > 30 || !Retryable(err) || counts[0].Load()+counts[1].Load() != 5 {
		t.Fatalf("every deployment at its limit: %v (retry after %d)", err, g.RetryAfter)
	}

	tdeps, tcounts := upstreamServers(t, http.StatusOK)
	tdeps[0].TokensPerMinute = 1000
	p = deployed(t, tdeps...)
	if err := call(600); err != nil {
		t.Fatal(err)
	}
	if err := call(600); gwerr.As(err).Kind != gwerr.RateLimited || gwerr.As(err).RetryAfter < 1 || tcounts[0].Load() != 1 {
		t.Fatalf("past the tokens per minute: %v, calls %d", err, tcounts[0].Load())
	}
	// A smaller prompt still fits what is left of the minute.
	if err := call(300); err != nil || tcounts[0].Load() != 2 {
		t.Fatalf("a prompt within what is left: %v, calls %d", err, tcounts[0].Load())
	}
}

// A limiter that cannot answer refuses the call (the limits are never
// passed unchecked).
func TestDoLimiterDown(t *testing.T) {
	deps, counts := upstreamServers(t, http.StatusOK)
	deps[0].RequestsPerMinute = 10
	c := New()
	c.SetLimiter(brokenLimiter{})
	_, err := c.Do(context.Background(), Request{Provider: deployed(t, deps...), Path: PathChat, Body: []byte(`{}`)})
	if gwerr.As(err).Kind != gwerr.Unavailable || counts[0].Load() != 0 {
		t.Fatalf("limiter down: %v, calls %d", err, counts[0].Load())
	}
}

// The choice of a deployment (the set's lookup included) is cheap and
// allocates nothing.
func BenchmarkDeploymentChoice(b *testing.B) {
	c := New()
	p := deployed(b, catalog.Deployment{BaseURL: "http://a/v1"}, catalog.Deployment{BaseURL: "http://b/v1", Weight: 2},
		catalog.Deployment{BaseURL: "http://c/v1", Weight: 3}, catalog.Deployment{BaseURL: "http://d/v1"})
	s := c.deployments(p)
	s.states[1].inflight.Store(2)
	s.states[2].ewma.Store(int64(80 * time.Millisecond))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if c.deployments(p).choose(time.Now().UnixNano(), 0) < 0 {
			b.Fatal("no deployment")
		}
	}
}

var errBroken = errors.New("limiter down")

// brokenLimiter fails every check, as a Redis that cannot be reached.
type brokenLimiter struct{}

func (brokenLimiter) Allow(context.Context, string, limits.Budget, int64) (limits.Decision, error) {
	return limits.Decision{}, errBroken
}

// A deployment's limits are kept under its provider, a hash of its base
// URL and its rank among the provider's deployments at that URL: a reload
// that drops or reorders deployments (or a node running another list)
// never hands one deployment's counts to another, and the key names
// neither the URL nor the API key.
func TestDeploymentLimitKeys(t *testing.T) {
	deps, counts := upstreamServers(t, http.StatusOK, http.StatusOK)
	a, b := deps[0], deps[1]
	a.RequestsPerMinute, b.RequestsPerMinute = 1, 1
	a.APIKey, b.APIKey = "sk-secret-a", "sk-secret-b"
	c := New()
	call := func(p *catalog.Provider) error {
		resp, err := c.Do(context.Background(), Request{Provider: p, Path: PathChat, Body: []byte(`{}`)})
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := call(deployed(t, a)); err != nil {
		t.Fatal(err)
	}
	// Reloaded with b first and alone: b's minute is its own.
	if err := call(deployed(t, b)); err != nil || counts[1].Load() != 1 {
		t.Fatalf("b after a reload dropping a: %v (calls %d)", err, counts[1].Load())
	}
	// Reordered: a's minute is still used up, b's too.
	if err := call(deployed(t, b, a)); gwerr.As(err).Kind != gwerr.RateLimited || counts[0].Load() != 1 || counts[1].Load() != 1 {
		t.Fatalf("both used up after reordering: %v (calls %d %d)", err, counts[0].Load(), counts[1].Load())
	}

	s := c.deployments(deployed(t, a, b, a))
	if s.limitKey[0] == s.limitKey[2] || s.limitKey[0] == s.limitKey[1] {
		t.Fatalf("keys %q: want one per deployment", s.limitKey)
	}
	if r := c.deployments(deployed(t, b, a)); r.limitKey[1] != s.limitKey[0] || r.limitKey[0] != s.limitKey[1] {
		t.Fatalf("keys %q and %q: a deployment's key depends on its position", s.limitKey, r.limitKey)
	}
	for _, k := range s.limitKey {
		if !strings.HasPrefix(k, "deployment:p:") || strings.Contains(k, "127.0.0.1") || strings.Contains(k, "sk-secret") {
			t.Fatalf("key %q: want the provider and no URL or key", k)
		}
	}
}

// A prompt refused for its tokens takes no request from the deployment's
// minute.
func TestDoTokensRefusedTakesNoRequest(t *testing.T) {
	deps, counts := upstreamServers(t, http.StatusOK)
	deps[0].RequestsPerMinute, deps[0].TokensPerMinute = 2, 1000
	p := deployed(t, deps...)
	c := New()
	call := func(tokens int64) error { return doTokens(c, p, tokens) }
	if err := call(800); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := call(800); gwerr.As(err).Kind != gwerr.RateLimited {
			t.Fatalf("large prompt %d past the tokens: %v", i, err)
		}
	}
	if err := call(100); err != nil || counts[0].Load() != 2 {
		t.Fatalf("a small prompt with one request left: %v (calls %d)", err, counts[0].Load())
	}
	if err := call(10); gwerr.As(err).Kind != gwerr.RateLimited || counts[0].Load() != 2 {
		t.Fatalf("past the requests: %v (calls %d)", err, counts[0].Load())
	}
}

// A call waits out at most MaxTimeouts deployments that time out, and
// fails with the last; failures that come fast do not count: every
// deployment is tried for them, so a healthy one always answers.
func TestDoBoundsTimeouts(t *testing.T) {
	var sent atomic.Int64
	var deps []catalog.Deployment
	for range 5 {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sent.Add(1)
			w.WriteHeader(http.StatusGatewayTimeout)
		}))
		t.Cleanup(srv.Close)
		deps = append(deps, catalog.Deployment{BaseURL: srv.URL + "/v1"})
	}
	_, err := New().Do(context.Background(), Request{Provider: deployed(t, deps...), Path: PathChat, Body: []byte(`{}`)})
	var e *Error
	if sent.Load() != MaxTimeouts || !errors.As(err, &e) || !Retryable(err) || e.Status != http.StatusGatewayTimeout {
		t.Fatalf("%d deployments called, then %v; want %d, then a 504", sent.Load(), err, MaxTimeouts)
	}

	for round := range 20 {
		sent.Store(0)
		deps = deps[:0]
		for i := range 5 {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				sent.Add(1)
				if i < 4 {
					w.WriteHeader(http.StatusInternalServerError)
					return
				}
				io.WriteString(w, `{}`)
			}))
			t.Cleanup(srv.Close)
			deps = append(deps, catalog.Deployment{BaseURL: srv.URL + "/v1"})
		}
		resp, err := New().Do(context.Background(), Request{Provider: deployed(t, deps...), Path: PathChat, Body: []byte(`{}`)})
		if err != nil {
			t.Fatalf("round %d: %v after %d sends, want the healthy deployment's answer", round, err, sent.Load())
		}
		resp.Body.Close()
	}
}

// A provider made by hand with more deployments than a catalogue allows
// uses the first MaxDeployments: a call that every one refuses ends.
func TestDoHandMadeProviderWithTooManyDeployments(t *testing.T) {
	p := &catalog.Provider{Name: "p", Format: catalog.FormatOpenAI, HeaderTimeout: time.Second}
	for i := range catalog.MaxDeployments + 6 {
		p.Deployments = append(p.Deployments, catalog.Deployment{BaseURL: "http://127.0.0.1:1/v" + strconv.Itoa(i), Weight: 1, TokensPerMinute: 10})
	}
	l := &refusing{t: t}
	c := New()
	c.SetLimiter(l)
	_, err := c.Do(context.Background(), Request{Provider: p, Path: PathChat, Body: []byte(`{}`), Tokens: 5})
	if gwerr.As(err).Kind != gwerr.RateLimited || l.calls != catalog.MaxDeployments {
		t.Fatalf("%v after %d checks, want a 429 after %d", err, l.calls, catalog.MaxDeployments)
	}
}

// refusing refuses every check; past a few hundred the call is looping.
type refusing struct {
	t     *testing.T
	calls int
}

func (l *refusing) Allow(context.Context, string, limits.Budget, int64) (limits.Decision, error) {
	if l.calls++; l.calls > 4*catalog.MaxDeployments {
		l.t.Fatalf("%d limit checks for one call: it does not end", l.calls)
	}
	return limits.Decision{RetryAfter: time.Second}, nil
}

// Samples of the latency arriving together are each folded into the
// average.
func TestObserveConcurrent(t *testing.T) {
	const goroutines, each = 8, 18 // within the folds that each move the average
	const sample = time.Duration(1 << 62)
	var want, got deployState
	want.ewma.Store(1)
	got.ewma.Store(1)
	for range goroutines * each {
		want.observe(sample)
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range goroutines {
		wg.Go(func() {
			<-start
			for range each {
				got.observe(sample)
			}
		})
	}
	close(start)
	wg.Wait()
	if got.ewma.Load() != want.ewma.Load() {
		t.Fatalf("average %d, want %d: samples were lost", got.ewma.Load(), want.ewma.Load())
	}
}

package limits

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/big"
	"sort"
	"sync"
	"testing"
	"time"
)

// fakeClock is a settable clock; tests never sleep.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// step is one Allow call, after moving the clock by advance, and its exact answer.
type step struct {
	advance  time.Duration
	endpoint string // label only: which endpoint spends the budget
	account  string
	budget   Budget
	n        int64
	want     Decision
}

func allowed(remaining int64) Decision { return Decision{Allowed: true, Remaining: remaining} }

func refused(retry time.Duration, remaining int64) Decision {
	return Decision{RetryAfter: retry, Remaining: remaining}
}

// burst returns k single-unit steps at one instant, all allowed, with
// Remaining counting down from first-1.
func burst(endpoint, account string, b Budget, k int, first int64) []step {
	var s []step
	for i := 0; i < k; i++ {
		s = append(s, step{endpoint: endpoint, account: account, budget: b, n: 1, want: allowed(first - 1 - int64(i))})
	}
	return s
}

func concat(parts ...[]step) []step {
	var s []step
	for _, p := range parts {
		s = append(s, p...)
	}
	return s
}

var odd = Budget{Name: "odd", Limit: 7, Period: time.Second} // 142857142.857... ns per unit

// bytesBudget is a budget counted in bytes: 64 MiB a minute, 894.0696... ns a
// byte (the unit count_tokens charges a body's length in).
var bytesBudget = Budget{Name: "count_tokens_bytes", Limit: 64 << 20, Period: time.Minute}

func TestAllow(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
	}{
		{
			name: "60 requests at once, then one per second",
			steps: concat(
				burst("search", "acct", Requests, 60, 60),
				[]step{
					{account: "acct", budget: Requests, n: 1, want: refused(time.Second, 0)},
					{account: "acct", budget: Requests, n: 1, want: refused(time.Second, 0)}, // a refusal took nothing
					{advance: time.Second - 1, account: "acct", budget: Requests, n: 1, want: refused(1, 0)},
					{advance: 1, account: "acct", budget: Requests, n: 1, want: allowed(0)},
					{account: "acct", budget: Requests, n: 1, want: refused(time.Second, 0)},
					{advance: 60 * time.Second, account: "acct", budget: Requests, n: 0, want: allowed(60)},
				},
				burst("search", "acct", Requests, 60, 60),
				[]step{{account: "acct", budget: Requests, n: 1, want: refused(time.Second, 0)}},
			),
		},
		{
			name: "refill is gradual",
			steps: concat(
				burst("speech", "acct", Requests, 60, 60),
				[]step{
					{advance: 10 * time.Second, account: "acct", budget: Requests, n: 0, want: allowed(10)},
					{advance: 500 * time.Millisecond, account: "acct", budget: Requests, n: 11, want: refused(time.Second/2, 10)},
					{account: "acct", budget: Requests, n: 10, want: allowed(0)},
					{advance: 30 * time.Second, account: "acct", budget: Requests, n: 0, want: allowed(30)},
				},
			),
		},
		{
			name: "audio: the whole hour in one call, then 0.1 s per unit",
			steps: []step{
				{endpoint: "transcription", account: "acct", budget: AudioSeconds, n: 36000, want: allowed(0)},
				{endpoint: "speech", account: "acct", budget: AudioSeconds, n: 1, want: refused(100*time.Millisecond, 0)},
				{endpoint: "speech", account: "acct", budget: AudioSeconds, n: 36001, want: refused(time.Hour, 0)},
				{advance: 100 * time.Millisecond, endpoint: "speech", account: "acct", budget: AudioSeconds, n: 1, want: allowed(0)},
				{advance: 30 * time.Minute, endpoint: "speech", account: "acct", budget: AudioSeconds, n: 0, want: allowed(18000)},
			},
		},
		{
			name: "audio: more than the limit is refused for a whole period and takes nothing",
			steps: []step{
				{endpoint: "transcription", account: "acct", budget: AudioSeconds, n: 36001, want: refused(time.Hour, 36000)},
				{endpoint: "transcription", account: "acct", budget: AudioSeconds, n: math.MaxInt64, want: refused(time.Hour, 36000)},
				{endpoint: "transcription", account: "acct", budget: AudioSeconds, n: 36000, want: allowed(0)},
			},
		},
		{
			name: "audio: partial use",
			steps: []step{
				{endpoint: "transcription", account: "acct", budget: AudioSeconds, n: 30000, want: allowed(6000)},
				{endpoint: "speech", account: "acct", budget: AudioSeconds, n: 6001, want: refused(100*time.Millisecond, 6000)},
				{endpoint: "speech", account: "acct", budget: AudioSeconds, n: 6000, want: allowed(0)},
			},
		},
		{
			name: "shared budget: endpoints exhaust it together; other accounts and budgets unaffected",
			steps: concat(
				burst("transcription", "a", Requests, 30, 60),
				burst("search", "a", Requests, 30, 30),
				[]step{
					{endpoint: "search", account: "a", budget: Requests, n: 1, want: refused(time.Second, 0)},
					{endpoint: "transcription", account: "a", budget: Requests, n: 1, want: refused(time.Second, 0)},
					{endpoint: "speech", account: "a", budget: Requests, n: 1, want: refused(time.Second, 0)},
					{endpoint: "search", account: "b", budget: Requests, n: 1, want: allowed(59)},
					{endpoint: "transcription", account: "a", budget: AudioSeconds, n: 120, want: allowed(35880)},
					{endpoint: "speech", account: "a", budget: AudioSeconds, n: 20, want: allowed(35860)},
					{endpoint: "transcription", account: "b", budget: AudioSeconds, n: 0, want: allowed(36000)},
					// Account "a\x00x" must not collide with anything of account "a".
					{account: "a\x00x", budget: Requests, n: 1, want: allowed(59)},
				},
			),
		},
		{
			name: "bytes: a cost per call of a body's length, exact at a unit under a microsecond",
			steps: []step{
				{endpoint: "count_tokens", account: "key_a", budget: bytesBudget, n: 32 << 20, want: allowed(32 << 20)},
				{endpoint: "count_tokens", account: "key_a", budget: bytesBudget, n: 32 << 20, want: allowed(0)},
				{endpoint: "count_tokens", account: "key_a", budget: bytesBudget, n: 1, want: refused(895, 0)},
				// A second refills 10^9 × 2^26 / (6 × 10^10) = 1,118,481.06 bytes.
				{advance: time.Second, endpoint: "count_tokens", account: "key_a", budget: bytesBudget, n: 0, want: allowed(1118481)},
				{endpoint: "count_tokens", account: "key_a", budget: bytesBudget, n: 1118482, want: refused(835, 1118481)},
				{endpoint: "count_tokens", account: "key_a", budget: bytesBudget, n: 1118481, want: allowed(0)},
				{endpoint: "count_tokens", account: "key_b", budget: bytesBudget, n: 64 << 20, want: allowed(0)},
				{endpoint: "count_tokens", account: "key_c", budget: bytesBudget, n: 64<<20 + 1, want: refused(time.Minute, 64<<20)},
				{advance: time.Minute, endpoint: "count_tokens", account: "key_a", budget: bytesBudget, n: 0, want: allowed(64 << 20)},
			},
		},
		{
			name: "uneven emission interval stays exact",
			steps: concat(
				burst("", "acct", odd, 7, 7),
				[]step{
					{account: "acct", budget: odd, n: 1, want: refused(142857143, 0)},
					{advance: 142857142, account: "acct", budget: odd, n: 1, want: refused(1, 0)},
					{advance: 1, account: "acct", budget: odd, n: 1, want: allowed(0)},
					{advance: 500 * time.Millisecond, account: "acct", budget: odd, n: 0, want: allowed(3)},
					{advance: 357142857, account: "acct", budget: odd, n: 0, want: allowed(6)},
					{advance: time.Second, account: "acct", budget: odd, n: 0, want: allowed(7)},
				},
			),
		},
		{
			name: "n <= 0 is allowed and takes nothing",
			steps: []step{
				{account: "acct", budget: Requests, n: 0, want: allowed(60)},
				{account: "acct", budget: Requests, n: -5, want: allowed(60)},
				{account: "acct", budget: Requests, n: 60, want: allowed(0)},
				{account: "acct", budget: Requests, n: 0, want: allowed(0)},
				{account: "acct", budget: Requests, n: math.MinInt64, want: allowed(0)},
			},
		},
		{
			name: "a clock that steps back gives nothing back",
			steps: concat(
				[]step{{advance: 10 * time.Second, account: "acct", budget: Requests, n: 60, want: allowed(0)}},
				[]step{
					{advance: -5 * time.Second, account: "acct", budget: Requests, n: 1, want: refused(time.Second, 0)},
					{advance: 5 * time.Second, account: "acct", budget: Requests, n: 1, want: refused(time.Second, 0)},
					{advance: time.Second, account: "acct", budget: Requests, n: 1, want: allowed(0)},
				},
			),
		},
		{
			name: "a budget whose limit or period changes under the same name stays conservative",
			steps: []step{
				{account: "acct", budget: Requests, n: 30, want: allowed(30)}, // TAT = now + 30 s
				{account: "acct", budget: Budget{Name: "requests", Limit: 120, Period: time.Minute}, n: 0, want: allowed(60)},
				{account: "acct", budget: Budget{Name: "requests", Limit: 60, Period: 10 * time.Second}, n: 1, want: refused(166666667, 0)}, // 30 s clamped to the new period; cost 1/6 s
				{account: "acct", budget: Requests, n: 30, want: allowed(0)},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			l := NewMemory(clock.Now)
			for i, s := range tt.steps {
				clock.Advance(s.advance)
				got, err := l.Allow(context.Background(), s.account, s.budget, s.n)
				if err != nil {
					t.Fatalf("step %d (%s %q %s n=%d): %v", i, s.endpoint, s.account, s.budget.Name, s.n, err)
				}
				if got != s.want {
					t.Fatalf("step %d (%s %q %s n=%d): got %+v, want %+v", i, s.endpoint, s.account, s.budget.Name, s.n, got, s.want)
				}
			}
		})
	}
}

// TestNoDrift: taking one unit at a time, each exactly when RetryAfter says,
// a budget of 7 per second yields exactly 7000 units in 1000 seconds: the
// fractional emission interval does not accumulate rounding.
func TestNoDrift(t *testing.T) {
	clock := newFakeClock()
	l := NewMemory(clock.Now)
	ctx := context.Background()
	if d, _ := l.Allow(ctx, "acct", odd, 7); !d.Allowed {
		t.Fatal("burst refused")
	}
	var elapsed time.Duration
	for k := 0; k < 7000; k++ {
		d, _ := l.Allow(ctx, "acct", odd, 1)
		if d.Allowed {
			t.Fatalf("unit %d allowed before its time", k)
		}
		clock.Advance(d.RetryAfter)
		elapsed += d.RetryAfter
		if d, _ = l.Allow(ctx, "acct", odd, 1); !d.Allowed {
			t.Fatalf("unit %d refused after RetryAfter: %+v", k, d)
		}
	}
	if elapsed != 1000*time.Second {
		t.Fatalf("7000 units took %v, want 1000s", elapsed)
	}
	if d, _ := l.Allow(ctx, "acct", odd, 1); d != refused(142857143, 0) {
		t.Fatalf("after 1000s: %+v", d)
	}
}

func TestInvalidBudget(t *testing.T) {
	l := NewMemory(nil)
	for _, b := range []Budget{
		{Name: "zero limit", Limit: 0, Period: time.Minute},
		{Name: "negative limit", Limit: -1, Period: time.Minute},
		{Name: "zero period", Limit: 1},
		{Name: "negative period", Limit: 1, Period: -time.Second},
	} {
		if _, err := l.Allow(context.Background(), "acct", b, 1); !errors.Is(err, ErrInvalidBudget) {
			t.Errorf("%s: err = %v, want ErrInvalidBudget", b.Name, err)
		}
	}
	for _, b := range []Budget{Requests, AudioSeconds} {
		if err := b.Validate(); err != nil {
			t.Errorf("%s: %v", b.Name, err)
		}
	}
}

func TestSpecBudgets(t *testing.T) {
	if Requests != (Budget{Name: "requests", Limit: 60, Period: time.Minute}) {
		t.Errorf("Requests = %+v", Requests)
	}
	if AudioSeconds != (Budget{Name: "audio_seconds", Limit: 36000, Period: time.Hour}) {
		t.Errorf("AudioSeconds = %+v", AudioSeconds)
	}
	if got := Key("acct", Requests); got != "acct\x00requests" {
		t.Errorf("Key = %q", got)
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want int
	}{
		{0, 1},
		{-time.Second, 1},
		{1, 1},
		{100 * time.Millisecond, 1},
		{time.Second, 1},
		{time.Second + 1, 2},
		{1200 * time.Millisecond, 2},
		{59*time.Second + 1, 60},
		{time.Minute, 60},
		{time.Hour, 3600},
		{math.MaxInt64, int(math.MaxInt64/int64(time.Second)) + 1},
	}
	for _, tt := range tests {
		if got := RetryAfterSeconds(tt.d); got != tt.want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", tt.d, got, tt.want)
		}
	}
}

func TestConcurrent(t *testing.T) {
	clock := newFakeClock()
	l := NewMemory(clock.Now)
	b := Budget{Name: "c", Limit: 60, Period: time.Minute}
	const callers = 200
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		remaining []int64
		refusals  int
	)
	start := make(chan struct{})
	for i := 0; i < callers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			d, err := l.Allow(context.Background(), "acct", b, 1)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if d.Allowed {
				remaining = append(remaining, d.Remaining)
			} else {
				refusals++
				if d.RetryAfter != time.Second || d.Remaining != 0 {
					t.Errorf("refusal %+v", d)
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(remaining) != 60 || refusals != callers-60 {
		t.Fatalf("allowed %d, refused %d; want 60 and %d", len(remaining), refusals, callers-60)
	}
	sort.Slice(remaining, func(i, j int) bool { return remaining[i] < remaining[j] })
	for i, r := range remaining {
		if r != int64(i) {
			t.Fatalf("Remaining values %v, want 0..59 once each", remaining)
		}
	}
}

func TestSweep(t *testing.T) {
	clock := newFakeClock()
	l := NewMemory(clock.Now)
	l.minSweep, l.sweepAt = 16, 16
	ctx := context.Background()
	size := func() int {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.m)
	}

	// One account uses its whole hour of audio: its TAT is an hour away.
	if d, _ := l.Allow(ctx, "heavy", AudioSeconds, 36000); !d.Allowed {
		t.Fatal("heavy refused")
	}
	const accounts = 1000
	for i := 0; i < accounts; i++ {
		if d, _ := l.Allow(ctx, fmt.Sprint("a", i), Requests, 1); !d.Allowed {
			t.Fatalf("account %d refused", i)
		}
	}
	if got := size(); got != accounts+1 {
		t.Fatalf("size %d, want %d (nothing had expired yet)", got, accounts+1)
	}

	clock.Advance(2 * time.Second) // every request TAT (1 s) is now in the past
	added, shrunk := 0, false
	for ; added < 2*accounts && !shrunk; added++ {
		before := size()
		if _, err := l.Allow(ctx, fmt.Sprint("b", added), Requests, 1); err != nil {
			t.Fatal(err)
		}
		shrunk = size() < before
	}
	if !shrunk {
		t.Fatal("the map never shrank")
	}
	// Left: "heavy" and the new accounts, whose TATs are still ahead.
	if got := size(); got != added+1 {
		t.Fatalf("size %d after sweep, want %d", got, added+1)
	}
	// The live entry survived the sweep: 2 s refilled 20 of its 36000 units.
	if d, _ := l.Allow(ctx, "heavy", AudioSeconds, 21); d != refused(100*time.Millisecond, 20) {
		t.Fatalf("heavy after sweep: %+v, want refused with 100ms and 20 remaining", d)
	}
}

// TestSweepBounded: with a steady stream of new accounts, each expiring a
// second later, the map stays near its sweep threshold.
func TestSweepBounded(t *testing.T) {
	clock := newFakeClock()
	l := NewMemory(clock.Now)
	ctx := context.Background()
	b := Budget{Name: "b", Limit: 1, Period: time.Second}
	for i := 0; i < 100_000; i++ {
		if d, _ := l.Allow(ctx, fmt.Sprint(i), b, 1); !d.Allowed {
			t.Fatalf("account %d refused", i)
		}
		clock.Advance(time.Second)
		if len(l.m) > minSweep {
			t.Fatalf("after %d accounts the map holds %d", i+1, len(l.m))
		}
	}
}

func TestDestruct(t *testing.T) {
	var d interface{ Destruct() error } = NewMemory(nil) // caddy.Destructor
	if err := d.Destruct(); err != nil {
		t.Fatal(err)
	}
	var _ Limiter = NewMemory(nil)
}

// refGCRA is an independent model of one key, in exact rationals.
type refGCRA struct {
	L, P int64
	tat  *big.Rat // absolute, ns since the start; nil: never used
	// allowed takes, for the window invariant (see take)
	sum, minTerm *big.Int
}

func (r *refGCRA) allow(now, n int64) Decision {
	bnow := new(big.Rat).SetInt64(now)
	start := bnow
	if r.tat != nil && r.tat.Cmp(bnow) > 0 {
		start = r.tat
	}
	rem := func(tat *big.Rat) int64 {
		// floor((now + P - tat) * L / P)
		x := new(big.Rat).Add(bnow, new(big.Rat).SetInt64(r.P))
		x.Sub(x, tat)
		x.Mul(x, new(big.Rat).SetFrac64(r.L, r.P))
		if x.Sign() < 0 {
			return 0
		}
		q := new(big.Int).Quo(x.Num(), x.Denom())
		return q.Int64()
	}
	if n <= 0 {
		return Decision{Allowed: true, Remaining: rem(start)}
	}
	if n > r.L {
		return Decision{RetryAfter: time.Duration(r.P), Remaining: rem(start)}
	}
	cost := new(big.Rat).SetFrac(new(big.Int).Mul(big.NewInt(n), big.NewInt(r.P)), big.NewInt(r.L))
	newTAT := new(big.Rat).Add(start, cost)
	allowAt := new(big.Rat).Sub(newTAT, new(big.Rat).SetInt64(r.P))
	if allowAt.Cmp(bnow) > 0 {
		wait := new(big.Rat).Sub(allowAt, bnow)
		q, m := new(big.Int).QuoRem(wait.Num(), wait.Denom(), new(big.Int))
		if m.Sign() != 0 {
			q.Add(q, big.NewInt(1))
		}
		return Decision{RetryAfter: time.Duration(q.Int64()), Remaining: rem(start)}
	}
	r.tat = newTAT
	return Decision{Allowed: true, Remaining: rem(newTAT)}
}

// take records n units allowed at time b and verifies GCRA's bound: for
// every earlier take at time a, the units taken in [a, b] are at most
// L + (b-a)*L/P. (So at most L at one instant, and fewer than 2L in any window
// shorter than Period; GCRA with burst L does allow L at once and then one
// more every Period/L, so "at most L in any window of length Period" does not
// hold.) With S(i) the units taken up to and including take i, the bound for
// takes i..k is S(k)*P - t(k)*L <= L*P + S(i-1)*P - t(i)*L, so keeping the
// minimum of the right-hand term over i makes each check O(1).
func (r *refGCRA) take(t *testing.T, b, n int64) {
	if r.sum == nil {
		r.sum = new(big.Int)
	}
	P, L := big.NewInt(r.P), big.NewInt(r.L)
	tL := new(big.Int).Mul(big.NewInt(b), L)
	term := new(big.Int).Mul(r.sum, P) // S(k-1)*P - t(k)*L
	term.Sub(term, tL)
	if r.minTerm == nil || term.Cmp(r.minTerm) < 0 {
		r.minTerm = term
	}
	r.sum.Add(r.sum, big.NewInt(n))
	lhs := new(big.Int).Mul(r.sum, P)
	lhs.Sub(lhs, tL)
	rhs := new(big.Int).Mul(L, P)
	rhs.Add(rhs, r.minTerm)
	if lhs.Cmp(rhs) > 0 {
		t.Fatalf("limit %d per %d ns: the window invariant fails at %d ns (%d units in total)", r.L, r.P, b, r.sum)
	}
}

func normalize(v int64) int64 {
	switch {
	case v == math.MinInt64:
		return math.MaxInt64
	case v < 0:
		return -v
	case v == 0:
		return 1
	}
	return v
}

func FuzzAllow(f *testing.F) {
	f.Add(int64(60), int64(time.Minute), int64(36000), int64(time.Hour), []byte{0, 0, 0, 60, 0, 0, 0, 1, 4, 200, 0, 1})
	f.Add(int64(7), int64(time.Second), int64(1), int64(1), []byte{1, 3, 64, 0, 2, 9, 160, 1, 15, 31, 32, 1, 7, 128, 48, 90})
	f.Add(int64(math.MaxInt64), int64(1), int64(1), int64(math.MaxInt64), []byte{0, 0, 64, 0, 2, 0, 64, 0, 11, 255, 160, 3})
	f.Add(int64(3), int64(10), int64(-5), int64(0), []byte{8, 255, 0, 2, 9, 1, 48, 1, 14, 7, 224, 200})
	f.Add(int64(36000), int64(time.Hour), int64(60), int64(time.Minute), []byte{0, 0, 64, 0, 0, 0, 0, 1, 0, 0, 48, 0})

	f.Fuzz(fuzzAllow)
}

// maxOps bounds the operations one fuzz input runs, so that an execution
// stays cheap enough for the fuzzer's minimizer.
const maxOps = 64

// fuzzAllow runs ops (4 bytes each) against Memory and against refGCRA, an
// independent model in exact rationals, with sweeps as frequent as possible.
func fuzzAllow(t *testing.T, l1, p1, l2, p2 int64, ops []byte) {
	clock := newFakeClock()
	l := NewMemory(clock.Now)
	l.minSweep, l.sweepAt = 2, 2 // sweep as often as possible: it must not change any answer
	ctx := context.Background()

	raw := [2]Budget{{"x", l1, time.Duration(p1)}, {"y", l2, time.Duration(p2)}}
	var budgets [2]Budget
	for i, b := range raw {
		_, err := l.Allow(ctx, "a", b, 0)
		if (b.Limit <= 0 || b.Period <= 0) != errors.Is(err, ErrInvalidBudget) {
			t.Fatalf("budget %+v: err %v", b, err)
		}
		budgets[i] = Budget{b.Name, normalize(b.Limit), time.Duration(normalize(int64(b.Period)))}
	}

	var elapsed int64
	const maxElapsed = 1 << 62
	advance := func(d int64) bool {
		if d < 0 || d > maxElapsed-elapsed {
			return false
		}
		elapsed += d
		clock.Advance(time.Duration(d))
		return true
	}

	models := map[int]*refGCRA{}
	call := func(key int, n int64) Decision {
		account := [2]string{"a", "b"}[key&1]
		b := budgets[key>>1]
		m := models[key]
		if m == nil {
			m = &refGCRA{L: b.Limit, P: int64(b.Period)}
			models[key] = m
		}
		got, err := l.Allow(ctx, account, b, n)
		if err != nil {
			t.Fatalf("Allow(%q, %+v, %d): %v", account, b, n, err)
		}
		want := m.allow(elapsed, n)
		if got != want {
			t.Fatalf("at %d ns Allow(%q, %+v, %d) = %+v, model says %+v", elapsed, account, b, n, got, want)
		}
		if got.Allowed == (got.RetryAfter > 0) || got.RetryAfter < 0 {
			t.Fatalf("Allow(%d) = %+v: RetryAfter must be > 0 exactly when refused", n, got)
		}
		if got.Remaining < 0 || got.Remaining > b.Limit {
			t.Fatalf("Allow(%d) = %+v: Remaining outside [0, %d]", n, got, b.Limit)
		}
		if n > b.Limit && (got.Allowed || got.RetryAfter != b.Period) {
			t.Fatalf("Allow(%d) over limit %d = %+v", n, b.Limit, got)
		}
		if got.Allowed && n > 0 {
			m.take(t, elapsed, n)
		}
		return got
	}

	if len(ops) > 4*maxOps {
		ops = ops[:4*maxOps]
	}
	for ; len(ops) >= 4; ops = ops[4:] {
		b0, b1, b2, b3 := ops[0], ops[1], ops[2], ops[3]
		key := int(b0 & 3)
		b := budgets[key>>1]
		P, L := int64(b.Period), b.Limit

		switch (b0 >> 2) & 3 {
		case 1:
			advance(int64(b1))
		case 2:
			advance(P/256*int64(b1) + int64(b1))
		case 3:
			if q := P / 16; q <= math.MaxInt64/32 {
				advance(q * int64(b1%32))
			}
		}

		var n int64
		switch b2 >> 6 {
		case 0:
			n = int64(b3)
		case 1:
			n = L - int64(b3)
		case 2:
			n = L + int64(b3)
			if L > math.MaxInt64-int64(b3) {
				n = math.MaxInt64
			}
		case 3:
			if b3&0x80 != 0 {
				n = int64(int8(b3))
			} else {
				n = L/128*int64(b3) + int64(b3&1)
			}
		}

		d := call(key, n)

		// RetryAfter is exact: one ns earlier the same call is still
		// refused, at RetryAfter it is allowed.
		if b2&0x20 != 0 && !d.Allowed && n <= L && int64(d.RetryAfter) <= maxElapsed-elapsed {
			advance(int64(d.RetryAfter) - 1)
			if d2 := call(key, n); d2.Allowed {
				t.Fatalf("allowed %d units 1 ns before RetryAfter %v", n, d.RetryAfter)
			}
			advance(1)
			if d2 := call(key, n); !d2.Allowed {
				t.Fatalf("refused %d units at RetryAfter %v: %+v", n, d.RetryAfter, d2)
			}
		}
		// Remaining is exact: Remaining+1 units are refused, Remaining are allowed.
		if b2&0x10 != 0 {
			d = call(key, 0)
			if d.Remaining < L {
				if d2 := call(key, d.Remaining+1); d2.Allowed {
					t.Fatalf("Remaining %d but %d allowed", d.Remaining, d.Remaining+1)
				}
			}
			if d.Remaining > 0 {
				if d2 := call(key, d.Remaining); !d2.Allowed || d2.Remaining != 0 {
					t.Fatalf("Remaining %d but taking it gave %+v", d.Remaining, d2)
				}
			}
		}
	}
}

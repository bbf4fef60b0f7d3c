package limits_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/limits"
	"github.com/caddy-gw/caddy-gw/internal/testsvc"
)

func newRedis(t *testing.T, url string) *limits.Redis {
	t.Helper()
	l, err := limits.NewRedis(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Destruct() })
	return l
}

// The shared per-minute budget is exact across nodes: two limiters on one
// Redis (two gateway nodes) share one account's 60 requests, and other
// accounts and budgets are untouched.
func TestRedisSharedAcrossNodes(t *testing.T) {
	url := testsvc.Redis(t)
	a, b := newRedis(t, url), newRedis(t, url)
	ctx := context.Background()
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			node := a
			if i%2 == 1 {
				node = b
			}
			d, err := node.Allow(ctx, "acct", limits.Requests, 1)
			if err != nil {
				t.Error(err)
				return
			}
			if d.Allowed {
				allowed.Add(1)
			} else if d.RetryAfter <= 0 || d.RetryAfter > time.Second {
				t.Errorf("refused with RetryAfter %v, want (0, 1s]", d.RetryAfter)
			}
		}()
	}
	wg.Wait()
	if got := allowed.Load(); got != limits.RequestsPerMinute {
		t.Fatalf("allowed %d calls of 200 across two nodes, want %d", got, limits.RequestsPerMinute)
	}
	d, err := b.Allow(ctx, "other", limits.Requests, 1)
	if err != nil || !d.Allowed || d.Remaining != limits.RequestsPerMinute-1 {
		t.Fatalf("another account: %+v, %v", d, err)
	}
	d, err = a.Allow(ctx, "acct", limits.AudioSeconds, 600)
	if err != nil || !d.Allowed || d.Remaining != limits.AudioSecondsPerHour-600 {
		t.Fatalf("another budget: %+v, %v", d, err)
	}
}

// Units are taken all or nothing, more than the whole budget is never
// allowed, and n <= 0 only reports what is left.
func TestRedisUnits(t *testing.T) {
	l := newRedis(t, testsvc.Redis(t))
	ctx := context.Background()
	b := limits.AudioSeconds
	steps := []struct {
		n             int64
		allowed       bool
		remaining     int64
		retryPositive bool
	}{
		{0, true, 36000, false},
		{30000, true, 6000, false},
		{7000, false, 6000, true},
		{6000, true, 0, false},
		{36001, false, 0, true},
	}
	for i, s := range steps {
		d, err := l.Allow(ctx, "acct", b, s.n)
		if err != nil {
			t.Fatal(err)
		}
		// Remaining may have grown by a unit or two while the test ran
		// (a unit refills every 100 ms).
		if d.Allowed != s.allowed || d.Remaining < s.remaining || d.Remaining > s.remaining+2 || (d.RetryAfter > 0) != s.retryPositive {
			t.Fatalf("step %d (n=%d): %+v, want allowed=%v remaining≈%d", i, s.n, d, s.allowed, s.remaining)
		}
	}
	d, _ := l.Allow(ctx, "acct", b, 36001)
	if d.RetryAfter != b.Period {
		t.Fatalf("n over the limit: RetryAfter %v, want the period", d.RetryAfter)
	}
	if _, err := l.Allow(ctx, "acct", limits.Budget{Name: "bad"}, 1); err == nil {
		t.Fatal("an invalid budget was enforced")
	}
}

// A Redis that cannot answer is an error, never an allowance.
func TestRedisDown(t *testing.T) {
	l := newRedis(t, "unix://"+t.TempDir()+"/absent.sock")
	d, err := l.Allow(context.Background(), "acct", limits.Requests, 1)
	if err == nil || d.Allowed {
		t.Fatalf("Allow with Redis down = %+v, %v; want an error", d, err)
	}
}

// A budget of bytes (a call costs its body's length) is shared by the
// nodes on one Redis: what one node took is missing on the other, a call
// over what is left is refused with the wait for the missing bytes and
// takes nothing, and another key's budget is whole.
func TestRedisBytesAcrossNodes(t *testing.T) {
	url := testsvc.Redis(t)
	a, b := newRedis(t, url), newRedis(t, url)
	ctx := context.Background()
	budget := limits.Budget{Name: "count_tokens_bytes", Limit: 64 << 20, Period: time.Minute}
	// Bytes refill at 64 MiB a minute, 1,118,481 a second: the test's own
	// time may have given a few back.
	const slack = 1118481
	d, err := a.Allow(ctx, "key_a", budget, 40<<20)
	if err != nil || !d.Allowed || d.Remaining < 24<<20 || d.Remaining > 24<<20+slack {
		t.Fatalf("40 MiB on node a: %+v, %v", d, err)
	}
	// 32 MiB wants 8 MiB more than is left: 7.5 s at 64 MiB a minute.
	d, err = b.Allow(ctx, "key_a", budget, 32<<20)
	if err != nil || d.Allowed || d.RetryAfter > 7500*time.Millisecond || d.RetryAfter < 6500*time.Millisecond {
		t.Fatalf("32 MiB on node b after 40 MiB on node a: %+v, %v; want refused, retry after ≈7.5s", d, err)
	}
	d, err = b.Allow(ctx, "key_a", budget, 24<<20)
	if err != nil || !d.Allowed || d.Remaining > slack {
		t.Fatalf("24 MiB on node b: %+v, %v; want allowed with nothing left", d, err)
	}
	d, err = a.Allow(ctx, "key_b", budget, 64<<20)
	if err != nil || !d.Allowed || d.Remaining != 0 {
		t.Fatalf("another key: %+v, %v; want its whole budget", d, err)
	}
	d, err = a.Allow(ctx, "key_c", budget, 64<<20+1)
	if err != nil || d.Allowed || d.RetryAfter != time.Minute || d.Remaining != 64<<20 {
		t.Fatalf("more than the whole budget: %+v, %v", d, err)
	}
}

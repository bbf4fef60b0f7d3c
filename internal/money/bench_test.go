package money

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/internal/store/cached"
	"github.com/caddy-gw/caddy-gw/internal/store/sqlite"
	"github.com/caddy-gw/caddy-gw/internal/testsvc"
)

// chargedAtOnce is the hot path's store with every charge made at once
// and nowhere: the gate's benchmarks measure the gate, not the disk.
type chargedAtOnce struct{ *cached.Store }

func (chargedAtOnce) Settle(context.Context, *store.Entry) (bool, error) { return true, nil }

func (chargedAtOnce) SettleLater(context.Context, *store.Entry) func() (bool, error) {
	return func() (bool, error) { return true, nil }
}

// BenchmarkGate is one call's way through the gate (ReserveFor, then
// Settle) on the hot path's store (accounts, keys and organizations read
// from memory), one call after another: "plain" is a call made with a key
// without caps by an account in no organization, "caps" one made with a
// key with daily, monthly and total caps by an account in an
// organization with daily and monthly caps (all far above what the calls
// spend), on one node's locks in memory and on Redis's.
func BenchmarkGate(b *testing.B) {
	for _, locks := range []string{"memory", "redis"} {
		for _, caps := range []string{"plain", "caps"} {
			b.Run(locks+"/"+caps, func(b *testing.B) {
				g, trips := benchGate(b, locks, caps == "caps")
				ctx := context.Background()
				p := Payer{Account: "a", Key: "k"}
				est, cost := usd("0.002"), usd("0.001")
				call := func() {
					h, err := g.ReserveFor(ctx, p, Chat, est)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := h.Settle(ctx, &store.Entry{RequestID: "r", KeyID: "k", Cost: cost, Unit: "token"}); err != nil {
						b.Fatal(err)
					}
				}
				call() // the scripts loaded, the states read
				trips.Store(0)
				b.ReportAllocs()
				for b.Loop() {
					call()
				}
				if locks == "redis" {
					b.ReportMetric(float64(trips.Load())/float64(b.N), "round-trips/op")
				}
			})
		}
	}
}

// BenchmarkGateCharged is BenchmarkGate on memory locks with the charge
// made too, as the hot path's store makes it: counted in memory, written to
// the charge log (synced within a second, durability interval) and applied
// to SQLite behind the calls, the applier's work on the same processor. A
// call's every cost in the money's path is in it but the sync's wait.
func BenchmarkGateCharged(b *testing.B) {
	for _, caps := range []string{"plain", "caps"} {
		b.Run(caps, func(b *testing.B) {
			g, _ := benchGate(b, "memory", caps == "caps")
			c := g.Store.(chargedAtOnce).Store
			if err := c.SetSyncInterval(cached.MaxSyncInterval); err != nil {
				b.Fatal(err)
			}
			g.Store, g.Now = c, nil
			ctx := context.Background()
			p := Payer{Account: "a", Key: "k"}
			est, cost := usd("0.002"), usd("0.000001")
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				h, err := g.ReserveFor(ctx, p, Chat, est)
				if err != nil {
					b.Fatal(err)
				}
				e := &store.Entry{RequestID: "r" + strconv.Itoa(i), KeyID: "k", Endpoint: "chat", Model: "m", Units: 88, Unit: "token", Cost: cost}
				if _, err := h.Settle(ctx, e); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchGate is a gate on the hot path's store holding account a and its
// key k, with caps (and a in organization acme with caps) when caps is
// set, on locks "memory" or "redis" (a Redis server of its own); trips
// counts the round trips to Redis.
func benchGate(b *testing.B, locks string, caps bool) (g *Gate, trips *atomic.Int64) {
	b.Helper()
	ctx := context.Background()
	dir := b.TempDir()
	db, err := sqlite.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	c, err := cached.New(db, dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	far := usd("1000000")
	acc := store.Account{ID: "a", Plan: store.PlanPaid, Cleared: true, CreatedAt: t0}
	key := store.Key{ID: "k", AccountID: "a", Hash: store.HashSecret("k")}
	if caps {
		if err := c.CreateOrg(ctx, store.Org{ID: "acme", DailyCap: &far, MonthlyCap: &far, CreatedAt: t0}); err != nil {
			b.Fatal(err)
		}
		acc.Org = "acme"
		key.DailyCap, key.MonthlyCap, key.TotalCap = &far, &far, &far
	}
	if err := c.CreateAccount(ctx, acc); err != nil {
		b.Fatal(err)
	}
	if err := c.CreateKey(ctx, key); err != nil {
		b.Fatal(err)
	}
	g = &Gate{Store: chargedAtOnce{c}, Locks: NewMemoryLocks(), Policy: Policy{Ceiling: DefaultCeiling}, Now: func() time.Time { return t0 }}
	trips = new(atomic.Int64)
	if locks == "redis" {
		rs := testsvc.RedisServer(b)
		client := redisClientAt(b, rs.URL())
		client.AddHook(tripCounter{trips})
		// No renewal: its round trips are no call's.
		l := newRedisLocks(client, HoldLease, time.Hour, RestoreWait)
		if err := l.first(ctx); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Destruct() })
		g.Locks = l
	}
	return g, trips
}

// tripCounter counts a Redis client's round trips: each command, and each
// pipeline as one.
type tripCounter struct{ n *atomic.Int64 }

func (tripCounter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c tripCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c tripCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

// The hot path's store reads a key's or an organization's record and
// spend in one go.
var _ bounder = (*cached.Store)(nil)

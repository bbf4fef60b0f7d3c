package sqlite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// BenchmarkSettle is one durable charge at a time: one transaction, one
// commit, one fsync each (the hot path's floor at one connection).
func BenchmarkSettle(b *testing.B) {
	db, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	if err := db.CreateAccount(ctx, store.Account{ID: "a", Plan: store.PlanPaid}); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := db.Settle(ctx, &store.Entry{RequestID: fmt.Sprintf("r%d", i), AccountID: "a", Cost: 1000, Unit: "token", Time: time.Now()}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSettleBatch is the applier's work: batches of 512 charges
// spread over 1 or 32 accounts, one transaction and one fsync each.
// ns/row is the cost of one charge.
func BenchmarkSettleBatch(b *testing.B) {
	for _, c := range []struct {
		accounts int
		keys     bool
	}{{1, false}, {32, false}, {32, true}} {
		accounts := c.accounts
		b.Run(fmt.Sprintf("accounts=%d/keys=%v", accounts, c.keys), func(b *testing.B) {
			db, err := Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			ctx := context.Background()
			for a := range accounts {
				if err := db.CreateAccount(ctx, store.Account{ID: fmt.Sprint("a", a), Plan: store.PlanPaid}); err != nil {
					b.Fatal(err)
				}
				// With keys, each account's calls are made with its capped key.
				if c.keys {
					capped := pricing.USD(1000)
					if err := db.CreateKey(ctx, store.Key{ID: fmt.Sprint("k", a), AccountID: fmt.Sprint("a", a), Hash: fmt.Sprint("h", a), DailyCap: &capped}); err != nil {
						b.Fatal(err)
					}
				}
			}
			const n = 512
			entries := make([]store.Entry, n)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				for j := range entries {
					// Ids that grow with time, as the gateway's do.
					entries[j] = store.Entry{RequestID: fmt.Sprintf("req-%012d%04d", i, j), AccountID: fmt.Sprint("a", j%accounts),
						Endpoint: "chat", Model: "gpt-4.1-mini", Units: 88, Unit: "token", Cost: 1000, Time: time.Now()}
					if c.keys {
						entries[j].KeyID = fmt.Sprint("k", j%accounts)
					}
				}
				if _, err := db.SettleBatch(ctx, entries); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
		})
	}
}

package sqlite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/store"
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
	for _, accounts := range []int{1, 32} {
		b.Run(fmt.Sprintf("accounts=%d", accounts), func(b *testing.B) {
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
			}
			const n = 512
			entries := make([]store.Entry, n)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				for j := range entries {
					// Ids that grow with time, as the gateway's do.
					entries[j] = store.Entry{RequestID: fmt.Sprintf("req-%012d%04d", i, j), AccountID: fmt.Sprint("a", j%accounts),
						Endpoint: "chat", Model: "gpt-4.1-mini", Units: 88, Unit: "token", Cost: 1000, Time: time.Now()}
				}
				if _, err := db.SettleBatch(ctx, entries); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
		})
	}
}

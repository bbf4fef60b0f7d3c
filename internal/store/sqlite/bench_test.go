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
		if _, err := db.Settle(ctx, store.Entry{RequestID: fmt.Sprintf("r%d", i), AccountID: "a", Cost: 1000, Unit: "token", Time: time.Now()}); err != nil {
			b.Fatal(err)
		}
	}
}

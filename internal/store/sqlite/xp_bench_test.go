package sqlite

import (
	"context"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/store"
)

func BenchmarkXPSettleBatch(b *testing.B) {
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
	const n = 512
	es := make([]store.Entry, n)
	for b.Loop() {
		for i := range es {
			es[i] = store.Entry{RequestID: pipeline.NewRequestID(""), AccountID: "a", Endpoint: "chat", Model: "gpt-4.1-mini", Units: 88, Cost: 1000, Unit: "token", Time: time.Now()}
		}
		if _, err := db.SettleBatch(ctx, es); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/row")
}

package money

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/store"
)

func BenchmarkGateParallel(b *testing.B) {
	for _, caps := range []string{"plain", "caps"} {
		b.Run(caps, func(b *testing.B) {
			g, _ := benchGate(b, "memory", caps == "caps")
			ctx := context.Background()
			p := Payer{Account: "a", Key: "k"}
			est, cost := usd("0.002"), usd("0.001")
			var n atomic.Int64
			b.SetParallelism(32)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					h, err := g.ReserveFor(ctx, p, Chat, est)
					if err != nil {
						b.Fatal(err)
					}
					if _, err := h.Settle(ctx, &store.Entry{RequestID: fmt.Sprint("r", n.Add(1)), KeyID: "k", Cost: cost, Unit: "token"}); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

package pipeline_test

import (
	"context"
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/pipeline"
	"github.com/caddy-gw/caddy-gw/internal/store"
)

// BenchmarkObserve: a billed call through the pipeline without the
// metrics and the host's annotation, and with them: the difference is
// what observing a call costs.
func BenchmarkObserve(b *testing.B) {
	for _, tc := range []struct {
		name     string
		metrics  *pipeline.Metrics
		annotate func(context.Context, *pipeline.Annotation)
	}{
		{"unobserved", nil, nil},
		{"observed", pipeline.NewMetrics(), func(context.Context, *pipeline.Annotation) {}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			f := newFixture(&testing.T{}, store.Account{Plan: store.PlanPaid, Cleared: true, PAYG: true})
			f.gw.Metrics, f.gw.Annotate = tc.metrics, tc.annotate
			b.ReportAllocs()
			for b.Loop() {
				f.call()
			}
		})
	}
}

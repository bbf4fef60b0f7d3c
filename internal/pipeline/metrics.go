package pipeline

import (
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the gateway's Prometheus collectors. They are created once
// per process and registered into each config's registry (Register), since
// Caddy's registry is new on every config load.
type Metrics struct {
	Requests       *prometheus.CounterVec
	Duration       *prometheus.HistogramVec
	UpstreamErrors *prometheus.CounterVec
	// ChargeCommit is the time each batch of charges took to become
	// durable (the charge log's write and sync, or the batch's
	// transaction); ChargesCommitted counts the charges they held.
	ChargeCommit     prometheus.Histogram
	ChargesCommitted prometheus.Counter
}

// ChargeCommitBuckets are ChargeCommit's upper bounds: 25 µs apart up to
// 1 ms, where a sync usually ends, so its quantiles can be read closely;
// wider up to 2.5 s beyond.
func ChargeCommitBuckets() []float64 {
	var b []float64
	for us := 25; us <= 1000; us += 25 {
		b = append(b, float64(us)/1e6)
	}
	return append(b, 0.0015, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5)
}

// NewMetrics creates the collectors.
func NewMetrics() *Metrics {
	return &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "gw", Name: "requests_total",
			Help: "Requests answered by the gateway, by route family and status.",
		}, []string{"family", "code"}),
		Duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "gw", Name: "request_duration_seconds",
			Help:    "Time to answer a request, by route family.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
		}, []string{"family"}),
		UpstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "gw", Name: "upstream_errors_total",
			Help: "Failed upstream calls, by route family and provider.",
		}, []string{"family", "provider"}),
		ChargeCommit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "gw", Name: "charge_commit_seconds",
			Help:    "Time a batch of charges took to become durable (the charge log's write and sync, or the batch's transaction).",
			Buckets: ChargeCommitBuckets(),
		}),
		ChargesCommitted: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "gw", Name: "charges_committed_total",
			Help: "Charges made durable, in all batches.",
		}),
	}
}

// ObserveCommit records a batch of charges made durable in d.
func (m *Metrics) ObserveCommit(d time.Duration, charges int) {
	m.ChargeCommit.Observe(d.Seconds())
	m.ChargesCommitted.Add(float64(charges))
}

// Register adds the collectors to reg, keeping whichever collector is
// already registered under the same name.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.Requests, m.Duration, m.UpstreamErrors, m.ChargeCommit, m.ChargesCommitted} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				return err
			}
		}
	}
	return nil
}

func (m *Metrics) observe(family string, status int, d time.Duration) {
	if m == nil {
		return
	}
	m.Requests.WithLabelValues(family, strconv.Itoa(status)).Inc()
	m.Duration.WithLabelValues(family).Observe(d.Seconds())
}

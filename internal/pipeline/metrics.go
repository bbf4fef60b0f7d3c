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
	}
}

// Register adds the collectors to reg, keeping whichever collector is
// already registered under the same name.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.Requests, m.Duration, m.UpstreamErrors} {
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

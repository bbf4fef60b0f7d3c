package pipeline

import (
	"errors"
	"strconv"
	"sync"
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
	// UpstreamUnbilled counts the attempts a provider may bill that the
	// caller did not pay for, by family, provider and reason (obs's
	// Unbilled constants).
	UpstreamUnbilled *prometheus.CounterVec
	// Tokens counts billed tokens by family, model and kind; Cost the
	// money charged by family and model.
	Tokens *prometheus.CounterVec
	Cost   *moneyCounter
	// Shortfall counts what calls cost beyond what their accounts could
	// pay, by family and model; equals the ledger's shortfalls.
	Shortfall *moneyCounter
	// TTFT is a stream's time to its first byte; Overhead the gateway's
	// own time (a request's duration less its upstream waits).
	TTFT     *prometheus.HistogramVec
	Overhead *prometheus.HistogramVec
	// Refusals counts error answers of 4xx by their code; CacheHits the
	// answers served from a cache.
	Refusals  *prometheus.CounterVec
	CacheHits *prometheus.CounterVec
	// ChargeCommit is the time each batch of charges took to become
	// durable (the charge log's write and sync, or the batch's
	// transaction); ChargesCommitted counts the charges they held.
	ChargeCommit     prometheus.Histogram
	ChargesCommitted prometheus.Counter
	// WebhookAttempts counts attempts to deliver alerts, by outcome
	// (delivered, failed).
	WebhookAttempts *prometheus.CounterVec
	// MCPToolCalls counts the MCP gateway's tool calls by server, tool and
	// outcome; MCPServerUp is 1 for an upstream MCP server whose last
	// list or call reached it, 0 for one that could not be reached.
	MCPToolCalls *prometheus.CounterVec
	MCPServerUp  *prometheus.GaugeVec

	// families and models hold the children of the vectors a call
	// touches, looked up once: WithLabelValues hashes and checks its
	// label values on every call, on the hot path.
	families sync.Map // family → *familyMetrics
	models   sync.Map // [family, model] → *modelMetrics

	// listed are the labels servers listed themselves (Admit), and
	// listedN how many each server gave.
	listed   sync.Map // label → struct{}
	listedMu sync.Mutex
	listedN  map[string]int
}

// Labels the metrics take in place of a name nobody declared.
const (
	// LabelOther stands, in the model and provider labels, for every name
	// that neither the configuration declared nor a server listed (and
	// for a server's listed names past MaxListedLabels), so a caller
	// cannot add series by naming things.
	LabelOther = "other"
	// MaxListedLabels is how many of the names one server lists itself
	// (an app's tools) become labels of their own over the process's
	// life; the rest are LabelOther.
	MaxListedLabels = 200
)

// Admit makes labels, names that server listed itself (a connected app's
// "<app>/<tool>"), values the model label may take: those already
// admitted stay, and new ones are admitted while server has fewer than
// MaxListedLabels.
func (m *Metrics) Admit(server string, labels []string) {
	if m == nil {
		return
	}
	m.listedMu.Lock()
	defer m.listedMu.Unlock()
	if m.listedN == nil {
		m.listedN = map[string]int{}
	}
	for _, l := range labels {
		if _, ok := m.listed.Load(l); ok {
			continue
		}
		if m.listedN[server] >= MaxListedLabels {
			return
		}
		m.listed.Store(l, struct{}{})
		m.listedN[server]++
	}
}

// admitted reports whether label was admitted by Admit.
func (m *Metrics) admitted(label string) bool {
	if m == nil {
		return false
	}
	_, ok := m.listed.Load(label)
	return ok
}

// familyMetrics are one family's children of the vectors.
type familyMetrics struct {
	duration, overhead prometheus.Observer
	requests           sync.Map // status (int) → prometheus.Counter
}

// modelMetrics are one family's and model's children of the vectors.
type modelMetrics struct {
	tokens [len(tokenKinds)]prometheus.Counter
	ttft   prometheus.Observer
}

// family returns family's children, made on first use.
func (m *Metrics) family(family string) *familyMetrics {
	if f, ok := m.families.Load(family); ok {
		return f.(*familyMetrics)
	}
	f, _ := m.families.LoadOrStore(family, &familyMetrics{duration: m.Duration.WithLabelValues(family),
		overhead: m.Overhead.WithLabelValues(family)})
	return f.(*familyMetrics)
}

// requestsOf returns the requests counter of family and status.
func (f *familyMetrics) requestsOf(m *Metrics, family string, status int) prometheus.Counter {
	if c, ok := f.requests.Load(status); ok {
		return c.(prometheus.Counter)
	}
	c, _ := f.requests.LoadOrStore(status, m.Requests.WithLabelValues(family, strconv.Itoa(status)))
	return c.(prometheus.Counter)
}

// model returns the children of family and model, made on first use.
func (m *Metrics) model(family, model string) *modelMetrics {
	key := [2]string{family, model}
	if c, ok := m.models.Load(key); ok {
		return c.(*modelMetrics)
	}
	mm := &modelMetrics{ttft: m.TTFT.WithLabelValues(family, model)}
	for i, kind := range tokenKinds {
		mm.tokens[i] = m.Tokens.WithLabelValues(family, model, kind)
	}
	c, _ := m.models.LoadOrStore(key, mm)
	return c.(*modelMetrics)
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
			Help: "Failed upstream attempts, by route family, provider and reason.",
		}, []string{"family", "provider", "reason"}),
		UpstreamUnbilled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "gw", Name: "upstream_unbilled_total",
			Help: "Upstream attempts the provider may bill that the caller did not pay for, by route family, provider and reason.",
		}, []string{"family", "provider", "reason"}),
		Tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "gw", Name: "tokens_total",
			Help: "Tokens billed, by route family, model and kind.",
		}, []string{"family", "model", "kind"}),
		Cost:      newMoneyCounter("gw_cost_usd_total", "Money charged in US dollars, by route family and model; equals the ledger's sum."),
		Shortfall: newMoneyCounter("gw_shortfall_usd_total", "What calls cost beyond what their accounts could still pay, in US dollars, by route family and model; equals the ledger's shortfalls."),
		TTFT: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "gw", Name: "time_to_first_token_seconds",
			Help:    "Streams: time from the request's start to the first byte sent, by route family and model.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 12),
		}, []string{"family", "model"}),
		Overhead: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "gw", Name: "overhead_seconds",
			Help:    "The gateway's own time: a request's duration less its time waiting on upstreams, by route family.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 12),
		}, []string{"family"}),
		Refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "gw", Name: "refusals_total",
			Help: "Requests refused, by route family and error code.",
		}, []string{"family", "code"}),
		CacheHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "gw", Name: "cache_hits_total",
			Help: "Answers served from a cache, by route family.",
		}, []string{"family"}),
		ChargeCommit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "gw", Name: "charge_commit_seconds",
			Help:    "Time a batch of charges took to become durable (the charge log's write and sync, or the batch's transaction).",
			Buckets: ChargeCommitBuckets(),
		}),
		ChargesCommitted: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "gw", Name: "charges_committed_total",
			Help: "Charges made durable, in all batches.",
		}),
		WebhookAttempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "gw", Name: "webhook_attempts_total",
			Help: "Attempts to deliver an alert to its webhook, by outcome (delivered, failed).",
		}, []string{"outcome"}),
		MCPToolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "gw", Name: "mcp_tool_calls_total",
			Help: "Tool calls through the MCP gateway, by server, tool and outcome (ok, tool_error, refused, upstream_error).",
		}, []string{"server", "tool", "outcome"}),
		MCPServerUp: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "gw", Name: "mcp_server_up",
			Help: "Whether the MCP gateway's last list or call reached the upstream MCP server (1) or not (0).",
		}, []string{"server"}),
	}
}

// MCPToolCall counts a tool call of an MCP gateway server: tool is its
// label only when the server listed it (Admit, as "<server>/<tool>"), else
// LabelOther.
func (m *Metrics) MCPToolCall(server, tool, outcome string) {
	if m == nil {
		return
	}
	if !m.admitted(server + "/" + tool) {
		tool = LabelOther
	}
	m.MCPToolCalls.WithLabelValues(server, tool, outcome).Inc()
}

// ServerUp records whether an MCP gateway server was reached.
func (m *Metrics) ServerUp(server string, up bool) {
	if m == nil {
		return
	}
	v := 0.0
	if up {
		v = 1
	}
	m.MCPServerUp.WithLabelValues(server).Set(v)
}

// ObserveCommit records a batch of charges made durable in d.
func (m *Metrics) ObserveCommit(d time.Duration, charges int) {
	m.ChargeCommit.Observe(d.Seconds())
	m.ChargesCommitted.Add(float64(charges))
}

// Register adds the collectors to reg, keeping whichever collector is
// already registered under the same name.
func (m *Metrics) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.Requests, m.Duration, m.UpstreamErrors, m.UpstreamUnbilled, m.ChargeCommit, m.ChargesCommitted,
		m.Tokens, m.Cost, m.Shortfall, m.TTFT, m.Overhead, m.Refusals, m.CacheHits, m.WebhookAttempts, m.MCPToolCalls, m.MCPServerUp} {
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
	f := m.family(family)
	f.requestsOf(m, family, status).Inc()
	f.duration.Observe(d.Seconds())
}

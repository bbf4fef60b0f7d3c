package pipeline

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/caddy-gw/caddy-gw/pricing"
)

// moneyCounter is a counter of money by family and model. It adds exact
// amounts and turns each sum into dollars only when scraped, so its value
// is the ledger's sum rounded once, never a float sum's drift.
type moneyCounter struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	sums map[[2]string]pricing.Money
}

func newMoneyCounter(name, help string) *moneyCounter {
	return &moneyCounter{desc: prometheus.NewDesc(name, help, []string{"family", "model"}, nil), sums: map[[2]string]pricing.Money{}}
}

// Add adds m under family and model.
func (c *moneyCounter) Add(family, model string, m pricing.Money) {
	c.mu.Lock()
	c.sums[[2]string{family, model}] += m
	c.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (c *moneyCounter) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *moneyCounter) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, m := range c.sums {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(m)/float64(pricing.NanoPerUSD), k[0], k[1])
	}
}

package router

import (
	"sync"
	"time"

	"github.com/caddy-gw/caddy-gw/pricing"
)

// Decision records one routing decision: what was asked, how it was read,
// which models were in the running, which answered, at what cost and how
// fast. The routing server's flux_explain reads it by ID.
type Decision struct {
	ID         string        `json:"decision_id"`
	AccountID  string        `json:"-"`
	Time       time.Time     `json:"time"`
	Requested  string        `json:"requested_model"`
	Kind       Kind          `json:"task_kind,omitempty"`
	Lane       string        `json:"lane,omitempty"`
	Vision     bool          `json:"vision"`
	Tools      bool          `json:"tools"`
	Prompt     int           `json:"prompt_tokens_estimate"`
	Candidates []string      `json:"candidates"`
	Chosen     string        `json:"model"`
	Escalated  bool          `json:"escalated"`
	Cost       pricing.Money `json:"cost_usd"`
	Latency    time.Duration `json:"-"`
	LatencyMS  int64         `json:"latency_ms"`
}

// Decision records are kept this long, and at most this many.
const (
	DecisionTTL  = 24 * time.Hour
	MaxDecisions = 100_000
)

// Decisions keeps recent decisions in memory, oldest dropped first.
type Decisions struct {
	mu    sync.Mutex
	byID  map[string]*Decision
	order []string // insertion order, for expiry; order[head:] are live
	head  int
	Now   func() time.Time
}

// NewDecisions returns an empty record.
func NewDecisions() *Decisions { return &Decisions{byID: map[string]*Decision{}} }

func (d *Decisions) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// Put keeps dec.
func (d *Decisions) Put(dec Decision) {
	dec.LatencyMS = dec.Latency.Milliseconds()
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.byID[dec.ID]; !ok {
		d.order = append(d.order, dec.ID)
	}
	d.byID[dec.ID] = &dec
	cutoff := d.now().Add(-DecisionTTL)
	for d.head < len(d.order) {
		old := d.byID[d.order[d.head]]
		if len(d.order)-d.head <= MaxDecisions && (old == nil || !old.Time.Before(cutoff)) {
			break
		}
		delete(d.byID, d.order[d.head])
		d.order[d.head] = ""
		d.head++
	}
	// Compact once the dropped part is half the slice: amortised O(1).
	if d.head > len(d.order)/2 {
		d.order = d.order[:copy(d.order, d.order[d.head:])]
		d.head = 0
	}
}

// Get returns the decision with id, if it is still kept.
func (d *Decisions) Get(id string) (Decision, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	dec, ok := d.byID[id]
	if !ok || dec.Time.Before(d.now().Add(-DecisionTTL)) {
		return Decision{}, false
	}
	return *dec, true
}

// Destruct lets Decisions live in a caddy.UsagePool.
func (d *Decisions) Destruct() error { return nil }

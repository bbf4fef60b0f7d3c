package lanes

import (
	"sync"
	"time"
)

// Passive health: a model that fails FailThreshold times in a
// row is skipped for Cooldown; one success clears its record.
const (
	DefaultFailThreshold = 3
	DefaultCooldown      = 30 * time.Second
)

// Health remembers recent failures per backing model. The zero value is
// not ready; use NewHealth. A nil *Health reports every model healthy.
type Health struct {
	Threshold int
	Cooldown  time.Duration
	Now       func() time.Time

	mu     sync.Mutex
	models map[string]*modelHealth
}

type modelHealth struct {
	fails int
	until time.Time
}

// NewHealth returns a tracker with the defaults.
func NewHealth() *Health {
	return &Health{Threshold: DefaultFailThreshold, Cooldown: DefaultCooldown, models: map[string]*modelHealth{}}
}

func (h *Health) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// Healthy reports whether model is not cooling down.
func (h *Health) Healthy(model string) bool {
	if h == nil {
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.models[model]
	return m == nil || !h.now().Before(m.until)
}

// Fail records a failure of model.
func (h *Health) Fail(model string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.models[model]
	if m == nil {
		m = &modelHealth{}
		h.models[model] = m
	}
	m.fails++
	if m.fails >= h.Threshold {
		m.until = h.now().Add(h.Cooldown)
		m.fails = 0
	}
}

// OK records a success of model.
func (h *Health) OK(model string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.models, model)
}

// Destruct lets Health live in a caddy.UsagePool.
func (h *Health) Destruct() error { return nil }

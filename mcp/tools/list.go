package tools

import (
	"context"
	"fmt"
	"sync"

	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// States keeps, per account, where each paid tool stands in its listing
// states: a Free-plan call is refused (premium_locked), the next
// listing still shows the tool, the one after drops it, and a paid,
// cleared plan lists it again.
type States interface {
	// Refused records a paid tool's refusal for the account.
	Refused(ctx context.Context, account, tool string)
	// Listing is asked, on an account without a paid cleared plan, whether
	// a paid tool is listed, and moves its state on.
	Listing(ctx context.Context, account, tool string) bool
	// Reset forgets the account's states (its plan is paid and cleared).
	Reset(ctx context.Context, account string)
}

// Paid-tool states.
const (
	stateListed        = iota // default: listed
	stateRefused              // refused, not listed since
	stateRefusedListed        // refused, listed once since
	stateDropped              // dropped from the list
)

// MemoryStates keeps the states in memory (one node).
type MemoryStates struct {
	mu sync.Mutex
	m  map[string]map[string]int
}

// NewMemoryStates returns empty states.
func NewMemoryStates() *MemoryStates { return &MemoryStates{m: map[string]map[string]int{}} }

// Refused implements States. A dropped tool stays dropped.
func (s *MemoryStates) Refused(_ context.Context, account, tool string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[account] == nil {
		s.m[account] = map[string]int{}
	}
	if s.m[account][tool] != stateDropped {
		s.m[account][tool] = stateRefused
	}
}

// Listing implements States.
func (s *MemoryStates) Listing(_ context.Context, account, tool string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.m[account][tool] {
	case stateRefused:
		s.m[account][tool] = stateRefusedListed
		return true
	case stateRefusedListed:
		s.m[account][tool] = stateDropped
		return false
	case stateDropped:
		return false
	}
	return true
}

// Reset implements States.
func (s *MemoryStates) Reset(_ context.Context, account string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, account)
}

// List returns the tools the account is offered, in the table's order:
// tools of abilities switched off are left out; paid tools on an account
// without a paid cleared plan follow the paid-tool states. Paid tools'
// descriptions carry the plan and the advisory cost per call.
func (s *Server) List(ctx context.Context, acct store.Account) []Tool {
	paid := acct.PaidCleared()
	if paid && s.States != nil {
		s.States.Reset(ctx, acct.ID)
	}
	var out []Tool
	for _, t := range s.all() {
		if t.Ability != "" && !acct.HasAbility(t.Ability) {
			continue
		}
		if t.Paid && !paid && s.States != nil && !s.States.Listing(ctx, acct.ID, t.Name) {
			continue
		}
		out = append(out, s.described(t))
	}
	return out
}

// Offered returns the tools shown to a caller whose key is refused: what
// a new account is offered (every ability switched on, no paid plan yet),
// so a client sees the tools and their prices before it has a key; each
// call of one answers auth_failed.
func (s *Server) Offered() []Tool {
	var out []Tool
	for _, t := range s.all() {
		out = append(out, s.described(t))
	}
	return out
}

// all is every tool of the server: the table, then the apps tools when
// apps are offered.
func (s *Server) all() []Tool {
	if s.Apps == nil {
		return catalogue
	}
	return append(catalogue[:len(catalogue):len(catalogue)], appsTools...)
}

// described is t as listed: a paid tool's description gets its plan and
// advisory cost per call (plan prices; pay as you go adds its markup).
func (s *Server) described(t Tool) Tool {
	if t.Paid {
		t.Description += " Needs a paid plan with a cleared payment."
		if p, ok := s.advisory(t); ok {
			t.Description += fmt.Sprintf(" Advisory cost per call: %d microcents (%s USD), for %s.", p, pricing.Micro(p), t.CostBasis)
		}
	}
	return t
}

// capabilities is list_capabilities' answer (docs/mcp.md, Tools
// server): the plan, whether premium abilities are unlocked, and each
// ability switched on with whether it is premium and its advisory cost.
func (s *Server) capabilities(acct store.Account) map[string]any {
	enabled := map[string]any{}
	for _, t := range catalogue {
		if t.Ability == "" || !acct.HasAbility(t.Ability) {
			continue
		}
		entry := map[string]any{"premium": t.Paid}
		if p, ok := s.advisory(t); ok {
			entry["est_microcents"] = p
		} else {
			entry["est_microcents"] = nil
		}
		enabled[t.Ability] = entry
	}
	return map[string]any{"tier": string(acct.Plan), "premium_unlocked": acct.PaidCleared(), "enabled": enabled}
}

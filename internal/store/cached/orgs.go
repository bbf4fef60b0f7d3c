package cached

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/store"
)

// orgState is an organization's bounds in memory: its caps and the
// running totals of its accounts' charges, the backend's plus those in
// flight. Its lock covers every account of the organization: a charge of
// any of them reads the room its caps leave and counts itself under it, so
// two accounts of one organization never pass its caps between them.
type orgState struct {
	mu sync.Mutex
	// capsLoaded: caps holds the organization's record, found whether the
	// backend holds it (no caps when it does not).
	capsLoaded bool
	caps       store.Org
	found      bool
	running
	// pending counts charges applied in memory and not yet in the
	// backend; stale asks for a reload from the backend once none is.
	pending int
	stale   bool
}

// orgEntry returns the organization's state in memory, made empty the
// first time.
func (s *Store) orgEntry(id string) *orgState {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.orgSpend[id]
	if o == nil {
		o = &orgState{}
		s.orgSpend[id] = o
	}
	return o
}

// loadOrg reads the organization's running totals relative to now from
// the backend when memory has none (or a stale copy and no charge in
// flight), and its caps too when caps is set. Called under o.mu.
func (s *Store) loadOrg(ctx context.Context, o *orgState, id string, now time.Time, caps bool) error {
	if o.stale && o.pending == 0 {
		o.capsLoaded, o.spLoaded, o.stale = false, false, false
	}
	if caps {
		if err := s.loadCaps(ctx, o, id); err != nil {
			return err
		}
	}
	if !o.spLoaded {
		sp, err := s.Backend.OrgSpend(ctx, id, now)
		if err != nil {
			return err
		}
		o.loadSpend(sp, now)
	}
	return nil
}

// loadCaps reads the organization's record from the backend when memory
// has none. Called under o.mu.
func (s *Store) loadCaps(ctx context.Context, o *orgState, id string) error {
	if o.capsLoaded {
		return nil
	}
	org, err := s.Backend.Org(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		org = store.Org{} // gone: no caps
	case err != nil:
		return err
	}
	o.caps, o.found, o.capsLoaded = copyOrg(org), err == nil, true
	return nil
}

// copyOrg is a copy of o that shares nothing with it.
func copyOrg(o store.Org) store.Org {
	store.CopyMoneys(&o.DailyCap, &o.MonthlyCap)
	return o
}

// Org answers from memory after the backend's first answer.
func (s *Store) Org(ctx context.Context, id string) (store.Org, error) {
	o := s.orgEntry(id)
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := s.loadCaps(ctx, o, id); err != nil {
		return store.Org{}, err
	}
	if !o.found {
		return store.Org{}, fmt.Errorf("cached: org %q: %w", id, store.ErrNotFound)
	}
	return copyOrg(o.caps), nil
}

// forgetOrg has the next charge of the organization's accounts read its
// caps and totals from the backend once no charge of it is in flight.
func (s *Store) forgetOrg(id string) {
	if id == "" {
		return
	}
	s.mu.Lock()
	o := s.orgSpend[id]
	s.mu.Unlock()
	if o == nil {
		return
	}
	o.mu.Lock()
	o.capsLoaded = false
	o.stale = true
	o.mu.Unlock()
}

// CreateOrg stores the organization in the backend.
func (s *Store) CreateOrg(ctx context.Context, org store.Org) error {
	if err := s.Backend.CreateOrg(ctx, org); err != nil {
		return err
	}
	// Nothing charged an organization that did not exist, but be sure.
	s.forgetOrg(org.ID)
	return nil
}

// UpdateOrg changes the organization in the backend, then its caps in
// memory: the next charge of its accounts is held to the new caps.
// Charges settling meanwhile wait for the change.
func (s *Store) UpdateOrg(ctx context.Context, id string, fn func(*store.Org) error) (store.Org, error) {
	// Answered charges reach the backend under the caps they were
	// floored by, so their alerts judge them by those.
	s.flush()
	o := s.orgEntry(id)
	o.mu.Lock()
	defer o.mu.Unlock()
	org, err := s.Backend.UpdateOrg(ctx, id, fn)
	if err != nil {
		return org, err
	}
	if o.capsLoaded {
		o.caps, o.found = copyOrg(org), true
	}
	return org, nil
}

// DeleteOrg deletes the organization in the backend once it holds every
// answered charge (its running totals go with it), then forgets it here.
func (s *Store) DeleteOrg(ctx context.Context, id string) error {
	s.flush()
	o := s.orgEntry(id)
	o.mu.Lock()
	err := s.Backend.DeleteOrg(ctx, id)
	if err == nil {
		o.capsLoaded, o.spLoaded, o.stale = false, false, o.pending > 0
	}
	o.mu.Unlock()
	return err
}

// OrgSpend answers from the organization's running totals in memory; a
// time before the periods memory counts asks the backend.
func (s *Store) OrgSpend(ctx context.Context, orgID string, now time.Time) (store.Spend, error) {
	o := s.orgEntry(orgID)
	o.mu.Lock()
	defer o.mu.Unlock()
	return s.orgSpendLocked(ctx, o, orgID, now)
}

// OrgBounds is Org and, when the organization has caps, OrgSpend in one
// read, for the money gate: the record it answers shares its caps'
// amounts with memory, to be read only.
func (s *Store) OrgBounds(ctx context.Context, id string, now time.Time) (store.Org, store.Spend, error) {
	o := s.orgEntry(id)
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := s.loadCaps(ctx, o, id); err != nil {
		return store.Org{}, store.Spend{}, err
	}
	if !o.found {
		return store.Org{}, store.Spend{}, fmt.Errorf("cached: org %q: %w", id, store.ErrNotFound)
	}
	if !o.caps.HasCaps() {
		return o.caps, store.Spend{}, nil
	}
	sp, err := s.orgSpendLocked(ctx, o, id, now)
	return o.caps, sp, err
}

// orgSpendLocked is OrgSpend under o.mu.
func (s *Store) orgSpendLocked(ctx context.Context, o *orgState, orgID string, now time.Time) (store.Spend, error) {
	if err := s.loadOrg(ctx, o, orgID, now, false); err != nil {
		return store.Spend{}, err
	}
	if o.inPeriods(now) {
		return o.sp, nil
	}
	if day, _ := store.DayOf(now); day.Before(o.day) {
		// As Spend: the disk's totals with every charge in flight counted.
		sp, err := s.Backend.OrgSpend(ctx, orgID, now)
		sp.Add(o.flight)
		return sp, err
	}
	o.roll(now)
	return o.sp, nil
}

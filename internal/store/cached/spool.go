package cached

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// SpoolFile is the spool's file in a node's data folder: the charges the
// shared database could not take when they were made, in the charge log's
// format.
const SpoolFile = "spool.log"

// Timings of the spool.
const (
	// SpoolAfter is how long a batch of charges waits for the shared
	// database before its charges go to the spool instead.
	SpoolAfter = 2 * time.Second
	// spoolRetryMin and spoolRetryMax bound the pause between two tries
	// of the spool against a database that refused it (doubling).
	spoolRetryMin = 100 * time.Millisecond
	spoolRetryMax = 2 * time.Second
)

// spool keeps a node's charges that the shared database could not take
// durably on the node (an fsync'd append log in its data folder) until
// the database has them. Its applier tries them again, oldest first, while
// any is left; a start applies what an earlier run left. The ledger's
// unique request id makes a charge applied twice (a crash between the
// database's commit and the spool's truncation) a no-op.
type spool struct {
	mu      sync.Mutex
	log     *chargeLog
	sync    *syncer // syncs the log in interval mode
	pending []store.Entry
	ids     map[string]bool
	// applied are closed when the charge of their request id leaves the
	// spool (see Batched.Applied).
	applied map[string]chan struct{}
	wake    chan struct{}
}

// openSpool opens (creating) the spool in dir and returns it with what an
// earlier run left in it; onFail hears of a background sync that failed
// (interval mode).
func openSpool(dir string, onFail func(error)) (*spool, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("charge spool: %w", err)
	}
	l, entries, err := openLog(dir, SpoolFile, nil)
	if err != nil {
		return nil, err
	}
	l.holds = true
	l.sync = newSyncer(onFail)
	sp := &spool{log: l, sync: l.sync, ids: map[string]bool{}, applied: map[string]chan struct{}{}, wake: make(chan struct{}, 1)}
	for _, e := range entries {
		if !sp.ids[e.RequestID] {
			sp.ids[e.RequestID] = true
			sp.pending = append(sp.pending, e)
		}
	}
	return sp, nil
}

// add makes entries durable in the spool; when it returns nil they are
// (in interval mode: written, and durable within the interval).
func (sp *spool) add(entries []store.Entry) error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if err := sp.log.append(entries); err != nil {
		return err
	}
	for _, e := range entries {
		sp.ids[e.RequestID] = true
	}
	sp.pending = append(sp.pending, entries...)
	sp.signal()
	return nil
}

func (sp *spool) signal() {
	select {
	case sp.wake <- struct{}{}:
	default:
	}
}

// has reports whether requestID is spooled.
func (sp *spool) has(requestID string) bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.ids[requestID]
}

// appliedCh returns a channel closed once requestID leaves the spool, or
// nil when it is not in it.
func (sp *spool) appliedCh(requestID string) <-chan struct{} {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if !sp.ids[requestID] {
		return nil
	}
	c := sp.applied[requestID]
	if c == nil {
		c = make(chan struct{})
		sp.applied[requestID] = c
	}
	return c
}

// next returns (a copy of) the oldest n spooled charges.
func (sp *spool) next(n int) []store.Entry {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return slices.Clone(sp.pending[:min(n, len(sp.pending))])
}

// remove forgets the charges the database now has (or refused for good);
// the file is emptied once none is left.
func (sp *spool) remove(done map[string]bool) error {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.pending = slices.DeleteFunc(sp.pending, func(e store.Entry) bool { return done[e.RequestID] })
	for id := range done {
		delete(sp.ids, id)
		if c := sp.applied[id]; c != nil {
			close(c)
			delete(sp.applied, id)
		}
	}
	if len(sp.pending) > 0 {
		return nil
	}
	return sp.log.truncate()
}

// len is how many charges wait.
func (sp *spool) len() int {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return len(sp.pending)
}

// owed is what the account's spooled charges add to its spend, by the
// periods of now (the day and month they fall in), and take from its
// balance (their whole cost: the free monthly credit they may use is left
// to the database, so the balance seen is never more than it will be).
func (sp *spool) owed(account string, now time.Time) (add store.Spend, draw pricing.Money) {
	return sp.sum(func(e *store.Entry) bool { return e.AccountID == account }, now)
}

// owedKey is what the spooled charges made with a key add to its spend,
// by the periods of now.
func (sp *spool) owedKey(keyID string, now time.Time) store.Spend {
	add, _ := sp.sum(func(e *store.Entry) bool { return e.KeyID == keyID }, now)
	return add
}

// owedOrg is what the spooled charges of an organization's accounts (the
// organization each was admitted under) add to its spend, by the periods
// of now.
func (sp *spool) owedOrg(orgID string, now time.Time) store.Spend {
	add, _ := sp.sum(func(e *store.Entry) bool { return e.OrgID == orgID }, now)
	return add
}

// sum adds up the spooled charges of which is true, by the periods of now
// (add), and in all (cost).
func (sp *spool) sum(which func(*store.Entry) bool, now time.Time) (add store.Spend, cost pricing.Money) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	day, _ := store.DayOf(now)
	month, _ := store.MonthOf(now)
	for i := range sp.pending {
		e := &sp.pending[i]
		if !which(e) {
			continue
		}
		add.Total += e.Cost
		if d, _ := store.DayOf(e.Time); d.Equal(day) {
			add.Today += e.Cost
		}
		if m, _ := store.MonthOf(e.Time); m.Equal(month) {
			add.Month += e.Cost
		}
		cost += e.Cost
	}
	return add, cost
}

// refusedForGood reports whether the database refused a charge for a
// reason trying again cannot mend (its account is gone): such a charge is
// reported, not spooled.
func refusedForGood(err error) bool { return errors.Is(err, store.ErrNotFound) }

// applySpool is the spool's applier: it settles the spooled charges in
// the database, oldest first, whenever there are any, and tries again
// (with a growing pause) while the database refuses them, until stop.
func (s *Batched) applySpool() {
	defer close(s.spoolStopped)
	pause := spoolRetryMin
	for {
		if s.spool.len() == 0 {
			pause = spoolRetryMin
			select {
			case <-s.spoolStop:
				return
			case <-s.spool.wake:
			}
		}
		batch := s.spool.next(MaxApply)
		if len(batch) == 0 {
			continue
		}
		asked := slices.Clone(batch)
		ctx, cancel := context.WithTimeout(context.Background(), SpoolAfter)
		charged, errs := settleEach(ctx, s.SharedBackend, batch)
		cancel()
		done, failed := map[string]bool{}, false
		for i, err := range errs {
			switch {
			case err == nil:
				done[batch[i].RequestID] = true
				if charged[i] && batch[i].Cost < asked[i].Cost {
					// Its receipt showed more: the account's balance or
					// caps moved while the database was away.
					s.report(fmt.Errorf("spooled charge %s of %s: the account could pay %s of the %s charged on the node; shortfall %s",
						batch[i].RequestID, batch[i].AccountID, batch[i].Cost, asked[i].Cost, batch[i].Shortfall))
				}
			case refusedForGood(err):
				done[batch[i].RequestID] = true
				s.report(fmt.Errorf("spooled charge %s of %s refused by the store: %w", batch[i].RequestID, batch[i].AccountID, err))
			default:
				failed = true
			}
		}
		if err := s.spool.remove(done); err != nil {
			s.report(fmt.Errorf("emptying the charge spool: %w", err))
		}
		for _, e := range batch {
			if done[e.RequestID] {
				s.released(e)
			}
		}
		if !failed {
			pause = spoolRetryMin
			continue
		}
		t := time.NewTimer(pause)
		select {
		case <-s.spoolStop:
			t.Stop()
			return
		case <-t.C:
		}
		pause = min(2*pause, spoolRetryMax)
	}
}

func (s *Batched) report(err error) {
	if s.OnError != nil {
		s.OnError(err)
	}
}

// Applied returns a channel closed once the charge of requestID, kept in
// this node's spool, is in the database (or refused there for good); nil
// when it is not in the spool. The money gate keeps the call's hold until
// then, so the other nodes' checks still count the money.
func (s *Batched) Applied(requestID string) <-chan struct{} {
	if s.spool == nil {
		return nil
	}
	return s.spool.appliedCh(requestID)
}

// Spooled is how many charges wait in the spool for the database.
func (s *Batched) Spooled() int {
	if s.spool == nil {
		return 0
	}
	return s.spool.len()
}

// Account is the database's account, with the balance this node's spooled
// charges will take from it already taken.
func (s *Batched) Account(ctx context.Context, id string) (store.Account, error) {
	a, err := s.SharedBackend.Account(ctx, id)
	if err != nil || s.spool == nil || a.Balance == nil {
		return a, err
	}
	if _, draw := s.spool.owed(id, time.Now()); draw > 0 {
		b := *a.Balance - draw
		a.Balance = &b
	}
	return a, nil
}

// Spend is the database's spend of the account, with this node's spooled
// charges added.
func (s *Batched) Spend(ctx context.Context, id string, now time.Time) (store.Spend, error) {
	sp, err := s.SharedBackend.Spend(ctx, id, now)
	if err != nil || s.spool == nil {
		return sp, err
	}
	owed, _ := s.spool.owed(id, now)
	return addSpend(sp, owed), nil
}

// KeySpend is the database's spend of the key, with this node's spooled
// charges made with it added.
func (s *Batched) KeySpend(ctx context.Context, keyID string, now time.Time) (store.Spend, error) {
	sp, err := s.SharedBackend.KeySpend(ctx, keyID, now)
	if err != nil || s.spool == nil || keyID == "" {
		return sp, err
	}
	return addSpend(sp, s.spool.owedKey(keyID, now)), nil
}

// OrgSpend is the database's spend of the organization, with this node's
// spooled charges of its accounts added.
func (s *Batched) OrgSpend(ctx context.Context, orgID string, now time.Time) (store.Spend, error) {
	sp, err := s.SharedBackend.OrgSpend(ctx, orgID, now)
	if err != nil || s.spool == nil || orgID == "" {
		return sp, err
	}
	return addSpend(sp, s.spool.owedOrg(orgID, now)), nil
}

// addSpend is sp with owed added, period by period.
func addSpend(sp, owed store.Spend) store.Spend {
	sp.Total += owed.Total
	sp.Today += owed.Today
	sp.Month += owed.Month
	return sp
}

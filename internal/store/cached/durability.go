package cached

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// MaxSyncInterval bounds the sync interval (SetSyncInterval): a power cut
// loses at most this long's charges.
const MaxSyncInterval = time.Second

// CheckSyncInterval refuses a sync interval below zero or above
// MaxSyncInterval (0 is sync mode).
func CheckSyncInterval(d time.Duration) error {
	if d < 0 || d > MaxSyncInterval {
		return fmt.Errorf("sync interval %s: want 0 (each charge synced before its answer) up to %s", d, MaxSyncInterval)
	}
	return nil
}

// syncer makes what a file's appends wrote durable, behind their callers,
// when its interval is set; it is the one syncer of a charge log (both
// segments) or of a spool. With interval 0 (sync mode) every append syncs
// its own batch before it returns and the syncer has nothing to do; with
// an interval, an append only writes (the bytes are in the kernel's cache:
// a killed process loses nothing) and marks its file, and the syncer
// syncs every marked file at most an interval after the first write it
// has not synced yet. So a power cut loses at most the charges written in
// the last interval, and under load one sync covers every charge of an
// interval.
type syncer struct {
	interval atomic.Int64 // nanoseconds; 0: sync mode
	// failed: the last background sync failed. Until one succeeds, every
	// append syncs its own batch again, as in sync mode, and a batch the
	// disk refuses is refused: a failing disk never leaves more than the
	// charges of one interval answered and not durable.
	failed atomic.Bool

	mu sync.Mutex
	// dirty are the files written since their last sync, each with
	// whether its length changed (so its sync writes the metadata too);
	// since is when the first of those writes was made.
	dirty map[*chargeLog]bool
	since time.Time

	kick    chan struct{} // a first write since the last sync
	reset   chan struct{} // the interval changed
	stop    chan struct{}
	stopped chan struct{}
	once    sync.Once
	// err is the last sync's failure at stop.
	err error
	// onFail hears of a background sync that failed: its files stay
	// marked, and are synced again an interval later.
	onFail func(error)
	// after waits d (time.After); tests fire it themselves.
	after func(d time.Duration) <-chan time.Time
	// synced, when set, hears of each sync the syncer made (tests).
	synced func()
}

func newSyncer(onFail func(error)) *syncer {
	return &syncer{dirty: map[*chargeLog]bool{}, kick: make(chan struct{}, 1), reset: make(chan struct{}, 1),
		stop: make(chan struct{}), stopped: make(chan struct{}), onFail: onFail, after: time.After}
}

// lazy reports whether appends leave their sync to the syncer.
func (s *syncer) lazy() bool { return s != nil && s.interval.Load() > 0 && !s.failed.Load() }

// setInterval sets the interval (0: sync mode, from the next append on);
// what was written before is synced within the new interval (at once in
// sync mode).
func (s *syncer) setInterval(d time.Duration) {
	s.interval.Store(int64(d))
	select {
	case s.reset <- struct{}{}:
	default:
	}
}

// mark records that l was written and is not yet durable; grew says its
// length changed.
func (s *syncer) mark(l *chargeLog, grew bool) {
	s.mu.Lock()
	first := len(s.dirty) == 0
	s.dirty[l] = s.dirty[l] || grew
	if first {
		s.since = time.Now()
	}
	s.mu.Unlock()
	if first {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

// run is the syncer's loop, until close.
func (s *syncer) run() {
	defer close(s.stopped)
	for {
		select {
		case <-s.stop:
			s.err = s.syncDirty()
			return
		case <-s.kick:
		}
		if !s.wait() {
			s.err = s.syncDirty()
			return
		}
		if err := s.syncDirty(); err != nil && s.onFail != nil {
			s.onFail(err)
		}
	}
}

// wait waits until the interval since the first write not yet synced has
// passed; false when the syncer is stopped meanwhile.
func (s *syncer) wait() bool {
	for {
		s.mu.Lock()
		since, dirty := s.since, len(s.dirty) > 0
		s.mu.Unlock()
		d := time.Until(since.Add(time.Duration(s.interval.Load())))
		if !dirty || d <= 0 {
			return true
		}
		select {
		case <-s.after(d):
			return true
		case <-s.reset: // measured again with the new interval
		case <-s.stop:
			return false
		}
	}
}

// syncDirty syncs every file written since its last sync. One that fails
// stays marked.
func (s *syncer) syncDirty() error {
	s.mu.Lock()
	dirty := s.dirty
	if len(dirty) == 0 {
		s.mu.Unlock()
		return nil
	}
	s.dirty, s.since = map[*chargeLog]bool{}, time.Time{}
	s.mu.Unlock()
	var errs []error
	for l, grew := range dirty {
		if err := l.syncFile(grew); err != nil {
			errs = append(errs, err)
			s.mark(l, grew)
		}
	}
	s.failed.Store(len(errs) > 0)
	if s.synced != nil {
		s.synced()
	}
	return errors.Join(errs...)
}

// start starts the loop.
func (s *syncer) start() { go s.run() }

// close syncs what is still marked and stops the loop; it reports that
// last sync's failure.
func (s *syncer) close() error {
	if s == nil {
		return nil
	}
	s.once.Do(func() { close(s.stop) })
	<-s.stopped
	return s.err
}

// SetSyncInterval sets when a charge's answer completes: with 0 (the
// default) once the charge is synced to disk; with d > 0 (at most
// MaxSyncInterval) once it is written to the charge log, which is synced
// within d by one background syncer. A killed process loses nothing either
// way; a power cut may lose the charges of the last d. Without a charge
// log it changes nothing.
func (s *Store) SetSyncInterval(d time.Duration) error {
	if err := CheckSyncInterval(d); err != nil {
		return err
	}
	if s.syncer != nil {
		s.syncer.setInterval(d)
	}
	return nil
}

// SetSyncInterval sets when a charge the spool takes is settled, as
// Store.SetSyncInterval does for the charge log. Charges PostgreSQL takes
// are as durable as its commits; without a spool it changes nothing.
func (s *Batched) SetSyncInterval(d time.Duration) error {
	if err := CheckSyncInterval(d); err != nil {
		return err
	}
	if s.spool != nil {
		s.spool.sync.setInterval(d)
	}
	return nil
}

// Sync syncs now what was written to the charge log and not yet synced
// (interval mode; in sync mode nothing is left): what a stopping process
// does before it exits.
func (s *Store) Sync() error {
	if s.syncer == nil {
		return nil
	}
	return s.syncer.syncDirty()
}

// Sync syncs now what the spool took and did not yet sync, as
// Store.Sync does.
func (s *Batched) Sync() error {
	if s.spool == nil {
		return nil
	}
	return s.spool.sync.syncDirty()
}

package cached

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/store"
)

// keyState is a key's bounds in memory: its caps and the running totals of
// the charges made with it, the backend's plus those in flight. A charge
// holds it under its account's lock (a key's charges are its account's),
// so a key's caps hold in memory as the account's do.
type keyState struct {
	mu sync.Mutex
	// capsLoaded: caps holds the key's caps (none for a key the backend
	// does not hold active).
	capsLoaded bool
	caps       store.Key
	running
	// pending counts charges applied in memory and not yet in the
	// backend; stale asks for a reload from the backend once none is.
	pending int
	stale   bool
}

// keyEntry returns the key's state in memory, made empty the first time.
func (s *Store) keyEntry(id string) *keyState {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keySpend[id]
	if k == nil {
		k = &keyState{}
		s.keySpend[id] = k
	}
	return k
}

// loadKey reads the key's running totals relative to now from the backend
// when memory has none (or a stale copy and no charge in flight), and its
// caps too when caps is set. Called under k.mu.
func (s *Store) loadKey(ctx context.Context, k *keyState, id string, now time.Time, caps bool) error {
	if k.stale && k.pending == 0 {
		k.capsLoaded, k.spLoaded, k.stale = false, false, false
	}
	if caps && !k.capsLoaded {
		key, err := s.issuedKey(ctx, id)
		switch {
		case errors.Is(err, store.ErrNotFound):
			key = store.Key{} // never made: no caps
		case err != nil:
			return err
		}
		k.caps = capsOf(key)
		k.capsLoaded = true
	}
	if !k.spLoaded {
		sp, err := s.Backend.KeySpend(ctx, id, now)
		if err != nil {
			return err
		}
		k.loadSpend(sp, now)
	}
	return nil
}

// issuedKeyer is a backend that reads revoked keys too (the SQL ones).
type issuedKeyer interface {
	IssuedKey(ctx context.Context, id string) (store.Key, error)
}

// issuedKey reads a key's record, revoked or not where the backend can:
// the backend holds a call settling after its key was revoked to the
// key's caps, and memory must floor it alike.
func (s *Store) issuedKey(ctx context.Context, id string) (store.Key, error) {
	if b, ok := s.Backend.(issuedKeyer); ok {
		return b.IssuedKey(ctx, id)
	}
	return s.Backend.Key(ctx, id)
}

// capsOf is a copy of k's caps alone.
func capsOf(k store.Key) store.Key {
	return store.Key{DailyCap: store.CopyMoney(k.DailyCap), MonthlyCap: store.CopyMoney(k.MonthlyCap), TotalCap: store.CopyMoney(k.TotalCap)}
}

// forgetCaps has the next charge made with the key read its caps from the
// backend.
func (s *Store) forgetCaps(id string) {
	s.mu.Lock()
	k := s.keySpend[id]
	s.mu.Unlock()
	if k == nil {
		return
	}
	k.mu.Lock()
	k.capsLoaded = false
	k.mu.Unlock()
}

// Key answers from memory after the backend's first answer.
func (s *Store) Key(ctx context.Context, id string) (store.Key, error) {
	s.mu.Lock()
	k, ok := s.keysByID[id]
	gen := s.keyGen
	s.mu.Unlock()
	if ok {
		return copyKey(k), nil
	}
	k, err := s.Backend.Key(ctx, id)
	if err != nil {
		return k, err
	}
	s.mu.Lock()
	// A key write since the read may have changed it: do not keep it.
	if s.keyGen == gen {
		s.keysByID[id] = copyKey(k)
	}
	s.mu.Unlock()
	return k, nil
}

// KeyBounds is Key and, when the key has caps, KeySpend in one read, for
// the money gate: the record it answers shares its contents with memory,
// to be read only.
func (s *Store) KeyBounds(ctx context.Context, id string, now time.Time) (store.Key, store.Spend, error) {
	s.mu.Lock()
	k, ok := s.keysByID[id]
	s.mu.Unlock()
	if !ok {
		var err error
		if k, err = s.Key(ctx, id); err != nil {
			return store.Key{}, store.Spend{}, err
		}
	}
	if !k.HasCaps() {
		return k, store.Spend{}, nil
	}
	sp, err := s.KeySpend(ctx, id, now)
	return k, sp, err
}

// UpdateKey changes the key in the backend, then its caps in memory: the
// next charge made with it is held to the new caps. Charges settling
// meanwhile wait for the change.
func (s *Store) UpdateKey(ctx context.Context, id string, fn func(*store.Key) error) (store.Key, error) {
	// Answered charges reach the backend under the caps they were
	// floored by, so their alerts judge them by those.
	s.flush()
	k := s.keyEntry(id)
	k.mu.Lock()
	defer k.mu.Unlock()
	defer s.keysChanged(id)
	key, err := s.Backend.UpdateKey(ctx, id, fn)
	if err != nil {
		return key, err
	}
	if k.capsLoaded {
		k.caps = capsOf(key)
	}
	return key, nil
}

// KeySpend answers from the key's running totals in memory; a time before
// the periods memory counts asks the backend.
func (s *Store) KeySpend(ctx context.Context, keyID string, now time.Time) (store.Spend, error) {
	k := s.keyEntry(keyID)
	k.mu.Lock()
	defer k.mu.Unlock()
	if err := s.loadKey(ctx, k, keyID, now, false); err != nil {
		return store.Spend{}, err
	}
	if k.inPeriods(now) {
		return k.sp, nil
	}
	if day, _ := store.DayOf(now); day.Before(k.day) {
		// As Spend: the disk's totals with every charge in flight counted.
		sp, err := s.Backend.KeySpend(ctx, keyID, now)
		sp.Add(k.flight)
		return sp, err
	}
	k.roll(now)
	return k.sp, nil
}

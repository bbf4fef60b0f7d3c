package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"
)

// Session bounds.
const (
	// SessionTTL is how long a session lives without a request.
	SessionTTL = time.Hour
	// MaxSessionsPerKey bounds one key's live sessions: a key opening one
	// more loses its own least recently used, never another key's.
	MaxSessionsPerKey = 64
	// MaxSessions bounds the sessions one node keeps in memory. At the
	// bound, the key holding the most sessions loses its least recently
	// used.
	MaxSessions = 10_000
)

// Session is one routing-server session.
type Session struct {
	ID string
	// KeyID is the key that made it: the session belongs to it alone.
	KeyID string
	// Version is the negotiated protocol version.
	Version string
	Seen    time.Time
}

// Sessions stores sessions; an in-memory one serves one node, a shared one
// (Redis) several. Every key's sessions are kept apart: a session is found
// only with the key that made it, and a key's sessions never displace
// another key's.
type Sessions interface {
	// Create stores s, ending s.KeyID's least recently used session when
	// the key already holds MaxSessionsPerKey.
	Create(ctx context.Context, s Session) error
	// Get returns the live session id of key keyID and marks it used; ok
	// is false when it is unknown, expired or another key's.
	Get(ctx context.Context, keyID, id string) (s Session, ok bool, err error)
	// Delete ends key keyID's session id.
	Delete(ctx context.Context, keyID, id string) error
}

// NewSessionID returns a random session id of visible ASCII.
func NewSessionID() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// MemorySessions keeps sessions in memory with a TTL, at most
// MaxSessionsPerKey per key and MaxSessions in all.
type MemorySessions struct {
	mu     sync.Mutex
	m      map[string]Session
	byKey  map[string]map[string]struct{} // key ID → its session ids
	now    func() time.Time
	ttl    time.Duration
	max    int
	perKey int
}

var _ Sessions = (*MemorySessions)(nil)

// NewMemorySessions returns an empty store (now nil: time.Now).
func NewMemorySessions(now func() time.Time) *MemorySessions {
	if now == nil {
		now = time.Now
	}
	return &MemorySessions{m: map[string]Session{}, byKey: map[string]map[string]struct{}{}, now: now, ttl: SessionTTL,
		max: MaxSessions, perKey: MaxSessionsPerKey}
}

// Create implements Sessions.
func (s *MemorySessions) Create(_ context.Context, sess Session) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	sess.Seen = now
	s.sweepKey(sess.KeyID, now)
	if len(s.byKey[sess.KeyID]) >= s.perKey {
		s.dropOldest(sess.KeyID)
	}
	if len(s.m) >= s.max {
		for id, x := range s.m {
			if now.Sub(x.Seen) > s.ttl {
				s.drop(id)
			}
		}
	}
	if len(s.m) >= s.max {
		heaviest := ""
		for k, ids := range s.byKey {
			if heaviest == "" || len(ids) > len(s.byKey[heaviest]) {
				heaviest = k
			}
		}
		s.dropOldest(heaviest)
	}
	s.m[sess.ID] = sess
	ids := s.byKey[sess.KeyID]
	if ids == nil {
		ids = map[string]struct{}{}
		s.byKey[sess.KeyID] = ids
	}
	ids[sess.ID] = struct{}{}
	return nil
}

// sweepKey drops key's expired sessions.
func (s *MemorySessions) sweepKey(key string, now time.Time) {
	for id := range s.byKey[key] {
		if now.Sub(s.m[id].Seen) > s.ttl {
			s.drop(id)
		}
	}
}

// dropOldest drops key's least recently used session.
func (s *MemorySessions) dropOldest(key string) {
	oldest := ""
	for id := range s.byKey[key] {
		if oldest == "" || s.m[id].Seen.Before(s.m[oldest].Seen) {
			oldest = id
		}
	}
	if oldest != "" {
		s.drop(oldest)
	}
}

// drop removes session id.
func (s *MemorySessions) drop(id string) {
	key := s.m[id].KeyID
	delete(s.m, id)
	if ids := s.byKey[key]; ids != nil {
		delete(ids, id)
		if len(ids) == 0 {
			delete(s.byKey, key)
		}
	}
}

// Get implements Sessions.
func (s *MemorySessions) Get(_ context.Context, keyID, id string) (Session, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.m[id]
	if !ok || sess.KeyID != keyID {
		return Session{}, false, nil
	}
	now := s.now()
	if now.Sub(sess.Seen) > s.ttl {
		s.drop(id)
		return Session{}, false, nil
	}
	sess.Seen = now
	s.m[id] = sess
	return sess, true, nil
}

// Delete implements Sessions.
func (s *MemorySessions) Delete(_ context.Context, keyID, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sess, ok := s.m[id]; ok && sess.KeyID == keyID {
		s.drop(id)
	}
	return nil
}

package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sync"
	"time"
)

// Session bounds of the in-memory store.
const (
	// SessionTTL is how long a session lives without a request.
	SessionTTL = time.Hour
	// MaxSessions bounds the sessions kept; the least recently used goes
	// first.
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
// (Redis) several.
type Sessions interface {
	// Create stores s.
	Create(ctx context.Context, s Session) error
	// Get returns the live session id and marks it used; ok is false when
	// it is unknown or expired.
	Get(ctx context.Context, id string) (s Session, ok bool, err error)
	// Delete ends a session.
	Delete(ctx context.Context, id string) error
}

// NewSessionID returns a random session id of visible ASCII.
func NewSessionID() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// MemorySessions keeps sessions in memory with a TTL and a bound.
type MemorySessions struct {
	mu  sync.Mutex
	m   map[string]Session
	now func() time.Time
	ttl time.Duration
	max int
}

// NewMemorySessions returns an empty store (now nil: time.Now).
func NewMemorySessions(now func() time.Time) *MemorySessions {
	if now == nil {
		now = time.Now
	}
	return &MemorySessions{m: map[string]Session{}, now: now, ttl: SessionTTL, max: MaxSessions}
}

// Create implements Sessions.
func (s *MemorySessions) Create(_ context.Context, sess Session) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	sess.Seen = now
	for len(s.m) >= s.max {
		oldest := ""
		for id, x := range s.m {
			if oldest == "" || x.Seen.Before(s.m[oldest].Seen) {
				oldest = id
			}
		}
		delete(s.m, oldest)
	}
	s.m[sess.ID] = sess
	return nil
}

// Get implements Sessions.
func (s *MemorySessions) Get(_ context.Context, id string) (Session, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sess, ok := s.m[id]
	if !ok {
		return Session{}, false, nil
	}
	now := s.now()
	if now.Sub(sess.Seen) > s.ttl {
		delete(s.m, id)
		return Session{}, false, nil
	}
	sess.Seen = now
	s.m[id] = sess
	return sess, true, nil
}

// Delete implements Sessions.
func (s *MemorySessions) Delete(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
	return nil
}

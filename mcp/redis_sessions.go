package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisSessions keeps routing-server sessions in Redis, shared by every
// node: a session made on one node is used on any other. Each lives
// SessionTTL after its last request (the key's expiry, renewed on use).
type RedisSessions struct {
	Client redis.UniversalClient
	// TTL replaces SessionTTL when positive.
	TTL time.Duration
}

var _ Sessions = (*RedisSessions)(nil)

func sessionKey(id string) string { return "gw:mcp:session:" + id }

func (s *RedisSessions) ttl() time.Duration {
	if s.TTL > 0 {
		return s.TTL
	}
	return SessionTTL
}

// Create implements Sessions.
func (s *RedisSessions) Create(ctx context.Context, sess Session) error {
	b, err := json.Marshal(sess)
	if err != nil {
		return err
	}
	return s.Client.Set(ctx, sessionKey(sess.ID), b, s.ttl()).Err()
}

// Get implements Sessions: it renews the session's expiry.
func (s *RedisSessions) Get(ctx context.Context, id string) (Session, bool, error) {
	b, err := s.Client.GetEx(ctx, sessionKey(id), s.ttl()).Bytes()
	if errors.Is(err, redis.Nil) {
		return Session{}, false, nil
	}
	if err != nil {
		return Session{}, false, err
	}
	var sess Session
	if json.Unmarshal(b, &sess) != nil || sess.ID != id {
		return Session{}, false, nil
	}
	sess.Seen = time.Now()
	return sess, true, nil
}

// Delete implements Sessions.
func (s *RedisSessions) Delete(ctx context.Context, id string) error {
	return s.Client.Del(ctx, sessionKey(id)).Err()
}

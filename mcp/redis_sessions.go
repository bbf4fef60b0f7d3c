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
// A key's sessions are listed in one sorted set by last use, so a key
// holds at most MaxSessionsPerKey of them: one key can never fill Redis
// with sessions, whatever it sends.
type RedisSessions struct {
	Client redis.UniversalClient
	// TTL replaces SessionTTL when positive.
	TTL time.Duration
	// PerKey replaces MaxSessionsPerKey when positive.
	PerKey int
}

var _ Sessions = (*RedisSessions)(nil)

// sessionPrefix starts a key's Redis keys; the key ID in braces keeps a
// key's sessions and their list in one cluster slot.
func sessionPrefix(keyID string) string { return "gw:mcp:{" + keyID + "}:" }

func sessionKey(keyID, id string) string { return sessionPrefix(keyID) + "session:" + id }

func sessionList(keyID string) string { return sessionPrefix(keyID) + "sessions" }

func (s *RedisSessions) ttl() time.Duration {
	if s.TTL > 0 {
		return s.TTL
	}
	return SessionTTL
}

func (s *RedisSessions) perKey() int {
	if s.PerKey > 0 {
		return s.PerKey
	}
	return MaxSessionsPerKey
}

// serverNow is Redis's clock in microseconds, one clock for every node:
// now as a number, nows as its digits (Lua would write it with 14).
const serverNow = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local nows = string.format('%.0f', now)
`

// createScript stores a session and lists it for its key, first dropping
// the key's expired sessions and, at the bound, its least recently used.
// KEYS: the session, the key's list. ARGV: id, session JSON, TTL in ms,
// bound, the key's session key prefix.
var createScript = redis.NewScript(serverNow + `
local ttl, bound = tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', string.format('%.0f', now - ttl * 1000))
local n = redis.call('ZCARD', KEYS[2])
if n >= bound then
	local old = redis.call('ZRANGE', KEYS[2], 0, n - bound)
	for _, id in ipairs(old) do
		redis.call('DEL', ARGV[5] .. id)
		redis.call('ZREM', KEYS[2], id)
	end
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ttl)
redis.call('ZADD', KEYS[2], nows, ARGV[1])
redis.call('PEXPIRE', KEYS[2], ttl)
return 1
`)

// getScript returns a live session and renews it. KEYS: the session, the
// key's list. ARGV: id, TTL in ms.
var getScript = redis.NewScript(serverNow + `
local v = redis.call('GET', KEYS[1])
if not v then
	redis.call('ZREM', KEYS[2], ARGV[1])
	return false
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
redis.call('ZADD', KEYS[2], nows, ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return v
`)

// Create implements Sessions.
func (s *RedisSessions) Create(ctx context.Context, sess Session) error {
	sess.Seen = time.Now()
	b, err := json.Marshal(sess)
	if err != nil {
		return err
	}
	return createScript.Run(ctx, s.Client, []string{sessionKey(sess.KeyID, sess.ID), sessionList(sess.KeyID)},
		sess.ID, b, s.ttl().Milliseconds(), s.perKey(), sessionKey(sess.KeyID, "")).Err()
}

// Get implements Sessions: it renews the session's expiry.
func (s *RedisSessions) Get(ctx context.Context, keyID, id string) (Session, bool, error) {
	b, err := getScript.Run(ctx, s.Client, []string{sessionKey(keyID, id), sessionList(keyID)}, id, s.ttl().Milliseconds()).Text()
	if errors.Is(err, redis.Nil) {
		return Session{}, false, nil
	}
	if err != nil {
		return Session{}, false, err
	}
	var sess Session
	if json.Unmarshal([]byte(b), &sess) != nil || sess.ID != id || sess.KeyID != keyID {
		return Session{}, false, nil
	}
	sess.Seen = time.Now()
	return sess, true, nil
}

// Delete implements Sessions.
func (s *RedisSessions) Delete(ctx context.Context, keyID, id string) error {
	_, err := s.Client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, sessionKey(keyID, id))
		p.ZRem(ctx, sessionList(keyID), id)
		return nil
	})
	return err
}

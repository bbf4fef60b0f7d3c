// Package answercache keeps the answers of repeated requests, per account:
// the exact-match cache of the chat formats and of embeddings, for a TTL,
// in memory or in a Redis every node shares. A hit costs nothing.
package answercache

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/maypok86/otter/v2"
	"github.com/redis/go-redis/v9"
)

// Hit is a cached answer: the client's body as it was sent, and the model
// that made it.
type Hit struct {
	Body  []byte
	Model string
}

// Space keeps apart the answers to one body sent to different endpoints
// or in different wire formats: each has a space of its own. The chat
// handler keys each wire format by its number (below Embeddings).
type Space uint64

// Embeddings is the embeddings endpoint's space, apart from every chat
// format's (it is no wire format).
const Embeddings Space = 1 << 8

// Cache is the exact-match answer cache: per account, per space, for a
// TTL.
type Cache struct {
	c *otter.Cache[[32]byte, Hit]
	// shared, when set, keeps the answers in Redis for ttl instead, so
	// that every node answers from them.
	shared redis.UniversalClient
	ttl    time.Duration
}

// NewShared returns a cache keeping answers in Redis for ttl, shared by
// every node that names the same server.
func NewShared(ttl time.Duration, c redis.UniversalClient) *Cache {
	return &Cache{shared: c, ttl: ttl}
}

// sharedTimeout bounds a shared cache's read or write (a miss, if slower).
const sharedTimeout = 500 * time.Millisecond

// sharedKey is an answer's Redis key. Its prefix predates the embeddings
// space and stays, so that answers already shared are still found.
func sharedKey(k [32]byte) string { return "gw:chatcache:" + hex.EncodeToString(k[:]) }

// DefaultBytes bounds the cache's answers in memory.
const DefaultBytes = 64 << 20

// New returns a cache keeping answers for ttl, at most maxBytes of them
// (DefaultBytes when 0).
func New(ttl time.Duration, maxBytes uint64) *Cache {
	if maxBytes == 0 {
		maxBytes = DefaultBytes
	}
	return &Cache{c: otter.Must(&otter.Options[[32]byte, Hit]{
		MaximumWeight:    maxBytes,
		Weigher:          func(_ [32]byte, h Hit) uint32 { return uint32(min(len(h.Body)+len(h.Model), 1<<31)) },
		ExpiryCalculator: otter.ExpiryWriting[[32]byte, Hit](ttl),
	})}
}

// key is the SHA-256 of the account's length and bytes, the space and the
// body, so that no account, space and body run into another's.
func key(account string, s Space, body []byte) [32]byte {
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(account)))
	h.Write(n[:])
	h.Write([]byte(account))
	binary.BigEndian.PutUint64(n[:], uint64(s))
	h.Write(n[:])
	h.Write(body)
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// Get returns the cached answer for an identical request of the account
// in space s.
func (c *Cache) Get(account string, s Space, body []byte) (Hit, bool) {
	k := key(account, s, body)
	if c.shared == nil {
		return c.c.GetIfPresent(k)
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	b, err := c.shared.Get(ctx, sharedKey(k)).Bytes()
	var h Hit
	if err != nil || json.Unmarshal(b, &h) != nil {
		return Hit{}, false
	}
	return h, true
}

// Put keeps an answer.
func (c *Cache) Put(account string, s Space, body []byte, h Hit) {
	k := key(account, s, body)
	if c.shared == nil {
		c.c.Set(k, h)
		return
	}
	b, err := json.Marshal(h)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	_ = c.shared.Set(ctx, sharedKey(k), b, c.ttl).Err()
}

// Destruct lets the cache live in a caddy.UsagePool.
func (c *Cache) Destruct() error { return nil }

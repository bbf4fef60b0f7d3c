package chat

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

// Cache is the exact-match answer cache: per account, per
// format, for identical non-streaming temperature-0 requests, for a TTL.
// A hit costs nothing.
type Cache struct {
	c *otter.Cache[[32]byte, Hit]
	// shared, when set, keeps the answers in Redis for ttl instead, so
	// that every node answers from them.
	shared redis.UniversalClient
	ttl    time.Duration
}

// NewSharedCache returns a cache keeping answers in Redis for ttl, shared
// by every node that names the same server.
func NewSharedCache(ttl time.Duration, c redis.UniversalClient) *Cache {
	return &Cache{shared: c, ttl: ttl}
}

// sharedTimeout bounds a shared cache's read or write (a miss, if slower).
const sharedTimeout = 500 * time.Millisecond

func sharedKey(k [32]byte) string { return "gw:chatcache:" + hex.EncodeToString(k[:]) }

// DefaultCacheBytes bounds the cache's answers in memory.
const DefaultCacheBytes = 64 << 20

// NewCache returns a cache keeping answers for ttl, at most maxBytes of them.
func NewCache(ttl time.Duration, maxBytes uint64) *Cache {
	if maxBytes == 0 {
		maxBytes = DefaultCacheBytes
	}
	return &Cache{c: otter.Must(&otter.Options[[32]byte, Hit]{
		MaximumWeight:    maxBytes,
		Weigher:          func(_ [32]byte, h Hit) uint32 { return uint32(min(len(h.Body)+len(h.Model), 1<<31)) },
		ExpiryCalculator: otter.ExpiryWriting[[32]byte, Hit](ttl),
	})}
}

// CacheEmbeddings keys the embeddings endpoint's answers in the cache,
// apart from every chat format's (it is no wire format: it has no row of
// formats).
const CacheEmbeddings Format = 1 << 8

func cacheKey(account string, f Format, body []byte) [32]byte {
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(account)))
	h.Write(n[:])
	h.Write([]byte(account))
	binary.BigEndian.PutUint64(n[:], uint64(f))
	h.Write(n[:])
	h.Write(body)
	var k [32]byte
	h.Sum(k[:0])
	return k
}

// Get returns the cached answer for an identical request of the account.
func (c *Cache) Get(account string, f Format, body []byte) (Hit, bool) {
	k := cacheKey(account, f, body)
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
func (c *Cache) Put(account string, f Format, body []byte, h Hit) {
	k := cacheKey(account, f, body)
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

package answercache

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/caddy-gw/caddy-gw/internal/testsvc"
)

// A hit needs the same account, space and body; any other is a miss.
func testCache(t *testing.T, put, get *Cache) {
	t.Helper()
	body := []byte(`{"a":1}`)
	put.Put("acc", 0, body, Hit{Body: []byte("answer"), Model: "m"})
	if h, ok := get.Get("acc", 0, body); !ok || string(h.Body) != "answer" || h.Model != "m" {
		t.Fatalf("got %q %q %v; want answer m true", h.Body, h.Model, ok)
	}
	for _, miss := range []struct {
		acc string
		s   Space
		b   string
	}{{"other", 0, `{"a":1}`}, {"acc", 2, `{"a":1}`}, {"acc", Embeddings, `{"a":1}`}, {"acc", 0, `{"a":2}`}} {
		if _, ok := get.Get(miss.acc, miss.s, []byte(miss.b)); ok {
			t.Errorf("hit for %+v", miss)
		}
	}
}

func TestCache(t *testing.T) {
	c := New(time.Minute, 0)
	testCache(t, c, c)
}

// Answers one node keeps in a shared cache are found by another node's.
func TestSharedCache(t *testing.T) {
	opt, err := redis.ParseURL(testsvc.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	a, b := redis.NewClient(opt), redis.NewClient(opt)
	t.Cleanup(func() { a.Close(); b.Close() })
	testCache(t, NewShared(time.Minute, a), NewShared(time.Minute, b))
}

// The key is the SHA-256 of the account's length (8 bytes, big-endian),
// the account, the space (8 bytes) and the body: answers shared before
// the cache had a package of its own are still found under it, and an
// account name cannot run into the space or body after it.
func TestKeyLayout(t *testing.T) {
	var want bytes.Buffer
	_ = binary.Write(&want, binary.BigEndian, uint64(3))
	want.WriteString("acc")
	_ = binary.Write(&want, binary.BigEndian, uint64(Embeddings))
	want.WriteString(`{"input":"x"}`)
	if got := key("acc", Embeddings, []byte(`{"input":"x"}`)); got != sha256.Sum256(want.Bytes()) {
		t.Fatalf("key %x, want %x", got, sha256.Sum256(want.Bytes()))
	}
	if key("ab", 0, []byte("c")) == key("a", 0, []byte("bc")) {
		t.Fatal("an account's end runs into the body")
	}
}

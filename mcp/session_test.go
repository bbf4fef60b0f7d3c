package mcp

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/caddy-gw/caddy-gw/internal/testsvc"
)

// Both session stores behave alike: a session is found only with its own
// key, renewed on use and ended by Delete; a key holding its bound loses
// its own least recently used session when it opens one more, and another
// key's sessions stay.
func TestSessionsBackends(t *testing.T) {
	opt, err := redis.ParseURL(testsvc.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(opt)
	t.Cleanup(func() { client.Close() })
	const perKey = 4
	mem := NewMemorySessions(nil)
	mem.perKey = perKey
	for name, st := range map[string]Sessions{"memory": mem, "redis": &RedisSessions{Client: client, PerKey: perKey}} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			open := func(key string) string {
				t.Helper()
				id := NewSessionID()
				if err := st.Create(ctx, Session{ID: id, KeyID: key, Version: LatestVersion}); err != nil {
					t.Fatal(err)
				}
				return id
			}
			live := func(key, id string) bool {
				t.Helper()
				s, ok, err := st.Get(ctx, key, id)
				if err != nil {
					t.Fatal(err)
				}
				if ok && (s.ID != id || s.KeyID != key || s.Version != LatestVersion) {
					t.Fatalf("got %+v for %s of %s", s, id, key)
				}
				return ok
			}
			other := open("other")
			if !live("other", other) || live("flood", other) {
				t.Fatal("a session is found with its own key only")
			}
			var ids []string
			for range perKey {
				ids = append(ids, open("flood"))
			}
			// Using the first makes the second the least recently used.
			if !live("flood", ids[0]) {
				t.Fatal("a fresh session is not live")
			}
			open("flood")
			if live("flood", ids[1]) || !live("flood", ids[0]) || !live("flood", ids[2]) || !live("flood", ids[3]) {
				t.Fatal("one more session did not take the key's least recently used alone")
			}
			for range 3 * perKey {
				open("flood")
			}
			if !live("other", other) {
				t.Fatal("another key's session was ended by the flood")
			}
			fresh := open("flood")
			if err := st.Delete(ctx, "other", fresh); err != nil || !live("flood", fresh) {
				t.Fatalf("another key deleted a session (%v)", err)
			}
			if err := st.Delete(ctx, "flood", fresh); err != nil || live("flood", fresh) {
				t.Fatalf("delete (%v)", err)
			}
		})
	}
}

// In memory a session expires SessionTTL after its last use, and at the
// node's bound the key holding the most sessions loses its least recently
// used, never a key holding fewer.
func TestMemorySessionsBounds(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	st := NewMemorySessions(func() time.Time { return now })
	st.max, st.perKey = 6, 4
	ctx := context.Background()
	open := func(key string) string {
		id := NewSessionID()
		now = now.Add(time.Second)
		if err := st.Create(ctx, Session{ID: id, KeyID: key}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	live := func(key, id string) bool {
		_, ok, _ := st.Get(ctx, key, id)
		return ok
	}
	a1, a2 := open("a"), open("a")
	b1 := open("b")
	var c []string
	for range 3 {
		c = append(c, open("c"))
	}
	// Full: one more of a's takes c's least recently used (c holds most).
	a3 := open("a")
	if live("c", c[0]) || !live("c", c[1]) || !live("a", a1) || !live("a", a2) || !live("a", a3) || !live("b", b1) {
		t.Fatalf("at the bound: %v", st.byKey)
	}
	now = now.Add(SessionTTL + time.Second)
	if live("b", b1) {
		t.Fatal("a session outlived its TTL")
	}
	if len(st.m) != len(st.byKey["a"])+len(st.byKey["c"]) {
		t.Fatalf("an expired session left its key's list: %d sessions, lists %v", len(st.m), st.byKey)
	}
}

// Session ids are 48 lowercase hex digits, and only ids of that form are
// looked up.
func TestSessionIDs(t *testing.T) {
	for range 100 {
		if id := NewSessionID(); !validSessionID(id) {
			t.Fatalf("session id %q", id)
		}
	}
	for _, id := range []string{"", "abc", strings.Repeat("A", 48), strings.Repeat("0", 47) + "g", strings.Repeat("0", 49)} {
		if validSessionID(id) {
			t.Errorf("%q is taken for a session id", id)
		}
	}
}

package tools

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/caddy-gw/caddy-gw/internal/testsvc"
)

// The paid-tool states move the same way in memory and in Redis: refused,
// listed once more, then dropped (and a dropped tool stays dropped when
// refused again); a reset lists it again.
func TestStatesBackends(t *testing.T) {
	opt, err := redis.ParseURL(testsvc.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(opt)
	t.Cleanup(func() { client.Close() })
	for name, st := range map[string]States{"memory": NewMemoryStates(), "redis": &RedisStates{Client: client}} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			var got []bool
			list := func() { got = append(got, st.Listing(ctx, "acct", "speak")) }
			list()
			st.Refused(ctx, "acct", "speak")
			list()
			list()
			list()
			st.Refused(ctx, "acct", "speak")
			list()
			if other := st.Listing(ctx, "other", "speak"); !other {
				t.Error("another account's tool was dropped")
			}
			st.Reset(ctx, "acct")
			list()
			want := []bool{true, true, false, false, false, true}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("listings %v, want %v", got, want)
				}
			}
		})
	}
}

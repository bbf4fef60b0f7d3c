package lanes

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/caddy-gw/caddy-gw/internal/testsvc"
)

// In Redis each account keeps its most recent records up to the bound: a
// newer one ends the account's oldest, never another account's, and the
// account's list holds no more than the bound.
func TestRedisDecisionsPerAccount(t *testing.T) {
	opt, err := redis.ParseURL(testsvc.Redis(t))
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(opt)
	t.Cleanup(func() { client.Close() })
	const bound = 5
	d := &RedisDecisions{Client: client, PerAccount: bound}
	d.Put(Decision{ID: "other-1", AccountID: "other", Chosen: "m"})
	for i := range bound + 3 {
		d.Put(Decision{ID: fmt.Sprintf("flood-%d", i), AccountID: "flood", Chosen: "m"})
	}
	for i := range bound + 3 {
		_, ok := d.Get(fmt.Sprintf("flood-%d", i))
		if want := i >= 3; ok != want {
			t.Errorf("flood-%d kept: %v, want %v", i, ok, want)
		}
	}
	if dec, ok := d.Get("other-1"); !ok || dec.AccountID != "other" || dec.Chosen != "m" {
		t.Errorf("another account's record: %+v %v", dec, ok)
	}
	ctx := context.Background()
	if n, err := client.ZCard(ctx, decisionList("flood")).Result(); err != nil || n != bound {
		t.Errorf("the flooding account's list holds %d (%v), want %d", n, err, bound)
	}
	if n, err := client.DBSize(ctx).Result(); err != nil || n != bound+1+2 {
		t.Errorf("%d keys in Redis (%v), want %d records and 2 lists", n, err, bound+1)
	}
}

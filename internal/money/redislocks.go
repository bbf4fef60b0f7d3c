package money

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/caddy-gw/caddy-gw/pricing"
)

// Timings of the shared locks and holds.
const (
	// LockLease bounds how long an account's lock outlives a node that
	// died holding it.
	LockLease = 5 * time.Second
	// NodeLease is how long a node's holds count without its heartbeat;
	// the heartbeat renews it every NodeLease/3.
	NodeLease = 30 * time.Second
	// lockRetry is the longest pause between two tries of a taken lock.
	lockRetry = 2 * time.Millisecond
)

// RedisLocks are Locks shared by every node on one Redis: an account's
// lock is a key set with NX and a lease, and its holds are a hash of one
// field per node, counted only while that node's heartbeat key lives. A
// node that dies leaves its lock for at most LockLease and its holds for at
// most NodeLease; then they stop counting, and nothing it had not settled
// is charged.
type RedisLocks struct {
	Client redis.UniversalClient
	node   string
	stop   chan struct{}
	once   sync.Once
}

var _ Locks = (*RedisLocks)(nil)

// NewRedisLocks registers this node (a random id) and starts its
// heartbeat; Destruct stops it.
func NewRedisLocks(ctx context.Context, c redis.UniversalClient) (*RedisLocks, error) {
	l := &RedisLocks{Client: c, node: randomToken(), stop: make(chan struct{})}
	if err := l.beat(ctx); err != nil {
		return nil, err
	}
	go func() {
		t := time.NewTicker(NodeLease / 3)
		defer t.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), NodeLease/3)
				_ = l.beat(ctx)
				cancel()
			}
		}
	}()
	return l, nil
}

// Node is this node's id in the holds.
func (l *RedisLocks) Node() string { return l.node }

func (l *RedisLocks) beat(ctx context.Context) error {
	return l.Client.Set(ctx, nodeKey(l.node), 1, NodeLease).Err()
}

// Destruct stops the heartbeat and drops the node, whose holds then stop
// counting at once.
func (l *RedisLocks) Destruct() error {
	l.once.Do(func() {
		close(l.stop)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = l.Client.Del(ctx, nodeKey(l.node)).Err()
	})
	return nil
}

func nodeKey(node string) string    { return "gw:node:" + node }
func lockKey(account string) string { return "gw:lock:{" + account + "}" }
func holdsKey(account string) string {
	return "gw:holds:{" + account + "}"
}

func randomToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// unlockScript deletes the lock only if it is still this holder's.
var unlockScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// Lock takes the account's lock, waiting (until ctx ends) while another
// node or call holds it.
func (l *RedisLocks) Lock(ctx context.Context, account string) (func(), error) {
	token := randomToken()
	pause := 50 * time.Microsecond
	for {
		ok, err := l.Client.SetNX(ctx, lockKey(account), token, LockLease).Result()
		if err != nil {
			return nil, err
		}
		if ok {
			return func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				_ = unlockScript.Run(ctx, l.Client, []string{lockKey(account)}, token).Err()
			}, nil
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		pause = min(2*pause, lockRetry)
	}
}

// heldScript sums the holds of live nodes and drops those of dead ones.
var heldScript = redis.NewScript(`
local fields = redis.call('HGETALL', KEYS[1])
local sum = 0
for i = 1, #fields, 2 do
	if redis.call('EXISTS', 'gw:node:' .. fields[i]) == 1 then
		sum = sum + tonumber(fields[i + 1])
	else
		redis.call('HDEL', KEYS[1], fields[i])
	end
end
return tostring(sum)
`)

// Held sums the account's holds of every live node.
func (l *RedisLocks) Held(ctx context.Context, account string) (pricing.Money, error) {
	s, err := heldScript.Run(ctx, l.Client, []string{holdsKey(account)}).Text()
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, errors.New("money: unreadable holds")
	}
	return pricing.Money(v), nil
}

// Add changes this node's holds of the account by delta.
func (l *RedisLocks) Add(ctx context.Context, account string, delta pricing.Money) error {
	if delta == 0 {
		return nil
	}
	// A field at zero stays (deleting it could race a concurrent Add);
	// it goes with the node.
	return l.Client.HIncrBy(ctx, holdsKey(account), l.node, int64(delta)).Err()
}

package money

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
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
	// HoldLease is how long a hold counts past its last renewal: a node
	// that dies (or loses Redis) stops holding after at most this long.
	HoldLease = 30 * time.Second
	// HoldRenew is how often a node writes its outstanding holds to Redis
	// again, with a fresh HoldLease: so a Redis that lost them (a restart,
	// a flush) has them back within this long.
	HoldRenew = 2 * time.Second
	// RestoreWait is how long, after Redis is found to have lost the
	// holds, every node refuses new reservations (credit_unresolved):
	// long enough for each live node to have written its holds again,
	// even one whose first renewal after the loss failed (its client
	// still reconnecting).
	RestoreWait = 2*HoldRenew + time.Second
	// lockRetry is the longest pause between two tries of a taken lock.
	lockRetry = 2 * time.Millisecond
)

// RedisLocks are Locks shared by every node on one Redis: an account's
// lock is a key set with NX and a lease, and its holds are a hash of one
// field per hold (its id → amount and expiry), released by deleting the
// field. A hold counts until its expiry, which its node renews every
// HoldRenew while the call runs; a node that dies leaves its lock for at
// most LockLease and its holds for at most HoldLease, and nothing it had
// not settled is charged. The sum of holds can never go below zero: a
// release only deletes its own record.
//
// The node keeps its outstanding holds in memory too, and writes them all
// again at each renewal: a Redis that restarts empty or is flushed has
// them back within HoldRenew. A loss is found by the mark of since when
// the holds are whole, which names the Redis server (its run id) it was
// set on: missing (a restart empty, a flush) or set on another server (a
// restart from an RDB or AOF snapshot, a replica promoted by a failover:
// the mark came along, the holds written after the snapshot did not).
// Meanwhile (RestoreWait from the moment any node sees the loss)
// reservations are refused with credit_unresolved rather than granted
// against holds that are not there.
type RedisLocks struct {
	Client redis.UniversalClient
	node   string
	// lease, renew and restore are HoldLease, HoldRenew and RestoreWait
	// (tests shorten them).
	lease, renew, restore time.Duration

	mu    sync.Mutex
	holds map[string]redisHold // this node's outstanding holds by id
	// kept are the holds of charges this node keeps in its spool (see
	// Keep), which outlive the node; renewals write them again.
	kept map[string]redisHold
	// orphans are holds released while Redis could not be told; each
	// renewal tries to delete them again (they expire in any case).
	orphans map[string]string // hold id → account
	seq     uint64

	stop chan struct{}
	kick chan struct{}
	once sync.Once
}

// redisHold is one outstanding hold of this node.
type redisHold struct {
	account string
	amount  pricing.Money
}

var _ Locks = (*RedisLocks)(nil)

// NewRedisLocks registers this node (a random id) and starts its renewal;
// Destruct stops it.
func NewRedisLocks(ctx context.Context, c redis.UniversalClient) (*RedisLocks, error) {
	l := newRedisLocks(c, HoldLease, HoldRenew, RestoreWait)
	if err := l.first(ctx); err != nil {
		return nil, err
	}
	go l.loop()
	return l, nil
}

func newRedisLocks(c redis.UniversalClient, lease, renew, restore time.Duration) *RedisLocks {
	return &RedisLocks{Client: c, node: randomToken(), lease: lease, renew: renew, restore: restore,
		holds: map[string]redisHold{}, kept: map[string]redisHold{}, orphans: map[string]string{}, stop: make(chan struct{}), kick: make(chan struct{}, 1)}
}

// Node is this node's id, the prefix of its holds' ids.
func (l *RedisLocks) Node() string { return l.node }

// loop renews this node's holds every renew, and at once when a check
// found that Redis lost them.
func (l *RedisLocks) loop() {
	t := time.NewTicker(l.renew)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		case <-l.kick:
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.renew)
		_ = l.renewAll(ctx)
		cancel()
	}
}

// Destruct stops the renewal and deletes this node's outstanding holds,
// which then stop counting at once; kept holds stay (see Keep).
func (l *RedisLocks) Destruct() error {
	l.once.Do(func() {
		close(l.stop)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		l.mu.Lock()
		holds := l.holds
		l.holds = map[string]redisHold{}
		l.mu.Unlock()
		pipe := l.Client.Pipeline()
		for id, h := range holds {
			pipe.HDel(ctx, holdsKey(h.account), id)
		}
		_, _ = pipe.Exec(ctx)
	})
	return nil
}

// sinceKey holds the Redis server time (milliseconds) from which its
// holds are whole, and serverKey the run id of the Redis server they are
// whole on: set when the first node starts, and again when a node finds
// either missing (Redis lost its data) or serverKey naming another server
// (Redis restarted from a snapshot, or another server took over), which
// starts a RestoreWait.
const (
	sinceKey  = "gw:holds:since"
	serverKey = "gw:holds:server"
)

// wholeKeys are the keys of the mark, in the order the scripts read them.
var wholeKeys = []string{sinceKey, serverKey}

func lockKey(account string) string  { return "gw:lock:{" + account + "}" }
func holdsKey(account string) string { return "gw:holds:{" + account + "}" }
func keptKey(account string) string  { return "gw:kept:{" + account + "}" }

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

// nowMs is the Lua that reads the Redis server's clock in milliseconds:
// every node's expiries are on the one clock.
const nowMs = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`

// serverRun is the Lua that reads the run id of the Redis server running
// the script (INFO server): new at every start of a server, so a server
// restarted from a snapshot, or a replica promoted in a failover, is told
// from the one the holds were written to even though their data came
// along. A server that names none reads as the empty id.
const serverRun = `local run = string.match(redis.call('INFO', 'server'), 'run_id:(%w+)') or ''
`

// wholeCheck is the Lua that finds a loss of the holds: the mark missing
// (KEYS[1], Redis lost its data) or set on another server (KEYS[2] not
// this server's run id). It then marks the holds whole from now on this
// server (starting a RestoreWait) and leaves lost true; since is the mark.
const wholeCheck = nowMs + serverRun + `
local since = redis.call('GET', KEYS[1])
local lost = (not since) or redis.call('GET', KEYS[2]) ~= run
if lost then
	since = now
	redis.call('SET', KEYS[1], now)
	redis.call('SET', KEYS[2], run)
end
`

// firstScript marks the holds whole as of restore ago on this server when
// no node has yet (the first node on a new Redis waits for nothing). A
// mark already there is left for the checks to judge.
var firstScript = redis.NewScript(nowMs + serverRun + `
if redis.call('SET', KEYS[1], now - tonumber(ARGV[1]), 'NX') then
	redis.call('SET', KEYS[2], run)
end
return 0
`)

// heldScript sums an account's holds (KEYS[3]) that have not expired,
// deleting the expired ones, and its kept holds (KEYS[4], which never
// expire); never below zero. With the holds not whole
// (Redis lost them less than RestoreWait ago) it answers the error
// errRestoring.
var heldScript = redis.NewScript(wholeCheck + `
if lost then
	return redis.error_reply('GWRESTORING holds lost')
end
if now - tonumber(since) < tonumber(ARGV[1]) then
	return redis.error_reply('GWRESTORING holds being restored')
end
local fields = redis.call('HGETALL', KEYS[3])
local sum = 0
for i = 1, #fields, 2 do
	local v = fields[i + 1]
	local sep = string.find(v, ':', 1, true)
	local amount, expiry = 0, 0
	if sep then
		amount, expiry = tonumber(string.sub(v, 1, sep - 1)) or 0, tonumber(string.sub(v, sep + 1)) or 0
	end
	if expiry <= now then
		redis.call('HDEL', KEYS[3], fields[i])
	elseif amount > 0 then
		sum = sum + amount
	end
end
local kept = redis.call('HVALS', KEYS[4])
for i = 1, #kept do
	local amount = tonumber(kept[i]) or 0
	if amount > 0 then sum = sum + amount end
end
if sum < 0 then sum = 0 end
return tostring(sum)
`)

// holdScript writes (or renews) one hold: amount and an expiry lease
// from now; the account's hash lives as long as its newest hold.
var holdScript = redis.NewScript(nowMs + `
local expiry = now + tonumber(ARGV[3])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2] .. ':' .. expiry)
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[3]) then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return 0
`)

// errRestoring is Held's answer while Redis's holds are being restored.
var errRestoring = errors.New("money: the shared holds are being restored")

func (l *RedisLocks) first(ctx context.Context) error {
	return firstScript.Run(ctx, l.Client, wholeKeys, l.restore.Milliseconds()).Err()
}

// Held sums the account's outstanding holds of every node.
func (l *RedisLocks) Held(ctx context.Context, account string) (pricing.Money, error) {
	s, err := heldScript.Run(ctx, l.Client, []string{sinceKey, serverKey, holdsKey(account), keptKey(account)}, l.restore.Milliseconds()).Text()
	if err != nil {
		if strings.HasPrefix(err.Error(), "GWRESTORING") {
			// Put this node's holds back at once; the other nodes do at
			// their next renewal.
			select {
			case l.kick <- struct{}{}:
			default:
			}
			return 0, errRestoring
		}
		return 0, err
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, errors.New("money: unreadable holds")
	}
	return pricing.Money(v), nil
}

// Hold records a hold of amount for the account and returns its id.
func (l *RedisLocks) Hold(ctx context.Context, account string, amount pricing.Money) (string, error) {
	l.mu.Lock()
	l.seq++
	id := l.node + "-" + strconv.FormatUint(l.seq, 36)
	l.holds[id] = redisHold{account: account, amount: amount}
	l.mu.Unlock()
	err := holdScript.Run(ctx, l.Client, []string{holdsKey(account)}, id, int64(amount), l.lease.Milliseconds()).Err()
	if err != nil {
		l.mu.Lock()
		delete(l.holds, id)
		l.orphans[id] = account // it may have been written all the same
		l.mu.Unlock()
		return "", err
	}
	return id, nil
}

// keepScript turns hold ARGV[1] into a kept hold of ARGV[2].
var keepScript = redis.NewScript(`
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('HDEL', KEYS[1], ARGV[1])
return 0
`)

// Keep makes hold id of the account a kept hold of amount: it counts on
// every node, never expires and is not deleted when this node stops, until
// Drop deletes it. A charge kept in this node's spool keeps its money held
// so, even when the node dies before the shared store has the charge; the
// node (or the next process on its data folder) drops it once the store
// has it. An id this node does not know is kept all the same (a spool left
// by an earlier process).
func (l *RedisLocks) Keep(ctx context.Context, account, id string, amount pricing.Money) error {
	l.mu.Lock()
	delete(l.holds, id)
	l.kept[id] = redisHold{account: account, amount: amount}
	l.mu.Unlock()
	return keepScript.Run(ctx, l.Client, []string{holdsKey(account), keptKey(account)}, id, int64(amount)).Err()
}

// Drop deletes hold id of the account, kept or not. One Redis could not be
// told of is deleted at a later renewal (a hold not kept expires in any
// case).
func (l *RedisLocks) Drop(ctx context.Context, account, id string) error {
	l.mu.Lock()
	delete(l.holds, id)
	delete(l.kept, id)
	l.mu.Unlock()
	if err := l.Client.HDel(ctx, holdsKey(account), id).Err(); err != nil {
		l.mu.Lock()
		l.orphans[id] = account
		l.mu.Unlock()
		return err
	}
	if err := l.Client.HDel(ctx, keptKey(account), id).Err(); err != nil {
		l.mu.Lock()
		l.orphans[id] = account
		l.mu.Unlock()
		return err
	}
	return nil
}

// renewAll writes every outstanding hold of this node again with a fresh
// lease (putting back what Redis lost), and deletes the orphans. It first
// checks the mark, as Held does, so a loss starts its wait at the first
// renewal after it, even on a node that holds nothing. A hold dropped
// while the renewal ran is deleted again after it.
func (l *RedisLocks) renewAll(ctx context.Context) error {
	l.mu.Lock()
	holds := make(map[string]redisHold, len(l.holds))
	for id, h := range l.holds {
		holds[id] = h
	}
	kept := make(map[string]redisHold, len(l.kept))
	for id, h := range l.kept {
		kept[id] = h
	}
	orphans := l.orphans
	l.orphans = map[string]string{}
	l.mu.Unlock()

	// One connection carries the whole pipeline: a server that restarts
	// or is replaced after the check fails the writes that follow it.
	pipe := l.Client.Pipeline()
	sinceScript.Eval(ctx, pipe, wholeKeys)
	for id, h := range holds {
		holdScript.Eval(ctx, pipe, []string{holdsKey(h.account)}, id, int64(h.amount), l.lease.Milliseconds())
	}
	for id, h := range kept {
		pipe.HSet(ctx, keptKey(h.account), id, int64(h.amount))
	}
	for id, account := range orphans {
		pipe.HDel(ctx, holdsKey(account), id)
		pipe.HDel(ctx, keptKey(account), id)
	}
	_, err := pipe.Exec(ctx)

	l.mu.Lock()
	if err != nil {
		for id, account := range orphans {
			l.orphans[id] = account
		}
	}
	// gone: written again above, but dropped (or kept, for a hold)
	// meanwhile.
	gone := map[string]string{}
	for id, h := range holds {
		if _, ok := l.holds[id]; !ok {
			gone[id] = h.account
		}
	}
	goneKept := map[string]string{}
	for id, h := range kept {
		if _, ok := l.kept[id]; !ok {
			goneKept[id] = h.account
		}
	}
	l.mu.Unlock()
	if len(gone)+len(goneKept) > 0 {
		pipe := l.Client.Pipeline()
		for id, account := range gone {
			pipe.HDel(ctx, holdsKey(account), id)
		}
		for id, account := range goneKept {
			pipe.HDel(ctx, keptKey(account), id)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			l.mu.Lock()
			for _, g := range []map[string]string{gone, goneKept} {
				for id, account := range g {
					l.orphans[id] = account
				}
			}
			l.mu.Unlock()
		}
	}
	return err
}

// sinceScript is wholeCheck alone: a renewal's check of the mark.
var sinceScript = redis.NewScript(wholeCheck + `
return 0
`)

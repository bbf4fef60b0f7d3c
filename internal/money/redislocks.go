package money

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"maps"
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
	holds map[holdRef]pricing.Money // this node's outstanding holds
	// kept are the holds of charges this node keeps in its spool (see
	// Keep), which outlive the node; renewals write them again.
	kept map[holdRef]pricing.Money
	// orphans are holds released while Redis could not be told; each
	// renewal tries to delete them again (they expire in any case).
	orphans map[holdRef]bool
	seq     uint64

	stop chan struct{}
	kick chan struct{}
	once sync.Once
}

// holdRef names one hold's record: its scope and its id there (one hold
// of a call has the same id in each of its scopes).
type holdRef struct{ scope, id string }

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
		holds: map[holdRef]pricing.Money{}, kept: map[holdRef]pricing.Money{}, orphans: map[holdRef]bool{}, stop: make(chan struct{}), kick: make(chan struct{}, 1)}
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
		l.holds = map[holdRef]pricing.Money{}
		l.mu.Unlock()
		pipe := l.Client.Pipeline()
		for h := range holds {
			pipe.HDel(ctx, holdsKey(h.scope), h.id)
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

func lockKey(scope string) string  { return "gw:lock:{" + scope + "}" }
func holdsKey(scope string) string { return "gw:holds:{" + scope + "}" }
func keptKey(scope string) string  { return "gw:kept:{" + scope + "}" }

func randomToken() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// unlockScript deletes the locks (KEYS) that are still this holder's
// (ARGV[1]).
var unlockScript = redis.NewScript(`
for i = 1, #KEYS do
	if redis.call('GET', KEYS[i]) == ARGV[1] then redis.call('DEL', KEYS[i]) end
end
return 0
`)

// lockScript takes every lock of KEYS for holder ARGV[1], with a lease of
// ARGV[2] milliseconds, or none when any is taken: 1 when it took them.
var lockScript = redis.NewScript(`
for i = 1, #KEYS do
	if redis.call('EXISTS', KEYS[i]) == 1 then return 0 end
end
for i = 1, #KEYS do
	redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
end
return 1
`)

// Lock takes the scopes' locks, all at once (one round trip; a single
// scope with SET NX), waiting (until ctx ends) while another node or call
// holds any of them.
func (l *RedisLocks) Lock(ctx context.Context, scopes ...string) (func(), error) {
	token := randomToken()
	keys := make([]string, len(scopes))
	for i, scope := range scopes {
		keys[i] = lockKey(scope)
	}
	pause := 50 * time.Microsecond
	for {
		ok, err := l.tryLock(ctx, keys, token)
		if err != nil {
			return nil, err
		}
		if ok {
			return func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				_ = unlockScript.Run(ctx, l.Client, keys, token).Err()
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

// tryLock takes every lock of keys for token, or none.
func (l *RedisLocks) tryLock(ctx context.Context, keys []string, token string) (bool, error) {
	if len(keys) == 1 {
		return l.Client.SetNX(ctx, keys[0], token, LockLease).Result()
	}
	n, err := lockScript.Run(ctx, l.Client, keys, token, LockLease.Milliseconds()).Int()
	return n == 1, err
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

// heldScript sums the holds of each scope that have not expired (KEYS[3],
// KEYS[5], ...: its hash of holds), deleting the expired ones, and its
// kept holds (KEYS[4], KEYS[6], ...: which never expire); never below
// zero; one sum a scope, in order. With the holds not whole (Redis lost
// them less than RestoreWait ago) it answers the error errRestoring.
var heldScript = redis.NewScript(wholeCheck + `
if lost then
	return redis.error_reply('GWRESTORING holds lost')
end
if now - tonumber(since) < tonumber(ARGV[1]) then
	return redis.error_reply('GWRESTORING holds being restored')
end
local sums = {}
for k = 3, #KEYS, 2 do
	local fields = redis.call('HGETALL', KEYS[k])
	local sum = 0
	for i = 1, #fields, 2 do
		local v = fields[i + 1]
		local sep = string.find(v, ':', 1, true)
		local amount, expiry = 0, 0
		if sep then
			amount, expiry = tonumber(string.sub(v, 1, sep - 1)) or 0, tonumber(string.sub(v, sep + 1)) or 0
		end
		if expiry <= now then
			redis.call('HDEL', KEYS[k], fields[i])
		elseif amount > 0 then
			sum = sum + amount
		end
	end
	local kept = redis.call('HVALS', KEYS[k + 1])
	for i = 1, #kept do
		local amount = tonumber(kept[i]) or 0
		if amount > 0 then sum = sum + amount end
	end
	if sum < 0 then sum = 0 end
	sums[#sums + 1] = tostring(sum)
end
return sums
`)

// holdScript writes (or renews) hold ARGV[1] of ARGV[2] in each hash of
// KEYS, with an expiry lease of ARGV[3] milliseconds from now; a hash
// lives as long as its newest hold.
var holdScript = redis.NewScript(nowMs + `
local expiry = now + tonumber(ARGV[3])
for i = 1, #KEYS do
	redis.call('HSET', KEYS[i], ARGV[1], ARGV[2] .. ':' .. expiry)
	if redis.call('PTTL', KEYS[i]) < tonumber(ARGV[3]) then redis.call('PEXPIRE', KEYS[i], ARGV[3]) end
end
return 0
`)

// dropScript deletes hold ARGV[1] from each hash of KEYS.
var dropScript = redis.NewScript(`
for i = 1, #KEYS do redis.call('HDEL', KEYS[i], ARGV[1]) end
return 0
`)

// errRestoring is Held's answer while Redis's holds are being restored.
var errRestoring = errors.New("money: the shared holds are being restored")

func (l *RedisLocks) first(ctx context.Context) error {
	return firstScript.Run(ctx, l.Client, wholeKeys, l.restore.Milliseconds()).Err()
}

// Held writes to held each scope's outstanding holds of every node, in
// one round trip.
func (l *RedisLocks) Held(ctx context.Context, scopes []string, held []pricing.Money) error {
	keys := make([]string, 2, 2+2*len(scopes))
	keys[0], keys[1] = sinceKey, serverKey
	for _, scope := range scopes {
		keys = append(keys, holdsKey(scope), keptKey(scope))
	}
	sums, err := heldScript.Run(ctx, l.Client, keys, l.restore.Milliseconds()).StringSlice()
	if err != nil {
		if strings.HasPrefix(err.Error(), "GWRESTORING") {
			// Put this node's holds back at once; the other nodes do at
			// their next renewal.
			select {
			case l.kick <- struct{}{}:
			default:
			}
			return errRestoring
		}
		return err
	}
	if len(sums) != len(scopes) {
		return errors.New("money: unreadable holds")
	}
	for i, s := range sums {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return errors.New("money: unreadable holds")
		}
		held[i] = pricing.Money(v)
	}
	return nil
}

// Hold records a hold of amount in each scope, in one round trip, and
// returns its id.
func (l *RedisLocks) Hold(ctx context.Context, scopes []string, amount pricing.Money) (string, error) {
	keys := make([]string, len(scopes))
	l.mu.Lock()
	l.seq++
	id := l.node + "-" + strconv.FormatUint(l.seq, 36)
	for i, scope := range scopes {
		l.holds[holdRef{scope, id}] = amount
		keys[i] = holdsKey(scope)
	}
	l.mu.Unlock()
	err := holdScript.Run(ctx, l.Client, keys, id, int64(amount), l.lease.Milliseconds()).Err()
	if err != nil {
		l.mu.Lock()
		for _, scope := range scopes {
			delete(l.holds, holdRef{scope, id})
			l.orphans[holdRef{scope, id}] = true // it may have been written all the same
		}
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
func (l *RedisLocks) Keep(ctx context.Context, scope, id string, amount pricing.Money) error {
	l.mu.Lock()
	delete(l.holds, holdRef{scope, id})
	l.kept[holdRef{scope, id}] = amount
	l.mu.Unlock()
	return keepScript.Run(ctx, l.Client, []string{holdsKey(scope), keptKey(scope)}, id, int64(amount)).Err()
}

// Drop deletes hold id in each scope, kept or not, in one round trip. One
// Redis could not be told of is deleted at a later renewal (a hold not
// kept expires in any case).
func (l *RedisLocks) Drop(ctx context.Context, scopes []string, id string) error {
	keys := make([]string, 0, 2*len(scopes))
	l.mu.Lock()
	for _, scope := range scopes {
		delete(l.holds, holdRef{scope, id})
		delete(l.kept, holdRef{scope, id})
		keys = append(keys, holdsKey(scope), keptKey(scope))
	}
	l.mu.Unlock()
	if err := dropScript.Run(ctx, l.Client, keys, id).Err(); err != nil {
		l.mu.Lock()
		for _, scope := range scopes {
			l.orphans[holdRef{scope, id}] = true
		}
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
	holds := maps.Clone(l.holds)
	kept := maps.Clone(l.kept)
	orphans := l.orphans
	l.orphans = map[holdRef]bool{}
	l.mu.Unlock()

	// One connection carries the whole pipeline: a server that restarts
	// or is replaced after the check fails the writes that follow it.
	pipe := l.Client.Pipeline()
	sinceScript.Eval(ctx, pipe, wholeKeys)
	for h, amount := range holds {
		holdScript.Eval(ctx, pipe, []string{holdsKey(h.scope)}, h.id, int64(amount), l.lease.Milliseconds())
	}
	for h, amount := range kept {
		pipe.HSet(ctx, keptKey(h.scope), h.id, int64(amount))
	}
	for h := range orphans {
		pipe.HDel(ctx, holdsKey(h.scope), h.id)
		pipe.HDel(ctx, keptKey(h.scope), h.id)
	}
	_, err := pipe.Exec(ctx)

	l.mu.Lock()
	if err != nil {
		maps.Copy(l.orphans, orphans)
	}
	// gone: written again above, but dropped (or kept, for a hold)
	// meanwhile.
	var gone, goneKept []holdRef
	for h := range holds {
		if _, ok := l.holds[h]; !ok {
			gone = append(gone, h)
		}
	}
	for h := range kept {
		if _, ok := l.kept[h]; !ok {
			goneKept = append(goneKept, h)
		}
	}
	l.mu.Unlock()
	if len(gone)+len(goneKept) > 0 {
		pipe := l.Client.Pipeline()
		for _, h := range gone {
			pipe.HDel(ctx, holdsKey(h.scope), h.id)
		}
		for _, h := range goneKept {
			pipe.HDel(ctx, keptKey(h.scope), h.id)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			l.mu.Lock()
			for _, h := range append(gone, goneKept...) {
				l.orphans[h] = true
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

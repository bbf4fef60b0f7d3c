package limits

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// KeyPrefix starts every Redis key of the limiter.
const KeyPrefix = "gw:limit:"

// gcra is the GCRA step of Memory.Allow as one atomic Redis script, so that
// every node of a deployment draws from the same budget: "60 a minute" is 60
// for the account, not 60 per node. Times are whole microseconds read from
// Redis's own clock (nodes' clocks never matter), and a unit costs
// Period/Limit rounded up to a microsecond (exact for the fixed budgets:
// 1 s per request, 100 ms per audio second).
//
// ARGV: limit, period (µs), n. Returns {allowed (0/1), retry after (µs),
// remaining}.
var gcra = redis.NewScript(`
local limit = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
local rel = 0
if tat > now then rel = tat - now end
if rel > period then rel = period end
local function remaining(r)
  if r >= period then return 0 end
  return math.floor((period - r) * limit / period)
end
if n <= 0 then return {1, 0, remaining(rel)} end
if n > limit then return {0, period, remaining(rel)} end
local cost = math.ceil(n * period / limit)
local newrel = rel + cost
if newrel > period then return {0, newrel - period, remaining(rel)} end
redis.call('SET', KEYS[1], now + newrel, 'PX', math.ceil(newrel / 1000) + 1)
return {1, 0, remaining(newrel)}
`)

// Redis is a GCRA Limiter whose state lives in Redis, shared by every node
// that names the same server. It has Memory's semantics (a burst of Limit,
// then one unit every Period/Limit) at microsecond resolution. When Redis
// cannot answer, Allow returns the error: the pipeline then refuses the
// call (fails closed), never lets it through unlimited.
type Redis struct {
	Client redis.UniversalClient
}

var _ Limiter = (*Redis)(nil)

// NewRedis returns a limiter on the Redis server of url (redis://...).
func NewRedis(url string) (*Redis, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("limits: redis url: %w", err)
	}
	return &Redis{Client: redis.NewClient(opt)}, nil
}

// Destruct closes the client, for a caddy.UsagePool.
func (l *Redis) Destruct() error { return l.Client.Close() }

// Allow implements Limiter.
func (l *Redis) Allow(ctx context.Context, account string, b Budget, n int64) (Decision, error) {
	if err := b.Validate(); err != nil {
		return Decision{}, err
	}
	period := b.Period.Microseconds()
	if period <= 0 {
		return Decision{}, fmt.Errorf("%w %q: period under a microsecond", ErrInvalidBudget, b.Name)
	}
	res, err := gcra.Run(ctx, l.Client, []string{KeyPrefix + Key(account, b)}, b.Limit, period, n).Int64Slice()
	if err != nil {
		return Decision{}, fmt.Errorf("limits: redis: %w", err)
	}
	if len(res) != 3 {
		return Decision{}, fmt.Errorf("limits: redis: unexpected answer %v", res)
	}
	return Decision{Allowed: res[0] == 1, RetryAfter: time.Duration(res[1]) * time.Microsecond, Remaining: res[2]}, nil
}

package tools

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// RedisStates keep the paid-tool states in Redis (a hash per account),
// shared by every node, with MemoryStates' transitions done atomically.
type RedisStates struct {
	Client redis.UniversalClient
}

var _ States = (*RedisStates)(nil)

func statesKey(account string) string { return "gw:toolstate:{" + account + "}" }

var refusedScript = redis.NewScript(`
if tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0') ~= tonumber(ARGV[3]) then
	redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
return 0
`)

var listingScript = redis.NewScript(`
local s = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if s == tonumber(ARGV[2]) then redis.call('HSET', KEYS[1], ARGV[1], ARGV[3]) return 1 end
if s == tonumber(ARGV[3]) then redis.call('HSET', KEYS[1], ARGV[1], ARGV[4]) return 0 end
if s == tonumber(ARGV[4]) then return 0 end
return 1
`)

// Refused implements States. A dropped tool stays dropped.
func (s *RedisStates) Refused(ctx context.Context, account, tool string) {
	_ = refusedScript.Run(ctx, s.Client, []string{statesKey(account)}, tool, stateRefused, stateDropped).Err()
}

// Listing implements States. When Redis cannot answer, the tool is listed.
func (s *RedisStates) Listing(ctx context.Context, account, tool string) bool {
	v, err := listingScript.Run(ctx, s.Client, []string{statesKey(account)}, tool, stateRefused, stateRefusedListed, stateDropped).Int()
	return err != nil || v == 1
}

// Reset implements States.
func (s *RedisStates) Reset(ctx context.Context, account string) {
	_ = s.Client.Del(ctx, statesKey(account)).Err()
}

package lanes

import (
	"context"
	"encoding/json"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/caddy-gw/caddy-gw/pricing"
)

// Decision records one routing decision: what was asked, how it was read,
// which models were in the running, which answered, at what cost and how
// fast. The routing server's flux_explain reads it by ID.
type Decision struct {
	ID         string        `json:"decision_id"`
	AccountID  string        `json:"-"`
	Time       time.Time     `json:"time"`
	Requested  string        `json:"requested_model"`
	Kind       Kind          `json:"task_kind,omitempty"`
	Lane       string        `json:"lane,omitempty"`
	Vision     bool          `json:"vision"`
	Tools      bool          `json:"tools"`
	Prompt     int           `json:"prompt_tokens_estimate"`
	Candidates []string      `json:"candidates"`
	Chosen     string        `json:"model"`
	Escalated  bool          `json:"escalated"`
	Cost       pricing.Money `json:"cost_usd"`
	Latency    time.Duration `json:"-"`
	LatencyMS  int64         `json:"latency_ms"`
}

// Decision records are kept this long, and at most this many.
const (
	DecisionTTL  = 24 * time.Hour
	MaxDecisions = 100_000
)

// Destruct lets Decisions live in a caddy.UsagePool.
func (d *Decisions) Destruct() error { return nil }

// DecisionStore keeps decision records: Decisions in memory on one node,
// RedisDecisions shared by several.
type DecisionStore interface {
	Put(Decision)
	Get(id string) (Decision, bool)
}

var (
	_ DecisionStore = (*Decisions)(nil)
	_ DecisionStore = (*RedisDecisions)(nil)
)

// RedisDecisions keeps decision records in Redis for DecisionTTL, so that
// flux_explain on any node explains a call served by another; each
// account keeps its MaxDecisionsPerAccount most recent, listed in a
// sorted set by time, so no account's calls can fill Redis with records.
type RedisDecisions struct {
	Client redis.UniversalClient
	// PerAccount replaces MaxDecisionsPerAccount when positive.
	PerAccount int
}

// MaxDecisionsPerAccount is how many decision records one account keeps
// in Redis; a newer one ends its oldest.
const MaxDecisionsPerAccount = 1000

// redisTimeout bounds one record's write or read.
const redisTimeout = 2 * time.Second

// storedDecision is a record with the fields the JSON answer leaves out.
type storedDecision struct {
	Decision
	AccountID string        `json:"account_id"`
	Latency   time.Duration `json:"latency"`
}

func decisionKey(id string) string { return "gw:decision:" + id }

func decisionList(account string) string { return "gw:decisions:{" + account + "}" }

// putScript keeps a record and lists it for its account, ending the
// account's records past the bound or older than the TTL. KEYS: the
// record, the account's list. ARGV: id, record, TTL in ms, bound, the
// records' key prefix.
var putScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ttl, bound = tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('SET', KEYS[1], ARGV[2], 'PX', ttl)
redis.call('ZADD', KEYS[2], string.format('%.0f', now), ARGV[1])
local old = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', string.format('%.0f', now - ttl * 1000))
local n = redis.call('ZCARD', KEYS[2]) - #old
if n > bound then
	for _, id in ipairs(redis.call('ZRANGE', KEYS[2], #old, #old + n - bound - 1)) do
		table.insert(old, id)
	end
end
for _, id in ipairs(old) do
	redis.call('DEL', ARGV[5] .. id)
	redis.call('ZREM', KEYS[2], id)
end
redis.call('PEXPIRE', KEYS[2], ttl)
return #old
`)

// Put implements DecisionStore (a failed write loses only the record).
func (d *RedisDecisions) Put(dec Decision) {
	dec.LatencyMS = dec.Latency.Milliseconds()
	b, err := json.Marshal(storedDecision{Decision: dec, AccountID: dec.AccountID, Latency: dec.Latency})
	if err != nil {
		return
	}
	bound := d.PerAccount
	if bound <= 0 {
		bound = MaxDecisionsPerAccount
	}
	ctx, cancel := context.WithTimeout(context.Background(), redisTimeout)
	defer cancel()
	_ = putScript.Run(ctx, d.Client, []string{decisionKey(dec.ID), decisionList(dec.AccountID)},
		dec.ID, b, DecisionTTL.Milliseconds(), bound, decisionKey("")).Err()
}

// Get implements DecisionStore.
func (d *RedisDecisions) Get(id string) (Decision, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), redisTimeout)
	defer cancel()
	b, err := d.Client.Get(ctx, decisionKey(id)).Bytes()
	if err != nil {
		return Decision{}, false
	}
	var s storedDecision
	if json.Unmarshal(b, &s) != nil || s.ID != id {
		return Decision{}, false
	}
	s.Decision.AccountID, s.Decision.Latency = s.AccountID, s.Latency
	return s.Decision, true
}

// Package money is the one money gate every billed call passes: it checks
// an account's prepaid balance, free monthly credit, caps, ceiling and the
// free tier's chat stop, reserves a call's estimated cost atomically
// against them, and settles the real cost into the ledger (or releases the
// reservation when the call fails).
package money

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// FreeChatStop is the free tier's hard stop: a free account's chat stops
// once its lifetime chat spend reaches it (1 USD).
const FreeChatStop = 1 * pricing.NanoPerUSD

// Policy holds the configurable money rules.
type Policy struct {
	// FreeMonthlyCredit is given to every account each UTC month and spent
	// before a prepaid balance.
	FreeMonthlyCredit pricing.Money
	// Ceiling bounds a paid account's monthly spend.
	Ceiling Ceiling
}

// Ceiling is a paid account's monthly spend ceiling, which rises with the
// account's age and its cleared spend:
//
//	ceiling = Base + PerMonth × whole months since the account was made
//	        + SpendPercent % of its lifetime spend (when cleared), at most Max.
//
// A zero Base switches the ceiling off.
type Ceiling struct {
	Base         pricing.Money
	PerMonth     pricing.Money
	SpendPercent int64
	Max          pricing.Money
}

// Default ceiling parameters.
const (
	DefaultCeilingBase         = 100 * pricing.NanoPerUSD
	DefaultCeilingPerMonth     = 50 * pricing.NanoPerUSD
	DefaultCeilingSpendPercent = 50
	DefaultCeilingMax          = 10_000 * pricing.NanoPerUSD
)

// DefaultCeiling is the ceiling used when the config sets none.
var DefaultCeiling = Ceiling{Base: DefaultCeilingBase, PerMonth: DefaultCeilingPerMonth, SpendPercent: DefaultCeilingSpendPercent, Max: DefaultCeilingMax}

// Limit returns the ceiling of an account made at created, with lifetime
// cleared spend, at now; ok is false when the ceiling is off.
func (c Ceiling) Limit(created time.Time, clearedSpend pricing.Money, now time.Time) (limit pricing.Money, ok bool) {
	if c.Base <= 0 {
		return 0, false
	}
	v := c.Base + pricing.Money(wholeMonths(created, now))*c.PerMonth + clearedSpend*pricing.Money(c.SpendPercent)/100
	if c.Max > 0 && v > c.Max {
		v = c.Max
	}
	return v, true
}

// wholeMonths counts the whole calendar months from a to b (0 when b is
// before a).
func wholeMonths(a, b time.Time) int64 {
	a, b = a.UTC(), b.UTC()
	m := (b.Year()-a.Year())*12 + int(b.Month()-a.Month())
	if m > 0 && a.AddDate(0, m, 0).After(b) {
		m--
	}
	return int64(max(m, 0))
}

// Locks serialises the money decisions of one account and keeps its
// outstanding reservations, one record per hold, so that releasing a hold
// can only take back what that hold added. Locks and holds are kept by
// scope: an account, or the scope of a key or an organization (keyScope,
// orgScope); a call's methods take the scopes it needs at once, so that a
// shared implementation answers them in one round trip. The embedded
// implementation is in memory; a multi-node one keeps both in a shared
// store.
type Locks interface {
	// Lock takes the locks of scopes, every one of them (in their order,
	// or all at once), waiting until ctx ends while any is taken; unlock
	// releases them.
	Lock(ctx context.Context, scopes ...string) (unlock func(), err error)
	// Held writes to held[i] the sum of the outstanding holds of
	// scopes[i] (under its Lock), never below zero.
	Held(ctx context.Context, scopes []string, held []pricing.Money) error
	// Hold records a hold of amount in each of scopes, all under the id
	// it returns.
	Hold(ctx context.Context, scopes []string, amount pricing.Money) (id string, err error)
	// Drop deletes hold id in each of scopes; a record already gone
	// changes nothing.
	Drop(ctx context.Context, scopes []string, id string) error
}

// TryLocker is Locks that can take free locks without a wait (one node's
// memory).
type TryLocker interface {
	// TryLock takes the locks of scopes when every one is free, or none.
	TryLock(scopes ...string) (unlock func(), ok bool)
}

// Keeper is Locks that can keep a hold past its node's life (see
// RedisLocks.Keep).
type Keeper interface {
	Keep(ctx context.Context, scope, id string, amount pricing.Money) error
}

// KeepSpooled keeps the holds of e, a charge a node keeps in its spool,
// at what e charged, on every node and past the node's life, until
// DropSpooled: its account's, and its key's and organization's when the
// call held in their scopes (see spooledHolds). Other nodes then never
// admit calls against a balance or past a cap that lacks it, even when
// its node dies before the shared store has it. Locks that are not a
// Keeper (one node's memory) keep them as they are.
func KeepSpooled(ctx context.Context, l Locks, e store.Entry) error {
	k, ok := l.(Keeper)
	if !ok {
		return nil
	}
	var errs []error
	for _, h := range spooledHolds(&e) {
		errs = append(errs, k.Keep(ctx, h.scope, h.id, e.Cost))
	}
	return errors.Join(errs...)
}

// DropSpooled drops the holds of e, a spooled charge the shared store now
// has.
func DropSpooled(ctx context.Context, l Locks, e store.Entry) error {
	var errs []error
	for _, h := range spooledHolds(&e) {
		errs = append(errs, l.Drop(ctx, []string{h.scope}, h.id))
	}
	return errors.Join(errs...)
}

// scopedHold is one hold's record in the Locks: its scope (an account,
// keyScope or orgScope) and its id there.
type scopedHold struct{ scope, id string }

// spooledHolds are the records of e's holds that Settle wrote into it:
// its account's (HoldID), its key's (KeyHoldID, in the scope of KeyID)
// and its organization's (OrgHoldID, in the scope of OrgID), those it has.
func spooledHolds(e *store.Entry) []scopedHold {
	hs := make([]scopedHold, 0, 3)
	if e.HoldID != "" {
		hs = append(hs, scopedHold{e.AccountID, e.HoldID})
	}
	if e.KeyHoldID != "" && e.KeyID != "" {
		hs = append(hs, scopedHold{keyScope(e.KeyID), e.KeyHoldID})
	}
	if e.OrgHoldID != "" && e.OrgID != "" {
		hs = append(hs, scopedHold{orgScope(e.OrgID), e.OrgHoldID})
	}
	return hs
}

// Gate is the money gate.
type Gate struct {
	Store  store.Store
	Locks  Locks
	Policy Policy
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// OnOverrun, when set, is told of every settlement above its hold (a
	// provider that billed more than the gateway reserved). The charge is
	// recorded up to what the account can still pay (see Hold.Settle).
	OnOverrun func(account, requestID string, held, cost pricing.Money)
	// OnShortfall, when set, is told of every settlement the account could
	// not pay in full: charged is what it paid, shortfall the rest.
	OnShortfall func(account, requestID string, charged, shortfall pricing.Money)

	orgs atomic.Pointer[orgGuesses]
}

func (g *Gate) now() time.Time {
	if g.Now != nil {
		return g.Now().UTC()
	}
	return time.Now().UTC()
}

// Kind of spend, for the free tier's chat stop.
type Kind int

const (
	// Ability spend: paid plans only, so the free chat stop does not apply.
	Ability Kind = iota
	// Chat spend: the free tier stops at FreeChatStop.
	Chat
)

// Payer is who a call's spend counts against: its account and, for a
// call made with a key, that key, whose own caps bound the call too.
type Payer struct {
	Account string
	// Key is the id of the key the call was made with; "" for none.
	Key string
}

// keyScope names a key's holds in the Locks (an account id cannot hold a
// colon). A key's holds are recorded under its account's lock, as every
// call made with the key takes that lock.
func keyScope(keyID string) string { return "key:" + keyID }

// orgScope names an organization's lock and holds in the Locks. Every
// call of an account in an organization takes the organization's lock
// with the account's (before it, or both at once), so the accounts of one
// organization are admitted and settled one at a time against its caps,
// and no two locks are ever taken in the other order.
func orgScope(orgID string) string { return orgScopePrefix + orgID }

// orgScopePrefix begins every orgScope.
const orgScopePrefix = "org:"

// orgLockTries bounds how often Reserve takes the locks again when the
// account moved to another organization while it waited for them.
const orgLockTries = 3

// maxScopes is how many scopes one call locks and holds in at most: its
// account's, its key's and its organization's.
const maxScopes = 3

// lockScopes are the scopes a call of account locks: its organization's
// (orgLock, its orgScope; "" for none) first, then the account's.
func lockScopes(account, orgLock string) (scopes [2]string, n int) {
	if orgLock == "" {
		return [2]string{account}, 1
	}
	return [2]string{orgLock, account}, 2
}

// lock takes the locks a call of account takes: its organization's (when
// it is in one), then its own. org is the organization locked, and
// orgLock its scope: the one the account was last seen in (see
// orgGuesses), else read from the store; the caller checks it is still
// the account's once it has read the account under the lock.
func (g *Gate) lock(ctx context.Context, account string) (unlock func(), org, orgLock string, err error) {
	guess := g.guesses().get(account)
	if guess == nil {
		acc, err := g.Store.Account(ctx, account)
		if err != nil {
			return nil, "", "", Unresolved()
		}
		guess = g.guesses().put(account, acc.Org)
	}
	scopes, n := lockScopes(account, guess.scope)
	if unlock, err = g.Locks.Lock(ctx, scopes[:n]...); err != nil {
		return nil, "", "", Unresolved()
	}
	return unlock, guess.org, guess.scope, nil
}

// Check refuses a billed call that could not start now (no credit left, a
// cap or the ceiling reached), without reserving anything.
func (g *Gate) Check(ctx context.Context, p Payer, kind Kind) error {
	h, err := g.ReserveFor(ctx, p, kind, 0)
	if err != nil {
		return err
	}
	h.Release(ctx)
	return nil
}

// Reserve holds est for a call of accountID. It refuses (402 with a money
// code) when the account has nothing left, or when est on top of what is
// spent and held would overdraw the balance or pass a cap or the ceiling.
// Checks and the hold happen under the account's lock, so concurrent calls
// can never pass a cap together. A store that cannot answer refuses with
// credit_unresolved.
func (g *Gate) Reserve(ctx context.Context, accountID string, kind Kind, est pricing.Money) (*Hold, error) {
	return g.ReserveFor(ctx, Payer{Account: accountID}, kind, est)
}

// ReserveFor is Reserve for a call of p: a call made with a key is held to
// the key's caps too, the key's spend and holds counted under the
// account's lock, and a call of an account in an organization to the
// organization's caps, under the organization's lock.
func (g *Gate) ReserveFor(ctx context.Context, p Payer, kind Kind, est pricing.Money) (*Hold, error) {
	if est < 0 {
		est = 0
	}
	var st payerState
	var orgLock string
	for try := 1; ; try++ {
		unlock, org, scope, err := g.lock(ctx, p.Account)
		if err != nil {
			return nil, err
		}
		if st, err = g.state(ctx, p, scope); err != nil {
			unlock()
			return nil, err
		}
		g.guesses().put(p.Account, st.account.Org)
		if st.account.Org == org {
			orgLock = scope
			defer unlock()
			break
		}
		unlock()
		if try == orgLockTries {
			return nil, Unresolved()
		}
	}
	rs, n := g.rules(&st, kind)
	for _, r := range rs[:n] {
		// Sums saturate: no amount, however large, can wrap around and pass.
		if r.used >= r.limit || addSat(r.used, est) > r.limit {
			return nil, refuse(r.code, r.msg)
		}
	}
	h := &Hold{gate: g, account: p.Account, org: st.account.Org, orgLock: orgLock, amount: est, limits: g.limits(&st.account, kind, st.spend, st.now)}
	if est > 0 {
		// One record of the hold in each scope whose rules it counts in.
		h.scopes, h.n, h.keyHeld, h.orgHeld = st.scopes, st.n, st.keyCapped, st.orgCapped
		var err error
		if h.id, err = g.Locks.Hold(ctx, h.scopes[:h.n], est); err != nil {
			return nil, Unresolved()
		}
	}
	return h, nil
}

// payerState is what the money rules of a call read: the account, its
// spend and holds, and for a key with caps the key, its spend and holds.
type payerState struct {
	now     time.Time
	account store.Account
	spend   store.Spend
	held    pricing.Money
	// keyCapped: the call was made with key, which has caps.
	keyCapped bool
	key       store.Key
	keySpend  store.Spend
	keyHeld   pricing.Money
	// orgCapped: the account is in org, which has caps.
	orgCapped bool
	org       store.Org
	orgSpend  store.Spend
	orgHeld   pricing.Money
	// scopes[:n] are the scopes whose holds the rules count: the
	// account's, then the key's (with caps), then the organization's
	// (with caps).
	scopes [maxScopes]string
	n      int
}

// heldScopes is the scopes whose holds a call's rules count, and those
// holds, as the Locks read them.
type heldScopes struct {
	scopes [maxScopes]string
	held   [maxScopes]pricing.Money
}

// state reads what the rules of p's call need, under the account's lock,
// the holds of all its scopes at once; a store or lock store that cannot
// answer refuses with credit_unresolved. orgLock, when it is the scope of
// the account's organization, is used as that scope.
func (g *Gate) state(ctx context.Context, p Payer, orgLock string) (st payerState, err error) {
	st.now = g.now()
	if st.account, err = g.Store.Account(ctx, p.Account); err != nil {
		return st, Unresolved()
	}
	if st.spend, err = g.Store.Spend(ctx, p.Account, st.now); err != nil {
		return st, Unresolved()
	}
	st.scopes[0], st.n = p.Account, 1
	if err := g.keyState(ctx, p.Key, &st); err != nil {
		return st, err
	}
	if err := g.orgState(ctx, &st, orgLock); err != nil {
		return st, err
	}
	// The Locks get slices of a small buffer, not of st: a slice handed
	// to an interface escapes, and st is large.
	buf := &heldScopes{scopes: st.scopes}
	held := buf.held[:st.n]
	if err := g.Locks.Held(ctx, buf.scopes[:st.n], held); err != nil {
		return st, Unresolved()
	}
	st.held = held[0]
	i := 1
	if st.keyCapped {
		st.keyHeld, i = held[i], i+1
	}
	if st.orgCapped {
		st.orgHeld = held[i]
	}
	return st, nil
}

// keyState reads the key of a call made with keyID ("" for none), and
// its spend when it has caps (then its scope's holds count too).
func (g *Gate) keyState(ctx context.Context, keyID string, st *payerState) error {
	if keyID == "" {
		return nil
	}
	k, sp, err := g.keyBounds(ctx, keyID, st.now)
	if err != nil {
		return Unresolved()
	}
	if !k.HasCaps() {
		return nil
	}
	st.key, st.keyCapped, st.keySpend = k, true, sp
	st.scopes[st.n] = keyScope(k.ID)
	st.n++
	return nil
}

// orgState reads the account's organization, and its spend when it has
// caps (then its scope's holds count too, under orgLock when that is its
// scope).
func (g *Gate) orgState(ctx context.Context, st *payerState, orgLock string) error {
	id := st.account.Org
	if id == "" {
		return nil
	}
	o, sp, err := g.orgBounds(ctx, id, st.now)
	if err != nil {
		return Unresolved()
	}
	if !o.HasCaps() {
		return nil
	}
	st.org, st.orgCapped, st.orgSpend = o, true, sp
	if len(orgLock) != len(orgScopePrefix)+len(id) || orgLock[len(orgScopePrefix):] != id {
		orgLock = orgScope(id)
	}
	st.scopes[st.n] = orgLock
	st.n++
	return nil
}

// bounder is a store that reads a key's or an organization's record and,
// when it has caps, its spend in one go (the hot path's, from memory).
// The records may share their contents with the store: the gate only
// reads them.
type bounder interface {
	KeyBounds(ctx context.Context, id string, now time.Time) (store.Key, store.Spend, error)
	OrgBounds(ctx context.Context, id string, now time.Time) (store.Org, store.Spend, error)
}

// keyBounds reads the key id and, when it has caps, its spend.
func (g *Gate) keyBounds(ctx context.Context, id string, now time.Time) (store.Key, store.Spend, error) {
	if b, ok := g.Store.(bounder); ok {
		return b.KeyBounds(ctx, id, now)
	}
	k, err := g.Store.Key(ctx, id)
	if err != nil || !k.HasCaps() {
		return k, store.Spend{}, err
	}
	sp, err := g.Store.KeySpend(ctx, id, now)
	return k, sp, err
}

// orgBounds reads the organization id and, when it has caps, its spend.
func (g *Gate) orgBounds(ctx context.Context, id string, now time.Time) (store.Org, store.Spend, error) {
	if b, ok := g.Store.(bounder); ok {
		return b.OrgBounds(ctx, id, now)
	}
	o, err := g.Store.Org(ctx, id)
	if err != nil || !o.HasCaps() {
		return o, store.Spend{}, err
	}
	sp, err := g.Store.OrgSpend(ctx, id, now)
	return o, sp, err
}

// rule is one money limit a call is under: what it counts as used (spend
// and holds), its limit, and the refusal when it is reached.
type rule struct {
	used, limit pricing.Money
	code, msg   string
}

// maxRules is how many rules can apply to one call.
const maxRules = 10

// rules lists the money rules that apply to a call of kind, in order:
// prepaid balance (with the free monthly credit), the free tier's chat
// stop, the daily cap, the monthly cap, the account ceiling, the key's
// daily, monthly and total caps, then the organization's daily and
// monthly caps.
func (g *Gate) rules(st *payerState, kind Kind) (rs [maxRules]rule, n int) {
	acc, sp, now := &st.account, st.spend, st.now
	add := func(used, limit pricing.Money, code, msg string) {
		rs[n] = rule{used: addSat(used, st.held), limit: limit, code: code, msg: msg}
		n++
	}
	if acc.Balance != nil {
		free := max(g.Policy.FreeMonthlyCredit-sp.Month, 0)
		add(0, addSat(*acc.Balance, free), gwerr.CodeCreditExhausted, "the prepaid balance is used up; add credit to continue")
	}
	if kind == Chat && acc.Plan == store.PlanFree {
		add(sp.Total, FreeChatStop, gwerr.CodeCreditExhausted, "the free tier's 1 USD of chat is used up; upgrade to a paid plan to continue")
	}
	if acc.DailyCap != nil {
		add(sp.Today, *acc.DailyCap, gwerr.CodeDailyCap, "the account's daily spend cap is reached")
	}
	if acc.MonthlyCap != nil {
		add(sp.Month, *acc.MonthlyCap, gwerr.CodeMonthlyCap, "the account's monthly spend cap is reached")
	}
	if limit, ok := g.ceiling(acc, sp, now); ok {
		add(sp.Month, limit, gwerr.CodeMonthlyCap, "the account's monthly ceiling is reached; it rises with cleared spend and account age")
	}
	// A cap of the key or the organization, when set, over its own spend
	// and holds.
	capped := func(used, held pricing.Money, limit *pricing.Money, code, msg string) {
		if limit != nil {
			rs[n] = rule{used: addSat(used, held), limit: *limit, code: code, msg: msg}
			n++
		}
	}
	if k := &st.key; st.keyCapped {
		capped(st.keySpend.Today, st.keyHeld, k.DailyCap, gwerr.CodeKeyDailyCap, "the key's daily spend cap is reached")
		capped(st.keySpend.Month, st.keyHeld, k.MonthlyCap, gwerr.CodeKeyMonthlyCap, "the key's monthly spend cap is reached")
		capped(st.keySpend.Total, st.keyHeld, k.TotalCap, gwerr.CodeKeyTotalCap, "the key's total spend cap is reached")
	}
	if o := &st.org; st.orgCapped {
		capped(st.orgSpend.Today, st.orgHeld, o.DailyCap, gwerr.CodeOrgDailyCap, "the organization's daily spend cap is reached")
		capped(st.orgSpend.Month, st.orgHeld, o.MonthlyCap, gwerr.CodeOrgMonthlyCap, "the organization's monthly spend cap is reached")
	}
	return rs, n
}

// ceiling is a paid account's monthly ceiling now; ok is false when it
// has none.
func (g *Gate) ceiling(acc *store.Account, sp store.Spend, now time.Time) (pricing.Money, bool) {
	if acc.Plan != store.PlanPaid {
		return 0, false
	}
	cleared := pricing.Money(0)
	if acc.Cleared {
		cleared = sp.Total
	}
	return g.Policy.Ceiling.Limit(acc.CreatedAt, cleared, now)
}

// limits are the rules of a call of kind that the account's own record
// does not hold (the free tier's chat stop, the ceiling), which its
// settlement is held to in the store's transaction.
func (g *Gate) limits(acc *store.Account, kind Kind, sp store.Spend, now time.Time) store.Limits {
	var l store.Limits
	if kind == Chat && acc.Plan == store.PlanFree {
		l.Total = FreeChatStop
	}
	if limit, ok := g.ceiling(acc, sp, now); ok {
		l.Month = limit
	}
	return l
}

// Room is the most a call of kind could reserve for accountID now: the
// least that any money rule leaves after what is spent and held (at most
// math.MaxInt64 when no rule applies). It refuses as Reserve would when a
// rule leaves nothing. It reserves nothing: a call that must fit what is
// left (see the chat handler's tightening) reserves its amount after, and
// Reserve refuses it if another call took the room meanwhile.
func (g *Gate) Room(ctx context.Context, p Payer, kind Kind) (pricing.Money, error) {
	st, err := g.state(ctx, p, "")
	if err != nil {
		return 0, err
	}
	room := pricing.Money(math.MaxInt64)
	rs, n := g.rules(&st, kind)
	for _, r := range rs[:n] {
		left := r.limit - r.used
		if left <= 0 {
			return 0, refuse(r.code, r.msg)
		}
		room = min(room, left)
	}
	return room, nil
}

// addSat is a+b, at most math.MaxInt64 and at least math.MinInt64.
func addSat(a, b pricing.Money) pricing.Money {
	switch {
	case b > 0 && a > math.MaxInt64-b:
		return math.MaxInt64
	case b < 0 && a < math.MinInt64-b:
		return math.MinInt64
	}
	return a + b
}

func refuse(code, msg string) error {
	return &gwerr.Error{Kind: gwerr.Payment, Code: code, Message: msg}
}

// tightenable are the refusals of Reserve a smaller estimate can get
// past; the others (a store that cannot be read) stand.
var tightenable = []string{gwerr.CodeCreditExhausted, gwerr.CodeDailyCap, gwerr.CodeMonthlyCap,
	gwerr.CodeKeyDailyCap, gwerr.CodeKeyMonthlyCap, gwerr.CodeKeyTotalCap, gwerr.CodeOrgDailyCap, gwerr.CodeOrgMonthlyCap}

// Tightenable reports whether a refusal of Reserve is one a tighter
// estimate may get past (credit or a cap), not a failure to check: a call
// that can size itself down (a counted prompt, a lowered output limit)
// tries again only then.
func Tightenable(err error) bool { return slices.Contains(tightenable, gwerr.As(err).Code) }

// UnresolvedRetryAfter is the Retry-After, in seconds, of
// credit_unresolved: a client retries once.
const UnresolvedRetryAfter = 1

// Unresolved is the refusal when the balance cannot be checked.
func Unresolved() error { return unresolvedErr("the balance could not be checked; retry once") }

func unresolvedErr(msg string) error {
	return &gwerr.Error{Kind: gwerr.Payment, Code: gwerr.CodeCreditUnresolved, Message: msg, RetryAfter: UnresolvedRetryAfter}
}

// Hold is a reservation of one call. Settle or Release it exactly once;
// later calls do nothing.
type Hold struct {
	gate    *Gate
	account string
	amount  pricing.Money
	limits  store.Limits // the policy's limits the settlement is held to
	// id is the Locks' record of it ("" when amount is zero) in each of
	// scopes[:n]: the account's, then its key's (keyHeld: a key with
	// caps), then its organization's (orgHeld: one with caps).
	id               string
	scopes           [maxScopes]string
	n                int
	keyHeld, orgHeld bool
	// org is the account's organization at Reserve ("" for none), whose
	// lock (orgLock, its scope) Settle takes before the account's.
	org, orgLock string
	done         bool
}

// Done reports whether the hold was settled or released.
func (h *Hold) Done() bool { return h.done }

// Amount is what the hold reserves.
func (h *Hold) Amount() pricing.Money { return h.amount }

// Spooler is a store that may keep a charge on the node before the store
// every node reads has it (a database that was down): Applied returns a
// channel closed once that store has it, nil when it has already.
type Spooler interface {
	Applied(requestID string) <-chan struct{}
}

// SettleLockWait bounds how long a settlement waits for the account's
// lock before it records the charge without it.
const SettleLockWait = 2 * LockLease

// Settle records the call's real cost in the ledger under e.RequestID and
// drops the reservation, under the account's lock so that a concurrent
// Reserve sees either the hold or the charge, never neither (a charge the
// store keeps on the node for now, see Spooler, keeps its hold until the
// shared store has it). The lock only orders admission checks: when it
// cannot be had (the shared lock store is down or restarting), the charge
// is recorded without it, since the work it pays for is done.
//
// The store charges at most what the account can still pay (its balance,
// free credit, caps and the policy's limits, in the charge's own
// transaction), however far the cost passes the hold: e.Cost is then what
// was charged and e.Shortfall the rest. It reports whether this settlement
// charged the account: false when the request id was settled before. A
// store that cannot make the charge durable refuses with
// credit_unresolved and charges nothing.
func (h *Hold) Settle(ctx context.Context, e *store.Entry) (bool, error) {
	if h.done {
		return false, errors.New("money: hold already settled or released")
	}
	ctx = context.WithoutCancel(ctx) // a client gone after the work is done still pays
	e.AccountID = h.account
	e.FreeMonthlyCredit = h.gate.Policy.FreeMonthlyCredit
	e.Limits = h.limits
	e.Held = &h.amount
	e.HoldID, e.KeyHoldID, e.OrgHoldID, e.OrgID = h.id, "", "", h.org
	if h.keyHeld {
		e.KeyHoldID = h.id
	}
	if h.orgHeld {
		e.OrgHoldID = h.id
	}
	cost := e.Cost
	if e.Time.IsZero() {
		e.Time = h.gate.now()
	}
	unlock := h.settleLock(ctx)
	// A store that counts the charge at once (store.LaterSettler) is
	// waited on after the lock is released: calls of one account then
	// share a commit instead of queueing behind each other's.
	var wait func() (bool, error)
	if later, ok := h.gate.Store.(store.LaterSettler); ok {
		wait = later.SettleLater(ctx, e)
	} else {
		charged, err := h.gate.Store.Settle(ctx, e)
		wait = func() (bool, error) { return charged, err }
	}
	var applied <-chan struct{}
	if sp, ok := h.gate.Store.(Spooler); ok && h.id != "" {
		applied = sp.Applied(e.RequestID)
	}
	if applied != nil {
		// The charge waits on this node for the shared store: its hold
		// stays until then, so every node's checks still count it.
		h.done = true
		go func() {
			<-applied
			_ = h.gate.Locks.Drop(context.Background(), h.scopes[:h.n], h.id)
		}()
	} else {
		h.drop(ctx)
	}
	unlock()
	charged, err := wait()
	if err != nil {
		return false, unsettled()
	}
	if charged && cost > h.amount && h.gate.OnOverrun != nil {
		h.gate.OnOverrun(h.account, e.RequestID, h.amount, cost)
	}
	if charged && e.Shortfall > 0 && h.gate.OnShortfall != nil {
		h.gate.OnShortfall(h.account, e.RequestID, e.Cost, e.Shortfall)
	}
	return charged, nil
}

// settleLock takes the locks Settle takes: the organization's the call
// was admitted under (when any), then the account's. Locks that cannot be
// had within SettleLockWait are gone without: the charge is recorded all
// the same, since the work it pays for is done. Free locks of a TryLocker
// are taken without a time-out.
func (h *Hold) settleLock(ctx context.Context) (unlock func()) {
	scopes, n := lockScopes(h.account, h.orgLock)
	if t, ok := h.gate.Locks.(TryLocker); ok {
		if unlock, ok := t.TryLock(scopes[:n]...); ok {
			return unlock
		}
	}
	ctx, cancel := context.WithTimeout(ctx, SettleLockWait)
	defer cancel()
	unlock, err := h.gate.Locks.Lock(ctx, scopes[:n]...)
	if err != nil {
		return func() {}
	}
	return unlock
}

func unsettled() error {
	return unresolvedErr("the charge could not be recorded; nothing was charged")
}

// Release drops the reservation without charging.
func (h *Hold) Release(ctx context.Context) {
	if h == nil || h.done {
		return
	}
	h.drop(context.WithoutCancel(ctx))
}

// drop marks the hold done and deletes its records (one the lock store
// cannot delete now expires there).
func (h *Hold) drop(ctx context.Context) {
	h.done = true
	if h.id != "" {
		_ = h.gate.Locks.Drop(ctx, h.scopes[:h.n], h.id)
	}
}

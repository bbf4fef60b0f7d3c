// Package store defines the gateway's durable state (accounts, keys and the
// money ledger) behind interfaces that the embedded SQLite backend implements
// and that a PostgreSQL backend can implement for several nodes.
package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path"
	"strings"
	"time"

	"github.com/caddy-gw/caddy-gw/pricing"
)

// Errors every backend returns (wrapped or not) so callers can tell cases
// apart with errors.Is.
var (
	// ErrNotFound: no account, key or entry with that id.
	ErrNotFound = errors.New("not found")
	// ErrExists: an account or key with that id already exists.
	ErrExists = errors.New("already exists")
	// ErrTooMany: the account holds as many of a thing (app links) as it
	// may.
	ErrTooMany = errors.New("too many")
	// ErrInUse: an organization that accounts still belong to cannot be
	// deleted.
	ErrInUse = errors.New("in use")
	// ErrNoOrg: an account names an organization that does not exist. It
	// is an ErrNotFound.
	ErrNoOrg = fmt.Errorf("organization %w", ErrNotFound)
)

// Plan is an account's plan.
type Plan string

const (
	PlanFree Plan = "free"
	PlanPaid Plan = "paid"
)

// Abilities an account can have switched on.
const (
	AbilityTranscription = "transcription"
	AbilitySpeech        = "speech"
	AbilityImages        = "images"
	AbilitySearch        = "search"
	AbilityFetch         = "fetch"
	AbilityDecide        = "decide"
	AbilityApps          = "apps"
	AbilityMCPGateway    = "mcp_gateway"
)

// AllAbilities lists every ability, in the contract's order.
var AllAbilities = []string{AbilityTranscription, AbilitySpeech, AbilityImages, AbilitySearch, AbilityFetch, AbilityDecide, AbilityApps, AbilityMCPGateway}

// Account is a billing account.
type Account struct {
	ID          string
	Plan        Plan
	Cleared     bool
	PAYG        bool
	LaneBilling bool
	// Balance is the prepaid balance; nil means the account is billed
	// afterwards, bounded by its caps and ceiling.
	Balance *pricing.Money
	// DailyCap and MonthlyCap are the user's own caps; nil means none.
	DailyCap   *pricing.Money
	MonthlyCap *pricing.Money
	// Abilities switched on; nil means all.
	Abilities []string
	// Org is the organization the account belongs to; "" means none.
	Org string
	// LowBalance is the prepaid balance below which a charge raises a
	// balance.low alert; nil means none.
	LowBalance *pricing.Money
	CreatedAt  time.Time
}

// Org is an organization: accounts that belong to it share its caps,
// which bound their summed spend in a UTC day and a UTC month; nil means
// none.
type Org struct {
	ID, Name   string
	DailyCap   *pricing.Money
	MonthlyCap *pricing.Money
	CreatedAt  time.Time
}

// HasCaps reports whether any cap bounds the organization's spend.
func (o *Org) HasCaps() bool { return o.DailyCap != nil || o.MonthlyCap != nil }

// PaidCleared reports whether the account may use paid abilities.
func (a *Account) PaidCleared() bool { return a.Plan == PlanPaid && a.Cleared }

// HasAbility reports whether ability is switched on for the account.
func (a *Account) HasAbility(ability string) bool {
	if a.Abilities == nil {
		return true
	}
	for _, x := range a.Abilities {
		if x == ability {
			return true
		}
	}
	return false
}

// Key is an API key. The secret itself is never stored: Hash is
// HashSecret of it.
type Key struct {
	ID        string
	AccountID string
	Name      string
	Hash      string
	// Models is the allowlist of model ids; nil means every model.
	Models    []string
	ExpiresAt *time.Time
	CreatedAt time.Time
	// DailyCap, MonthlyCap and TotalCap bound what the calls made with the
	// key spend in a UTC day, a UTC month and in all; nil means none.
	DailyCap   *pricing.Money
	MonthlyCap *pricing.Money
	TotalCap   *pricing.Money
	// MCPTools are the globs (path.Match patterns) over the
	// <server>__<tool> names of the MCP gateway's tools that the key may
	// call; nil means every tool offered, an empty list none.
	MCPTools []string
}

// HasCaps reports whether any cap bounds the key's spend.
func (k *Key) HasCaps() bool {
	return k.DailyCap != nil || k.MonthlyCap != nil || k.TotalCap != nil
}

// AllowsMCPTool reports whether the key may call the MCP gateway's tool
// name (<server>__<tool>): every tool when MCPTools is nil, else those
// that one of its globs matches as path.Match does. A malformed glob
// matches nothing.
func (k Key) AllowsMCPTool(name string) bool {
	if k.MCPTools == nil {
		return true
	}
	for _, g := range k.MCPTools {
		if ok, err := path.Match(g, name); ok && err == nil {
			return true
		}
	}
	return false
}

// Entry is one settled charge in the ledger. RequestID is unique: settling
// the same request twice charges it once.
type Entry struct {
	RequestID string
	AccountID string
	Endpoint  string
	Model     string
	Units     int64
	Unit      string
	Cost      pricing.Money
	Time      time.Time
	// KeyID is the key the call was made with.
	KeyID string
	// InputTokens and OutputTokens split Units for a call billed by the
	// token (input, cached input included, and output); zero otherwise.
	InputTokens, OutputTokens int64
	// FreeMonthlyCredit is the account's free credit for the entry's UTC
	// month. It is spent before a prepaid balance: Settle draws the balance
	// down only by the part of Cost that the credit left over this month
	// (credit minus the month's earlier spend, at least zero) does not
	// cover. It is not stored.
	FreeMonthlyCredit pricing.Money
	// Shortfall is what the call cost beyond what the account could still
	// pay: Settle charges Cost at most what the balance, the free credit,
	// the caps and Limits leave, and moves the rest here (Cost + Shortfall
	// is what the call cost). A shortfall is the operator's loss.
	Shortfall pricing.Money
	// Limits are the policy's bounds on the account's spend that its own
	// record does not hold.
	Limits Limits
	// Held, when set, is what the gateway reserved for the charge: a
	// store that cannot see the account's balance now (a node's spool
	// while the shared database is down) charges at most this. It is not
	// stored.
	Held *pricing.Money
	// HoldID names the reservation's record in the money locks: a charge
	// a node keeps in its spool keeps its hold until the shared store has
	// it (the spool stores it; the ledger does not).
	HoldID string
	// KeyHoldID and OrgHoldID name the reservation's records in the
	// scopes of its key (one with caps) and of its organization (one with
	// caps) in the money locks, and OrgID is that organization: the
	// account's when the call was admitted ("" for none). A spooled
	// charge keeps these holds too, and counts in the organization's
	// spend on its node, until the shared store has it (the spool stores
	// them; the ledger does not: it counts a charge in the organization
	// its account is in when it settles).
	KeyHoldID, OrgHoldID string
	OrgID                string
}

// Limits are bounds of the gateway's policy on what an account may spend,
// beyond the balance and caps of its own record: the free tier's chat stop
// over all time, the monthly ceiling. A zero field bounds nothing.
type Limits struct {
	Month, Total pricing.Money
}

// NoRoom is Room's answer when nothing bounds a charge.
const NoRoom pricing.Money = math.MaxInt64

// Room is the most a charge may take from an account whose spend (relative
// to the charge's day and month) is sp: the least that its prepaid balance
// with what is left of the month's free credit, its daily and monthly caps
// and lim leave. It is NoRoom when nothing bounds the charge, and below
// zero when a bound is passed already.
func Room(a *Account, sp Spend, freeCredit pricing.Money, lim Limits) pricing.Money {
	room := NoRoom
	if a.Balance != nil {
		room = min(room, *a.Balance+max(freeCredit-sp.Month, 0))
	}
	if a.DailyCap != nil {
		room = min(room, *a.DailyCap-sp.Today)
	}
	if a.MonthlyCap != nil {
		room = min(room, *a.MonthlyCap-sp.Month)
	}
	if lim.Month > 0 {
		room = min(room, lim.Month-sp.Month)
	}
	if lim.Total > 0 {
		room = min(room, lim.Total-sp.Total)
	}
	return room
}

// KeyRoom is the most a charge made with k may take given the key's spend
// sp (relative to the charge's day and month): the least that its daily,
// monthly and total caps leave. It is NoRoom when k has no cap, and below
// zero when a cap is passed already.
func KeyRoom(k *Key, sp Spend) pricing.Money {
	room := NoRoom
	if k.DailyCap != nil {
		room = min(room, *k.DailyCap-sp.Today)
	}
	if k.MonthlyCap != nil {
		room = min(room, *k.MonthlyCap-sp.Month)
	}
	if k.TotalCap != nil {
		room = min(room, *k.TotalCap-sp.Total)
	}
	return room
}

// OrgRoom is the most a charge of an account of o may take given the
// organization's spend sp (relative to the charge's day and month): the
// least that its daily and monthly caps leave. It is NoRoom when o has no
// cap, and below zero when a cap is passed already.
func OrgRoom(o *Org, sp Spend) pricing.Money {
	room := NoRoom
	if o.DailyCap != nil {
		room = min(room, *o.DailyCap-sp.Today)
	}
	if o.MonthlyCap != nil {
		room = min(room, *o.MonthlyCap-sp.Month)
	}
	return room
}

// Add counts a charge of cost in each of the spend's periods.
func (sp *Spend) Add(cost pricing.Money) {
	sp.Today += cost
	sp.Month += cost
	sp.Total += cost
}

// Floor charges e at most room (nothing when room is below zero): the part
// of its cost beyond that moves to its Shortfall.
func (e *Entry) Floor(room pricing.Money) {
	if room = max(room, 0); e.Cost > room {
		e.Shortfall += e.Cost - room
		e.Cost = room
	}
}

// Charge adds a charge of cost to the spend and draws a prepaid balance
// down by the part the month's free credit (spent before it, see
// BalanceDraw) does not cover; it returns that draw.
func (sp *Spend) Charge(a *Account, cost, freeCredit pricing.Money) (draw pricing.Money) {
	draw = cost
	if freeCredit > 0 {
		draw = BalanceDraw(cost, freeCredit, sp.Month)
	}
	sp.Add(cost)
	if a.Balance != nil {
		*a.Balance -= draw
	}
	return draw
}

// Spend sums an account's (or a key's) ledger entries over the current UTC
// day and month, and in all.
type Spend struct {
	Today pricing.Money
	Month pricing.Money
	Total pricing.Money
}

// Accounts stores accounts and their keys.
type Accounts interface {
	// CreateAccount stores a new account; ErrExists if the id is taken.
	CreateAccount(ctx context.Context, a Account) error
	// Account returns the account; ErrNotFound if none.
	Account(ctx context.Context, id string) (Account, error)
	// UpdateAccount applies fn to the stored account inside one transaction
	// and stores the result; ErrNotFound if none. fn's error aborts. A
	// change of the prepaid balance is journaled in the same transaction,
	// as why says (a "set" when it says nothing).
	UpdateAccount(ctx context.Context, id string, fn func(*Account) error, why ...Movement) (Account, error)

	// CreateKey stores a key for an existing account (ErrNotFound if the
	// account does not exist, ErrExists if the id or hash is taken).
	CreateKey(ctx context.Context, k Key) error
	// Keys lists an account's keys, oldest first.
	Keys(ctx context.Context, accountID string) ([]Key, error)
	// DeleteKey revokes a key for good: it stops working at once and its
	// secret can never be issued again; ErrNotFound if none (or revoked).
	DeleteKey(ctx context.Context, keyID string) error
	// Key returns an active key by its id; ErrNotFound if none (or
	// revoked).
	Key(ctx context.Context, id string) (Key, error)
	// UpdateKey applies fn to the stored active key inside one transaction
	// and stores its name, models, expiry, caps and MCP tools; ErrNotFound if none
	// (or revoked). fn's error aborts; fn cannot change the key's id,
	// account, hash or creation time.
	UpdateKey(ctx context.Context, id string, fn func(*Key) error) (Key, error)
	// KeyByHash finds an active key by the hash of its secret; ErrNotFound
	// if none (or revoked).
	KeyByHash(ctx context.Context, hash string) (Key, error)
	// KeyIssued reports whether a key with this hash was ever issued,
	// revoked ones included.
	KeyIssued(ctx context.Context, hash string) (bool, error)
	// ListAccounts returns at most limit accounts whose ids sort after
	// after (byte by byte), in that order.
	ListAccounts(ctx context.Context, after string, limit int) ([]Account, error)

	// CreateOrg stores a new organization; ErrExists if the id is taken.
	// A zero CreatedAt is set to now.
	CreateOrg(ctx context.Context, o Org) error
	// Org returns the organization; ErrNotFound if none.
	Org(ctx context.Context, id string) (Org, error)
	// ListOrgs returns every organization, by id (byte by byte).
	ListOrgs(ctx context.Context) ([]Org, error)
	// UpdateOrg applies fn to the stored organization inside one
	// transaction and stores its name and caps; ErrNotFound if none. fn's
	// error aborts; fn cannot change the id or creation time.
	UpdateOrg(ctx context.Context, id string, fn func(*Org) error) (Org, error)
	// DeleteOrg deletes the organization and its running totals;
	// ErrNotFound if none, ErrInUse while accounts belong to it.
	DeleteOrg(ctx context.Context, id string) error
}

// Journal entry kinds: every movement of a prepaid balance.
const (
	// JournalSet: balance_usd given at creation or by PATCH; the amount is
	// the change.
	JournalSet = "set"
	// JournalTopUp: add_balance_usd above zero.
	JournalTopUp = "top_up"
	// JournalAdjustment: add_balance_usd below zero, with its reason.
	JournalAdjustment = "adjustment"
	// JournalCharge: the part of a call's cost drawn from the balance.
	JournalCharge = "charge"
)

// Movement says why a balance moves.
type Movement struct {
	Kind   string
	Reason string
}

// JournalEntry is one movement of a prepaid balance. Balance is the
// balance after it; the amounts of an account's entries add up to its
// balance.
type JournalEntry struct {
	Time      time.Time
	Kind      string
	Amount    pricing.Money
	Balance   pricing.Money
	RequestID string
	Reason    string
}

// JournalProblem is a difference CheckJournal found.
type JournalProblem struct {
	AccountID string
	// Balance is the account's balance (0 when billed afterwards),
	// JournalSum what its journal adds up to, Last the balance its newest
	// entry records.
	Balance, JournalSum, Last pricing.Money
	// UnledgeredCharges are charge entries with no ledger entry.
	UnledgeredCharges []string
}

// Ledger stores settled charges.
type Ledger interface {
	// Settle records e and, in the same transaction, draws a prepaid
	// balance down by the part of e.Cost not covered by the free monthly
	// credit (see Entry.FreeMonthlyCredit). It never takes the balance
	// below zero, the free credit past its end or spend past a cap of the
	// account, of the key it was made with (e.KeyID) or of the
	// organization the account belongs to: e is charged at most what they
	// leave (the least of Room, KeyRoom and OrgRoom), and e.Cost and
	// e.Shortfall are set to what was charged and what was not. It reports false (and
	// changes nothing) when an entry with e.RequestID already exists.
	Settle(ctx context.Context, e *Entry) (bool, error)
	// Entries returns an account's newest entries first, at most limit.
	Entries(ctx context.Context, accountID string, limit int) ([]Entry, error)
	// Spend sums an account's entries relative to now (UTC day and month).
	Spend(ctx context.Context, accountID string, now time.Time) (Spend, error)
	// KeySpend sums the entries made with a key (Entry.KeyID) relative to
	// now (UTC day and month), revoked keys' too; an unknown key has spent
	// nothing.
	KeySpend(ctx context.Context, keyID string, now time.Time) (Spend, error)
	// OrgSpend sums the entries of an organization's accounts relative
	// to now (UTC day and month), each counted when its account belonged
	// to the organization at its settlement; an unknown organization has
	// spent nothing.
	OrgSpend(ctx context.Context, orgID string, now time.Time) (Spend, error)
	// Journal returns an account's balance movements, newest first, at
	// most limit.
	Journal(ctx context.Context, accountID string, limit int) ([]JournalEntry, error)
	// CheckJournal verifies every account: its journal adds up to its
	// balance, its newest entry records that balance, and every charge has
	// its ledger entry. It returns the accounts that differ.
	CheckJournal(ctx context.Context) ([]JournalProblem, error)
	// UsageReader sums the ledger per day, model, account, key and
	// organization.
	UsageReader
}

// BatchSettler is a backend that can settle several entries in one
// transaction (one commit, one fsync): the group commit of the hot path.
type BatchSettler interface {
	// SettleBatch settles entries in order, all or none; charged[i] is
	// what Settle would report of entries[i], whose Cost and Shortfall it
	// sets as Settle does.
	SettleBatch(ctx context.Context, entries []Entry) (charged []bool, err error)
}

// LaterSettler is a backend that counts a charge at once and makes it
// durable afterwards: SettleLater applies e to what Account and Spend
// answer (and sets its Cost and Shortfall as Settle does) before it
// returns, and wait blocks until e is on disk (or failed, and was taken
// back), reporting as Settle does. A caller may release its locks between
// the two.
type LaterSettler interface {
	SettleLater(ctx context.Context, e *Entry) (wait func() (bool, error))
}

// Store is a complete backend.
type Store interface {
	Accounts
	Ledger
	Webhooks
	// Ping reports whether the backend can answer.
	Ping(ctx context.Context) error
	// Close releases the backend.
	Close() error
}

// secondsPerDay is a UTC day in Unix time, which has no leap seconds.
const secondsPerDay = 24 * 60 * 60

// DayOf returns the UTC day containing t, as [from, to). Every charge
// asks it several times, so it divides Unix seconds rather than taking
// the calendar date apart.
func DayOf(t time.Time) (from, to time.Time) {
	s := t.Unix()
	d := s / secondsPerDay
	if s%secondsPerDay < 0 { // before 1970: the division truncated up
		d--
	}
	return time.Unix(d*secondsPerDay, 0).UTC(), time.Unix((d+1)*secondsPerDay, 0).UTC()
}

// MonthOf returns the UTC month containing t, as [from, to).
func MonthOf(t time.Time) (from, to time.Time) {
	y, m, _ := t.UTC().Date()
	return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC), time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC)
}

// BalanceDraw is the part of cost a prepaid balance pays when the month's
// free credit is spent first and monthBefore was spent earlier that month.
func BalanceDraw(cost, freeCredit, monthBefore pricing.Money) pricing.Money {
	left := max(freeCredit-monthBefore, 0)
	return max(cost-left, 0)
}

// BalanceMove is the journal entry of a balance changed from before to
// after (nil: billed afterwards, counted as 0), as why says; moved is false
// when nothing moved.
func BalanceMove(before, after *pricing.Money, why ...Movement) (e JournalEntry, moved bool) {
	var b, a pricing.Money
	if before != nil {
		b = *before
	}
	if after != nil {
		a = *after
	}
	if a == b && (before == nil) == (after == nil) {
		return JournalEntry{}, false
	}
	e = JournalEntry{Time: time.Now().UTC(), Kind: JournalSet, Amount: a - b, Balance: a}
	if len(why) > 0 && why[0].Kind != "" {
		e.Kind, e.Reason = why[0].Kind, why[0].Reason
	}
	return e, true
}

// Rows is what ScanJournalCheck reads (database/sql and pgx rows).
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// ScanJournalCheck reads the rows of a backend's journal check (account,
// balance, journal sum, newest entry's balance, unledgered charges
// comma-separated) and keeps the accounts that differ.
func ScanJournalCheck(rows Rows) ([]JournalProblem, error) {
	out := []JournalProblem{}
	for rows.Next() {
		var (
			p                  JournalProblem
			balance, sum, last int64
			unledgered         string
		)
		if err := rows.Scan(&p.AccountID, &balance, &sum, &last, &unledgered); err != nil {
			return nil, err
		}
		p.Balance, p.JournalSum, p.Last = pricing.Money(balance), pricing.Money(sum), pricing.Money(last)
		if unledgered != "" {
			p.UnledgeredCharges = strings.Split(unledgered, ",")
		}
		if p.Balance != p.JournalSum || p.Balance != p.Last || len(p.UnledgeredCharges) > 0 {
			out = append(out, p)
		}
	}
	return out, rows.Err()
}

// CopyMoney returns a copy of m (nil stays nil), so a value compared later
// cannot have been changed through the original pointer.
func CopyMoney(m *pricing.Money) *pricing.Money {
	if m == nil {
		return nil
	}
	v := *m
	return &v
}

// CopyMoneys points each non-nil pointer of ps at a copy of its amount,
// the copies made in one allocation: a record copied so shares nothing
// with the original, for the price of one amount.
func CopyMoneys(ps ...**pricing.Money) {
	n := 0
	for _, p := range ps {
		if *p != nil {
			n++
		}
	}
	if n == 0 {
		return
	}
	vs := make([]pricing.Money, 0, n)
	for _, p := range ps {
		if *p != nil {
			vs = append(vs, **p)
			*p = &vs[len(vs)-1]
		}
	}
}

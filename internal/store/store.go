// Package store defines the gateway's durable state (accounts, keys and the
// money ledger) behind interfaces that the embedded SQLite backend implements
// and that a PostgreSQL backend can implement for several nodes.
package store

import (
	"context"
	"errors"
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
)

// Plan is an account's plan.
type Plan string

const (
	PlanFree Plan = "free"
	PlanPaid Plan = "paid"
)

// Abilities an account can have switched on (CONTRACT §4).
const (
	AbilityTranscription = "transcription"
	AbilitySpeech        = "speech"
	AbilityImages        = "images"
	AbilitySearch        = "search"
	AbilityFetch         = "fetch"
	AbilityDecide        = "decide"
	AbilityApps          = "apps"
)

// AllAbilities lists every ability, in the contract's order.
var AllAbilities = []string{AbilityTranscription, AbilitySpeech, AbilityImages, AbilitySearch, AbilityFetch, AbilityDecide, AbilityApps}

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
	CreatedAt time.Time
}

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
	// FreeMonthlyCredit is the account's free credit for the entry's UTC
	// month. It is spent before a prepaid balance: Settle draws the balance
	// down only by the part of Cost that the credit left over this month
	// (credit minus the month's earlier spend, at least zero) does not
	// cover. It is not stored.
	FreeMonthlyCredit pricing.Money
}

// Spend sums an account's ledger over the current UTC day and month, and in
// all.
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
	// and stores the result; ErrNotFound if none. fn's error aborts.
	UpdateAccount(ctx context.Context, id string, fn func(*Account) error) (Account, error)

	// CreateKey stores a key for an existing account (ErrNotFound if the
	// account does not exist, ErrExists if the id or hash is taken).
	CreateKey(ctx context.Context, k Key) error
	// Keys lists an account's keys, oldest first.
	Keys(ctx context.Context, accountID string) ([]Key, error)
	// DeleteKey revokes a key for good: it stops working at once and its
	// secret can never be issued again; ErrNotFound if none (or revoked).
	DeleteKey(ctx context.Context, keyID string) error
	// KeyByHash finds an active key by the hash of its secret; ErrNotFound
	// if none (or revoked).
	KeyByHash(ctx context.Context, hash string) (Key, error)
	// KeyIssued reports whether a key with this hash was ever issued,
	// revoked ones included.
	KeyIssued(ctx context.Context, hash string) (bool, error)
}

// Ledger stores settled charges.
type Ledger interface {
	// Settle records e and, in the same transaction, draws a prepaid
	// balance down by the part of e.Cost not covered by the free monthly
	// credit (see Entry.FreeMonthlyCredit). It reports false (and changes nothing) when
	// an entry with e.RequestID already exists.
	Settle(ctx context.Context, e Entry) (bool, error)
	// Entries returns an account's newest entries first, at most limit.
	Entries(ctx context.Context, accountID string, limit int) ([]Entry, error)
	// Spend sums an account's entries relative to now (UTC day and month).
	Spend(ctx context.Context, accountID string, now time.Time) (Spend, error)
}

// Store is a complete backend.
type Store interface {
	Accounts
	Ledger
	// Ping reports whether the backend can answer.
	Ping(ctx context.Context) error
	// Close releases the backend.
	Close() error
}

// DayOf returns the UTC day containing t, as [from, to).
func DayOf(t time.Time) (from, to time.Time) {
	t = t.UTC()
	from = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	return from, from.AddDate(0, 0, 1)
}

// MonthOf returns the UTC month containing t, as [from, to).
func MonthOf(t time.Time) (from, to time.Time) {
	t = t.UTC()
	from = time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
	return from, from.AddDate(0, 1, 0)
}

// BalanceDraw is the part of cost a prepaid balance pays when the month's
// free credit is spent first and monthBefore was spent earlier that month.
func BalanceDraw(cost, freeCredit, monthBefore pricing.Money) pricing.Money {
	left := max(freeCredit-monthBefore, 0)
	return max(cost-left, 0)
}

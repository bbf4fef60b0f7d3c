package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/caddy-gw/caddy-gw/pricing"
)

// The range of times a backend stores: Unix nanoseconds in an int64,
// 1677-09-21..2262-04-11.
var (
	minTime = time.Unix(0, math.MinInt64)
	maxTime = time.Unix(0, math.MaxInt64)
)

// Nanos returns t as Unix nanoseconds, the backends' storage form of every
// time; times outside 1677-09-21..2262-04-11 are refused.
func Nanos(t time.Time) (int64, error) {
	if t.Before(minTime) || t.After(maxTime) {
		return 0, fmt.Errorf("time %s out of range", t.Format(time.RFC3339))
	}
	return t.UnixNano(), nil
}

// FromNanos is the UTC time of n Unix nanoseconds, the inverse of Nanos.
func FromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

// CheckEntries checks entries before a backend settles them: each names its
// request and has a storable time; a zero Time is set to now. backend
// prefixes the error ("sqlite", "postgres").
func CheckEntries(backend string, entries []Entry) error {
	for i := range entries {
		if entries[i].RequestID == "" {
			return errors.New(backend + ": settle: empty request id")
		}
		if entries[i].Time.IsZero() {
			entries[i].Time = time.Now()
		}
		if _, err := Nanos(entries[i].Time); err != nil {
			return fmt.Errorf("%s: settle %q: %w", backend, entries[i].RequestID, err)
		}
	}
	return nil
}

// SettleOne is a backend's Settle through its SettleBatch: e alone in a
// batch, its Cost and Shortfall set as the batch sets them.
func SettleOne(ctx context.Context, b BatchSettler, e *Entry) (bool, error) {
	entries := []Entry{*e}
	charged, err := b.SettleBatch(ctx, entries)
	if err != nil {
		return false, err
	}
	*e = entries[0]
	return charged[0], nil
}

// EncodeList is the storage form of a list of names: nil (NULL, "all")
// for nil, and a JSON array for anything else, an empty list included.
func EncodeList(list []string) (*string, error) {
	if list == nil {
		return nil, nil
	}
	b, err := json.Marshal(list)
	if err != nil {
		return nil, err
	}
	s := string(b)
	return &s, nil
}

// DecodeList reads what EncodeList stored: nil stays nil, a JSON null is an
// empty list.
func DecodeList(s *string) ([]string, error) {
	if s == nil {
		return nil, nil
	}
	list := []string{}
	if err := json.Unmarshal([]byte(*s), &list); err != nil {
		return nil, err
	}
	if list == nil { // JSON null
		list = []string{}
	}
	return list, nil
}

// Row is one row a backend scans (database/sql and pgx rows both are).
type Row interface {
	Scan(dest ...any) error
}

// ScanKey reads a key from row's KeyCols: id, account_id, name, hash,
// models (EncodeList's form), expires_at and created_at (Unix nanoseconds,
// expires_at NULL for never), its caps (nano-dollars, NULL for none) and
// mcp_tools (EncodeList's form).
func ScanKey(row Row) (Key, error) {
	var (
		k                     Key
		models, tools         *string
		expires               *int64
		created               int64
		daily, monthly, total *int64
	)
	if err := row.Scan(&k.ID, &k.AccountID, &k.Name, &k.Hash, &models, &expires, &created, &daily, &monthly, &total, &tools); err != nil {
		return Key{}, err
	}
	k.DailyCap, k.MonthlyCap, k.TotalCap = MoneyOf(daily), MoneyOf(monthly), MoneyOf(total)
	list, err := DecodeList(models)
	if err != nil {
		return Key{}, fmt.Errorf("models: %w", err)
	}
	k.Models = list
	if k.MCPTools, err = DecodeList(tools); err != nil {
		return Key{}, fmt.Errorf("mcp_tools: %w", err)
	}
	if expires != nil {
		t := FromNanos(*expires)
		k.ExpiresAt = &t
	}
	k.CreatedAt = FromNanos(created)
	return k, nil
}

// AccountCols are the columns of a backend's accounts table that
// AccountArgs fills and ScanAccount reads, in their order.
const AccountCols = `id, plan, cleared, payg, lane_billing, balance, daily_cap, monthly_cap, abilities, org, low_balance, created_at`

// OrgCols are the columns of a backend's orgs table that orgArgs fills and
// ScanOrg reads, in their order.
const OrgCols = `id, name, daily_cap, monthly_cap, created_at`

// KeyCols are the columns of a backend's keys table that KeyArgs fills and
// ScanKey reads, in their order.
const KeyCols = `id, account_id, name, hash, models, expires_at, created_at, daily_cap, monthly_cap, total_cap, mcp_tools`

// keyUpdateCols are the columns of KeyCols that UpdateKey writes, and
// keyUpdateArgs the indexes of their values in KeyArgs'.
var (
	keyUpdateCols = []string{"name", "models", "expires_at", "daily_cap", "monthly_cap", "total_cap", "mcp_tools"}
	keyUpdateArgs = []int{2, 4, 5, 7, 8, 9, 10}
)

// AccountArgs are a's values for AccountCols.
func AccountArgs(a *Account) ([]any, error) {
	abilities, err := EncodeList(a.Abilities)
	if err != nil {
		return nil, err
	}
	created, err := Nanos(a.CreatedAt)
	if err != nil {
		return nil, err
	}
	return []any{a.ID, string(a.Plan), a.Cleared, a.PAYG, a.LaneBilling,
		moneyArg(a.Balance), moneyArg(a.DailyCap), moneyArg(a.MonthlyCap), abilities, orgArg(a.Org), moneyArg(a.LowBalance), created}, nil
}

// orgArg is an account's org column: NULL for none.
func orgArg(org string) *string {
	if org == "" {
		return nil
	}
	return &org
}

// orgArgs are o's values for OrgCols.
func orgArgs(o *Org) ([]any, error) {
	created, err := Nanos(o.CreatedAt)
	if err != nil {
		return nil, err
	}
	return []any{o.ID, o.Name, moneyArg(o.DailyCap), moneyArg(o.MonthlyCap), created}, nil
}

// ScanOrg reads an organization from row's OrgCols.
func ScanOrg(row Row) (Org, error) {
	var (
		o              Org
		daily, monthly *int64
		created        int64
	)
	if err := row.Scan(&o.ID, &o.Name, &daily, &monthly, &created); err != nil {
		return Org{}, err
	}
	o.DailyCap, o.MonthlyCap = MoneyOf(daily), MoneyOf(monthly)
	o.CreatedAt = FromNanos(created)
	return o, nil
}

// ScanAccount reads an account from row's AccountCols.
func ScanAccount(row Row) (Account, error) {
	var (
		a                       Account
		plan                    string
		balance, daily, monthly *int64
		abilities, org          *string
		low                     *int64
		created                 int64
	)
	if err := row.Scan(&a.ID, &plan, &a.Cleared, &a.PAYG, &a.LaneBilling, &balance, &daily, &monthly, &abilities, &org, &low, &created); err != nil {
		return Account{}, err
	}
	list, err := DecodeList(abilities)
	if err != nil {
		return Account{}, fmt.Errorf("abilities: %w", err)
	}
	a.Plan = Plan(plan)
	a.Balance, a.DailyCap, a.MonthlyCap, a.LowBalance = MoneyOf(balance), MoneyOf(daily), MoneyOf(monthly), MoneyOf(low)
	a.Abilities = list
	if org != nil {
		a.Org = *org
	}
	a.CreatedAt = FromNanos(created)
	return a, nil
}

// KeyArgs checks k for a backend's CreateKey (it names its id and hash; a
// zero CreatedAt is set to now) and returns its values for KeyCols.
// backend prefixes the error ("sqlite", "postgres").
func KeyArgs(backend string, k *Key) ([]any, error) {
	if k.ID == "" || k.Hash == "" {
		return nil, errors.New(backend + ": create key: empty id or hash")
	}
	if k.CreatedAt.IsZero() {
		k.CreatedAt = time.Now()
	}
	args, err := keyValues(k)
	if err != nil {
		return nil, fmt.Errorf("%s: create key %q: %w", backend, k.ID, err)
	}
	return args, nil
}

// keyValues are k's values for KeyCols.
func keyValues(k *Key) ([]any, error) {
	models, err := EncodeList(k.Models)
	if err != nil {
		return nil, err
	}
	tools, err := EncodeList(k.MCPTools)
	if err != nil {
		return nil, err
	}
	created, err := Nanos(k.CreatedAt)
	if err != nil {
		return nil, err
	}
	var expires *int64
	if k.ExpiresAt != nil {
		n, err := Nanos(*k.ExpiresAt)
		if err != nil {
			return nil, fmt.Errorf("expires: %w", err)
		}
		expires = &n
	}
	return []any{k.ID, k.AccountID, k.Name, k.Hash, models, expires, created,
		moneyArg(k.DailyCap), moneyArg(k.MonthlyCap), moneyArg(k.TotalCap), tools}, nil
}

// moneyArg is m's column value: NULL for nil.
func moneyArg(m *pricing.Money) *int64 {
	if m == nil {
		return nil
	}
	v := int64(*m)
	return &v
}

// MoneyOf reads a money column; NULL is nil.
func MoneyOf(n *int64) *pricing.Money {
	if n == nil {
		return nil
	}
	m := pricing.Money(*n)
	return &m
}

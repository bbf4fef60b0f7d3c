package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/caddy-gw/caddy-gw/pricing"
)

// Periods of the SQL backends' spend and key_spend tables (their period
// column): the running total of all time (start 0), of a UTC day and of a
// UTC month (start: the period's first instant in Unix nanoseconds).
const (
	PeriodTotal = 0
	PeriodDay   = 1
	PeriodMonth = 2
)

// Conn is a SQL backend's pool or transaction as the code the backends
// share runs statements on it.
type Conn interface {
	// Exec runs a statement.
	Exec(ctx context.Context, query string, args ...any) error
	// QueryRow runs a query of at most one row.
	QueryRow(ctx context.Context, query string, args ...any) Row
	// Query runs a query; the caller closes its rows.
	Query(ctx context.Context, query string, args ...any) (ClosingRows, error)
}

// ClosingRows are the rows of a query, closed by their reader.
type ClosingRows interface {
	Rows
	Close()
}

// Dialect is what differs between the SQL backends' statements and
// drivers.
type Dialect struct {
	// Name prefixes errors ("sqlite", "postgres").
	Name string
	// Arg writes the i-th placeholder, from 1 ("?", "$1").
	Arg func(i int) string
	// ForUpdate ends a query that locks the account row it reads (" FOR
	// UPDATE"); empty where a write transaction holds the whole database.
	ForUpdate string
	// Classify maps the driver's errors to the store's: no rows to
	// ErrNotFound, a taken id to ErrExists, a missing account to
	// ErrNotFound.
	Classify func(error) error
}

// SQL is the part of a SQL backend that is the same in every dialect:
// its statements are written once, run on the backend's read pool and in
// its write transactions.
type SQL struct {
	d     Dialect
	read  Conn
	write func(ctx context.Context, fn func(Conn) error) error
	q     sqlStatements
}

// sqlStatements are SQL's statements in its dialect.
type sqlStatements struct {
	insertAccount, lockAccount, updateAccount, insertJournal, keyByHash, keyIssued, spend string
	key, issuedKey, lockKey, updateKey, keySpend                                          string
	orgExists, insertOrg, org, listOrgs, lockOrg, updateOrg, orgMember, orgSpend          string
}

// NewSQL is the shared code of a backend of dialect d: read is its read
// pool, write runs fn in a write transaction committed when fn returns
// nil.
func NewSQL(d Dialect, read Conn, write func(ctx context.Context, fn func(Conn) error) error) *SQL {
	cols := strings.Split(AccountCols, ", ")
	set := make([]string, 0, len(cols)-2)
	// cols[0] is the id, the last created_at: neither changes.
	for i, c := range cols[1 : len(cols)-1] {
		set = append(set, c+" = "+d.Arg(i+1))
	}
	keySet := make([]string, len(keyUpdateCols))
	for i, c := range keyUpdateCols {
		keySet[i] = c + " = " + d.Arg(i+1)
	}
	periods := func(table, col string) string {
		return `SELECT period, cost FROM ` + table + ` WHERE ` + col + ` = ` + d.Arg(1) + ` AND (period = ` + d.Arg(2) +
			` OR (period = ` + d.Arg(3) + ` AND start = ` + d.Arg(4) + `) OR (period = ` + d.Arg(5) + ` AND start = ` + d.Arg(6) + `))`
	}
	return &SQL{d: d, read: read, write: write, q: sqlStatements{
		insertAccount: `INSERT INTO accounts (` + AccountCols + `) VALUES (` + placeholders(d.Arg, len(cols)) + `)`,
		lockAccount:   `SELECT ` + AccountCols + ` FROM accounts WHERE id = ` + d.Arg(1) + d.ForUpdate,
		updateAccount: `UPDATE accounts SET ` + strings.Join(set, ", ") + ` WHERE id = ` + d.Arg(len(set)+1),
		insertJournal: JournalInsert(d.Arg),
		keyByHash:     `SELECT ` + KeyCols + ` FROM keys WHERE hash = ` + d.Arg(1) + ` AND revoked_at IS NULL`,
		keyIssued:     `SELECT 1 FROM keys WHERE hash = ` + d.Arg(1),
		spend:         periods("spend", "account_id"),
		key:           `SELECT ` + KeyCols + ` FROM keys WHERE id = ` + d.Arg(1) + ` AND revoked_at IS NULL`,
		issuedKey:     `SELECT ` + KeyCols + ` FROM keys WHERE id = ` + d.Arg(1),
		lockKey:       `SELECT ` + KeyCols + ` FROM keys WHERE id = ` + d.Arg(1) + ` AND revoked_at IS NULL` + d.ForUpdate,
		updateKey:     `UPDATE keys SET ` + strings.Join(keySet, ", ") + ` WHERE id = ` + d.Arg(len(keySet)+1),
		keySpend:      periods("key_spend", "key_id"),
		orgExists:     `SELECT 1 FROM orgs WHERE id = ` + d.Arg(1),
		insertOrg:     `INSERT INTO orgs (` + OrgCols + `) VALUES (` + placeholders(d.Arg, 5) + `)`,
		org:           `SELECT ` + OrgCols + ` FROM orgs WHERE id = ` + d.Arg(1),
		listOrgs:      `SELECT ` + OrgCols + ` FROM orgs`,
		lockOrg:       `SELECT ` + OrgCols + ` FROM orgs WHERE id = ` + d.Arg(1) + d.ForUpdate,
		updateOrg:     `UPDATE orgs SET name = ` + d.Arg(1) + `, daily_cap = ` + d.Arg(2) + `, monthly_cap = ` + d.Arg(3) + ` WHERE id = ` + d.Arg(4),
		orgMember:     `SELECT 1 FROM accounts WHERE org = ` + d.Arg(1) + ` LIMIT 1`,
		orgSpend:      periods("org_spend", "org_id"),
	}}
}

// placeholders lists the first n placeholders, comma-separated.
func placeholders(arg func(int) string, n int) string {
	p := make([]string, n)
	for i := range p {
		p[i] = arg(i + 1)
	}
	return strings.Join(p, ", ")
}

// JournalCols are the columns of the journal table JournalArgs fills, in
// their order.
const JournalCols = `account_id, time, kind, amount, balance, request_id, reason`

// JournalInsert is the statement that writes a journal row from
// JournalArgs, with placeholders written by arg.
func JournalInsert(arg func(i int) string) string {
	return `INSERT INTO journal (` + JournalCols + `) VALUES (` + placeholders(arg, strings.Count(JournalCols, ",")+1) + `)`
}

// JournalArgs are JournalInsert's arguments for account's movement e; a
// time out of range is recorded as now.
func JournalArgs(account string, e JournalEntry) []any {
	at, err := Nanos(e.Time)
	if err != nil {
		at = time.Now().UnixNano()
	}
	return []any{account, at, e.Kind, int64(e.Amount), int64(e.Balance), e.RequestID, e.Reason}
}

// journal writes account's balance movement e on c (a write
// transaction).
func (s *SQL) journal(ctx context.Context, c Conn, account string, e JournalEntry) error {
	return c.Exec(ctx, s.q.insertJournal, JournalArgs(account, e)...)
}

// CreateAccount stores a new account, and the journal row of its opening
// balance when it is prepaid, in one transaction; ErrExists if the id is
// taken. A zero CreatedAt is set to now.
func (s *SQL) CreateAccount(ctx context.Context, a Account) error {
	if a.ID == "" {
		return errors.New(s.d.Name + ": create account: empty id")
	}
	if a.CreatedAt.IsZero() {
		a.CreatedAt = time.Now()
	}
	args, err := AccountArgs(&a)
	if err != nil {
		return fmt.Errorf("%s: create account %q: %w", s.d.Name, a.ID, err)
	}
	err = s.write(ctx, func(c Conn) error {
		if err := s.checkOrg(ctx, c, a.Org); err != nil {
			return err
		}
		if err := c.Exec(ctx, s.q.insertAccount, args...); err != nil {
			return err
		}
		if a.Balance == nil {
			return nil
		}
		return s.journal(ctx, c, a.ID, JournalEntry{Time: a.CreatedAt, Kind: JournalSet, Amount: *a.Balance, Balance: *a.Balance})
	})
	if err != nil {
		return fmt.Errorf("%s: create account %q: %w", s.d.Name, a.ID, s.d.Classify(err))
	}
	return nil
}

// UpdateAccount reads the account (locking its row), applies fn and writes
// the result back in one transaction, journaling a change of the prepaid
// balance as why says; ErrNotFound if none, fn's error aborts. fn cannot
// change ID or CreatedAt, and runs inside the write transaction (on
// SQLite, holding the store's one write connection), so it must not write
// to the store itself.
func (s *SQL) UpdateAccount(ctx context.Context, id string, fn func(*Account) error, why ...Movement) (Account, error) {
	var out Account
	err := s.write(ctx, func(c Conn) error {
		a, err := ScanAccount(c.QueryRow(ctx, s.q.lockAccount, id))
		if err != nil {
			return s.d.Classify(err)
		}
		created, before := a.CreatedAt, CopyMoney(a.Balance)
		if err := fn(&a); err != nil {
			return err
		}
		a.ID, a.CreatedAt = id, created
		if err := s.checkOrg(ctx, c, a.Org); err != nil {
			return err
		}
		args, err := AccountArgs(&a)
		if err != nil {
			return err
		}
		// args[0] is the id, the last created_at; neither changes.
		if err := c.Exec(ctx, s.q.updateAccount, append(args[1:len(args)-1:len(args)-1], id)...); err != nil {
			return s.d.Classify(err)
		}
		if e, moved := BalanceMove(before, a.Balance, why...); moved {
			if err := s.journal(ctx, c, id, e); err != nil {
				return err
			}
		}
		out = a
		return nil
	})
	if err != nil {
		return Account{}, fmt.Errorf("%s: update account %q: %w", s.d.Name, id, err)
	}
	return out, nil
}

// checkOrg fails with ErrNoOrg when org (an account's) names no
// organization; "" is none and always fine.
func (s *SQL) checkOrg(ctx context.Context, c Conn, org string) error {
	if org == "" {
		return nil
	}
	var one int
	err := s.d.Classify(c.QueryRow(ctx, s.q.orgExists, org).Scan(&one))
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: %q", ErrNoOrg, org)
	}
	return err
}

// CreateOrg stores a new organization; ErrExists if the id is taken. A
// zero CreatedAt is set to now.
func (s *SQL) CreateOrg(ctx context.Context, o Org) error {
	if o.ID == "" {
		return errors.New(s.d.Name + ": create org: empty id")
	}
	if o.CreatedAt.IsZero() {
		o.CreatedAt = time.Now()
	}
	args, err := orgArgs(&o)
	if err != nil {
		return fmt.Errorf("%s: create org %q: %w", s.d.Name, o.ID, err)
	}
	err = s.write(ctx, func(c Conn) error { return c.Exec(ctx, s.q.insertOrg, args...) })
	if err != nil {
		return fmt.Errorf("%s: create org %q: %w", s.d.Name, o.ID, s.d.Classify(err))
	}
	return nil
}

// Org returns the organization; ErrNotFound if none.
func (s *SQL) Org(ctx context.Context, id string) (Org, error) {
	o, err := ScanOrg(s.read.QueryRow(ctx, s.q.org, id))
	if err != nil {
		return Org{}, fmt.Errorf("%s: org %q: %w", s.d.Name, id, s.d.Classify(err))
	}
	return o, nil
}

// ListOrgs returns every organization, by id (byte by byte).
func (s *SQL) ListOrgs(ctx context.Context) ([]Org, error) {
	rows, err := s.read.Query(ctx, s.q.listOrgs)
	if err != nil {
		return nil, fmt.Errorf("%s: list orgs: %w", s.d.Name, err)
	}
	defer rows.Close()
	out := []Org{}
	for rows.Next() {
		o, err := ScanOrg(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: list orgs: %w", s.d.Name, err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: list orgs: %w", s.d.Name, err)
	}
	slices.SortFunc(out, func(a, b Org) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// UpdateOrg reads the organization (locking its row), applies fn and
// writes its name and caps back in one transaction; ErrNotFound if none,
// fn's error aborts. fn runs inside the write transaction, so it must not
// write to the store itself.
func (s *SQL) UpdateOrg(ctx context.Context, id string, fn func(*Org) error) (Org, error) {
	var out Org
	err := s.write(ctx, func(c Conn) error {
		o, err := ScanOrg(c.QueryRow(ctx, s.q.lockOrg, id))
		if err != nil {
			return s.d.Classify(err)
		}
		created := o.CreatedAt
		if err := fn(&o); err != nil {
			return err
		}
		o.ID, o.CreatedAt = id, created
		if err := c.Exec(ctx, s.q.updateOrg, o.Name, moneyArg(o.DailyCap), moneyArg(o.MonthlyCap), id); err != nil {
			return s.d.Classify(err)
		}
		out = o
		return nil
	})
	if err != nil {
		return Org{}, fmt.Errorf("%s: update org %q: %w", s.d.Name, id, err)
	}
	return out, nil
}

// DeleteOrg deletes the organization and its running totals in one
// transaction; ErrNotFound if none, ErrInUse while an account belongs to
// it. The organization's row is locked first, so no account joins it
// meanwhile.
func (s *SQL) DeleteOrg(ctx context.Context, id string) error {
	err := s.write(ctx, func(c Conn) error {
		if _, err := ScanOrg(c.QueryRow(ctx, s.q.lockOrg, id)); err != nil {
			return s.d.Classify(err)
		}
		var one int
		err := s.d.Classify(c.QueryRow(ctx, s.q.orgMember, id).Scan(&one))
		switch {
		case err == nil:
			return ErrInUse
		case !errors.Is(err, ErrNotFound):
			return err
		}
		if err := c.Exec(ctx, `DELETE FROM org_spend WHERE org_id = `+s.d.Arg(1), id); err != nil {
			return err
		}
		return c.Exec(ctx, `DELETE FROM orgs WHERE id = `+s.d.Arg(1), id)
	})
	if err != nil {
		return fmt.Errorf("%s: delete org %q: %w", s.d.Name, id, err)
	}
	return nil
}

// OrgSpend reads the running totals of an organization's entries for
// now's UTC day and month and in all. An unknown organization has spent
// nothing.
func (s *SQL) OrgSpend(ctx context.Context, orgID string, now time.Time) (Spend, error) {
	sp, err := s.periods(ctx, s.q.orgSpend, orgID, now)
	if err != nil {
		return Spend{}, fmt.Errorf("%s: spend of org %q: %w", s.d.Name, orgID, err)
	}
	return sp, nil
}

// KeyByHash finds an active key by the hash of its secret; ErrNotFound if
// none (or revoked). It does not look at ExpiresAt: callers decide.
func (s *SQL) KeyByHash(ctx context.Context, hash string) (Key, error) {
	k, err := ScanKey(s.read.QueryRow(ctx, s.q.keyByHash, hash))
	if err != nil {
		// The hash identifies a secret: keep it out of the message.
		return Key{}, fmt.Errorf("%s: key by hash: %w", s.d.Name, s.d.Classify(err))
	}
	return k, nil
}

// KeyIssued reports whether a key with this hash was ever issued, revoked
// ones included.
func (s *SQL) KeyIssued(ctx context.Context, hash string) (bool, error) {
	var one int
	err := s.d.Classify(s.read.QueryRow(ctx, s.q.keyIssued, hash).Scan(&one))
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	if err != nil {
		// The hash identifies a secret: keep it out of the message.
		return false, fmt.Errorf("%s: key issued: %w", s.d.Name, err)
	}
	return true, nil
}

// Key returns an active key by its id; ErrNotFound if none (or revoked).
func (s *SQL) Key(ctx context.Context, id string) (Key, error) {
	k, err := ScanKey(s.read.QueryRow(ctx, s.q.key, id))
	if err != nil {
		return Key{}, fmt.Errorf("%s: key %q: %w", s.d.Name, id, s.d.Classify(err))
	}
	return k, nil
}

// IssuedKey returns a key by its id, revoked or not (a settlement holds
// the calls of a key revoked meanwhile to its caps); ErrNotFound if none.
func (s *SQL) IssuedKey(ctx context.Context, id string) (Key, error) {
	k, err := ScanKey(s.read.QueryRow(ctx, s.q.issuedKey, id))
	if err != nil {
		return Key{}, fmt.Errorf("%s: issued key %q: %w", s.d.Name, id, s.d.Classify(err))
	}
	return k, nil
}

// UpdateKey reads the active key (locking its row), applies fn and writes
// its name, models, expiry, caps and MCP tools back in one transaction; ErrNotFound
// if none (or revoked), fn's error aborts. fn cannot change the id,
// account, hash or creation time, and runs inside the write transaction,
// so it must not write to the store itself.
func (s *SQL) UpdateKey(ctx context.Context, id string, fn func(*Key) error) (Key, error) {
	var out Key
	err := s.write(ctx, func(c Conn) error {
		k, err := ScanKey(c.QueryRow(ctx, s.q.lockKey, id))
		if err != nil {
			return s.d.Classify(err)
		}
		fixed := k
		if err := fn(&k); err != nil {
			return err
		}
		k.ID, k.AccountID, k.Hash, k.CreatedAt = fixed.ID, fixed.AccountID, fixed.Hash, fixed.CreatedAt
		vals, err := keyValues(&k)
		if err != nil {
			return err
		}
		args := make([]any, 0, len(keyUpdateArgs)+1)
		for _, i := range keyUpdateArgs {
			args = append(args, vals[i])
		}
		if err := c.Exec(ctx, s.q.updateKey, append(args, id)...); err != nil {
			return s.d.Classify(err)
		}
		out = k
		return nil
	})
	if err != nil {
		return Key{}, fmt.Errorf("%s: update key %q: %w", s.d.Name, id, err)
	}
	return out, nil
}

// Spend reads an account's running totals for now's UTC day and month and
// in all. An unknown account has spent nothing.
func (s *SQL) Spend(ctx context.Context, accountID string, now time.Time) (Spend, error) {
	sp, err := s.periods(ctx, s.q.spend, accountID, now)
	if err != nil {
		return Spend{}, fmt.Errorf("%s: spend of %q: %w", s.d.Name, accountID, err)
	}
	return sp, nil
}

// KeySpend reads the running totals of the entries made with a key for
// now's UTC day and month and in all. An unknown key has spent nothing.
func (s *SQL) KeySpend(ctx context.Context, keyID string, now time.Time) (Spend, error) {
	sp, err := s.periods(ctx, s.q.keySpend, keyID, now)
	if err != nil {
		return Spend{}, fmt.Errorf("%s: spend of key %q: %w", s.d.Name, keyID, err)
	}
	return sp, nil
}

// periods reads the running totals of id for now's UTC day and month and
// in all with query (spend's or keySpend's).
func (s *SQL) periods(ctx context.Context, query, id string, now time.Time) (Spend, error) {
	day, _ := DayOf(now)
	month, _ := MonthOf(now)
	rows, err := s.read.Query(ctx, query, id, PeriodTotal, PeriodDay, day.UnixNano(), PeriodMonth, month.UnixNano())
	if err != nil {
		return Spend{}, err
	}
	defer rows.Close()
	var sp Spend
	for rows.Next() {
		var period, cost int64
		if err := rows.Scan(&period, &cost); err != nil {
			return Spend{}, err
		}
		switch period {
		case PeriodTotal:
			sp.Total = pricing.Money(cost)
		case PeriodDay:
			sp.Today = pricing.Money(cost)
		case PeriodMonth:
			sp.Month = pricing.Money(cost)
		}
	}
	return sp, rows.Err()
}

// Usage sums the ledger's charges as q asks, from the daily usage table.
func (s *SQL) Usage(ctx context.Context, q UsageQuery) ([]UsageRow, error) {
	query, args := UsageSQL(q, s.d.Arg)
	rows, err := s.read.Query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: usage: %w", s.d.Name, err)
	}
	defer rows.Close()
	out, err := ScanUsage(rows, q)
	if err != nil {
		return nil, fmt.Errorf("%s: usage: %w", s.d.Name, err)
	}
	return out, nil
}

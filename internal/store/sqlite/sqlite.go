// Package sqlite is the embedded store.Store backend: one SQLite database file
// (<dir>/gw.db) in WAL mode, opened through the pure-Go modernc.org/sqlite
// driver.
//
// Writes go through a pool of exactly one connection, so writers in this
// process queue in Go (honouring their contexts) instead of spinning on
// SQLITE_BUSY; reads use a separate pool of read-only connections that WAL
// lets run alongside the writer. Write transactions start with BEGIN
// IMMEDIATE and every connection has a busy timeout, which covers another
// process opening the same file.
//
// Money is stored as INTEGER nano-dollars (pricing.Money), times as INTEGER
// Unix nanoseconds in UTC, and string lists as JSON text with NULL meaning
// "all".
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// FileName is the database file Open creates in its directory.
const FileName = "gw.db"

// FileMode is the database files' mode: read and written by their owner only.
const FileMode = 0o600

// schemaVersion is stored in PRAGMA user_version for future migrations.
const schemaVersion = 10

const schema = `
CREATE TABLE IF NOT EXISTS orgs (
	id          TEXT    PRIMARY KEY,
	name        TEXT    NOT NULL DEFAULT '',
	daily_cap   INTEGER,          -- nano-dollars; NULL: none
	monthly_cap INTEGER,          -- nano-dollars; NULL: none
	created_at  INTEGER NOT NULL  -- Unix nanoseconds, UTC
);

CREATE TABLE IF NOT EXISTS accounts (
	id           TEXT    PRIMARY KEY,
	plan         TEXT    NOT NULL,
	cleared      INTEGER NOT NULL DEFAULT 0,
	payg         INTEGER NOT NULL DEFAULT 0,
	lane_billing INTEGER NOT NULL DEFAULT 0,
	balance      INTEGER,          -- nano-dollars; NULL: billed afterwards
	daily_cap    INTEGER,          -- nano-dollars; NULL: none
	monthly_cap  INTEGER,          -- nano-dollars; NULL: none
	abilities    TEXT,             -- JSON array; NULL: all
	created_at   INTEGER NOT NULL, -- Unix nanoseconds, UTC
	org          TEXT REFERENCES orgs(id), -- NULL: none
	low_balance  INTEGER           -- nano-dollars; NULL: no balance.low alert
);

CREATE TABLE IF NOT EXISTS keys (
	id         TEXT    PRIMARY KEY,
	account_id TEXT    NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	name       TEXT    NOT NULL DEFAULT '',
	hash       TEXT    NOT NULL,   -- hex SHA-256 of the secret
	models     TEXT,               -- JSON array; NULL: every model
	expires_at INTEGER,            -- Unix nanoseconds, UTC; NULL: never
	created_at INTEGER NOT NULL,   -- Unix nanoseconds, UTC
	revoked_at INTEGER,            -- Unix nanoseconds, UTC; NULL: active
	daily_cap   INTEGER,           -- nano-dollars; NULL: none
	monthly_cap INTEGER,           -- nano-dollars; NULL: none
	total_cap   INTEGER,           -- nano-dollars; NULL: none
	mcp_tools   TEXT               -- JSON array of globs; NULL: every tool
);
CREATE UNIQUE INDEX IF NOT EXISTS keys_hash ON keys(hash);
CREATE INDEX IF NOT EXISTS keys_account ON keys(account_id, created_at);

CREATE TABLE IF NOT EXISTS ledger (
	request_id TEXT    PRIMARY KEY,
	account_id TEXT    NOT NULL REFERENCES accounts(id),
	endpoint   TEXT    NOT NULL DEFAULT '',
	model      TEXT    NOT NULL DEFAULT '',
	units      INTEGER NOT NULL DEFAULT 0,
	unit       TEXT    NOT NULL DEFAULT '',
	cost       INTEGER NOT NULL,   -- nano-dollars
	time       INTEGER NOT NULL,   -- Unix nanoseconds, UTC
	key_id        TEXT    NOT NULL DEFAULT '',
	input_tokens  INTEGER NOT NULL DEFAULT 0,
	output_tokens INTEGER NOT NULL DEFAULT 0,
	shortfall     INTEGER NOT NULL DEFAULT 0 -- nano-dollars the account could not pay
);
CREATE INDEX IF NOT EXISTS ledger_account_time ON ledger(account_id, time);

-- The ledger summed per UTC day (its first instant in Unix nanoseconds),
-- account, key, model and the organization the account belonged to ('':
-- none), kept by Settle in the same transaction as the entries: usage
-- figures read these rows instead of the ledger's.
CREATE TABLE IF NOT EXISTS usage_daily (` + usageDailyCols + `;
CREATE INDEX IF NOT EXISTS usage_daily_account ON usage_daily(account_id, day);

-- Running sums of the ledger per account: the total (period 0, start 0),
-- each UTC day (period 1) and each UTC month (period 2), start being the
-- period's first instant in Unix nanoseconds. Settle keeps them in the same
-- transaction as the entry, so Spend reads three rows instead of summing
-- the account's whole history.
-- Every movement of a prepaid balance, written in the same
-- transaction as the movement; balance is the balance after it.
CREATE TABLE IF NOT EXISTS journal (
	seq        INTEGER PRIMARY KEY AUTOINCREMENT,
	account_id TEXT    NOT NULL,
	time       INTEGER NOT NULL,   -- Unix nanoseconds, UTC
	kind       TEXT    NOT NULL,   -- set, top_up, adjustment, charge
	amount     INTEGER NOT NULL,   -- nano-dollars, signed
	balance    INTEGER NOT NULL,   -- nano-dollars, after the entry
	request_id TEXT    NOT NULL DEFAULT '',
	reason     TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS journal_account ON journal(account_id, seq);

CREATE TABLE IF NOT EXISTS spend (
	account_id TEXT    NOT NULL,
	period     INTEGER NOT NULL,
	start      INTEGER NOT NULL,
	cost       INTEGER NOT NULL,
	PRIMARY KEY (account_id, period, start)
) WITHOUT ROWID;

-- The same running sums per key, of the entries made with it (revoked
-- keys' included), kept by Settle in the same transaction as the entry.
CREATE TABLE IF NOT EXISTS key_spend (
	key_id TEXT    NOT NULL,
	period INTEGER NOT NULL,
	start  INTEGER NOT NULL,
	cost   INTEGER NOT NULL,
	PRIMARY KEY (key_id, period, start)
) WITHOUT ROWID;

-- The same running sums per organization, of the entries of its accounts
-- settled while they belonged to it, kept by Settle in the same
-- transaction as the entry.
CREATE TABLE IF NOT EXISTS org_spend (
	org_id TEXT    NOT NULL,
	period INTEGER NOT NULL,
	start  INTEGER NOT NULL,
	cost   INTEGER NOT NULL,
	PRIMARY KEY (org_id, period, start)
) WITHOUT ROWID;

-- Alert subscriptions, and the outbox of their events: a row per event
-- and webhook, written in the transaction that raised the event, kept
-- once delivered as the webhook's delivery log.
CREATE TABLE IF NOT EXISTS webhooks (
	id         TEXT    PRIMARY KEY,
	url        TEXT    NOT NULL,
	secret     TEXT    NOT NULL,
	events     TEXT    NOT NULL,   -- JSON array of event types
	created_at INTEGER NOT NULL    -- Unix nanoseconds, UTC
);
CREATE TABLE IF NOT EXISTS webhook_outbox (` + outboxCols + `;
CREATE INDEX IF NOT EXISTS webhook_outbox_pending ON webhook_outbox(webhook_id, account_id, seq) WHERE delivered_at IS NULL;
CREATE INDEX IF NOT EXISTS webhook_outbox_due ON webhook_outbox(next_at) WHERE delivered_at IS NULL;
`

// outboxCols are the columns of the webhook outbox.
const outboxCols = `
	seq          INTEGER PRIMARY KEY AUTOINCREMENT,
	webhook_id   TEXT    NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
	event_id     TEXT    NOT NULL,
	type         TEXT    NOT NULL,
	account_id   TEXT    NOT NULL,
	body         TEXT    NOT NULL,
	created_at   INTEGER NOT NULL,  -- Unix nanoseconds, UTC
	next_at      INTEGER NOT NULL,  -- next attempt, or the last claim's end
	attempts     INTEGER NOT NULL DEFAULT 0,
	delivered_at INTEGER,           -- NULL: pending
	last_status  INTEGER NOT NULL DEFAULT 0,
	last_error   TEXT    NOT NULL DEFAULT '',
	UNIQUE (webhook_id, event_id)
)`

// usageDailyCols are the columns of the daily usage table.
const usageDailyCols = `
	account_id    TEXT    NOT NULL,
	day           INTEGER NOT NULL,
	key_id        TEXT    NOT NULL,
	model         TEXT    NOT NULL,
	requests      INTEGER NOT NULL,
	input_tokens  INTEGER NOT NULL,
	output_tokens INTEGER NOT NULL,
	cost          INTEGER NOT NULL,
	org           TEXT    NOT NULL DEFAULT '',
	PRIMARY KEY (day, account_id, key_id, model, org)
) WITHOUT ROWID`

// rebuildUsage gives a daily usage table of version 5 to 7 its org column
// (in its primary key, which only a new table can change).
const rebuildUsage = `
CREATE TABLE usage_daily_8 (` + usageDailyCols + `;
INSERT INTO usage_daily_8 (account_id, day, key_id, model, requests, input_tokens, output_tokens, cost)
	SELECT account_id, day, key_id, model, requests, input_tokens, output_tokens, cost FROM usage_daily;
DROP TABLE usage_daily;
ALTER TABLE usage_daily_8 RENAME TO usage_daily;
CREATE INDEX usage_daily_account ON usage_daily(account_id, day);
`

// backfillUsage builds the daily usage table from a ledger older than it.
const backfillUsage = `
INSERT INTO usage_daily (account_id, day, key_id, model, requests, input_tokens, output_tokens, cost)
	SELECT account_id, time - time % 86400000000000, key_id, model, COUNT(*), SUM(input_tokens), SUM(output_tokens), SUM(cost)
	FROM ledger GROUP BY 1, 2, 3, 4;
`

// backfillSpend builds the spend table from a version-1 ledger.
const backfillSpend = `
INSERT INTO spend (account_id, period, start, cost)
	SELECT account_id, 0, 0, SUM(cost) FROM ledger GROUP BY account_id;
INSERT INTO spend (account_id, period, start, cost)
	SELECT account_id, 1, time - time % 86400000000000, SUM(cost) FROM ledger GROUP BY 1, 2, 3;
INSERT INTO spend (account_id, period, start, cost)
	SELECT account_id, 2, CAST(strftime('%s', time / 1000000000, 'unixepoch', 'start of month') AS INTEGER) * 1000000000, SUM(cost)
	FROM ledger GROUP BY 1, 2, 3;
`

// backfillKeySpend builds the key_spend table from a version-6 ledger.
const backfillKeySpend = `
INSERT INTO key_spend (key_id, period, start, cost)
	SELECT key_id, 0, 0, SUM(cost) FROM ledger WHERE key_id <> '' GROUP BY key_id;
INSERT INTO key_spend (key_id, period, start, cost)
	SELECT key_id, 1, time - time % 86400000000000, SUM(cost) FROM ledger WHERE key_id <> '' GROUP BY 1, 2, 3;
INSERT INTO key_spend (key_id, period, start, cost)
	SELECT key_id, 2, CAST(strftime('%s', time / 1000000000, 'unixepoch', 'start of month') AS INTEGER) * 1000000000, SUM(cost)
	FROM ledger WHERE key_id <> '' GROUP BY 1, 2, 3;
`

// DB is the embedded store. It is safe for concurrent use.
type DB struct {
	w *sql.DB // one connection: every write transaction
	r *sql.DB // read-only connections
	// settle holds Settle's statements, prepared once on w.
	settle settleStmts
	// shared is CreateAccount, UpdateAccount, KeyByHash, KeyIssued, Spend
	// and Usage, written once for both SQL backends.
	*shared
}

// shared is the code both SQL backends share, embedded unexported.
type shared = store.SQL

// settleStmts are the statements of one settlement.
type settleStmts struct {
	ledger, room, spend, balance, journal, usage, floor *sql.Stmt
	// keyRoom reads a key's caps and running totals; keySpend moves the
	// totals.
	keyRoom, keySpend *sql.Stmt
	// orgRoom reads an organization's caps and running totals; orgSpend
	// moves the totals.
	orgRoom, orgSpend *sql.Stmt
	// ledgerChunk inserts LedgerChunk ledger rows at once.
	ledgerChunk *sql.Stmt
}

// LedgerChunk is how many ledger rows Settle inserts with one statement:
// one statement a row costs more than the row itself.
const LedgerChunk = 32

// ledgerInsert inserts n ledger rows, skipping request ids already there.
func ledgerInsert(n int) string {
	var b strings.Builder
	b.WriteString(`INSERT INTO ledger (request_id, account_id, endpoint, model, units, unit, cost, time, key_id, input_tokens, output_tokens, shortfall) VALUES `)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	}
	b.WriteString(` ON CONFLICT (request_id) DO NOTHING`)
	return b.String()
}

// prepare readies Settle's statements on w.
func (db *DB) prepare() error {
	var err error
	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&db.settle.ledger, ledgerInsert(1)},
		{&db.settle.ledgerChunk, ledgerInsert(LedgerChunk)},
		{&db.settle.room, `SELECT balance, daily_cap, monthly_cap, COALESCE(org, ''), low_balance,
			COALESCE((SELECT cost FROM spend WHERE account_id = a.id AND period = ? AND start = 0), 0),
			COALESCE((SELECT cost FROM spend WHERE account_id = a.id AND period = ? AND start = ?), 0),
			COALESCE((SELECT cost FROM spend WHERE account_id = a.id AND period = ? AND start = ?), 0)
			FROM accounts a WHERE id = ?`},
		{&db.settle.floor, `UPDATE ledger SET cost = ?, shortfall = ? WHERE request_id = ?`},
		{&db.settle.spend, `INSERT INTO spend (account_id, period, start, cost) VALUES (?, ?, 0, ?), (?, ?, ?, ?), (?, ?, ?, ?)
			ON CONFLICT (account_id, period, start) DO UPDATE SET cost = cost + excluded.cost`},
		{&db.settle.keyRoom, `SELECT daily_cap, monthly_cap, total_cap,
			COALESCE((SELECT cost FROM key_spend WHERE key_id = k.id AND period = ? AND start = 0), 0),
			COALESCE((SELECT cost FROM key_spend WHERE key_id = k.id AND period = ? AND start = ?), 0),
			COALESCE((SELECT cost FROM key_spend WHERE key_id = k.id AND period = ? AND start = ?), 0)
			FROM keys k WHERE id = ?`},
		{&db.settle.keySpend, `INSERT INTO key_spend (key_id, period, start, cost) VALUES (?, ?, 0, ?), (?, ?, ?, ?), (?, ?, ?, ?)
			ON CONFLICT (key_id, period, start) DO UPDATE SET cost = cost + excluded.cost`},
		{&db.settle.orgRoom, `SELECT daily_cap, monthly_cap,
			COALESCE((SELECT cost FROM org_spend WHERE org_id = o.id AND period = ? AND start = 0), 0),
			COALESCE((SELECT cost FROM org_spend WHERE org_id = o.id AND period = ? AND start = ?), 0),
			COALESCE((SELECT cost FROM org_spend WHERE org_id = o.id AND period = ? AND start = ?), 0)
			FROM orgs o WHERE id = ?`},
		{&db.settle.orgSpend, `INSERT INTO org_spend (org_id, period, start, cost) VALUES (?, ?, 0, ?), (?, ?, ?, ?), (?, ?, ?, ?)
			ON CONFLICT (org_id, period, start) DO UPDATE SET cost = cost + excluded.cost`},
		{&db.settle.balance, `UPDATE accounts SET balance = balance - ? WHERE id = ? AND balance IS NOT NULL RETURNING balance`},
		{&db.settle.journal, store.JournalInsert(arg)},
		{&db.settle.usage, `INSERT INTO usage_daily (account_id, day, key_id, model, requests, input_tokens, output_tokens, cost, org)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (day, account_id, key_id, model, org) DO UPDATE SET
			requests = requests + excluded.requests, input_tokens = input_tokens + excluded.input_tokens,
			output_tokens = output_tokens + excluded.output_tokens, cost = cost + excluded.cost`},
	} {
		if *p.stmt, err = db.w.Prepare(p.sql); err != nil {
			return err
		}
	}
	return nil
}

var _ store.Store = (*DB)(nil)

// Open opens (creating if needed) the database in dir, creating dir too,
// and brings its schema up to date.
func Open(dir string) (*DB, error) {
	if dir == "" {
		return nil, errors.New("sqlite: empty directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	path, err := filepath.Abs(filepath.Join(dir, FileName))
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	// The file holds key hashes and the ledger: only its owner reads it.
	// SQLite gives the -wal and -shm files the database file's mode.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, FileMode)
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	f.Close()
	if err := os.Chmod(path, FileMode); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}

	w, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	if err := migrate(w); err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}

	r, err := sql.Open("sqlite", dsn(path, true))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	n := max(4, runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	r.SetConnMaxLifetime(0)
	r.SetConnMaxIdleTime(0)
	if err := r.Ping(); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	db := &DB{w: w, r: r}
	db.shared = store.NewSQL(dialect, conn{r}, db.write)
	if err := db.prepare(); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	return db, nil
}

// dsn builds the driver's data source name for the database file at the
// absolute path. temp_store(MEMORY) keeps statement journals (a
// multi-row insert's, to undo it alone) in memory rather than in a
// temporary file written page by page. The path is escaped as a file: URI so that characters such
// as '?', '#' or '%' in it survive.
func dsn(path string, readOnly bool) string {
	u := url.URL{Scheme: "file", Path: filepath.ToSlash(path)}
	q := "_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(1)&_pragma=temp_store(MEMORY)&_txlock=immediate"
	if readOnly {
		q += "&_pragma=query_only(1)"
	}
	return u.String() + "?" + q
}

func migrate(db *sql.DB) error {
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var v int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return err
	}
	if v > schemaVersion {
		return fmt.Errorf("database schema version %d is newer than this build's %d", v, schemaVersion)
	}
	if _, err := tx.ExecContext(ctx, schema); err != nil {
		return err
	}
	if v < 2 {
		if _, err := tx.ExecContext(ctx, backfillSpend); err != nil {
			return fmt.Errorf("building spend totals: %w", err)
		}
	}
	if v < 4 {
		// Version 4: the balance journal starts with one set entry equal
		// to each prepaid balance, so it adds up from the upgrade on.
		if _, err := tx.ExecContext(ctx, `INSERT INTO journal (account_id, time, kind, amount, balance)
			SELECT id, ?, 'set', balance, balance FROM accounts WHERE balance IS NOT NULL`, time.Now().UnixNano()); err != nil {
			return fmt.Errorf("starting the journal: %w", err)
		}
	}
	if v < 3 {
		// Version 3: keys are revoked, not deleted, so a revoked secret
		// (the bootstrap key's included) is never issued again. A table
		// made by an older version lacks the column.
		var has int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_table_info('keys') WHERE name = 'revoked_at'`).Scan(&has); err != nil {
			return err
		}
		if has == 0 {
			if _, err := tx.ExecContext(ctx, `ALTER TABLE keys ADD COLUMN revoked_at INTEGER`); err != nil {
				return fmt.Errorf("adding key revocation: %w", err)
			}
		}
	}
	if v < 5 {
		// Version 5: ledger entries name their key and split their tokens,
		// and the daily usage table sums them (entries from before count
		// no key and no tokens).
		for _, col := range []string{"key_id TEXT NOT NULL DEFAULT ''", "input_tokens INTEGER NOT NULL DEFAULT 0", "output_tokens INTEGER NOT NULL DEFAULT 0"} {
			if err := addColumn(ctx, tx, "ledger", col); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, backfillUsage); err != nil {
			return fmt.Errorf("building daily usage: %w", err)
		}
	}
	if v < 6 {
		// Version 6: an entry records what the account could not pay.
		if err := addColumn(ctx, tx, "ledger", "shortfall INTEGER NOT NULL DEFAULT 0"); err != nil {
			return err
		}
	}
	if v < 7 {
		// Version 7: keys have caps, and the running totals of each key's
		// entries bound them.
		for _, col := range []string{"daily_cap INTEGER", "monthly_cap INTEGER", "total_cap INTEGER"} {
			if err := addColumn(ctx, tx, "keys", col); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, backfillKeySpend); err != nil {
			return fmt.Errorf("building key spend totals: %w", err)
		}
	}
	if v < 8 {
		// Version 8: accounts belong to organizations (none did before,
		// so org_spend starts empty).
		if err := addColumn(ctx, tx, "accounts", "org TEXT REFERENCES orgs(id)"); err != nil {
			return err
		}
		var has int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_table_info('usage_daily') WHERE name = 'org'`).Scan(&has); err != nil {
			return err
		}
		if has == 0 {
			if _, err := tx.ExecContext(ctx, rebuildUsage); err != nil {
				return fmt.Errorf("adding the daily usage's org: %w", err)
			}
		}
		if _, err := tx.ExecContext(ctx, `CREATE INDEX IF NOT EXISTS accounts_org ON accounts(org);
			CREATE INDEX IF NOT EXISTS usage_daily_org ON usage_daily(org, day)`); err != nil {
			return err
		}
	}
	if v < 9 {
		// Version 9: accounts have a low-balance mark for alerts (the
		// webhook tables are new, made by the schema above).
		if err := addColumn(ctx, tx, "accounts", "low_balance INTEGER"); err != nil {
			return err
		}
	}
	if v < 10 {
		// Version 10: keys name the MCP gateway's tools they may call
		// (every tool for the keys before).
		if err := addColumn(ctx, tx, "keys", "mcp_tools TEXT"); err != nil {
			return err
		}
	}
	if v < schemaVersion {
		if _, err := tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", schemaVersion)); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// addColumn adds col (its definition) to table unless a table made by the
// schema of this build has it already.
func addColumn(ctx context.Context, tx *sql.Tx, table, col string) error {
	name, _, _ := strings.Cut(col, " ")
	var has int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = ?`, table, name).Scan(&has); err != nil {
		return err
	}
	if has == 0 {
		if _, err := tx.ExecContext(ctx, `ALTER TABLE `+table+` ADD COLUMN `+col); err != nil {
			return fmt.Errorf("adding the %s's %s: %w", table, name, err)
		}
	}
	return nil
}

// Close closes the database.
func (db *DB) Close() error {
	return errors.Join(db.r.Close(), db.w.Close())
}

// Ping runs a trivial query.
func (db *DB) Ping(ctx context.Context) error {
	var one int
	if err := db.r.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		return fmt.Errorf("sqlite: ping: %w", err)
	}
	return nil
}

// inTx runs fn in a write transaction (BEGIN IMMEDIATE) and commits it if fn
// returns nil.
func (db *DB) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := db.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// write is inTx for the shared code: fn runs on the transaction.
func (db *DB) write(ctx context.Context, fn func(store.Conn) error) error {
	return db.inTx(ctx, func(tx *sql.Tx) error { return fn(conn{tx}) })
}

// arg is SQLite's placeholder, the same at every position.
func arg(int) string { return "?" }

// dialect is SQLite's to the shared code: a write transaction (BEGIN
// IMMEDIATE) holds the whole database, so a read takes no row lock.
var dialect = store.Dialect{Name: "sqlite", Arg: arg, Classify: classify}

// conn is a database/sql pool or transaction as the shared code's
// store.Conn.
type conn struct {
	q interface {
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
		QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
		QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	}
}

// Exec runs a statement.
func (c conn) Exec(ctx context.Context, query string, args ...any) error {
	_, err := c.q.ExecContext(ctx, query, args...)
	return err
}

// QueryRow runs a query of at most one row.
func (c conn) QueryRow(ctx context.Context, query string, args ...any) store.Row {
	return c.q.QueryRowContext(ctx, query, args...)
}

// Query runs a query; the caller closes its rows.
func (c conn) Query(ctx context.Context, query string, args ...any) (store.ClosingRows, error) {
	rows, err := c.q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return closingRows{rows}, nil
}

// closingRows are database/sql rows closed as store.ClosingRows are.
type closingRows struct{ *sql.Rows }

// Close closes the rows; what they met while read, Err reports.
func (r closingRows) Close() { r.Rows.Close() }

// Accounts

// Account returns the account; store.ErrNotFound if none.
func (db *DB) Account(ctx context.Context, id string) (store.Account, error) {
	a, err := store.ScanAccount(db.r.QueryRowContext(ctx, `SELECT `+store.AccountCols+` FROM accounts WHERE id = ?`, id))
	if err != nil {
		return store.Account{}, fmt.Errorf("sqlite: account %q: %w", id, classify(err))
	}
	return a, nil
}

// ListAccounts returns at most limit accounts whose ids sort after after,
// in the order of their ids.
func (db *DB) ListAccounts(ctx context.Context, after string, limit int) ([]store.Account, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT `+store.AccountCols+` FROM accounts WHERE id > ? ORDER BY id LIMIT ?`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list accounts: %w", err)
	}
	defer rows.Close()
	out := []store.Account{}
	for rows.Next() {
		a, err := store.ScanAccount(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list accounts: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list accounts: %w", err)
	}
	return out, nil
}

// Keys

// CreateKey stores a key; store.ErrNotFound if its account does not exist,
// store.ErrExists if its id or hash is taken. A zero CreatedAt is set to
// now.
func (db *DB) CreateKey(ctx context.Context, k store.Key) error {
	args, err := store.KeyArgs("sqlite", &k)
	if err != nil {
		return err
	}
	err = db.inTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO keys (`+store.KeyCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, args...)
		return err
	})
	if err != nil {
		return fmt.Errorf("sqlite: create key %q: %w", k.ID, classify(err))
	}
	return nil
}

// Keys lists an account's keys, oldest first. An unknown account has none.
func (db *DB) Keys(ctx context.Context, accountID string) ([]store.Key, error) {
	rows, err := db.r.QueryContext(ctx, `SELECT `+store.KeyCols+` FROM keys WHERE account_id = ? AND revoked_at IS NULL ORDER BY created_at, rowid`, accountID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: keys of %q: %w", accountID, err)
	}
	defer rows.Close()
	keys := []store.Key{}
	for rows.Next() {
		k, err := store.ScanKey(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: keys of %q: %w", accountID, err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: keys of %q: %w", accountID, err)
	}
	return keys, nil
}

// DeleteKey revokes a key for good (its secret can never be issued
// again), raising its key.revoked alert in the same transaction;
// store.ErrNotFound if none or revoked already.
func (db *DB) DeleteKey(ctx context.Context, keyID string) error {
	err := db.write(ctx, func(c store.Conn) error { return db.RevokeKey(ctx, c, keyID, time.Now()) })
	if err != nil {
		return fmt.Errorf("sqlite: delete key %q: %w", keyID, err)
	}
	return nil
}

// Ledger

// Settle records e and, in the same transaction, draws the account's
// balance down by e.Cost when it has one, charging at most what the
// account can still pay (see store.Ledger). It reports false and changes
// nothing when e.RequestID is already in the ledger; store.ErrNotFound if
// the account does not exist. A zero e.Time is set to now.
func (db *DB) Settle(ctx context.Context, e *store.Entry) (bool, error) {
	return store.SettleOne(ctx, db, e)
}

// SettleBatch settles entries in order in one transaction, so one commit
// (one fsync) makes all of them durable; charged[i] is Settle's report of
// entries[i], whose Cost and Shortfall it sets. Any entry's failure rolls
// the whole batch back.
func (db *DB) SettleBatch(ctx context.Context, entries []store.Entry) ([]bool, error) {
	charged := make([]bool, len(entries))
	if err := store.CheckEntries("sqlite", entries); err != nil {
		return nil, err
	}
	asked := slices.Clone(entries) // a rolled back try starts again from these
	err := db.inTx(ctx, func(tx *sql.Tx) error {
		return db.settleTx(ctx, tx, entries, charged, true)
	})
	if errors.Is(err, errRepeat) {
		// Rolled back: again, a ledger row at a time.
		clear(charged)
		copy(entries, asked)
		err = db.inTx(ctx, func(tx *sql.Tx) error {
			return db.settleTx(ctx, tx, entries, charged, false)
		})
	}
	if err != nil {
		copy(entries, asked)
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	return charged, nil
}

// settleGroup is the charged entries of a batch that share an account, a
// UTC day and a UTC month: their running totals move by one statement.
type settleGroup struct {
	account    string
	day, month time.Time
	entries    []*store.Entry
}

// settleTx is SettleBatch inside tx: a ledger row per entry (charged[i]
// says whether it was new), then per account, day and month one update
// of the running totals and one of the balance, and a journal row per
// charge that drew on a prepaid balance. The balance each draw left is
// worked out from the balance after the last.
func (db *DB) settleTx(ctx context.Context, tx *sql.Tx, entries []store.Entry, charged []bool, chunked bool) error {
	if err := db.insertLedger(ctx, tx, entries, charged, chunked); err != nil {
		return err
	}
	type groupKey struct {
		account    string
		day, month int64
	}
	var (
		groups []*settleGroup
		alerts store.Alerts
	)
	byKey := map[groupKey]*settleGroup{}
	for i := range entries {
		if !charged[i] {
			continue // already settled
		}
		e := &entries[i]
		day, _ := store.DayOf(e.Time)
		month, _ := store.MonthOf(e.Time)
		k := groupKey{e.AccountID, day.UnixNano(), month.UnixNano()}
		g := byKey[k]
		if g == nil {
			g = &settleGroup{account: e.AccountID, day: day, month: month}
			groups = append(groups, g)
			byKey[k] = g
		}
		g.entries = append(g.entries, e)
	}
	for _, g := range groups {
		if err := db.settleGroup(ctx, tx, g, &alerts); err != nil {
			return fmt.Errorf("settle %q: %w", g.entries[0].RequestID, err)
		}
	}
	if len(alerts.Events) == 0 {
		return nil
	}
	return db.Raise(ctx, conn{tx}, alerts.Events)
}

// errRepeat rolls back a batch whose chunked ledger insert met a request
// id the ledger has (SettleBatch then inserts a row at a time).
var errRepeat = errors.New("sqlite: a repeated request id in a chunk")

// insertLedger inserts a ledger row per entry; charged[i] says whether it
// was new. Chunked, it inserts LedgerChunk rows a statement, the rest a
// row at a time, and fails with errRepeat at the first chunk not all new
// (the cached store's own check of request ids makes all new the rule).
// Row by row, each row says whether it was new.
func (db *DB) insertLedger(ctx context.Context, tx *sql.Tx, entries []store.Entry, charged []bool, chunked bool) error {
	args := make([]any, 0, 12*LedgerChunk)
	row := func(args []any, e store.Entry) []any {
		at, _ := store.Nanos(e.Time)
		return append(args, e.RequestID, e.AccountID, e.Endpoint, e.Model, e.Units, e.Unit, int64(e.Cost), at,
			e.KeyID, e.InputTokens, e.OutputTokens, int64(e.Shortfall))
	}
	if chunked && len(entries) >= LedgerChunk {
		chunk := tx.StmtContext(ctx, db.settle.ledgerChunk)
		for len(entries) >= LedgerChunk {
			args = args[:0]
			for _, e := range entries[:LedgerChunk] {
				args = row(args, e)
			}
			res, err := chunk.ExecContext(ctx, args...)
			if err != nil {
				return errRepeat // the rows alone name which one failed
			}
			if n, err := res.RowsAffected(); err != nil || n != LedgerChunk {
				return errRepeat
			}
			for i := range LedgerChunk {
				charged[i] = true
			}
			entries, charged = entries[LedgerChunk:], charged[LedgerChunk:]
		}
	}
	one := tx.StmtContext(ctx, db.settle.ledger)
	for i, e := range entries {
		res, err := one.ExecContext(ctx, row(args[:0], e)...)
		if err != nil {
			return fmt.Errorf("settle %q: %w", e.RequestID, classify(err))
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		charged[i] = n > 0
	}
	return nil
}

// settleGroup charges one group's entries at most what the account can
// still pay (a ledger row whose charge that lowers is rewritten), moves
// its running totals and balance, journals its draws, and adds the alerts
// they raise to al.
func (db *DB) settleGroup(ctx context.Context, tx *sql.Tx, g *settleGroup, al *store.Alerts) error {
	st := func(s *sql.Stmt) *sql.Stmt { return tx.StmtContext(ctx, s) }
	var (
		acc                      store.Account
		balance, daily, mon, low sql.NullInt64
		total, today, month      int64
	)
	err := st(db.settle.room).QueryRowContext(ctx, store.PeriodTotal, store.PeriodDay, g.day.UnixNano(), store.PeriodMonth, g.month.UnixNano(), g.account).
		Scan(&balance, &daily, &mon, &acc.Org, &low, &total, &today, &month)
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	if err != nil {
		return classify(err)
	}
	acc.Balance, acc.DailyCap, acc.MonthlyCap, acc.LowBalance = moneyPtr(balance), moneyPtr(daily), moneyPtr(mon), moneyPtr(low)
	sp := store.Spend{Today: pricing.Money(today), Month: pricing.Money(month), Total: pricing.Money(total)}
	keys, err := db.keyRooms(ctx, tx, g)
	if err != nil {
		return err
	}
	org, osp, err := db.orgRoom(ctx, tx, g, acc.Org)
	if err != nil {
		return err
	}
	draws := make([]pricing.Money, len(g.entries))
	var cost, drawn pricing.Money
	for i, e := range g.entries {
		room := store.Room(&acc, sp, e.FreeMonthlyCredit, e.Limits)
		kr := keys.of(e.KeyID)
		if kr != nil && kr.capped {
			room = min(room, store.KeyRoom(&kr.key, kr.sp))
		}
		if org.HasCaps() {
			room = min(room, store.OrgRoom(&org, osp))
		}
		if e.Cost > room {
			e.Floor(room)
			if _, err := st(db.settle.floor).ExecContext(ctx, int64(e.Cost), int64(e.Shortfall), e.RequestID); err != nil {
				return err
			}
		}
		al.Charge(e, &acc, sp, kr.caps(), kr.spend(), &org, osp)
		draws[i] = sp.Charge(&acc, e.Cost, e.FreeMonthlyCredit)
		if acc.Balance != nil {
			al.Balance(g.account, e.RequestID, acc.LowBalance, *acc.Balance+draws[i], *acc.Balance, e.Time)
		}
		if kr != nil {
			kr.sp.Add(e.Cost)
			kr.cost += e.Cost
		}
		osp.Add(e.Cost)
		cost += e.Cost
		drawn += draws[i]
	}
	if err := db.addKeySpend(ctx, tx, g, keys); err != nil {
		return err
	}
	if acc.Org != "" {
		if _, err := st(db.settle.orgSpend).ExecContext(ctx,
			acc.Org, store.PeriodTotal, int64(cost),
			acc.Org, store.PeriodDay, g.day.UnixNano(), int64(cost),
			acc.Org, store.PeriodMonth, g.month.UnixNano(), int64(cost)); err != nil {
			return err
		}
	}
	if _, err := st(db.settle.spend).ExecContext(ctx,
		g.account, store.PeriodTotal, int64(cost),
		g.account, store.PeriodDay, g.day.UnixNano(), int64(cost),
		g.account, store.PeriodMonth, g.month.UnixNano(), int64(cost)); err != nil {
		return err
	}
	if err := db.addUsage(ctx, tx, g, acc.Org); err != nil {
		return err
	}
	if acc.Balance == nil {
		return nil // billed afterwards: no balance to journal
	}
	var after int64
	if err := st(db.settle.balance).QueryRowContext(ctx, int64(drawn), g.account).Scan(&after); err != nil {
		return classify(err)
	}
	// The balance before the group is the final one plus what it drew;
	// each draw's journal row records the balance it left.
	left := pricing.Money(after) + drawn
	journal := st(db.settle.journal)
	for i, e := range g.entries {
		if draws[i] <= 0 {
			continue
		}
		left -= draws[i]
		if _, err := journal.ExecContext(ctx, store.JournalArgs(g.account, store.JournalEntry{Time: e.Time, Kind: store.JournalCharge,
			Amount: -draws[i], Balance: left, RequestID: e.RequestID})...); err != nil {
			return err
		}
	}
	return nil
}

// keyRoom is a key's bounds within a settle group: its caps (capped:
// it has one), its running totals for the group's day and month with the
// group's charges so far, and what the group charged with it.
type keyRoom struct {
	id     string
	key    store.Key
	capped bool
	sp     store.Spend
	cost   pricing.Money
}

// keyRooms are a group's keys, in the order of their first entry, and by
// id.
type keyRooms struct {
	order []*keyRoom
	by    map[string]*keyRoom
}

// caps is the key with its caps; nil for no key.
func (kr *keyRoom) caps() *store.Key {
	if kr == nil {
		return nil
	}
	return &kr.key
}

// spend is the key's running totals so far; none for no key.
func (kr *keyRoom) spend() store.Spend {
	if kr == nil {
		return store.Spend{}
	}
	return kr.sp
}

// of is the keyRoom of id; nil for the empty id (no key).
func (ks *keyRooms) of(id string) *keyRoom { return ks.by[id] }

// keyRooms reads the caps and running totals of the keys a group's entries
// were made with; a key the store does not hold has no cap.
func (db *DB) keyRooms(ctx context.Context, tx *sql.Tx, g *settleGroup) (*keyRooms, error) {
	ks := &keyRooms{}
	var st *sql.Stmt
	for _, e := range g.entries {
		if e.KeyID == "" || ks.of(e.KeyID) != nil {
			continue
		}
		if ks.by == nil {
			ks.by = map[string]*keyRoom{}
		}
		if st == nil {
			st = tx.StmtContext(ctx, db.settle.keyRoom)
		}
		kr := &keyRoom{id: e.KeyID}
		var (
			daily, monthly, total sql.NullInt64
			all, today, month     int64
		)
		err := st.QueryRowContext(ctx, store.PeriodTotal, store.PeriodDay, g.day.UnixNano(), store.PeriodMonth, g.month.UnixNano(), e.KeyID).
			Scan(&daily, &monthly, &total, &all, &today, &month)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return nil, err
		default:
			kr.key.DailyCap, kr.key.MonthlyCap, kr.key.TotalCap = moneyPtr(daily), moneyPtr(monthly), moneyPtr(total)
			kr.capped = kr.key.HasCaps()
			kr.sp = store.Spend{Today: pricing.Money(today), Month: pricing.Money(month), Total: pricing.Money(all)}
		}
		ks.order = append(ks.order, kr)
		ks.by[kr.id] = kr
	}
	return ks, nil
}

// orgRoom reads the caps and running totals of the organization id (an
// account's; "" is none: no caps) for a group's day and month. The
// transaction holds the whole database, so the totals include every
// settlement of the organization's other accounts before.
func (db *DB) orgRoom(ctx context.Context, tx *sql.Tx, g *settleGroup, id string) (store.Org, store.Spend, error) {
	if id == "" {
		return store.Org{}, store.Spend{}, nil
	}
	var (
		o                 store.Org
		daily, monthly    sql.NullInt64
		all, today, month int64
	)
	err := tx.StmtContext(ctx, db.settle.orgRoom).QueryRowContext(ctx, store.PeriodTotal, store.PeriodDay, g.day.UnixNano(), store.PeriodMonth, g.month.UnixNano(), id).
		Scan(&daily, &monthly, &all, &today, &month)
	if err != nil {
		return store.Org{}, store.Spend{}, classify(err)
	}
	o.DailyCap, o.MonthlyCap = moneyPtr(daily), moneyPtr(monthly)
	return o, store.Spend{Today: pricing.Money(today), Month: pricing.Money(month), Total: pricing.Money(all)}, nil
}

// addKeySpend moves the running totals of a group's keys by what the group
// charged with each.
func (db *DB) addKeySpend(ctx context.Context, tx *sql.Tx, g *settleGroup, ks *keyRooms) error {
	if len(ks.order) == 0 {
		return nil
	}
	st := tx.StmtContext(ctx, db.settle.keySpend)
	for _, k := range ks.order {
		if _, err := st.ExecContext(ctx,
			k.id, store.PeriodTotal, int64(k.cost),
			k.id, store.PeriodDay, g.day.UnixNano(), int64(k.cost),
			k.id, store.PeriodMonth, g.month.UnixNano(), int64(k.cost)); err != nil {
			return err
		}
	}
	return nil
}

// usageKey is a row of the daily usage table within a settle group.
type usageKey struct{ key, model string }

// addUsage adds a group's entries to the daily usage table, one statement
// per key and model, in the rows of org (its account's organization).
func (db *DB) addUsage(ctx context.Context, tx *sql.Tx, g *settleGroup, org string) error {
	sums := map[usageKey]*store.UsageRow{}
	var order []usageKey
	for _, e := range g.entries {
		k := usageKey{e.KeyID, e.Model}
		r := sums[k]
		if r == nil {
			r = &store.UsageRow{}
			sums[k] = r
			order = append(order, k)
		}
		r.Requests++
		r.InputTokens += e.InputTokens
		r.OutputTokens += e.OutputTokens
		r.Cost += e.Cost
	}
	st := tx.StmtContext(ctx, db.settle.usage)
	for _, k := range order {
		r := sums[k]
		if _, err := st.ExecContext(ctx, g.account, g.day.UnixNano(), k.key, k.model, r.Requests, r.InputTokens, r.OutputTokens, int64(r.Cost), org); err != nil {
			return err
		}
	}
	return nil
}

// Entries returns an account's newest entries first, at most limit (100 when
// limit <= 0).
func (db *DB) Entries(ctx context.Context, accountID string, limit int) ([]store.Entry, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := db.r.QueryContext(ctx, `SELECT request_id, account_id, endpoint, model, units, unit, cost, time, key_id, input_tokens, output_tokens, shortfall
		FROM ledger WHERE account_id = ? ORDER BY time DESC, rowid DESC LIMIT ?`, accountID, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: entries of %q: %w", accountID, err)
	}
	defer rows.Close()
	entries := []store.Entry{}
	for rows.Next() {
		var (
			e                   store.Entry
			cost, at, shortfall int64
		)
		if err := rows.Scan(&e.RequestID, &e.AccountID, &e.Endpoint, &e.Model, &e.Units, &e.Unit, &cost, &at,
			&e.KeyID, &e.InputTokens, &e.OutputTokens, &shortfall); err != nil {
			return nil, fmt.Errorf("sqlite: entries of %q: %w", accountID, err)
		}
		e.Cost, e.Time, e.Shortfall = pricing.Money(cost), store.FromNanos(at), pricing.Money(shortfall)
		entries = append(entries, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: entries of %q: %w", accountID, err)
	}
	return entries, nil
}

// Journal returns an account's balance movements, newest first, at most
// limit (100 when limit <= 0).
func (db *DB) Journal(ctx context.Context, accountID string, limit int) ([]store.JournalEntry, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := db.r.QueryContext(ctx, `SELECT time, kind, amount, balance, request_id, reason FROM journal
		WHERE account_id = ? ORDER BY seq DESC LIMIT ?`, accountID, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: journal of %q: %w", accountID, err)
	}
	defer rows.Close()
	out := []store.JournalEntry{}
	for rows.Next() {
		var (
			e                   store.JournalEntry
			at, amount, balance int64
		)
		if err := rows.Scan(&at, &e.Kind, &amount, &balance, &e.RequestID, &e.Reason); err != nil {
			return nil, fmt.Errorf("sqlite: journal of %q: %w", accountID, err)
		}
		e.Time, e.Amount, e.Balance = store.FromNanos(at), pricing.Money(amount), pricing.Money(balance)
		out = append(out, e)
	}
	return out, rows.Err()
}

// CheckJournal verifies every account's journal against its balance and
// the ledger.
func (db *DB) CheckJournal(ctx context.Context) ([]store.JournalProblem, error) {
	rows, err := db.r.QueryContext(ctx, checkJournalSQL)
	if err != nil {
		return nil, fmt.Errorf("sqlite: check journal: %w", err)
	}
	defer rows.Close()
	return store.ScanJournalCheck(rows)
}

// checkJournalSQL lists, per account, its balance, the sum of its journal,
// the balance its newest entry records, and its charges without a ledger
// entry (comma-separated).
const checkJournalSQL = `
SELECT a.id, COALESCE(a.balance, 0),
	COALESCE((SELECT SUM(amount) FROM journal j WHERE j.account_id = a.id), 0),
	COALESCE((SELECT balance FROM journal j WHERE j.account_id = a.id ORDER BY seq DESC LIMIT 1), 0),
	COALESCE((SELECT GROUP_CONCAT(j.request_id, ',') FROM journal j LEFT JOIN ledger l ON l.request_id = j.request_id
		WHERE j.account_id = a.id AND j.kind = 'charge' AND l.request_id IS NULL), '')
FROM accounts a ORDER BY a.id`

// Helpers

// classify maps "no rows" and constraint violations to the store's errors.
func classify(err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return store.ErrNotFound
	}
	var se *msqlite.Error
	if errors.As(err, &se) {
		switch se.Code() {
		case sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY, sqlite3.SQLITE_CONSTRAINT_UNIQUE:
			return fmt.Errorf("%w (%v)", store.ErrExists, err)
		case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
			return fmt.Errorf("account %w (%v)", store.ErrNotFound, err)
		}
	}
	return err
}

// moneyPtr reads a money column without allocating for NULL; NULL is nil.
func moneyPtr(n sql.NullInt64) *pricing.Money {
	if !n.Valid {
		return nil
	}
	m := pricing.Money(n.Int64)
	return &m
}

// Package postgres is the store.Store backend for several gateway nodes:
// accounts, keys, the ledger and its running spend totals in PostgreSQL,
// through a pgx connection pool.
//
// The schema is the embedded store's, in PostgreSQL types: money as BIGINT
// nano-dollars (pricing.Money), times as BIGINT Unix nanoseconds in UTC,
// string lists as JSON text with NULL meaning "all". Versioned migrations
// run at Open inside one transaction holding an advisory lock, so several
// nodes starting at once apply each migration exactly once.
//
// Every money write (Settle) first locks the account's row, so the
// settlements of one account are serialised across all nodes while other
// accounts proceed in parallel; the ledger's request id is the primary key,
// so a request is charged once whichever node settles it.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// migrationLock is the advisory lock key migrations hold ("gw" schema).
const migrationLock = 0x67770001

// migrations are applied in order; schema_migrations records each version.
var migrations = []string{
	1: `
CREATE TABLE accounts (
	id           TEXT    PRIMARY KEY,
	plan         TEXT    NOT NULL,
	cleared      BOOLEAN NOT NULL DEFAULT false,
	payg         BOOLEAN NOT NULL DEFAULT false,
	lane_billing BOOLEAN NOT NULL DEFAULT false,
	balance      BIGINT,           -- nano-dollars; NULL: billed afterwards
	daily_cap    BIGINT,
	monthly_cap  BIGINT,
	abilities    TEXT,             -- JSON array; NULL: all
	created_at   BIGINT  NOT NULL  -- Unix nanoseconds, UTC
);
CREATE TABLE keys (
	seq        BIGSERIAL,
	id         TEXT   PRIMARY KEY,
	account_id TEXT   NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
	name       TEXT   NOT NULL DEFAULT '',
	hash       TEXT   NOT NULL UNIQUE,
	models     TEXT,
	expires_at BIGINT,
	created_at BIGINT NOT NULL
);
CREATE INDEX keys_account ON keys(account_id, created_at, seq);
CREATE TABLE ledger (
	seq        BIGSERIAL,
	request_id TEXT   PRIMARY KEY,
	account_id TEXT   NOT NULL REFERENCES accounts(id),
	endpoint   TEXT   NOT NULL DEFAULT '',
	model      TEXT   NOT NULL DEFAULT '',
	units      BIGINT NOT NULL DEFAULT 0,
	unit       TEXT   NOT NULL DEFAULT '',
	cost       BIGINT NOT NULL,
	time       BIGINT NOT NULL
);
CREATE INDEX ledger_account_time ON ledger(account_id, time, seq);
CREATE TABLE spend (
	account_id TEXT     NOT NULL,
	period     SMALLINT NOT NULL,
	start      BIGINT   NOT NULL,
	cost       BIGINT   NOT NULL,
	PRIMARY KEY (account_id, period, start)
);`,
	2: `ALTER TABLE keys ADD COLUMN revoked_at BIGINT;`,
	3: `
CREATE TABLE journal (
	seq        BIGSERIAL PRIMARY KEY,
	account_id TEXT   NOT NULL,
	time       BIGINT NOT NULL,
	kind       TEXT   NOT NULL,
	amount     BIGINT NOT NULL,
	balance    BIGINT NOT NULL,
	request_id TEXT   NOT NULL DEFAULT '',
	reason     TEXT   NOT NULL DEFAULT ''
);
CREATE INDEX journal_account ON journal(account_id, seq);
INSERT INTO journal (account_id, time, kind, amount, balance)
	SELECT id, (EXTRACT(EPOCH FROM now()) * 1000000000)::BIGINT, 'set', balance, balance FROM accounts WHERE balance IS NOT NULL;`,
	4: `
CREATE TABLE app_links (
	seq        BIGSERIAL,
	account_id TEXT NOT NULL,
	app        TEXT NOT NULL,
	alias      TEXT NOT NULL,
	PRIMARY KEY (account_id, app, alias)
);`,
	// Ledger entries name their key and split their tokens; usage_daily
	// sums the ledger per UTC day (its first instant in Unix
	// nanoseconds), account, key and model, kept by Settle in the same
	// transaction as the entry. Entries from before count no key and no
	// tokens.
	5: `
ALTER TABLE ledger ADD COLUMN key_id TEXT NOT NULL DEFAULT '',
	ADD COLUMN input_tokens BIGINT NOT NULL DEFAULT 0,
	ADD COLUMN output_tokens BIGINT NOT NULL DEFAULT 0;
CREATE TABLE usage_daily (
	account_id    TEXT   NOT NULL,
	day           BIGINT NOT NULL,
	key_id        TEXT   NOT NULL,
	model         TEXT   NOT NULL,
	requests      BIGINT NOT NULL,
	input_tokens  BIGINT NOT NULL,
	output_tokens BIGINT NOT NULL,
	cost          BIGINT NOT NULL,
	PRIMARY KEY (day, account_id, key_id, model)
);
CREATE INDEX usage_daily_account ON usage_daily(account_id, day);
INSERT INTO usage_daily (account_id, day, key_id, model, requests, input_tokens, output_tokens, cost)
	SELECT account_id, time - time % 86400000000000, key_id, model, COUNT(*), SUM(input_tokens), SUM(output_tokens), SUM(cost)
	FROM ledger GROUP BY 1, 2, 3, 4;`,
	// Version 6: an entry records what the account could not pay
	// (nano-dollars).
	6: `ALTER TABLE ledger ADD COLUMN shortfall BIGINT NOT NULL DEFAULT 0;`,
	// Version 7: keys have caps (nano-dollars; NULL: none), and key_spend
	// keeps the running totals of each key's entries as spend does an
	// account's.
	7: `
ALTER TABLE keys ADD COLUMN daily_cap BIGINT,
	ADD COLUMN monthly_cap BIGINT,
	ADD COLUMN total_cap BIGINT;
CREATE TABLE key_spend (
	key_id TEXT     NOT NULL,
	period SMALLINT NOT NULL,
	start  BIGINT   NOT NULL,
	cost   BIGINT   NOT NULL,
	PRIMARY KEY (key_id, period, start)
);
INSERT INTO key_spend (key_id, period, start, cost)
	SELECT key_id, 0, 0, SUM(cost) FROM ledger WHERE key_id <> '' GROUP BY key_id;
INSERT INTO key_spend (key_id, period, start, cost)
	SELECT key_id, 1, time - time % 86400000000000, SUM(cost) FROM ledger WHERE key_id <> '' GROUP BY 1, 2, 3;
INSERT INTO key_spend (key_id, period, start, cost)
	SELECT key_id, 2, (EXTRACT(EPOCH FROM date_trunc('month', to_timestamp(time / 1000000000) AT TIME ZONE 'UTC')) * 1000000000)::BIGINT, SUM(cost)
	FROM ledger WHERE key_id <> '' GROUP BY 1, 2, 3;`,
	// Version 8: accounts belong to organizations, whose caps org_spend's
	// running totals bound (no account belonged to one before, so it
	// starts empty), and usage_daily's rows name the organization ('':
	// none).
	8: `
CREATE TABLE orgs (
	id          TEXT   PRIMARY KEY,
	name        TEXT   NOT NULL DEFAULT '',
	daily_cap   BIGINT,
	monthly_cap BIGINT,
	created_at  BIGINT NOT NULL
);
ALTER TABLE accounts ADD COLUMN org TEXT REFERENCES orgs(id);
CREATE INDEX accounts_org ON accounts(org);
CREATE TABLE org_spend (
	org_id TEXT     NOT NULL,
	period SMALLINT NOT NULL,
	start  BIGINT   NOT NULL,
	cost   BIGINT   NOT NULL,
	PRIMARY KEY (org_id, period, start)
);
ALTER TABLE usage_daily ADD COLUMN org TEXT NOT NULL DEFAULT '';
ALTER TABLE usage_daily DROP CONSTRAINT usage_daily_pkey;
ALTER TABLE usage_daily ADD PRIMARY KEY (day, account_id, key_id, model, org);
CREATE INDEX usage_daily_org ON usage_daily(org, day);`,
	// Version 9: accounts have a low-balance mark, and alert
	// subscriptions an outbox of their events (a row per event and
	// webhook, written in the transaction that raised the event, kept once
	// delivered as the webhook's delivery log).
	9: `
ALTER TABLE accounts ADD COLUMN low_balance BIGINT;
CREATE TABLE webhooks (
	id         TEXT   PRIMARY KEY,
	url        TEXT   NOT NULL,
	secret     TEXT   NOT NULL,
	events     TEXT   NOT NULL,
	created_at BIGINT NOT NULL
);
CREATE TABLE webhook_outbox (
	seq          BIGSERIAL PRIMARY KEY,
	webhook_id   TEXT     NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
	event_id     TEXT     NOT NULL,
	type         TEXT     NOT NULL,
	account_id   TEXT     NOT NULL,
	body         TEXT     NOT NULL,
	created_at   BIGINT   NOT NULL,
	next_at      BIGINT   NOT NULL,
	attempts     INTEGER  NOT NULL DEFAULT 0,
	delivered_at BIGINT,
	last_status  INTEGER  NOT NULL DEFAULT 0,
	last_error   TEXT     NOT NULL DEFAULT '',
	UNIQUE (webhook_id, event_id)
);
CREATE INDEX webhook_outbox_pending ON webhook_outbox(webhook_id, account_id, seq) WHERE delivered_at IS NULL;
CREATE INDEX webhook_outbox_due ON webhook_outbox(next_at) WHERE delivered_at IS NULL;`,
	// Version 10: keys name the MCP gateway's tools they may call (a JSON
	// array of globs; NULL, as for the keys before: every tool).
	10: `ALTER TABLE keys ADD COLUMN mcp_tools TEXT;`,
}

// DB is the PostgreSQL store. It is safe for concurrent use by any number
// of nodes.
type DB struct {
	pool *pgxpool.Pool
	// shared is CreateAccount, UpdateAccount, KeyByHash, KeyIssued, Spend
	// and Usage, written once for both SQL backends.
	*shared
}

// shared is the code both SQL backends share, embedded unexported.
type shared = store.SQL

var _ store.Store = (*DB)(nil)

// Open connects to url (postgres://...) and brings the schema up to date.
func Open(ctx context.Context, url string) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// The URL may hold a password: never repeat it.
		return nil, errors.New("postgres: the database URL could not be parsed")
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("postgres: migrate: %w", err)
	}
	db := &DB{pool: pool}
	db.shared = store.NewSQL(dialect, conn{pool}, db.write)
	return db, nil
}

// write runs fn in a transaction, committed when fn returns nil.
func (db *DB) write(ctx context.Context, fn func(store.Conn) error) error {
	return pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error { return fn(conn{tx}) })
}

// dialect is PostgreSQL's to the shared code: numbered placeholders, and
// an account's row locked while it is updated.
var dialect = store.Dialect{Name: "postgres", Arg: func(i int) string { return "$" + strconv.Itoa(i) },
	ForUpdate: " FOR UPDATE", Classify: classify}

// conn is a pool or transaction as the shared code's store.Conn (pgx rows
// are store.ClosingRows as they are).
type conn struct {
	q interface {
		Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
		QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
		Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	}
}

// Exec runs a statement.
func (c conn) Exec(ctx context.Context, query string, args ...any) error {
	_, err := c.q.Exec(ctx, query, args...)
	return err
}

// QueryRow runs a query of at most one row.
func (c conn) QueryRow(ctx context.Context, query string, args ...any) store.Row {
	return c.q.QueryRow(ctx, query, args...)
}

// Query runs a query; the caller closes its rows.
func (c conn) Query(ctx context.Context, query string, args ...any) (store.ClosingRows, error) {
	return c.q.Query(ctx, query, args...)
}

func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())`); err != nil {
			return err
		}
		var v int
		if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v); err != nil {
			return err
		}
		if latest := len(migrations) - 1; v > latest {
			return fmt.Errorf("database schema version %d is newer than this build's %d", v, latest)
		}
		for next := v + 1; next < len(migrations); next++ {
			if _, err := tx.Exec(ctx, migrations[next]); err != nil {
				return fmt.Errorf("version %d: %w", next, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, next); err != nil {
				return err
			}
		}
		return nil
	})
}

// linksLock is the class of the advisory locks that make adding an
// account's app link and counting its links one step.
const linksLock = 0x67770002

// AddLink records an account's link to an app under alias; false when that
// link exists, store.ErrTooMany when the account holds most links already
// (the tools server's connected apps). Nodes adding links to one account
// at once take turns, so it never holds more than most.
func (db *DB) AddLink(ctx context.Context, account, app, alias string, most int) (bool, error) {
	var added bool
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, int32(linksLock), account); err != nil {
			return err
		}
		var exists bool
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*), coalesce(bool_or(app = $2 AND alias = $3), false) FROM app_links WHERE account_id = $1`,
			account, app, alias).Scan(&n, &exists); err != nil {
			return err
		}
		if exists {
			return nil
		}
		if n >= most {
			return store.ErrTooMany
		}
		added = true
		_, err := tx.Exec(ctx, `INSERT INTO app_links (account_id, app, alias) VALUES ($1, $2, $3)`, account, app, alias)
		return err
	})
	if errors.Is(err, store.ErrTooMany) {
		return false, err
	}
	if err != nil {
		return false, fmt.Errorf("postgres: add link: %w", err)
	}
	return added, nil
}

// Links lists an account's app links (app, alias), in the order made.
func (db *DB) Links(ctx context.Context, account string) ([][2]string, error) {
	rows, err := db.pool.Query(ctx, `SELECT app, alias FROM app_links WHERE account_id = $1 ORDER BY seq`, account)
	if err != nil {
		return nil, fmt.Errorf("postgres: links: %w", err)
	}
	defer rows.Close()
	var out [][2]string
	for rows.Next() {
		var l [2]string
		if err := rows.Scan(&l[0], &l[1]); err != nil {
			return nil, fmt.Errorf("postgres: links: %w", err)
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// Close closes the pool.
func (db *DB) Close() error { db.pool.Close(); return nil }

// Ping checks that the database answers.
func (db *DB) Ping(ctx context.Context) error {
	if err := db.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres: ping: %w", err)
	}
	return nil
}

// Account returns the account; store.ErrNotFound if none.
func (db *DB) Account(ctx context.Context, id string) (store.Account, error) {
	a, err := store.ScanAccount(db.pool.QueryRow(ctx, `SELECT `+store.AccountCols+` FROM accounts WHERE id = $1`, id))
	if err != nil {
		return store.Account{}, fmt.Errorf("postgres: account %q: %w", id, classify(err))
	}
	return a, nil
}

// ListAccounts returns at most limit accounts whose ids sort after after
// (byte by byte, as the embedded store sorts them), in that order.
func (db *DB) ListAccounts(ctx context.Context, after string, limit int) ([]store.Account, error) {
	rows, err := db.pool.Query(ctx, `SELECT `+store.AccountCols+` FROM accounts WHERE id > $1 COLLATE "C" ORDER BY id COLLATE "C" LIMIT $2`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: list accounts: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Account, error) { return store.ScanAccount(r) })
	if err != nil {
		return nil, fmt.Errorf("postgres: list accounts: %w", err)
	}
	if out == nil {
		out = []store.Account{}
	}
	return out, nil
}

// CreateKey stores a key; store.ErrNotFound if its account does not exist,
// store.ErrExists if its id or hash is taken.
func (db *DB) CreateKey(ctx context.Context, k store.Key) error {
	args, err := store.KeyArgs("postgres", &k)
	if err != nil {
		return err
	}
	if _, err := db.pool.Exec(ctx, `INSERT INTO keys (`+store.KeyCols+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`, args...); err != nil {
		return fmt.Errorf("postgres: create key %q: %w", k.ID, classify(err))
	}
	return nil
}

// Keys lists an account's keys, oldest first.
func (db *DB) Keys(ctx context.Context, accountID string) ([]store.Key, error) {
	rows, err := db.pool.Query(ctx, `SELECT `+store.KeyCols+` FROM keys WHERE account_id = $1 AND revoked_at IS NULL ORDER BY created_at, seq`, accountID)
	if err != nil {
		return nil, fmt.Errorf("postgres: keys of %q: %w", accountID, err)
	}
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Key, error) { return store.ScanKey(r) })
	if err != nil {
		return nil, fmt.Errorf("postgres: keys of %q: %w", accountID, err)
	}
	if keys == nil {
		keys = []store.Key{}
	}
	return keys, nil
}

// DeleteKey revokes a key for good, raising its key.revoked alert in the
// same transaction; store.ErrNotFound if none or revoked already. The
// key's account is locked first, so its alerts keep the order of the
// account's settlements.
func (db *DB) DeleteKey(ctx context.Context, keyID string) error {
	err := db.write(ctx, func(c store.Conn) error {
		var one int
		err := c.QueryRow(ctx, `SELECT 1 FROM accounts WHERE id = (SELECT account_id FROM keys WHERE id = $1) FOR UPDATE`, keyID).Scan(&one)
		if err != nil {
			return classify(err)
		}
		return db.RevokeKey(ctx, c, keyID, time.Now())
	})
	if err != nil {
		return fmt.Errorf("postgres: delete key %q: %w", keyID, err)
	}
	return nil
}

// Settle records e and, in the same transaction, draws a prepaid balance
// down by the part of e.Cost the free monthly credit does not cover,
// charging at most what the account can still pay (see store.Ledger). The
// account's row is locked first, so one account's settlements are
// serialised across nodes. It reports false (and changes nothing) when
// e.RequestID is in the ledger already.
func (db *DB) Settle(ctx context.Context, e *store.Entry) (bool, error) {
	return store.SettleOne(ctx, db, e)
}

// SettleBatch settles entries in one transaction (one commit for all);
// charged[i] is Settle's report of entries[i], whose Cost and Shortfall
// it sets. Accounts are locked in the order of their ids, so two nodes'
// batches never wait on each other in a circle; one account's entries
// keep their order.
func (db *DB) SettleBatch(ctx context.Context, entries []store.Entry) ([]bool, error) {
	if err := store.CheckEntries("postgres", entries); err != nil {
		return nil, err
	}
	charged := make([]bool, len(entries))
	asked := slices.Clone(entries)
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		order, err := lockOrder(ctx, tx, entries)
		if err != nil {
			return err
		}
		for _, i := range order {
			ok, err := db.settleTx(ctx, tx, &entries[i])
			if err != nil {
				return fmt.Errorf("settle %q: %w", entries[i].RequestID, err)
			}
			charged[i] = ok
		}
		return nil
	})
	if err != nil {
		copy(entries, asked)
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return charged, nil
}

// lockOrder is the order in which a batch settles its entries: by the
// organization of their account ("" for none first), then by account, one
// account's entries in their order. Every transaction takes its locks in
// that order (an organization's before its accounts'), so two nodes'
// batches never wait on each other in a circle. A batch of one account
// asks nothing.
func lockOrder(ctx context.Context, tx pgx.Tx, entries []store.Entry) ([]int, error) {
	order := make([]int, len(entries))
	ids := make([]string, 0, 1)
	for i := range entries {
		order[i] = i
		if !slices.Contains(ids, entries[i].AccountID) {
			ids = append(ids, entries[i].AccountID)
		}
	}
	orgs := map[string]string{}
	if len(ids) > 1 {
		rows, err := tx.Query(ctx, `SELECT id, COALESCE(org, '') FROM accounts WHERE id = ANY($1)`, ids)
		if err != nil {
			return nil, err
		}
		var id, org string
		if _, err := pgx.ForEachRow(rows, []any{&id, &org}, func() error { orgs[id] = org; return nil }); err != nil {
			return nil, err
		}
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ea, eb := &entries[a], &entries[b]
		if c := strings.Compare(orgs[ea.AccountID], orgs[eb.AccountID]); c != 0 {
			return c
		}
		return strings.Compare(ea.AccountID, eb.AccountID)
	})
	return order, nil
}

// lockOrg locks the row of the organization an account belongs to (FOR
// NO KEY UPDATE: an account joining it meanwhile, whose foreign key
// shares the row, does not wait), answering its id; it finds no row for
// an account of none.
const lockOrg = `SELECT id FROM orgs WHERE id = (SELECT org FROM accounts WHERE id = $1) FOR NO KEY UPDATE`

// lockOrgByID is lockOrg of an organization named by its id.
const lockOrgByID = `SELECT id FROM orgs WHERE id = $1 FOR NO KEY UPDATE`

// lockAccount locks an account's row; it finds no row for an unknown
// account.
const lockAccount = `SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE`

// readRoom reads, after lockAccount, what bounds an entry: the account's
// balance and caps, its running totals, and the caps and running totals
// of the entry's key (NULL caps when it has none or no key).
const readRoom = `SELECT a.balance, a.daily_cap, a.monthly_cap,
	COALESCE((SELECT cost FROM spend WHERE account_id = a.id AND period = $2 AND start = 0), 0),
	COALESCE((SELECT cost FROM spend WHERE account_id = a.id AND period = $3 AND start = $4), 0),
	COALESCE((SELECT cost FROM spend WHERE account_id = a.id AND period = $5 AND start = $6), 0),
	k.daily_cap, k.monthly_cap, k.total_cap,
	COALESCE((SELECT cost FROM key_spend WHERE key_id = k.id AND period = $2 AND start = 0), 0),
	COALESCE((SELECT cost FROM key_spend WHERE key_id = k.id AND period = $3 AND start = $4), 0),
	COALESCE((SELECT cost FROM key_spend WHERE key_id = k.id AND period = $5 AND start = $6), 0),
	COALESCE(a.org, ''), o.daily_cap, o.monthly_cap,
	COALESCE((SELECT cost FROM org_spend WHERE org_id = o.id AND period = $3 AND start = $4), 0),
	COALESCE((SELECT cost FROM org_spend WHERE org_id = o.id AND period = $5 AND start = $6), 0),
	a.low_balance
	FROM accounts a LEFT JOIN keys k ON k.id = $7 LEFT JOIN orgs o ON o.id = a.org WHERE a.id = $1`

// settleTx is one entry of SettleBatch inside tx: the row of the
// account's organization is locked, then the account's, then the account,
// its organization and the entry's key are read with their running
// totals, and the entry charged at most what they leave. The read is a
// statement of its own after the locks (all sent at once), so it sees
// every settlement committed while the locks were awaited: a statement
// that locked and read at once would read the totals as they were when it
// began. A key's charges are its account's, so the account's lock keeps
// the key's totals too; the organization's lock keeps the totals its
// accounts share. When the account changed organization between the two
// locks, the one it is in now is locked and the read made again.
func (db *DB) settleTx(ctx context.Context, tx pgx.Tx, e *store.Entry) (bool, error) {
	at, _ := store.Nanos(e.Time)
	day, _ := store.DayOf(e.Time)
	month, _ := store.MonthOf(e.Time)
	b := &pgx.Batch{}
	b.Queue(lockOrg, e.AccountID)
	b.Queue(lockAccount, e.AccountID)
	b.Queue(readRoom, e.AccountID, store.PeriodTotal, store.PeriodDay, day.UnixNano(), store.PeriodMonth, month.UnixNano(), e.KeyID)
	br := tx.SendBatch(ctx, b)
	var locked string
	err := br.QueryRow().Scan(&locked)
	if errors.Is(err, pgx.ErrNoRows) {
		err = nil // an account of no organization
	}
	var one int
	if err == nil {
		err = br.QueryRow().Scan(&one)
	}
	var r room
	if err == nil {
		r, err = scanRoom(br.QueryRow())
	}
	if err = errors.Join(err, br.Close()); err != nil {
		return false, classify(err)
	}
	if r.org != "" && r.org != locked {
		b := &pgx.Batch{}
		b.Queue(lockOrgByID, r.org)
		b.Queue(readRoom, e.AccountID, store.PeriodTotal, store.PeriodDay, day.UnixNano(), store.PeriodMonth, month.UnixNano(), e.KeyID)
		br := tx.SendBatch(ctx, b)
		err := br.QueryRow().Scan(&locked)
		if err == nil {
			r, err = scanRoom(br.QueryRow())
		}
		if err = errors.Join(err, br.Close()); err != nil {
			return false, classify(err)
		}
	}
	acc, sp := r.acc, r.sp
	settled := *e
	settled.Floor(min(store.Room(&acc, sp, e.FreeMonthlyCredit, e.Limits), store.KeyRoom(&r.key, r.ksp), store.OrgRoom(&r.orgCaps, r.osp)))
	tag, err := tx.Exec(ctx, `INSERT INTO ledger (request_id, account_id, endpoint, model, units, unit, cost, time, key_id, input_tokens, output_tokens, shortfall)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) ON CONFLICT (request_id) DO NOTHING`,
		e.RequestID, e.AccountID, e.Endpoint, e.Model, e.Units, e.Unit, int64(settled.Cost), at, e.KeyID, e.InputTokens, e.OutputTokens, int64(settled.Shortfall))
	if err != nil {
		return false, classify(err)
	}
	if tag.RowsAffected() == 0 {
		return false, nil // already settled
	}
	*e = settled
	var alerts store.Alerts
	alerts.Charge(e, &acc, sp, &r.key, r.ksp, &r.orgCaps, r.osp)
	draw := sp.Charge(&acc, e.Cost, e.FreeMonthlyCredit)
	// The running totals (the account's, the key's and the organization's) and the day's usage
	// row, in one round trip.
	if _, err := tx.Exec(ctx, `WITH s AS (INSERT INTO spend (account_id, period, start, cost) VALUES ($1, $2, 0, $3), ($1, $4, $5, $3), ($1, $6, $7, $3)
		ON CONFLICT (account_id, period, start) DO UPDATE SET cost = spend.cost + excluded.cost),
		k AS (INSERT INTO key_spend (key_id, period, start, cost)
		SELECT $8, p.period, p.start, $3 FROM (VALUES ($2::SMALLINT, 0::BIGINT), ($4::SMALLINT, $5::BIGINT), ($6::SMALLINT, $7::BIGINT)) p (period, start) WHERE $8 <> ''
		ON CONFLICT (key_id, period, start) DO UPDATE SET cost = key_spend.cost + excluded.cost),
		o AS (INSERT INTO org_spend (org_id, period, start, cost)
		SELECT $12, p.period, p.start, $3 FROM (VALUES ($2::SMALLINT, 0::BIGINT), ($4::SMALLINT, $5::BIGINT), ($6::SMALLINT, $7::BIGINT)) p (period, start) WHERE $12 <> ''
		ON CONFLICT (org_id, period, start) DO UPDATE SET cost = org_spend.cost + excluded.cost)
		INSERT INTO usage_daily (account_id, day, key_id, model, requests, input_tokens, output_tokens, cost, org) VALUES ($1, $5, $8, $9, 1, $10, $11, $3, $12)
		ON CONFLICT (day, account_id, key_id, model, org) DO UPDATE SET requests = usage_daily.requests + 1,
		input_tokens = usage_daily.input_tokens + excluded.input_tokens, output_tokens = usage_daily.output_tokens + excluded.output_tokens,
		cost = usage_daily.cost + excluded.cost`,
		e.AccountID, store.PeriodTotal, int64(e.Cost), store.PeriodDay, day.UnixNano(), store.PeriodMonth, month.UnixNano(),
		e.KeyID, e.Model, e.InputTokens, e.OutputTokens, r.org); err != nil {
		return false, err
	}
	if acc.Balance != nil {
		var after int64
		if err := tx.QueryRow(ctx, `UPDATE accounts SET balance = balance - $1 WHERE id = $2 RETURNING balance`,
			int64(draw), e.AccountID).Scan(&after); err != nil {
			return false, err
		}
		if draw > 0 {
			if err := journal(ctx, tx, e.AccountID, store.JournalEntry{Time: e.Time, Kind: store.JournalCharge, Amount: -draw,
				Balance: pricing.Money(after), RequestID: e.RequestID}); err != nil {
				return false, err
			}
			alerts.Balance(e.AccountID, e.RequestID, acc.LowBalance, pricing.Money(after)+draw, pricing.Money(after), e.Time)
		}
	}
	if len(alerts.Events) > 0 {
		if err := db.Raise(ctx, conn{tx}, alerts.Events); err != nil {
			return false, err
		}
	}
	return true, nil
}

// room is what readRoom reads: the account and its running totals, the
// caps and totals of the entry's key, and the organization the account
// belongs to ("" for none) with its caps and totals.
type room struct {
	acc     store.Account
	sp      store.Spend
	key     store.Key
	ksp     store.Spend
	org     string
	orgCaps store.Org
	osp     store.Spend
}

// scanRoom reads readRoom's row.
func scanRoom(row pgx.Row) (room, error) {
	var (
		r                        room
		balance, daily, mon      *int64
		kDaily, kMonthly, kTotal *int64
		oDaily, oMonthly, low    *int64
		total, today, spent      int64
		kAll, kToday, kMonth     int64
		oToday, oMonth           int64
	)
	if err := row.Scan(&balance, &daily, &mon, &total, &today, &spent, &kDaily, &kMonthly, &kTotal, &kAll, &kToday, &kMonth,
		&r.org, &oDaily, &oMonthly, &oToday, &oMonth, &low); err != nil {
		return room{}, err
	}
	r.acc.Org, r.acc.LowBalance = r.org, store.MoneyOf(low)
	r.acc.Balance, r.acc.DailyCap, r.acc.MonthlyCap = store.MoneyOf(balance), store.MoneyOf(daily), store.MoneyOf(mon)
	r.key.DailyCap, r.key.MonthlyCap, r.key.TotalCap = store.MoneyOf(kDaily), store.MoneyOf(kMonthly), store.MoneyOf(kTotal)
	r.orgCaps.DailyCap, r.orgCaps.MonthlyCap = store.MoneyOf(oDaily), store.MoneyOf(oMonthly)
	r.sp = store.Spend{Today: pricing.Money(today), Month: pricing.Money(spent), Total: pricing.Money(total)}
	r.ksp = store.Spend{Today: pricing.Money(kToday), Month: pricing.Money(kMonth), Total: pricing.Money(kAll)}
	r.osp = store.Spend{Today: pricing.Money(oToday), Month: pricing.Money(oMonth)}
	return r, nil
}

// Entries returns an account's newest entries first, at most limit (100
// when limit <= 0).
func (db *DB) Entries(ctx context.Context, accountID string, limit int) ([]store.Entry, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := db.pool.Query(ctx, `SELECT request_id, account_id, endpoint, model, units, unit, cost, time, key_id, input_tokens, output_tokens, shortfall
		FROM ledger WHERE account_id = $1 ORDER BY time DESC, seq DESC LIMIT $2`, accountID, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: entries of %q: %w", accountID, err)
	}
	entries, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Entry, error) {
		var (
			e                   store.Entry
			cost, at, shortfall int64
		)
		err := r.Scan(&e.RequestID, &e.AccountID, &e.Endpoint, &e.Model, &e.Units, &e.Unit, &cost, &at, &e.KeyID, &e.InputTokens, &e.OutputTokens, &shortfall)
		e.Cost, e.Time, e.Shortfall = pricing.Money(cost), store.FromNanos(at), pricing.Money(shortfall)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: entries of %q: %w", accountID, err)
	}
	if entries == nil {
		entries = []store.Entry{}
	}
	return entries, nil
}

// journalInsert writes a journal row from store.JournalArgs.
var journalInsert = store.JournalInsert(dialect.Arg)

// journal writes one balance movement inside tx.
func journal(ctx context.Context, tx pgx.Tx, account string, e store.JournalEntry) error {
	_, err := tx.Exec(ctx, journalInsert, store.JournalArgs(account, e)...)
	return err
}

// Journal returns an account's balance movements, newest first, at most
// limit (100 when limit <= 0).
func (db *DB) Journal(ctx context.Context, accountID string, limit int) ([]store.JournalEntry, error) {
	if limit <= 0 {
		limit = 100
	}
	rows, err := db.pool.Query(ctx, `SELECT time, kind, amount, balance, request_id, reason FROM journal
		WHERE account_id = $1 ORDER BY seq DESC LIMIT $2`, accountID, limit)
	if err != nil {
		return nil, fmt.Errorf("postgres: journal of %q: %w", accountID, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.JournalEntry, error) {
		var (
			e                   store.JournalEntry
			at, amount, balance int64
		)
		err := r.Scan(&at, &e.Kind, &amount, &balance, &e.RequestID, &e.Reason)
		e.Time, e.Amount, e.Balance = store.FromNanos(at), pricing.Money(amount), pricing.Money(balance)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: journal of %q: %w", accountID, err)
	}
	if out == nil {
		out = []store.JournalEntry{}
	}
	return out, nil
}

// CheckJournal verifies every account's journal against its balance and
// the ledger.
func (db *DB) CheckJournal(ctx context.Context) ([]store.JournalProblem, error) {
	rows, err := db.pool.Query(ctx, `
SELECT a.id, COALESCE(a.balance, 0),
	COALESCE((SELECT SUM(amount) FROM journal j WHERE j.account_id = a.id), 0)::BIGINT,
	COALESCE((SELECT balance FROM journal j WHERE j.account_id = a.id ORDER BY seq DESC LIMIT 1), 0),
	COALESCE((SELECT string_agg(j.request_id, ',') FROM journal j LEFT JOIN ledger l ON l.request_id = j.request_id
		WHERE j.account_id = a.id AND j.kind = 'charge' AND l.request_id IS NULL), '')
FROM accounts a ORDER BY a.id`)
	if err != nil {
		return nil, fmt.Errorf("postgres: check journal: %w", err)
	}
	defer rows.Close()
	return store.ScanJournalCheck(rows)
}

// PostgreSQL error codes the store maps.
const (
	codeUniqueViolation     = "23505"
	codeForeignKeyViolation = "23503"
)

// classify maps "no rows" and constraint violations to the store's errors.
func classify(err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return store.ErrNotFound
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case codeUniqueViolation:
			return fmt.Errorf("%w (%s)", store.ErrExists, pe.ConstraintName)
		case codeForeignKeyViolation:
			return fmt.Errorf("account %w (%s)", store.ErrNotFound, pe.ConstraintName)
		}
	}
	return err
}

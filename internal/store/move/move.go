// Package move copies an embedded SQLite store into an empty PostgreSQL
// database: the one step of moving from one node to several.
// Organizations, accounts, keys (revoked ones too, so a revoked secret
// stays revoked) with their caps and MCP tools, the ledger, the running totals of
// accounts, keys and organizations, the daily
// usage sums, the balance journal, the webhooks with their outbox (pending
// alerts and the delivery log, in their order) and nothing else (rate
// budgets, sessions and caches start empty).
package move

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"

	"github.com/jackc/pgx/v5"
	_ "modernc.org/sqlite" // the embedded store's driver

	"github.com/caddy-gw/caddy-gw/internal/dirlock"
	"github.com/caddy-gw/caddy-gw/internal/store/cached"
	"github.com/caddy-gw/caddy-gw/internal/store/postgres"
	"github.com/caddy-gw/caddy-gw/internal/store/sqlite"
)

// tables are copied in this order, column for column (both schemas name
// them alike).
var tables = []struct{ name, cols string }{
	{"orgs", "id, name, daily_cap, monthly_cap, created_at"},
	{"accounts", "id, plan, cleared, payg, lane_billing, balance, daily_cap, monthly_cap, abilities, org, low_balance, created_at"},
	{"keys", "id, account_id, name, hash, models, expires_at, created_at, revoked_at, daily_cap, monthly_cap, total_cap, mcp_tools"},
	{"ledger", "request_id, account_id, endpoint, model, units, unit, cost, time, key_id, input_tokens, output_tokens, shortfall"},
	{"spend", "account_id, period, start, cost"},
	{"key_spend", "key_id, period, start, cost"},
	{"org_spend", "org_id, period, start, cost"},
	{"usage_daily", "account_id, day, key_id, model, requests, input_tokens, output_tokens, cost, org"},
	{"journal", "account_id, time, kind, amount, balance, request_id, reason"},
	{"webhooks", "id, url, secret, events, created_at"},
	{"webhook_outbox", "webhook_id, event_id, type, account_id, body, created_at, next_at, attempts, delivered_at, last_status, last_error"},
}

// order keeps each table's rows in the order they were made.
var order = map[string]string{"keys": "rowid", "ledger": "rowid", "journal": "seq", "accounts": "rowid", "spend": "account_id, period, start", "key_spend": "key_id, period, start", "org_spend": "org_id, period, start", "orgs": "id", "usage_daily": "account_id, day, key_id, model, org",
	"webhooks": "created_at, id", "webhook_outbox": "seq"}

// Counts is how many rows of each table were copied.
type Counts map[string]int

// ErrNotEmpty: the database already holds accounts.
var ErrNotEmpty = errors.New("the PostgreSQL database already holds accounts; copy into an empty one")

// Copy copies the embedded store in dir into the PostgreSQL database of
// url (migrated first), in one transaction: all or nothing. Charges still
// in the charge log are applied to the embedded store first. A folder a
// running gateway holds is refused (a *dirlock.InUseError): it would go
// on charging past the copy.
func Copy(ctx context.Context, dir, url string) (Counts, error) {
	lock, err := dirlock.Take(dir)
	if err != nil {
		return nil, err
	}
	defer lock.Release()
	// Apply what the charge log holds (a stop without draining).
	c, err := cached.Open(dir)
	if err != nil {
		return nil, err
	}
	if err := c.Close(); err != nil {
		return nil, err
	}
	pg, err := postgres.Open(ctx, url) // migrates
	if err != nil {
		return nil, err
	}
	pg.Close()

	src, err := sql.Open("sqlite", "file:"+filepath.Join(dir, sqlite.FileName)+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return nil, err
	}
	defer src.Close()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, errors.New("the database URL could not be parsed")
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	counts := Counts{}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var n int
		if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM accounts`).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return ErrNotEmpty
		}
		for _, t := range tables {
			k, err := copyTable(ctx, src, tx, t.name, t.cols)
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			counts[t.name] = k
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return counts, nil
}

func copyTable(ctx context.Context, src *sql.DB, tx pgx.Tx, table, cols string) (int, error) {
	rows, err := src.QueryContext(ctx, "SELECT "+cols+" FROM "+table+" ORDER BY "+order[table])
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	names, err := rows.Columns()
	if err != nil {
		return 0, err
	}
	var all [][]any
	for rows.Next() {
		vals := make([]any, len(names))
		ptrs := make([]any, len(names))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return 0, err
		}
		if table == "accounts" {
			// SQLite keeps booleans as integers.
			for _, i := range []int{2, 3, 4} {
				if v, ok := vals[i].(int64); ok {
					vals[i] = v != 0
				}
			}
		}
		all = append(all, vals)
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	n, err := tx.CopyFrom(ctx, pgx.Identifier{table}, names, pgx.CopyFromRows(all))
	return int(n), err
}

package store

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-gw/caddy-gw/pricing"
)

// UsageGroup is a set of the columns usage figures are grouped by.
type UsageGroup uint8

// The columns usage figures can be grouped by.
const (
	GroupDay UsageGroup = 1 << iota
	GroupModel
	GroupAccount
	GroupKey
	GroupOrg
)

// UsageQuery selects usage figures: the charges of one account (every
// account when AccountID is empty) and of one organization's accounts
// while they belonged to it (no matter which when OrgID is empty) made
// from From up to To, both the start of a UTC day, summed per combination
// of the GroupBy columns; at most Limit rows when Limit is above zero.
type UsageQuery struct {
	AccountID string
	OrgID     string
	From, To  time.Time
	GroupBy   UsageGroup
	Limit     int
}

// UsageRow is the sum of the charges that share the grouped columns; the
// columns not grouped by are zero.
type UsageRow struct {
	Day       time.Time
	Model     string
	AccountID string
	KeyID     string
	// Org is the organization the account belonged to at the charges
	// ("" for none).
	Org          string
	Requests     int64
	InputTokens  int64
	OutputTokens int64
	Cost         pricing.Money
}

// UsageReader is a ledger that sums its charges per UTC day, model,
// account, key and organization.
type UsageReader interface {
	// Usage returns the rows q selects, in no particular order.
	Usage(ctx context.Context, q UsageQuery) ([]UsageRow, error)
}

// usageColumns are the groupable columns of the daily usage table, in the
// order of UsageGroup's bits.
var usageColumns = []struct {
	group UsageGroup
	col   string
}{{GroupDay, "day"}, {GroupModel, "model"}, {GroupAccount, "account_id"}, {GroupKey, "key_id"}, {GroupOrg, "org"}}

// UsageSQL is the query of q over the daily usage table (usage_daily) that
// both SQL backends keep: arg(i) writes the i-th placeholder (1-based), and
// args are its arguments. ScanUsage reads its rows.
func UsageSQL(q UsageQuery, arg func(i int) string) (query string, args []any) {
	var cols []string
	for _, c := range usageColumns {
		if q.GroupBy&c.group != 0 {
			cols = append(cols, c.col)
		}
	}
	var b strings.Builder
	b.WriteString("SELECT ")
	for _, c := range cols {
		b.WriteString(c + ", ")
	}
	for i, c := range []string{"requests", "input_tokens", "output_tokens", "cost"} {
		if i > 0 {
			b.WriteString(", ")
		}
		// PostgreSQL sums BIGINT as NUMERIC: cast back.
		b.WriteString("CAST(COALESCE(SUM(" + c + "), 0) AS BIGINT)")
	}
	b.WriteString(" FROM usage_daily WHERE day >= ")
	args = []any{q.From.UnixNano(), q.To.UnixNano()}
	b.WriteString(arg(1) + " AND day < " + arg(2))
	if q.AccountID != "" {
		args = append(args, q.AccountID)
		b.WriteString(" AND account_id = " + arg(len(args)))
	}
	if q.OrgID != "" {
		args = append(args, q.OrgID)
		b.WriteString(" AND org = " + arg(len(args)))
	}
	if len(cols) > 0 {
		b.WriteString(" GROUP BY " + strings.Join(cols, ", "))
	}
	if q.Limit > 0 {
		b.WriteString(" LIMIT " + strconv.Itoa(q.Limit))
	}
	return b.String(), args
}

// ScanUsage reads the rows of UsageSQL's query for q.
func ScanUsage(rows Rows, q UsageQuery) ([]UsageRow, error) {
	out := []UsageRow{}
	for rows.Next() {
		var (
			r         UsageRow
			day, cost int64
		)
		var dest []any
		for _, c := range usageColumns {
			if q.GroupBy&c.group == 0 {
				continue
			}
			switch c.group {
			case GroupDay:
				dest = append(dest, &day)
			case GroupModel:
				dest = append(dest, &r.Model)
			case GroupAccount:
				dest = append(dest, &r.AccountID)
			case GroupKey:
				dest = append(dest, &r.KeyID)
			case GroupOrg:
				dest = append(dest, &r.Org)
			}
		}
		dest = append(dest, &r.Requests, &r.InputTokens, &r.OutputTokens, &cost)
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		if q.GroupBy&GroupDay != 0 {
			r.Day = time.Unix(0, day).UTC()
		}
		r.Cost = pricing.Money(cost)
		if r.Requests == 0 {
			continue // no grouping over no rows: the one row of zeros
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

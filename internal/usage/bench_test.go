package usage_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/internal/store/cached"
	"github.com/caddy-gw/caddy-gw/internal/store/postgres"
	"github.com/caddy-gw/caddy-gw/internal/store/sqlite"
	"github.com/caddy-gw/caddy-gw/internal/testsvc"
	"github.com/caddy-gw/caddy-gw/internal/usage"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// The ledger of the benchmark: benchCharges charges spread evenly over
// benchDays UTC days, benchAccounts accounts, two keys each and
// benchModels models.
const (
	benchCharges  = 1_000_000
	benchDays     = 30
	benchAccounts = 100
	benchModels   = 8
)

var benchFrom = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

// benchEntry is the i-th charge of the benchmark's ledger.
func benchEntry(i int) store.Entry {
	at := benchFrom.Add(time.Duration(int64(i) * (int64(benchDays*24*time.Hour) / benchCharges)))
	in, out := int64(100+i%900), int64(10+i%90)
	return store.Entry{RequestID: fmt.Sprintf("req-%012d", i), AccountID: fmt.Sprint("acct-", i%benchAccounts),
		KeyID: fmt.Sprintf("key-%d-%d", i%benchAccounts, i/benchAccounts%2), Model: fmt.Sprint("model-", i/(2*benchAccounts)%benchModels),
		Endpoint: "chat", Unit: "token", Units: in + out, InputTokens: in, OutputTokens: out,
		Cost: pricing.Money(in*400 + out*1600), Time: at}
}

// benchQueries are the usage queries measured over the 30 days.
var benchQueries = []struct {
	name string
	q    store.UsageQuery
}{
	{"every_account/by=day", store.UsageQuery{GroupBy: store.GroupDay}},
	{"every_account/by=account,key,model", store.UsageQuery{GroupBy: store.GroupAccount | store.GroupKey | store.GroupModel}},
	{"one_account/by=day,model", store.UsageQuery{AccountID: "acct-7", GroupBy: store.GroupDay | store.GroupModel}},
}

// runQueries measures usage.Run (what GET /gw/usage runs) for each query,
// checking once that every charge is counted.
func runQueries(b *testing.B, st store.UsageReader) {
	ctx := context.Background()
	for _, bq := range benchQueries {
		q := bq.q
		q.From, q.To = benchFrom, benchFrom.AddDate(0, 0, benchDays)
		b.Run(bq.name, func(b *testing.B) {
			var rep usage.Report
			for b.Loop() {
				var err error
				if rep, err = usage.Run(ctx, st, q); err != nil {
					b.Fatal(err)
				}
			}
			want := int64(benchCharges)
			if q.AccountID != "" {
				want /= benchAccounts
			}
			if rep.Total.Requests != want {
				b.Fatalf("%d requests counted, want %d", rep.Total.Requests, want)
			}
			b.ReportMetric(float64(len(rep.Data)), "rows")
		})
	}
}

// BenchmarkUsageSQLite: usage figures over 30 days of a million charges
// in the embedded store, its ledger and daily sums written by SettleBatch
// in batches of cached.MaxApply (what the charge log's applier does), and
// the same day totals summed from the ledger rows as a reference.
func BenchmarkUsageSQLite(b *testing.B) {
	dir := b.TempDir()
	db, err := sqlite.Open(dir)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	for a := range benchAccounts {
		if err := db.CreateAccount(ctx, store.Account{ID: fmt.Sprint("acct-", a), Plan: store.PlanPaid}); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	batch := make([]store.Entry, 0, cached.MaxApply)
	for i := range benchCharges {
		batch = append(batch, benchEntry(i))
		if len(batch) == cap(batch) || i == benchCharges-1 {
			if _, err := db.SettleBatch(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	b.Logf("settled %d charges in %s (%.1f µs a charge, daily sums included)", benchCharges, time.Since(start).Round(time.Millisecond),
		float64(time.Since(start).Microseconds())/benchCharges)
	runQueries(b, db)
	b.Run("reference:ledger_rows/by=day", func(b *testing.B) {
		// What the day totals cost without the daily sums: every ledger
		// row of the 30 days read (through its time).
		raw, err := sql.Open("sqlite", "file:"+filepath.Join(dir, sqlite.FileName)+"?mode=ro")
		if err != nil {
			b.Fatal(err)
		}
		defer raw.Close()
		from, to := benchFrom.UnixNano(), benchFrom.AddDate(0, 0, benchDays).UnixNano()
		for b.Loop() {
			var n int
			err := raw.QueryRowContext(ctx, `SELECT COUNT(*) FROM (SELECT time - time % 86400000000000, COUNT(*), SUM(input_tokens), SUM(output_tokens), SUM(cost)
				FROM ledger WHERE time >= ? AND time < ? GROUP BY 1)`, from, to).Scan(&n)
			if err != nil || n != benchDays {
				b.Fatalf("%d days, %v", n, err)
			}
		}
	})
}

// BenchmarkUsagePostgres: the same on PostgreSQL. The ledger is loaded
// with COPY and its daily sums built by the statement that builds them on
// an upgrade (settling a million charges one by one takes minutes there).
func BenchmarkUsagePostgres(b *testing.B) {
	url := testsvc.Postgres(b)
	ctx := context.Background()
	db, err := postgres.Open(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	for a := range benchAccounts {
		if err := db.CreateAccount(ctx, store.Account{ID: fmt.Sprint("acct-", a), Plan: store.PlanPaid}); err != nil {
			b.Fatal(err)
		}
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	start := time.Now()
	i := 0
	_, err = conn.CopyFrom(ctx, pgx.Identifier{"ledger"},
		[]string{"request_id", "account_id", "endpoint", "model", "units", "unit", "cost", "time", "key_id", "input_tokens", "output_tokens"},
		pgx.CopyFromFunc(func() ([]any, error) {
			if i == benchCharges {
				return nil, nil
			}
			e := benchEntry(i)
			i++
			return []any{e.RequestID, e.AccountID, e.Endpoint, e.Model, e.Units, e.Unit, int64(e.Cost), e.Time.UnixNano(), e.KeyID, e.InputTokens, e.OutputTokens}, nil
		}))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO usage_daily (account_id, day, key_id, model, requests, input_tokens, output_tokens, cost)
		SELECT account_id, time - time % 86400000000000, key_id, model, COUNT(*), SUM(input_tokens), SUM(output_tokens), SUM(cost)
		FROM ledger GROUP BY 1, 2, 3, 4`); err != nil {
		b.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `VACUUM ANALYZE`); err != nil {
		b.Fatal(err)
	}
	b.Logf("loaded %d charges and their daily sums in %s", benchCharges, time.Since(start).Round(time.Millisecond))
	runQueries(b, db)
	b.Run("reference:ledger_rows/by=day", func(b *testing.B) {
		from, to := benchFrom.UnixNano(), benchFrom.AddDate(0, 0, benchDays).UnixNano()
		for b.Loop() {
			var n int
			err := conn.QueryRow(ctx, `SELECT COUNT(*) FROM (SELECT time - time % 86400000000000, COUNT(*), SUM(input_tokens), SUM(output_tokens), SUM(cost)
				FROM ledger WHERE time >= $1 AND time < $2 GROUP BY 1) AS d`, from, to).Scan(&n)
			if err != nil || n != benchDays {
				b.Fatalf("%d days, %v", n, err)
			}
		}
	})
}

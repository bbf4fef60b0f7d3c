package usage

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

var now = time.Date(2026, 3, 15, 17, 4, 5, 0, time.UTC)

func day(s string) time.Time {
	d, err := time.Parse(DateLayout, s)
	if err != nil {
		panic(err)
	}
	return d
}

func TestParse(t *testing.T) {
	all, own := Scope{}, Scope{Account: "acme"}
	for _, c := range []struct {
		query string
		scope Scope
		want  store.UsageQuery
	}{
		{"", all, store.UsageQuery{From: day("2026-02-14"), To: day("2026-03-16"), GroupBy: store.GroupDay}},
		{"", own, store.UsageQuery{AccountID: "acme", From: day("2026-02-14"), To: day("2026-03-16"), GroupBy: store.GroupDay}},
		{"account=a&from=2026-01-01&to=2026-01-31", all, store.UsageQuery{AccountID: "a", From: day("2026-01-01"), To: day("2026-02-01"), GroupBy: store.GroupDay}},
		{"from=2026-03-15&to=2026-03-15&group_by=model,%20key", own,
			store.UsageQuery{AccountID: "acme", From: day("2026-03-15"), To: day("2026-03-16"), GroupBy: store.GroupModel | store.GroupKey}},
		{"to=2026-01-10", all, store.UsageQuery{From: day("2025-12-12"), To: day("2026-01-11"), GroupBy: store.GroupDay}},
		{"group_by=key,account,model,day", all, store.UsageQuery{From: day("2026-02-14"), To: day("2026-03-16"), GroupBy: 15}},
		{"org=acme&account=a&group_by=org,account", all,
			store.UsageQuery{AccountID: "a", OrgID: "acme", From: day("2026-02-14"), To: day("2026-03-16"), GroupBy: store.GroupOrg | store.GroupAccount}},
		{"group_by=", all, store.UsageQuery{From: day("2026-02-14"), To: day("2026-03-16"), GroupBy: store.GroupDay}},
		{"to=1970-01-05", all, store.UsageQuery{From: day("1970-01-01"), To: day("1970-01-06"), GroupBy: store.GroupDay}},
		{"from=2025-03-16&to=2026-03-16", all, store.UsageQuery{From: day("2025-03-16"), To: day("2026-03-17"), GroupBy: store.GroupDay}}, // 366 days
	} {
		v, _ := url.ParseQuery(c.query)
		got, err := Parse(v, now, c.scope)
		if err != nil || got != c.want {
			t.Errorf("Parse(%q, %+v) = %+v, %v; want %+v", c.query, c.scope, got, err, c.want)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, c := range []struct {
		query, param, message string
		own                   bool
	}{
		{"acount=a", "acount", "unknown parameter (known: account, org, from, to, group_by)", false},
		{"org=", "org", "empty; leave it out for every organization", false},
		{"org=acme", "org", "a key reads its own account's usage only; leave org out", true},
		{"group_by=day,org", "group_by", "a key reads its own account's usage only, so org is no grouping here (known: day, model, key)", true},
		{"from=2026-01-01&from=2026-01-02", "from", "given 2 times; give it once", false},
		{"account=", "account", "empty; leave it out for every account", false},
		{"account=acme", "account", "a key reads its own account's usage only; leave account out", true},
		{"from=2026-1-1", "from", `"2026-1-1" is not a date of the form YYYY-MM-DD`, false},
		{"to=yesterday", "to", `"yesterday" is not a date of the form YYYY-MM-DD`, false},
		{"to=2026-02-30", "to", `"2026-02-30" is not a date of the form YYYY-MM-DD`, false},
		{"from=1969-12-31", "from", "1969-12-31 is outside 1970-01-01 to 2261-12-31", false},
		{"to=9999-01-01", "to", "9999-01-01 is outside 1970-01-01 to 2261-12-31", false},
		{"from=2026-03-02&to=2026-03-01", "from", "2026-03-02 is after to (2026-03-01)", false},
		{"from=2025-03-15&to=2026-03-16", "from", "2025-03-15 to 2026-03-16 spans 367 days; at most 366", false},
		{"group_by=week", "group_by", `"week" is not a grouping (known: day, model, account, key, org, comma-separated)`, false},
		{"group_by=day,,model", "group_by", `"" is not a grouping (known: day, model, account, key, org, comma-separated)`, false},
		{"group_by=day,day", "group_by", "day given twice", false},
		{"group_by=account", "group_by", "a key reads its own account's usage only, so account is no grouping here (known: day, model, key)", true},
		{"group_by=week", "group_by", `"week" is not a grouping (known: day, model, key, comma-separated)`, true},
	} {
		v, _ := url.ParseQuery(c.query)
		scope := Scope{}
		if c.own {
			scope.Account = "acme"
		}
		_, err := Parse(v, now, scope)
		var e *Error
		if !errors.As(err, &e) || e.Param != c.param || e.Message != c.message {
			t.Errorf("Parse(%q, own %v) = %v; want %s: %s", c.query, c.own, err, c.param, c.message)
		}
	}
}

// FuzzParse: any query string is either refused with an *Error naming a
// parameter, or gives a query within the limits.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "account=a&from=2026-01-01&to=2026-01-31&group_by=day,model", "group_by=key,account",
		"from=2261-12-31", "to=1970-01-01", "from=2026-13-01", "group_by=%00", "a=1&a=2", "account=%FF", "group_by=,"} {
		f.Add(s, false)
	}
	f.Fuzz(func(t *testing.T, query string, own bool) {
		v, err := url.ParseQuery(query)
		if err != nil {
			return
		}
		scope := Scope{}
		if own {
			scope.Account = "acme"
		}
		q, err := Parse(v, now, scope)
		if err != nil {
			var e *Error
			if !errors.As(err, &e) || e.Message == "" {
				t.Fatalf("Parse(%q): %v is not a parameter error", query, err)
			}
			return
		}
		days := q.To.Sub(q.From).Hours() / 24
		if days < 1 || days > MaxDays || q.From.Before(firstDate) || q.To.After(lastDate.AddDate(0, 0, 1)) || q.GroupBy == 0 || q.GroupBy > 15 {
			t.Fatalf("Parse(%q) = %+v: outside the limits", query, q)
		}
		if own && (q.AccountID != "acme" || q.GroupBy&store.GroupAccount != 0) {
			t.Fatalf("Parse(%q) for a key = %+v: another account, or grouped by account", query, q)
		}
	})
}

// reader answers fixed rows and records the query.
type reader struct {
	rows []store.UsageRow
	got  store.UsageQuery
}

func (r *reader) Usage(_ context.Context, q store.UsageQuery) ([]store.UsageRow, error) {
	r.got = q
	return r.rows, nil
}

func TestRun(t *testing.T) {
	usd := func(s string) pricing.Money {
		m, err := pricing.ParseUSD(s)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	r := &reader{rows: []store.UsageRow{
		{Day: day("2026-03-02"), KeyID: "", Requests: 1, Cost: usd("0.1")},
		{Day: day("2026-03-01"), KeyID: "k2", Requests: 2, InputTokens: 20, OutputTokens: 2, Cost: usd("0.000000001")},
		{Day: day("2026-03-01"), KeyID: "k1", Requests: 3, InputTokens: 30, OutputTokens: 3, Cost: usd("1.25")},
	}}
	q := store.UsageQuery{AccountID: "a", From: day("2026-03-01"), To: day("2026-03-03"), GroupBy: store.GroupDay | store.GroupKey}
	rep, err := Run(context.Background(), r, q)
	if err != nil {
		t.Fatal(err)
	}
	if want := (store.UsageQuery{AccountID: "a", From: q.From, To: q.To, GroupBy: q.GroupBy, Limit: MaxRows + 1}); r.got != want {
		t.Fatalf("query %+v, want %+v", r.got, want)
	}
	b, _ := json.Marshal(rep)
	want := `{"object":"list","data":[` +
		`{"day":"2026-03-01","key_id":"k1","requests":3,"input_tokens":30,"output_tokens":3,"cost_usd":"1.25"},` +
		`{"day":"2026-03-01","key_id":"k2","requests":2,"input_tokens":20,"output_tokens":2,"cost_usd":"0.000000001"},` +
		`{"day":"2026-03-02","key_id":"","requests":1,"input_tokens":0,"output_tokens":0,"cost_usd":"0.10"}],` +
		`"total":{"requests":6,"cost_usd":"1.350000001"}}`
	if string(b) != want {
		t.Fatalf("report\n%s\nwant\n%s", b, want)
	}
	rep, err = Run(context.Background(), &reader{rows: []store.UsageRow{}}, q)
	if b, _ := json.Marshal(rep); err != nil || string(b) != `{"object":"list","data":[],"total":{"requests":0,"cost_usd":"0.00"}}` {
		t.Fatalf("no rows: %s, %v", b, err)
	}
	many := &reader{rows: make([]store.UsageRow, MaxRows+1)}
	if _, err := Run(context.Background(), many, q); err == nil || !strings.Contains(err.Error(), "more than 10000 rows") {
		t.Fatalf("%d rows: %v", MaxRows+1, err)
	}
}

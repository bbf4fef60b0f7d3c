// Package usage answers usage figures from the ledger: requests, tokens and
// cost per UTC day, model, account, key and organization, summed exactly
// as charged. The
// admin API (GET /gw/usage), a key's own GET /v1/usage and the operator
// console all call it in process.
package usage

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// Limits of a usage query.
const (
	// DefaultDays is how many days, today included, a query without from
	// covers.
	DefaultDays = 30
	// MaxDays bounds the days from and to span, both included.
	MaxDays = 366
	// MaxRows bounds the rows of one answer: a query that would give more
	// is refused, to be asked again over fewer days or fewer groupings.
	MaxRows = 10_000
)

// DateLayout is the form of from, to and each row's day: a UTC date.
const DateLayout = "2006-01-02"

// firstDate and lastDate bound the dates a query may name: the days whose
// instants the stores can keep (Unix nanoseconds in an int64), from 1970.
var (
	firstDate = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)
	lastDate  = time.Date(2261, 12, 31, 0, 0, 0, 0, time.UTC)
)

// Grouping is a name group_by takes and the column it groups by.
type Grouping struct {
	Name  string
	Group store.UsageGroup
}

// Groupings are the names group_by takes, in the order rows are sorted.
var Groupings = []Grouping{{"day", store.GroupDay}, {"model", store.GroupModel}, {"account", store.GroupAccount}, {"key", store.GroupKey}, {"org", store.GroupOrg}}

// Parameters are the query parameters a usage request takes.
var Parameters = []string{"account", "org", "from", "to", "group_by"}

// Error is a refused parameter: Param names it, Message says why.
type Error struct {
	Param   string
	Message string
}

// Error implements error.
func (e *Error) Error() string {
	if e.Param == "" {
		return e.Message
	}
	return e.Param + ": " + e.Message
}

func refuse(param, format string, args ...any) *Error {
	return &Error{Param: param, Message: fmt.Sprintf(format, args...)}
}

// Scope says whose figures a request may ask for.
type Scope struct {
	// Account, when set, is the one account the caller may see: the
	// account and org parameters and their groupings are refused.
	Account string
}

// Parse reads a request's query parameters into a query: account (every
// account when absent), org (the charges of the organization's accounts
// while they belonged to it; any when absent), from and to (UTC dates, both included; to
// defaults to now's date, from to DefaultDays days ending on to) and
// group_by (comma-separated names of Groupings; day when absent). Any
// other parameter, a repeated one, or a bad value is an *Error.
func Parse(v url.Values, now time.Time, scope Scope) (store.UsageQuery, error) {
	var q store.UsageQuery
	for _, name := range slices.Sorted(maps.Keys(v)) {
		if !slices.Contains(Parameters, name) {
			return q, refuse(name, "unknown parameter (known: %s)", strings.Join(Parameters, ", "))
		}
		if n := len(v[name]); n > 1 {
			return q, refuse(name, "given %d times; give it once", n)
		}
	}
	if v.Has("account") {
		if scope.Account != "" {
			return q, refuse("account", "a key reads its own account's usage only; leave account out")
		}
		q.AccountID = v.Get("account")
		if q.AccountID == "" {
			return q, refuse("account", "empty; leave it out for every account")
		}
	}
	if scope.Account != "" {
		q.AccountID = scope.Account
	}
	if v.Has("org") {
		if scope.Account != "" {
			return q, refuse("org", "a key reads its own account's usage only; leave org out")
		}
		q.OrgID = v.Get("org")
		if q.OrgID == "" {
			return q, refuse("org", "empty; leave it out for every organization")
		}
	}
	today, _ := store.DayOf(now)
	to := today
	if v.Has("to") {
		d, err := date("to", v.Get("to"))
		if err != nil {
			return q, err
		}
		to = d
	}
	from := to.AddDate(0, 0, 1-DefaultDays)
	if from.Before(firstDate) {
		from = firstDate
	}
	if v.Has("from") {
		d, err := date("from", v.Get("from"))
		if err != nil {
			return q, err
		}
		from = d
	}
	if from.After(to) {
		return q, refuse("from", "%s is after to (%s)", from.Format(DateLayout), to.Format(DateLayout))
	}
	if days := int(to.Sub(from).Hours()/24) + 1; days > MaxDays {
		return q, refuse("from", "%s to %s spans %d days; at most %d", from.Format(DateLayout), to.Format(DateLayout), days, MaxDays)
	}
	q.From, q.To = from, to.AddDate(0, 0, 1)
	q.GroupBy = store.GroupDay
	if s := v.Get("group_by"); s != "" {
		g, err := groups(s, scope)
		if err != nil {
			return q, err
		}
		q.GroupBy = g
	}
	return q, nil
}

// date reads a UTC date of param.
func date(param, s string) (time.Time, error) {
	d, err := time.Parse(DateLayout, s)
	if err != nil {
		return time.Time{}, refuse(param, "%q is not a date of the form YYYY-MM-DD", s)
	}
	if d.Before(firstDate) || d.After(lastDate) {
		return time.Time{}, refuse(param, "%s is outside %s to %s", s, firstDate.Format(DateLayout), lastDate.Format(DateLayout))
	}
	return d, nil
}

// groups reads group_by.
func groups(s string, scope Scope) (store.UsageGroup, error) {
	// A key reads one account's usage: neither accounts nor
	// organizations are groupings there.
	var unscoped store.UsageGroup
	if scope.Account != "" {
		unscoped = store.GroupAccount | store.GroupOrg
	}
	var known []string
	for _, g := range Groupings {
		if g.Group&unscoped == 0 {
			known = append(known, g.Name)
		}
	}
	var out store.UsageGroup
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(Groupings, func(g Grouping) bool { return g.Name == name })
		switch {
		case i >= 0 && Groupings[i].Group&unscoped != 0:
			return 0, refuse("group_by", "a key reads its own account's usage only, so %s is no grouping here (known: %s)", name, strings.Join(known, ", "))
		case i < 0:
			return 0, refuse("group_by", "%q is not a grouping (known: %s, comma-separated)", name, strings.Join(known, ", "))
		case out&Groupings[i].Group != 0:
			return 0, refuse("group_by", "%s given twice", name)
		}
		out |= Groupings[i].Group
	}
	return out, nil
}

// Report is the answer to a usage query: a row per combination of the
// grouped columns that has charges, and the sums of all of them.
type Report struct {
	Object string `json:"object"`
	Data   []Row  `json:"data"`
	Total  Total  `json:"total"`
}

// Row is the sum of the charges sharing its grouped columns; a column not
// grouped by is absent.
type Row struct {
	Day     *string `json:"day,omitempty"`
	Model   *string `json:"model,omitempty"`
	Account *string `json:"account,omitempty"`
	KeyID   *string `json:"key_id,omitempty"`
	// Org is the organization the account belonged to at the charges:
	// "" for none.
	Org          *string       `json:"org,omitempty"`
	Requests     int64         `json:"requests"`
	InputTokens  int64         `json:"input_tokens"`
	OutputTokens int64         `json:"output_tokens"`
	Cost         pricing.Money `json:"cost_usd"`
}

// Total sums every row.
type Total struct {
	Requests int64         `json:"requests"`
	Cost     pricing.Money `json:"cost_usd"`
}

// Run answers q from st: rows in the order of day, model, account, key and
// organization,
// and their total. A query giving more than MaxRows rows is an *Error.
func Run(ctx context.Context, st store.UsageReader, q store.UsageQuery) (Report, error) {
	q.Limit = MaxRows + 1
	rows, err := st.Usage(ctx, q)
	if err != nil {
		return Report{}, err
	}
	if len(rows) > MaxRows {
		return Report{}, refuse("", "more than %d rows: ask for fewer days or fewer groupings", MaxRows)
	}
	slices.SortFunc(rows, func(a, b store.UsageRow) int {
		return cmp.Or(a.Day.Compare(b.Day), strings.Compare(a.Model, b.Model), strings.Compare(a.AccountID, b.AccountID), strings.Compare(a.KeyID, b.KeyID), strings.Compare(a.Org, b.Org))
	})
	rep := Report{Object: "list", Data: make([]Row, 0, len(rows))}
	for _, r := range rows {
		row := Row{Requests: r.Requests, InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, Cost: r.Cost}
		if q.GroupBy&store.GroupDay != 0 {
			row.Day = ptr(r.Day.Format(DateLayout))
		}
		if q.GroupBy&store.GroupModel != 0 {
			row.Model = ptr(r.Model)
		}
		if q.GroupBy&store.GroupAccount != 0 {
			row.Account = ptr(r.AccountID)
		}
		if q.GroupBy&store.GroupKey != 0 {
			row.KeyID = ptr(r.KeyID)
		}
		if q.GroupBy&store.GroupOrg != 0 {
			row.Org = ptr(r.Org)
		}
		rep.Data = append(rep.Data, row)
		rep.Total.Requests += r.Requests
		rep.Total.Cost += r.Cost
	}
	return rep, nil
}

func ptr(s string) *string { return &s }

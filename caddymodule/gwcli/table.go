package gwcli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/caddy-gw/caddy-gw/internal/admin"
	"github.com/caddy-gw/caddy-gw/internal/printable"
	"github.com/caddy-gw/caddy-gw/internal/usage"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// checkResult is the journal check's answer.
type checkResult struct {
	OK       bool            `json:"ok"`
	Problems []admin.Problem `json:"problems"`
}

// usd writes an amount for people: a dollar sign, thousands separated,
// every decimal the amount has (at least two).
func usd(m pricing.Money) string {
	s := m.String()
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	whole, frac, _ := strings.Cut(s, ".")
	n, _ := strconv.ParseInt(whole, 10, 64)
	return sign + "$" + humanize.Comma(n) + "." + frac
}

// usdOr writes an amount, or none when there is none.
func usdOr(m *pricing.Money, none string) string {
	if m == nil {
		return none
	}
	return usd(*m)
}

// ago writes a time for people ("3 hours ago", "2 months from now").
func ago(t time.Time) string { return humanize.Time(t) }

func table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// row writes one line of a table: its cells, each escaped so that no
// value can move the cursor, start a line or pass for a column, then
// tab-separated.
func row(w io.Writer, cells ...string) {
	line := make([]string, len(cells))
	for i, c := range cells {
		line[i] = printable.Escape(c)
	}
	fmt.Fprintln(w, strings.Join(line, "\t"))
}

func plan(a admin.Account) string {
	p := string(a.Plan)
	if a.Cleared {
		p += ", cleared"
	}
	if a.PAYG {
		p += ", pay as you go"
	}
	return p
}

func accountTable(w io.Writer, list []admin.Account) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "No accounts.")
		return err
	}
	tw := table(w)
	row(tw, "ACCOUNT", "PLAN", "ORG", "BALANCE", "TODAY", "THIS MONTH", "IN ALL", "CREATED")
	for _, a := range list {
		row(tw, a.ID, plan(a), orgOf(a), usdOr(a.Balance, "billed after"),
			usd(a.Spend.Today), usd(a.Spend.Month), usd(a.Spend.Total), ago(a.CreatedAt))
	}
	return tw.Flush()
}

func accountCard(w io.Writer, a admin.Account) error {
	abilities := strings.Join(a.Abilities, ", ")
	if len(a.Abilities) == 0 {
		abilities = "none"
	}
	billing := "list prices"
	if a.LaneBilling {
		billing = "gw-auto at its lane's price"
	}
	tw := table(w)
	for _, r := range [][2]string{
		{"Account", a.ID},
		{"Plan", plan(a)},
		{"Org", orgOf(a)},
		{"Balance", usdOr(a.Balance, "none: billed afterwards")},
		{"Low balance", usdOr(a.LowBalance, "none")},
		{"Daily cap", usdOr(a.DailyCap, "none")},
		{"Monthly cap", usdOr(a.MonthlyCap, "none")},
		{"Abilities", abilities},
		{"Billing", billing},
		{"Spent", fmt.Sprintf("%s today, %s this month, %s in all", usd(a.Spend.Today), usd(a.Spend.Month), usd(a.Spend.Total))},
		{"Created", ago(a.CreatedAt)},
	} {
		row(tw, r[0], r[1])
	}
	return tw.Flush()
}

// orgOf writes the organization an account belongs to, or none.
func orgOf(a admin.Account) string {
	if a.Org == nil {
		return "none"
	}
	return *a.Org
}

func orgTable(w io.Writer, list []admin.Org) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "No organizations.")
		return err
	}
	tw := table(w)
	row(tw, "ORG", "NAME", "DAILY CAP", "MONTHLY CAP", "TODAY", "THIS MONTH", "IN ALL", "CREATED")
	for _, o := range list {
		row(tw, o.ID, o.Name, usdOr(o.DailyCap, "none"), usdOr(o.MonthlyCap, "none"),
			usd(o.Spend.Today), usd(o.Spend.Month), usd(o.Spend.Total), ago(o.CreatedAt))
	}
	return tw.Flush()
}

// orgCard shows one organization with its caps and what its accounts
// spent while they belonged to it.
func orgCard(w io.Writer, o admin.Org) error {
	tw := table(w)
	for _, r := range [][2]string{
		{"Organization", o.ID},
		{"Name", o.Name},
		{"Daily cap", usdOr(o.DailyCap, "none")},
		{"Monthly cap", usdOr(o.MonthlyCap, "none")},
		{"Spent", fmt.Sprintf("%s today, %s this month, %s in all", usd(o.Spend.Today), usd(o.Spend.Month), usd(o.Spend.Total))},
		{"Created", ago(o.CreatedAt)},
	} {
		row(tw, r[0], r[1])
	}
	return tw.Flush()
}

func keyCreated(w io.Writer, accountID string, k admin.Key) error {
	e := printable.Escape
	capped := ""
	if c := capsText(k); c != "" {
		capped = ", capped at " + c
	}
	_, err := fmt.Fprintf(w, "Key %s (%s) of account %s%s:\n\n  %s\n\nThis is the only time the key is shown: store it now.\n", e(k.ID), e(k.Name), e(accountID), capped, e(k.Key))
	return err
}

// capsText writes the caps a key has ("$5.00 a day and $20.00 in all"),
// or "" when it has none.
func capsText(k admin.Key) string {
	var caps []string
	for _, c := range []struct {
		cap  *pricing.Money
		span string
	}{{k.DailyCap, "a day"}, {k.MonthlyCap, "a month"}, {k.TotalCap, "in all"}} {
		if c.cap != nil {
			caps = append(caps, usd(*c.cap)+" "+c.span)
		}
	}
	if len(caps) < 2 {
		return strings.Join(caps, "")
	}
	return strings.Join(caps[:len(caps)-1], ", ") + " and " + caps[len(caps)-1]
}

// expires writes when a key stops working, for people.
func expires(k admin.Key) string {
	if k.ExpiresAt == nil {
		return "never"
	}
	return ago(*k.ExpiresAt)
}

// allowed writes a key's list of models or MCP tools for people: "all"
// for none given (nil), "none" for an empty one.
func allowed(list []string) string {
	if list == nil {
		return "all"
	}
	if len(list) == 0 {
		return "none"
	}
	return strings.Join(list, ", ")
}

func keyTable(w io.Writer, list []admin.Key) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "No keys.")
		return err
	}
	tw := table(w)
	row(tw, "KEY", "NAME", "MODELS", "MCP TOOLS", "EXPIRES", "DAILY CAP", "MONTHLY CAP", "TOTAL CAP", "CREATED")
	for _, k := range list {
		row(tw, k.ID, k.Name, allowed(k.Models), allowed(k.MCPTools), expires(k),
			usdOr(k.DailyCap, "none"), usdOr(k.MonthlyCap, "none"), usdOr(k.TotalCap, "none"), ago(k.CreatedAt))
	}
	return tw.Flush()
}

// keyCard shows one key with its caps and, when read alone, its spend.
func keyCard(w io.Writer, k admin.Key) error {
	rows := [][2]string{
		{"Key", k.ID},
		{"Name", k.Name},
		{"Models", allowed(k.Models)},
		{"MCP tools", allowed(k.MCPTools)},
		{"Expires", expires(k)},
		{"Daily cap", usdOr(k.DailyCap, "none")},
		{"Monthly cap", usdOr(k.MonthlyCap, "none")},
		{"Total cap", usdOr(k.TotalCap, "none")},
	}
	if k.Spend != nil {
		rows = append(rows, [2]string{"Spent", fmt.Sprintf("%s today, %s this month, %s in all", usd(k.Spend.Today), usd(k.Spend.Month), usd(k.Spend.Total))})
	}
	tw := table(w)
	for _, r := range append(rows, [2]string{"Created", ago(k.CreatedAt)}) {
		row(tw, r[0], r[1])
	}
	return tw.Flush()
}

// webhookCreated shows a new webhook with its signing secret, the only
// time the secret is shown.
func webhookCreated(w io.Writer, h admin.Webhook) error {
	e := printable.Escape
	_, err := fmt.Fprintf(w, "Webhook %s sends %s to %s, signed with the secret:\n\n  %s\n\n"+
		"This is the only time the secret is shown: store it now. Each delivery's X-Gw-Signature\n"+
		"header is \"sha256=\" and the hex HMAC-SHA256 of the body keyed with it.\n",
		e(h.ID), e(strings.Join(h.Events, ", ")), e(h.URL), e(h.Secret))
	return err
}

func webhookTable(w io.Writer, list []admin.Webhook) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "No webhooks.")
		return err
	}
	tw := table(w)
	row(tw, "WEBHOOK", "URL", "EVENTS", "CREATED")
	for _, h := range list {
		row(tw, h.ID, h.URL, strings.Join(h.Events, ", "), ago(h.CreatedAt))
	}
	return tw.Flush()
}

func webhookCard(w io.Writer, h admin.Webhook) error {
	tw := table(w)
	for _, r := range [][2]string{
		{"Webhook", h.ID},
		{"URL", h.URL},
		{"Events", strings.Join(h.Events, ", ")},
		{"Created", ago(h.CreatedAt)},
	} {
		row(tw, r[0], r[1])
	}
	return tw.Flush()
}

// deliveryTable lists a webhook's deliveries as the admin API gives them
// (newest first).
func deliveryTable(w io.Writer, list []admin.Delivery) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "No deliveries.")
		return err
	}
	tw := table(w)
	row(tw, "WHEN", "EVENT", "ACCOUNT", "STATUS", "ATTEMPTS", "LAST ANSWER", "NEXT ATTEMPT")
	for _, d := range list {
		row(tw, ago(d.CreatedAt), eventText(d), d.Account, d.Status, strconv.Itoa(d.Attempts), lastAnswer(d), nextAttempt(d))
	}
	return tw.Flush()
}

// eventText writes a delivery's event type with what sets the event
// apart: the cap and threshold reached, the balance left, the key
// revoked.
func eventText(d admin.Delivery) string {
	var ev struct {
		KeyID     string         `json:"key_id"`
		Cap       string         `json:"cap"`
		Threshold int            `json:"threshold"`
		Balance   *pricing.Money `json:"balance_usd"`
	}
	if json.Unmarshal(d.Event, &ev) != nil {
		return d.Type
	}
	switch {
	case ev.Cap != "":
		return fmt.Sprintf("%s (%d%% of %s)", d.Type, ev.Threshold, ev.Cap)
	case ev.Balance != nil:
		return fmt.Sprintf("%s (%s left)", d.Type, usd(*ev.Balance))
	case ev.KeyID != "":
		return fmt.Sprintf("%s (%s)", d.Type, ev.KeyID)
	}
	return d.Type
}

// lastAnswer writes how a delivery's last attempt went: none yet, the
// error, or the receiver's success status.
func lastAnswer(d admin.Delivery) string {
	switch {
	case d.Attempts == 0 || d.LastStatus == nil:
		return "none"
	case d.LastError != nil && *d.LastError != "":
		return *d.LastError
	}
	return "HTTP " + strconv.Itoa(*d.LastStatus)
}

// nextAttempt writes when a delivery is tried next: none once delivered,
// now when it is due.
func nextAttempt(d admin.Delivery) string {
	switch {
	case d.DeliveredAt != nil || d.NextAttemptAt == nil:
		return "none"
	case !d.NextAttemptAt.After(time.Now()):
		return "now"
	}
	return ago(*d.NextAttemptAt)
}

func journalTable(w io.Writer, list []admin.Movement) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "No balance movements.")
		return err
	}
	tw := table(w)
	row(tw, "WHEN", "KIND", "AMOUNT", "BALANCE AFTER", "REQUEST OR REASON")
	for _, m := range list {
		row(tw, ago(m.Time), m.Kind, usd(m.Amount), usd(m.Balance), m.RequestID+m.Reason)
	}
	return tw.Flush()
}

func ledgerTable(w io.Writer, list []admin.Charge) error {
	if len(list) == 0 {
		_, err := fmt.Fprintln(w, "No charges.")
		return err
	}
	tw := table(w)
	row(tw, "WHEN", "REQUEST", "ENDPOINT", "MODEL", "UNITS", "COST")
	for _, c := range list {
		row(tw, ago(c.Time), c.RequestID, c.Endpoint, c.Model, humanize.Comma(c.Units)+" "+c.Unit, usd(c.Cost))
	}
	return tw.Flush()
}

func checkReport(w io.Writer, res checkResult) error {
	if res.OK {
		_, err := fmt.Fprintln(w, "Every account's journal adds up to its balance, and every charge has its ledger entry.")
		return err
	}
	tw := table(w)
	row(tw, "ACCOUNT", "BALANCE", "JOURNAL SUM", "LAST ENTRY'S BALANCE", "CHARGES WITHOUT A LEDGER ENTRY")
	for _, p := range res.Problems {
		row(tw, p.Account, usd(p.Balance), usd(p.JournalSum), usd(p.LastBalance), strings.Join(p.UnledgeredCharges, ", "))
	}
	return tw.Flush()
}

func usageTable(w io.Writer, rep usage.Report) error {
	if len(rep.Data) == 0 {
		_, err := fmt.Fprintln(w, "No charges in these days.")
		return err
	}
	first := rep.Data[0]
	var head []string
	for _, c := range []struct {
		name string
		set  bool
	}{{"DAY", first.Day != nil}, {"MODEL", first.Model != nil}, {"ACCOUNT", first.Account != nil}, {"KEY", first.KeyID != nil}} {
		if c.set {
			head = append(head, c.name)
		}
	}
	tw := table(w)
	row(tw, append(head, "REQUESTS", "INPUT TOKENS", "OUTPUT TOKENS", "COST")...)
	for _, r := range rep.Data {
		var cols []string
		for _, s := range []*string{r.Day, r.Model, r.Account, r.KeyID} {
			if s != nil {
				cols = append(cols, *s)
			}
		}
		cols = append(cols, humanize.Comma(r.Requests), humanize.Comma(r.InputTokens), humanize.Comma(r.OutputTokens), usd(r.Cost))
		row(tw, cols...)
	}
	total := make([]string, len(head))
	if len(total) > 0 {
		total[0] = "Total"
	}
	row(tw, append(total, humanize.Comma(rep.Total.Requests), "", "", usd(rep.Total.Cost))...)
	return tw.Flush()
}

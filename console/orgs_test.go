package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// sameOrigin is the header of a form sent from the console's own pages.
var sameOrigin = []string{"Sec-Fetch-Site", "same-origin"}

// addOrg stores an organization with the given name and caps.
func addOrg(t testing.TB, st store.Store, id, name string, daily, monthly *pricing.Money) {
	t.Helper()
	if err := st.CreateOrg(context.Background(), store.Org{ID: id, Name: name, DailyCap: daily, MonthlyCap: monthly, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
}

// addMember stores a paid account of organization org.
func addMember(t testing.TB, st store.Store, id, org string) {
	t.Helper()
	if err := st.CreateAccount(context.Background(), store.Account{ID: id, Plan: store.PlanPaid, Cleared: true, Org: org, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
}

// charge settles a call of account that cost cost, now.
func charge(t testing.TB, st store.Store, requestID, account string, cost pricing.Money) {
	t.Helper()
	if _, err := st.Settle(context.Background(), &store.Entry{RequestID: requestID, AccountID: account, KeyID: "key_" + account, Endpoint: "chat",
		Model: "gpt-4.1-mini", Units: 1, Unit: "token", Cost: cost, Time: time.Now().UTC()}); err != nil {
		t.Fatal(err)
	}
}

// rowCells returns the number cells of the table row whose header cell
// links to href.
func rowCells(t *testing.T, page, href string) []string {
	t.Helper()
	start := strings.Index(page, `<th scope="row"><a href="`+href+`">`)
	if start < 0 {
		t.Fatalf("no row links to %s", href)
	}
	row := page[start:]
	row = row[:strings.Index(row, "</tr>")]
	var cells []string
	for _, m := range cellText.FindAllStringSubmatch(row, -1) {
		cells = append(cells, m[1])
	}
	return cells
}

// ddText matches a fact of a page's list, its id and text captured.
var ddText = regexp.MustCompile(`<dd id="([^"]+)"[^>]*>(.*?)</dd>`)

// facts returns the facts of a page's list by their ids.
func facts(page string) map[string]string {
	out := map[string]string{}
	for _, m := range ddText.FindAllStringSubmatch(page, -1) {
		out[m[1]] = m[2]
	}
	return out
}

// get serves GET path and fails unless it answers 200.
func get(t *testing.T, c *Console, path string) string {
	t.Helper()
	w := serve(c, request("GET", path, ""))
	if w.Code != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", path, w.Code, w.Body)
	}
	return w.Body.String()
}

// The organizations page shows each organization's spend today and this
// month "of" its cap where it has one, and in all; an organization's page
// shows the same figures, its caps in its form and its accounts (linked),
// not the others.
func TestOrgsShowSpendOfCaps(t *testing.T) {
	c, st := newConsole(t)
	addOrg(t, st, "acme-group", "Acme Group", money(pricing.USD(5)), money(pricing.Micro(20_000_001)))
	addOrg(t, st, "bee", "", nil, nil)
	addMember(t, st, "m1", "acme-group")
	addMember(t, st, "m2", "acme-group")
	charge(t, st, "req_1", "m1", pricing.Micro(6538))
	charge(t, st, "req_2", "m2", 1)
	charge(t, st, "req_3", "acme", pricing.USD(1)) // outside any organization

	list := get(t, c, "/orgs")
	if got, want := rowCells(t, list, "/orgs/acme-group"), []string{"$0.006538001 of $5.00", "$0.006538001 of $20.000001", "$0.006538001"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("acme-group's cells %q, want %q", got, want)
	}
	if got, want := rowCells(t, list, "/orgs/bee"), []string{"$0.00", "$0.00", "$0.00"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("bee's cells %q, want %q", got, want)
	}
	if !strings.Contains(list, `<a href="/orgs/acme-group">acme-group</a></th><td>Acme Group</td>`) {
		t.Errorf("the list lacks acme-group's name")
	}
	if !strings.Contains(list, `<nav aria-label="Console"><a href="/">Accounts</a> <a href="/orgs">Organizations</a> <a href="/usage">Usage</a></nav>`) {
		t.Errorf("the navigation lacks the organizations")
	}

	page := get(t, c, "/orgs/acme-group")
	want := map[string]string{"org-name": "Acme Group", "org-today": "$0.006538001 of $5.00", "org-month": "$0.006538001 of $20.000001", "org-total": "$0.006538001"}
	got := facts(page)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("fact %s reads %q, want %q", k, got[k], v)
		}
	}
	if got, want := rowCells(t, page, "/accounts/m1"), []string{"billed afterwards", "$0.006538", "$0.006538", "$0.006538"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("m1's cells %q, want %q", got, want)
	}
	if got, want := rowCells(t, page, "/accounts/m2"), []string{"billed afterwards", "$0.000000001", "$0.000000001", "$0.000000001"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("m2's cells %q, want %q", got, want)
	}
	if strings.Contains(page, `href="/accounts/acme"`) {
		t.Errorf("the organization's page lists acme, which is not in it")
	}
	for _, s := range []string{
		`<input id="org-daily" name="daily_cap_usd" inputmode="decimal" pattern="[0-9]+(\.[0-9]+)?" value="5.00">`,
		`<input id="org-monthly" name="monthly_cap_usd" inputmode="decimal" pattern="[0-9]+(\.[0-9]+)?" value="20.000001">`,
		`<form method="post" action="/orgs/acme-group/caps" class="stack">`,
		`<form method="post" action="/orgs/acme-group/delete">`,
	} {
		if !strings.Contains(page, s) {
			t.Errorf("the organization's page lacks %s", s)
		}
	}
	bee := facts(get(t, c, "/orgs/bee"))
	if bee["org-name"] != "none" || bee["org-today"] != "$0.00" || bee["org-month"] != "$0.00" {
		t.Errorf("bee's facts %q: want no name and $0.00 without caps", bee)
	}
	if w := serve(c, request("GET", "/orgs/nobody", "")); w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), `<p class="error" role="alert">not found</p>`) {
		t.Errorf("GET /orgs/nobody: %d, want 404 not found", w.Code)
	}
}

// An organization's page lists its accounts a page at a time, with a link
// to the next page.
func TestOrgMembersPaged(t *testing.T) {
	c, st := newConsole(t)
	addOrg(t, st, "big", "", nil, nil)
	for i := range AccountsPerPage + 1 {
		addMember(t, st, fmt.Sprintf("m%03d", i), "big")
	}
	members := regexp.MustCompile(`<th scope="row"><a href="/accounts/(m\d+)">`)
	first := get(t, c, "/orgs/big")
	if n := len(members.FindAllString(first, -1)); n != AccountsPerPage {
		t.Errorf("the first page lists %d accounts, want %d", n, AccountsPerPage)
	}
	last := fmt.Sprintf("m%03d", AccountsPerPage-1)
	if want := `<a href="/orgs/big?after=` + last + `">Next accounts</a>`; !strings.Contains(first, want) {
		t.Errorf("the first page lacks %s", want)
	}
	second := get(t, c, "/orgs/big?after="+last)
	if got := members.FindAllStringSubmatch(second, -1); len(got) != 1 || got[0][1] != fmt.Sprintf("m%03d", AccountsPerPage) || strings.Contains(second, "Next accounts") {
		t.Errorf("the second page lists %q, want the last account alone and no next page", got)
	}
}

// orgState is an organization's name and caps as the store holds them,
// "none" for a cap it lacks.
func orgState(t *testing.T, st store.Store, id string) string {
	t.Helper()
	o, err := st.Org(context.Background(), id)
	if errors.Is(err, store.ErrNotFound) {
		return "not found"
	}
	if err != nil {
		t.Fatal(err)
	}
	s := []string{o.Name, "none", "none"}
	for i, m := range []*pricing.Money{o.DailyCap, o.MonthlyCap} {
		if m != nil {
			s[i+1] = m.String()
		}
	}
	return strings.Join(s, " ")
}

// The creation form makes an organization with what it holds (empty
// fields left out) and shows its page; a refused one shows the admin
// API's reason with what it held.
func TestCreateOrgForm(t *testing.T) {
	c, st := newConsole(t)
	w := serve(c, request("POST", "/orgs", "id=acme-group&name=Acme+Group&daily_cap_usd=2.5&monthly_cap_usd=", sameOrigin...))
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/orgs/acme-group" {
		t.Fatalf("creation: %d %q, want 303 /orgs/acme-group", w.Code, w.Header().Get("Location"))
	}
	if got := orgState(t, st, "acme-group"); got != "Acme Group 2.50 none" {
		t.Errorf("acme-group is %q, want Acme Group 2.50 none", got)
	}
	for _, tc := range []struct {
		form   string
		status int
		msg    string
	}{
		{"id=acme-group", http.StatusConflict, `organization &#34;acme-group&#34; already exists`},
		{"id=&name=x", http.StatusBadRequest, "id: required, 1 to 64 letters, digits, &#39;.&#39;, &#39;_&#39; or &#39;-&#39;"},
		{"id=ok&monthly_cap_usd=-1", http.StatusBadRequest, "monthly_cap_usd: must not be negative"},
		{"id=ok&daily_cap_usd=ten", http.StatusBadRequest, "daily_cap_usd: amount must be a decimal number of US dollars with at most 9 decimals"},
	} {
		w := serve(c, request("POST", "/orgs", tc.form, sameOrigin...))
		if w.Code != tc.status || !strings.Contains(w.Body.String(), `<p class="error" role="alert">`+tc.msg+`</p>`) {
			t.Errorf("%s: %d, want %d with %q:\n%s", tc.form, w.Code, tc.status, tc.msg, w.Body)
		}
	}
	w = serve(c, request("POST", "/orgs", "id=ok&name=Okay&daily_cap_usd=ten", sameOrigin...))
	for _, s := range []string{`id="new-org-id" name="id" required maxlength="64" value="ok"`, `id="new-org-name" name="name" maxlength="128" value="Okay"`,
		`id="new-org-daily" name="daily_cap_usd" inputmode="decimal" pattern="[0-9]+(\.[0-9]+)?" value="ten"`} {
		if !strings.Contains(w.Body.String(), s) {
			t.Errorf("the refused form's page lacks %s", s)
		}
	}
	if got := orgState(t, st, "ok"); got != "not found" {
		t.Errorf("refused forms made organization ok: %s", got)
	}
	if w := serve(c, request("POST", "/orgs", "id=evil", "Sec-Fetch-Site", "cross-site")); w.Code != http.StatusForbidden || orgState(t, st, "evil") != "not found" {
		t.Errorf("a cross-site creation: %d, organization %s", w.Code, orgState(t, st, "evil"))
	}
}

// The caps form sets the caps it holds, removes those left empty, leaves
// those it lacks; a refused one shows why with what it held.
func TestOrgCapsForm(t *testing.T) {
	c, st := newConsole(t)
	addOrg(t, st, "acme-group", "Acme", money(pricing.USD(5)), nil)
	post := func(form string, header ...string) *http.Response {
		return serve(c, request("POST", "/orgs/acme-group/caps", form, header...)).Result()
	}
	r := post("daily_cap_usd=&monthly_cap_usd=100.000000001", sameOrigin...)
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/orgs/acme-group" {
		t.Fatalf("caps form: %d %q, want 303 /orgs/acme-group", r.StatusCode, r.Header.Get("Location"))
	}
	if got := orgState(t, st, "acme-group"); got != "Acme none 100.000000001" {
		t.Errorf("acme-group is %q, want Acme none 100.000000001", got)
	}
	if r := post("daily_cap_usd=0.25", sameOrigin...); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("a form of one field: %d", r.StatusCode)
	}
	if got := orgState(t, st, "acme-group"); got != "Acme 0.25 100.000000001" {
		t.Errorf("acme-group is %q, want Acme 0.25 100.000000001", got)
	}
	for _, tc := range []struct {
		path, form string
		status     int
		msg        string
	}{
		{"/orgs/acme-group/caps", "daily_cap_usd=-1&monthly_cap_usd=", http.StatusBadRequest, "daily_cap_usd: must not be negative"},
		{"/orgs/acme-group/caps", "monthly_cap_usd=1.0000000001", http.StatusBadRequest, "monthly_cap_usd: amount must be a decimal number of US dollars with at most 9 decimals"},
		{"/orgs/acme-group/caps", "name=x", http.StatusBadRequest, "caps: the form holds none of daily_cap_usd, monthly_cap_usd"},
	} {
		w := serve(c, request("POST", tc.path, tc.form, sameOrigin...))
		if w.Code != tc.status || !strings.Contains(w.Body.String(), `<p class="error" role="alert">`+tc.msg+`</p>`) {
			t.Errorf("%s %s: %d, want %d with %q:\n%s", tc.path, tc.form, w.Code, tc.status, tc.msg, w.Body)
		}
	}
	if w := serve(c, request("POST", "/orgs/nobody/caps", "daily_cap_usd=1", sameOrigin...)); w.Code != http.StatusNotFound {
		t.Errorf("caps of an unknown organization: %d, want 404", w.Code)
	}
	w := serve(c, request("POST", "/orgs/acme-group/caps", "daily_cap_usd=-1&monthly_cap_usd=3", sameOrigin...))
	for _, s := range []string{`id="org-daily" name="daily_cap_usd" inputmode="decimal" pattern="[0-9]+(\.[0-9]+)?" value="-1"`,
		`id="org-monthly" name="monthly_cap_usd" inputmode="decimal" pattern="[0-9]+(\.[0-9]+)?" value="3"`} {
		if !strings.Contains(w.Body.String(), s) {
			t.Errorf("the refused form's page lacks %s", s)
		}
	}
	if r := post("daily_cap_usd=1", "Sec-Fetch-Site", "cross-site"); r.StatusCode != http.StatusForbidden {
		t.Errorf("a cross-site caps form: %d, want 403", r.StatusCode)
	}
	if got := orgState(t, st, "acme-group"); got != "Acme 0.25 100.000000001" {
		t.Errorf("refused forms changed acme-group to %q", got)
	}
}

// Deleting an organization that accounts belong to shows the admin API's
// refusal on its page; once they left, it is deleted.
func TestDeleteOrgForm(t *testing.T) {
	c, st := newConsole(t)
	addOrg(t, st, "acme-group", "", nil, nil)
	addMember(t, st, "m1", "acme-group")
	w := serve(c, request("POST", "/orgs/acme-group/delete", "x=1", sameOrigin...))
	body := w.Body.String()
	if w.Code != http.StatusConflict || !strings.Contains(body, `<p class="error" role="alert">organization &#34;acme-group&#34; still has accounts; move them out first</p>`) {
		t.Fatalf("deleting an organization with accounts: %d\n%s", w.Code, body)
	}
	if !strings.Contains(body, `<th scope="row"><a href="/accounts/m1">m1</a></th>`) {
		t.Errorf("the refusal's page lacks the organization's account")
	}
	if w := serve(c, request("POST", "/orgs/acme-group/delete", "x=1", "Sec-Fetch-Site", "cross-site")); w.Code != http.StatusForbidden {
		t.Errorf("a cross-site deletion: %d, want 403", w.Code)
	}
	if r := serve(c, request("POST", "/accounts/m1/org", "org=", sameOrigin...)); r.Code != http.StatusSeeOther {
		t.Fatalf("taking m1 out: %d", r.Code)
	}
	w = serve(c, request("POST", "/orgs/acme-group/delete", "x=1", sameOrigin...))
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/orgs" {
		t.Fatalf("deletion: %d %q, want 303 /orgs", w.Code, w.Header().Get("Location"))
	}
	if got := orgState(t, st, "acme-group"); got != "not found" {
		t.Errorf("after its deletion acme-group is %q", got)
	}
	if w := serve(c, request("POST", "/orgs/acme-group/delete", "x=1", sameOrigin...)); w.Code != http.StatusNotFound {
		t.Errorf("deleting it again: %d, want 404", w.Code)
	}
}

// An account's page shows its organization (linked) and its form puts it
// in one, takes it out (empty) or shows the admin API's refusal of an
// unknown one.
func TestAccountOrgForm(t *testing.T) {
	c, st := newConsole(t)
	addOrg(t, st, "acme-group", "", nil, nil)
	if got := facts(get(t, c, "/accounts/acme"))["account-org"]; got != "none" {
		t.Errorf("acme's organization reads %q, want none", got)
	}
	w := serve(c, request("POST", "/accounts/acme/org", "org=acme-group", sameOrigin...))
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/accounts/acme" {
		t.Fatalf("joining: %d %q, want 303 /accounts/acme", w.Code, w.Header().Get("Location"))
	}
	page := get(t, c, "/accounts/acme")
	if got := facts(page)["account-org"]; got != `<a href="/orgs/acme-group">acme-group</a>` {
		t.Errorf("acme's organization reads %q, want a link to acme-group", got)
	}
	if !strings.Contains(page, `<input id="org" name="org" maxlength="64" value="acme-group">`) {
		t.Errorf("the organization form does not hold acme-group")
	}
	if !strings.Contains(get(t, c, "/"), `<td><a href="/orgs/acme-group">acme-group</a></td>`) {
		t.Errorf("the accounts page does not show acme's organization")
	}
	if !strings.Contains(get(t, c, "/orgs/acme-group"), `<th scope="row"><a href="/accounts/acme">acme</a></th>`) {
		t.Errorf("the organization's page does not list acme")
	}

	for _, tc := range []struct {
		form   string
		status int
		msg    string
	}{
		{"org=nobody", http.StatusBadRequest, "org: no such organization"},
		{"org=a+b", http.StatusBadRequest, "org: must be an organization&#39;s id, or null for none"},
		{"x=1", http.StatusBadRequest, "org: the form lacks it"},
	} {
		w := serve(c, request("POST", "/accounts/acme/org", tc.form, sameOrigin...))
		if w.Code != tc.status || !strings.Contains(w.Body.String(), `<p class="error" role="alert">`+tc.msg+`</p>`) {
			t.Errorf("%s: %d, want %d with %q:\n%s", tc.form, w.Code, tc.status, tc.msg, w.Body)
		}
	}
	w = serve(c, request("POST", "/accounts/acme/org", "org=nobody", sameOrigin...))
	if !strings.Contains(w.Body.String(), `<input id="org" name="org" maxlength="64" value="nobody">`) {
		t.Errorf("the refused form does not hold what it was sent")
	}
	if w := serve(c, request("POST", "/accounts/acme/org", "org=", "Sec-Fetch-Site", "cross-site")); w.Code != http.StatusForbidden {
		t.Errorf("a cross-site form: %d, want 403", w.Code)
	}
	if acc, _ := st.Account(context.Background(), "acme"); acc.Org != "acme-group" {
		t.Errorf("refused forms moved acme to %q", acc.Org)
	}
	if w := serve(c, request("POST", "/accounts/acme/org", "org=+", sameOrigin...)); w.Code != http.StatusSeeOther {
		t.Fatalf("leaving: %d", w.Code)
	}
	if acc, _ := st.Account(context.Background(), "acme"); acc.Org != "" {
		t.Errorf("after leaving acme is in %q", acc.Org)
	}
	if w := serve(c, request("POST", "/accounts/nobody/org", "org=acme-group", sameOrigin...)); w.Code != http.StatusNotFound {
		t.Errorf("an unknown account: %d, want 404", w.Code)
	}
}

// An organization's name reaches its pages as text.
func TestOrgNameShownEscaped(t *testing.T) {
	c, st := newConsole(t)
	addOrg(t, st, "evil", evil, nil, nil)
	for _, path := range []string{"/orgs", "/orgs/evil"} {
		body := get(t, c, path)
		if strings.ContainsAny(body, "\x1b\x7f\u202e\r\t") || !strings.Contains(body, evilShown) {
			t.Errorf("GET %s: the name is not shown as %q:\n%s", path, evilShown, body)
		}
	}
}

func FuzzOrgForms(f *testing.F) {
	for _, s := range []string{"id=a&daily_cap_usd=1", "daily_cap_usd=&monthly_cap_usd=2.5", "monthly_cap_usd=-0.000000001", "org=acme-group", "org=",
		"org=%00", "id=%ff&name=%1b", "daily_cap_usd=1e3", "org=a&org=b", "id=" + strings.Repeat("x", 65)} {
		f.Add(s)
	}
	c, st := newConsole(f)
	addOrg(f, st, "acme-group", "", nil, nil)
	f.Fuzz(func(t *testing.T, form string) {
		for _, path := range []string{"/orgs", "/orgs/acme-group/caps", "/accounts/acme/org"} {
			w := serve(c, request("POST", path, form, sameOrigin...))
			if w.Code >= 500 {
				t.Fatalf("POST %s %q: status %d", path, form, w.Code)
			}
		}
		orgs, err := st.ListOrgs(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range orgs {
			for _, m := range []*pricing.Money{o.DailyCap, o.MonthlyCap} {
				if m != nil && *m < 0 {
					t.Fatalf("%q: organization %s has a cap of %s", form, o.ID, m)
				}
			}
		}
		acc, err := st.Account(context.Background(), "acme")
		if err != nil {
			t.Fatal(err)
		}
		if acc.Org != "" && orgState(t, st, acc.Org) == "not found" {
			t.Fatalf("%q: acme is in %q, which does not exist", form, acc.Org)
		}
	})
}

package gwcli

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/admin"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// An organization's card shows its caps ("none" where it has none) and
// what its accounts spent, exact to the nano-dollar.
func TestOrgCard(t *testing.T) {
	daily := pricing.Micro(5_500_000)
	o := admin.Org{ID: "acme-group", Name: "Acme Group", DailyCap: &daily, CreatedAt: time.Now().Add(-time.Hour),
		Spend: admin.Spend{Today: 1, Month: pricing.Micro(6538), Total: pricing.USD(1234)}}
	var b bytes.Buffer
	if err := orgCard(&b, o); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"Organization  acme-group\n" +
		"Name          Acme Group\n" +
		"Daily cap     $5.50\n" +
		"Monthly cap   none\n" +
		"Spent         $0.000000001 today, $0.006538 this month, $1,234.00 in all\n" +
		"Created       1 hour ago\n"
	if b.String() != want {
		t.Errorf("org card:\n%s\nwant\n%s", b.String(), want)
	}
}

// The organization list has a column per cap and per span of spend; the
// account list and card name the organization, or none.
func TestOrgTables(t *testing.T) {
	monthly := pricing.USD(50)
	at := time.Now().Add(-2 * time.Hour)
	var b bytes.Buffer
	if err := orgTable(&b, []admin.Org{{ID: "a", Name: "A", MonthlyCap: &monthly, CreatedAt: at, Spend: admin.Spend{Today: pricing.Micro(6538)}},
		{ID: "b", CreatedAt: at}}); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"ORG  NAME  DAILY CAP  MONTHLY CAP  TODAY      THIS MONTH  IN ALL  CREATED\n" +
		"a    A     none       $50.00       $0.006538  $0.00       $0.00   2 hours ago\n" +
		"b          none       none         $0.00      $0.00       $0.00   2 hours ago\n"
	if b.String() != want {
		t.Errorf("org table:\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	if err := orgTable(&b, nil); err != nil || b.String() != "No organizations.\n" {
		t.Errorf("no organizations: %q, %v", b.String(), err)
	}

	org := "acme-group"
	b.Reset()
	if err := accountTable(&b, []admin.Account{{ID: "acme", Plan: "paid", Org: &org, CreatedAt: at}, {ID: "solo", Plan: "free", CreatedAt: at}}); err != nil {
		t.Fatal(err)
	}
	want = "" +
		"ACCOUNT  PLAN  ORG         BALANCE       TODAY  THIS MONTH  IN ALL  CREATED\n" +
		"acme     paid  acme-group  billed after  $0.00  $0.00       $0.00   2 hours ago\n" +
		"solo     free  none        billed after  $0.00  $0.00       $0.00   2 hours ago\n"
	if b.String() != want {
		t.Errorf("account table:\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	if err := accountCard(&b, admin.Account{ID: "acme", Plan: "paid", Org: &org, CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	if want := "Account      acme\nPlan         paid\nOrg          acme-group\n"; !bytes.HasPrefix(b.Bytes(), []byte(want)) {
		t.Errorf("account card:\n%s\nlacks %q", b.String(), want)
	}
}

// orgAnswer is the admin API's answer for an organization.
const orgAnswer = `{"id":"acme-group","name":"Acme Group","daily_cap_usd":"5.00","monthly_cap_usd":null,"created_at":"2026-01-02T03:04:05Z",` +
	`"spend":{"today_usd":"0.25","month_usd":"1.50","total_usd":"3.00"}}`

// The organization commands send the settings given, "none" as null, and
// nothing for one not given; `--org` on the account commands sends the
// organization's id, or null for "none"; an id is one path segment.
func TestOrgCommandsSend(t *testing.T) {
	for _, c := range []struct {
		args   []string
		answer string
		want   sent
	}{
		{[]string{"orgs", "create", "acme-group", "--name", "Acme Group", "--daily-cap", "5", "--monthly-cap", "20.000000001"}, orgAnswer,
			sent{"POST", "/gw/orgs", map[string]any{"id": "acme-group", "name": "Acme Group", "daily_cap_usd": "5", "monthly_cap_usd": "20.000000001"}}},
		{[]string{"orgs", "create", "acme-group"}, orgAnswer, sent{"POST", "/gw/orgs", map[string]any{"id": "acme-group"}}},
		{[]string{"orgs", "update", "acme-group", "--daily-cap", "none", "--monthly-cap", "7.5"}, orgAnswer,
			sent{"PATCH", "/gw/orgs/acme-group", map[string]any{"daily_cap_usd": nil, "monthly_cap_usd": "7.5"}}},
		{[]string{"orgs", "update", "acme-group", "--name", ""}, orgAnswer, sent{"PATCH", "/gw/orgs/acme-group", map[string]any{"name": ""}}},
		{[]string{"orgs", "show", "a/../b"}, orgAnswer, sent{"GET", "/gw/orgs/a%2F..%2Fb", nil}},
		{[]string{"orgs", "list"}, `{"object":"list","data":[` + orgAnswer + `]}`, sent{"GET", "/gw/orgs", nil}},
		{[]string{"orgs", "delete", "acme-group"}, ``, sent{"DELETE", "/gw/orgs/acme-group", nil}},
		{[]string{"accounts", "create", "acme", "--plan", "paid", "--org", "acme-group"}, accountAnswer,
			sent{"POST", "/gw/accounts", map[string]any{"id": "acme", "plan": "paid", "org": "acme-group"}}},
		{[]string{"accounts", "update", "acme", "--org", "none"}, accountAnswer, sent{"PATCH", "/gw/accounts/acme", map[string]any{"org": nil}}},
		{[]string{"accounts", "update", "acme", "--org", "other"}, accountAnswer, sent{"PATCH", "/gw/accounts/acme", map[string]any{"org": "other"}}},
	} {
		addr, got := fakeAdmin(t, http.StatusOK, c.answer)
		if _, err := runGW(addr, c.args...); err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		if len(*got) != 1 || !sameSent((*got)[0], c.want) {
			t.Errorf("%q sent %+v, want %+v", c.args, *got, c.want)
		}
	}
}

// accountAnswer is the admin API's answer for an account in an
// organization.
const accountAnswer = `{"id":"acme","plan":"paid","cleared":false,"payg":false,"lane_billing":false,"low_balance_usd":null,"balance_usd":null,` +
	`"daily_cap_usd":null,"monthly_cap_usd":null,"abilities":[],"org":"acme-group","created_at":"2026-01-02T03:04:05Z",` +
	`"spend":{"today_usd":"0","month_usd":"0","total_usd":"0"}}`

// The organization commands print the card, or with --json the answer as
// it came; an update of nothing sends nothing; a delete refused while
// accounts belong to the organization says how to move them out.
func TestOrgCommandsPrint(t *testing.T) {
	addr, got := fakeAdmin(t, http.StatusOK, orgAnswer)
	out, err := runGW(addr, "orgs", "show", "acme-group")
	want := "" +
		"Organization  acme-group\n" +
		"Name          Acme Group\n" +
		"Daily cap     $5.00\n" +
		"Monthly cap   none\n" +
		"Spent         $0.25 today, $1.50 this month, $3.00 in all\n"
	if err != nil || !bytes.HasPrefix([]byte(out), []byte(want)) {
		t.Errorf("orgs show:\n%s\n%v\nwant it to start\n%s", out, err, want)
	}
	out, err = runGW(addr, "orgs", "update", "acme-group", "--daily-cap", "5", "--json")
	if err != nil || out != orgAnswer+"\n" {
		t.Errorf("orgs update --json: %q, %v", out, err)
	}
	n := len(*got)
	if _, err := runGW(addr, "orgs", "update", "acme-group"); err == nil || err.Error() != "nothing to change: give a setting (see --help)" {
		t.Errorf("orgs update of nothing: %v", err)
	}
	if len(*got) != n {
		t.Errorf("orgs update of nothing sent %+v", (*got)[n:])
	}

	addr, _ = fakeAdmin(t, http.StatusNoContent, "")
	if out, err := runGW(addr, "orgs", "delete", "acme-group"); err != nil || out != "Deleted organization acme-group.\n" {
		t.Errorf("orgs delete: %q, %v", out, err)
	}
	if out, err := runGW(addr, "orgs", "delete", "acme-group", "--json"); err != nil || out != `{"deleted":true,"id":"acme-group"}`+"\n" {
		t.Errorf("orgs delete --json: %q, %v", out, err)
	}

	addr, _ = fakeAdmin(t, http.StatusConflict, `{"error":"organization \"acme-group\" still has accounts; move them out first"}`)
	if _, err := runGW(addr, "orgs", "delete", "acme-group"); err == nil ||
		err.Error() != "organization acme-group still has accounts: move each out first (caddy gw accounts update ID --org none)" {
		t.Errorf("a refused delete: %v", err)
	}
	addr, _ = fakeAdmin(t, http.StatusNotFound, `{"error":"not found"}`)
	if _, err := runGW(addr, "orgs", "delete", "nobody"); err == nil || err.Error() != "organization nobody: not found" {
		t.Errorf("delete of no organization: %v", err)
	}
	addr, _ = fakeAdmin(t, http.StatusBadRequest, `{"error":"org: no such organization"}`)
	if _, err := runGW(addr, "accounts", "update", "acme", "--org", "nobody"); err == nil || err.Error() != "account acme: org: no such organization" {
		t.Errorf("an unknown org: %v", err)
	}
}

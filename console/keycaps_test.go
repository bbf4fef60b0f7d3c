package console

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// addKey stores a key of account with the given caps.
func addKey(t testing.TB, st store.Store, account, id string, daily, monthly, total *pricing.Money) {
	t.Helper()
	k := store.Key{ID: id, AccountID: account, Name: "k " + id, Hash: store.HashSecret("sk-" + id), CreatedAt: time.Now(),
		DailyCap: daily, MonthlyCap: monthly, TotalCap: total}
	if err := st.CreateKey(context.Background(), k); err != nil {
		t.Fatal(err)
	}
}

// cellText matches a number cell of a table row, its text captured.
var cellText = regexp.MustCompile(`<td class="num">([^<]*)</td>`)

// spendCells returns the three spend cells of key id's row on page.
func spendCells(t *testing.T, page, id string) []string {
	t.Helper()
	start := strings.Index(page, "<code>"+id+"</code>")
	if start < 0 {
		t.Fatalf("the page lists no key %s", id)
	}
	row := page[start:]
	row = row[:strings.Index(row, "</tr>")]
	var cells []string
	for _, m := range cellText.FindAllStringSubmatch(row, -1) {
		cells = append(cells, m[1])
	}
	return cells
}

func money(m pricing.Money) *pricing.Money { return &m }

// An account's page shows each key's spend today, this month and in all,
// each of its cap where it has one, and its caps form holds the caps.
func TestKeysShowSpendAndCaps(t *testing.T) {
	c, st := newConsole(t)
	ctx := context.Background()
	addKey(t, st, "acme", "key_capped", money(pricing.USD(5)), nil, money(pricing.Micro(20_000_001)))
	addKey(t, st, "acme", "key_free", nil, nil, nil)
	now := time.Now().UTC()
	for i, cost := range []pricing.Money{pricing.Micro(6538), 1} {
		if _, err := st.Settle(ctx, &store.Entry{RequestID: "req_" + itoa(i), AccountID: "acme", KeyID: "key_capped", Endpoint: "chat",
			Model: "gpt-4.1-mini", Units: 1, Unit: "token", Cost: cost, Time: now}); err != nil {
			t.Fatal(err)
		}
	}
	w := serve(c, request("GET", "/accounts/acme", ""))
	page := w.Body.String()
	if w.Code != http.StatusOK {
		t.Fatalf("GET /accounts/acme: %d", w.Code)
	}
	if got, want := spendCells(t, page, "key_capped"), []string{"$0.006538001 of $5.00", "$0.006538001", "$0.006538001 of $20.000001"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("capped key's spend cells %q, want %q", got, want)
	}
	if got, want := spendCells(t, page, "key_free"), []string{"$0.00", "$0.00", "$0.00"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("uncapped key's spend cells %q, want %q", got, want)
	}
	for _, s := range []string{
		`<input id="daily-key_capped" name="daily_cap_usd" inputmode="decimal" pattern="[0-9]+(\.[0-9]+)?" value="5.00">`,
		`<input id="monthly-key_capped" name="monthly_cap_usd" inputmode="decimal" pattern="[0-9]+(\.[0-9]+)?" value="">`,
		`<input id="total-key_capped" name="total_cap_usd" inputmode="decimal" pattern="[0-9]+(\.[0-9]+)?" value="20.000001">`,
		`<form method="post" action="/accounts/acme/keys/key_free/caps" class="stack">`,
	} {
		if !strings.Contains(page, s) {
			t.Errorf("the page lacks %s", s)
		}
	}
}

// The caps form sets the caps it holds, removes those left empty, leaves
// those it lacks; a refused one shows why with what it held; another
// account's key is not changed.
func TestCapsForm(t *testing.T) {
	c, st := newConsole(t)
	ctx := context.Background()
	addKey(t, st, "acme", "key_1", money(pricing.USD(5)), money(pricing.USD(50)), nil)
	same := []string{"Sec-Fetch-Site", "same-origin"}
	post := func(key, form string) *http.Response {
		return serve(c, request("POST", "/accounts/acme/keys/"+url.PathEscape(key)+"/caps", form, same...)).Result()
	}
	caps := func() [3]*pricing.Money {
		k, err := st.Key(ctx, "key_1")
		if err != nil {
			t.Fatal(err)
		}
		return [3]*pricing.Money{k.DailyCap, k.MonthlyCap, k.TotalCap}
	}
	show := func(m [3]*pricing.Money) string {
		s := make([]string, 3)
		for i, x := range m {
			s[i] = "none"
			if x != nil {
				s[i] = x.String()
			}
		}
		return strings.Join(s, " ")
	}

	r := post("key_1", "daily_cap_usd=7.25&monthly_cap_usd=&total_cap_usd=100.000000001")
	if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/accounts/acme" {
		t.Fatalf("caps form: %d %q, want 303 /accounts/acme", r.StatusCode, r.Header.Get("Location"))
	}
	if got := show(caps()); got != "7.25 none 100.000000001" {
		t.Errorf("caps %s, want 7.25 none 100.000000001", got)
	}
	// A field the form lacks is left as it is.
	if r := post("key_1", "daily_cap_usd="); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("a form of one field: %d", r.StatusCode)
	}
	if got := show(caps()); got != "none none 100.000000001" {
		t.Errorf("caps %s, want none none 100.000000001", got)
	}

	for _, tc := range []struct {
		key, form string
		status    int
		msg       string
	}{
		{"key_1", "daily_cap_usd=-1&monthly_cap_usd=&total_cap_usd=", http.StatusBadRequest, "daily_cap_usd: must not be negative"},
		{"key_1", "total_cap_usd=ten", http.StatusBadRequest, "total_cap_usd: amount must be a decimal number of US dollars with at most 9 decimals"},
		{"key_1", "name=x", http.StatusBadRequest, "caps: the form holds none of daily_cap_usd, monthly_cap_usd, total_cap_usd"},
		{"key_nobody", "daily_cap_usd=1", http.StatusNotFound, "no key key_nobody on this account"},
	} {
		w := serve(c, request("POST", "/accounts/acme/keys/"+tc.key+"/caps", tc.form, same...))
		if w.Code != tc.status || !strings.Contains(w.Body.String(), `<p class="error" role="alert">`+tc.msg+`</p>`) {
			t.Errorf("%s %s: %d, want %d with %q:\n%s", tc.key, tc.form, w.Code, tc.status, tc.msg, w.Body)
		}
	}
	// A refused form is shown open, with what it held.
	w := serve(c, request("POST", "/accounts/acme/keys/key_1/caps", "daily_cap_usd=-1&monthly_cap_usd=&total_cap_usd=3", same...))
	for _, s := range []string{`<details class="caps" id="caps-key_1" open>`, `id="daily-key_1" name="daily_cap_usd" inputmode="decimal" pattern="[0-9]+(\.[0-9]+)?" value="-1"`,
		`id="total-key_1" name="total_cap_usd" inputmode="decimal" pattern="[0-9]+(\.[0-9]+)?" value="3"`} {
		if !strings.Contains(w.Body.String(), s) {
			t.Errorf("the refused form's page lacks %s", s)
		}
	}
	if got := show(caps()); got != "none none 100.000000001" {
		t.Errorf("refused forms changed the caps to %s", got)
	}

	// Another account's key is not changed from this account's page.
	if err := st.CreateAccount(ctx, store.Account{ID: "other", Plan: store.PlanPaid, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	addKey(t, st, "other", "key_theirs", nil, nil, nil)
	if r := post("key_theirs", "daily_cap_usd=1"); r.StatusCode != http.StatusNotFound {
		t.Errorf("another account's key: %d, want 404", r.StatusCode)
	}
	if k, _ := st.Key(ctx, "key_theirs"); k.DailyCap != nil {
		t.Errorf("another account's key got a daily cap of %s", k.DailyCap)
	}
	// From another origin, nothing is changed.
	w = serve(c, request("POST", "/accounts/acme/keys/key_1/caps", "daily_cap_usd=1", "Sec-Fetch-Site", "cross-site"))
	if w.Code != http.StatusForbidden || show(caps()) != "none none 100.000000001" {
		t.Errorf("a cross-site caps form: %d, caps %s", w.Code, show(caps()))
	}
}

func FuzzCapsForm(f *testing.F) {
	for _, s := range []string{"daily_cap_usd=1", "daily_cap_usd=&monthly_cap_usd=2.5", "total_cap_usd=-0.000000001", "total_cap_usd=1e3",
		"daily_cap_usd=%00", "monthly_cap_usd=99999999999999999999", "x=1", "daily_cap_usd=1&daily_cap_usd=2"} {
		f.Add(s)
	}
	c, st := newConsole(f)
	addKey(f, st, "acme", "key_1", nil, nil, nil)
	f.Fuzz(func(t *testing.T, form string) {
		w := serve(c, request("POST", "/accounts/acme/keys/key_1/caps", form, "Sec-Fetch-Site", "same-origin"))
		if w.Code >= 500 {
			t.Fatalf("%q: status %d", form, w.Code)
		}
		k, err := st.Key(context.Background(), "key_1")
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range []*pricing.Money{k.DailyCap, k.MonthlyCap, k.TotalCap} {
			if m != nil && *m < 0 {
				t.Fatalf("%q: a cap of %s", form, m)
			}
		}
	})
}

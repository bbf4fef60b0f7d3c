package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"text/template/parse"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/admin"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/internal/store/sqlite"
	"github.com/caddy-gw/caddy-gw/internal/usage"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// newConsole returns a console over a fresh store holding a prepaid
// account "acme" with 10 USD.
func newConsole(t testing.TB) (*Console, store.Store) {
	t.Helper()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	bal := pricing.USD(10)
	if err := st.CreateAccount(context.Background(), store.Account{ID: "acme", Plan: store.PlanPaid, Cleared: true, Balance: &bal, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	api := admin.New(st)
	c := New(func() http.Handler { return api })
	c.Hosts = func(*http.Request) []string { return []string{"console.example.com", "*.ops.example.com"} }
	return c, st
}

// request builds a request from a loopback client to the console's site.
func request(method, target, form string, header ...string) *http.Request {
	var r *http.Request
	if form != "" {
		r = httptest.NewRequest(method, target, strings.NewReader(form))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		r = httptest.NewRequest(method, target, nil)
	}
	r.Host = "localhost:2020"
	r.RemoteAddr = "127.0.0.1:40000"
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	return r
}

func serve(c *Console, r *http.Request) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	c.ServeHTTP(w, r)
	return w
}

func keyCount(t *testing.T, st store.Store) int {
	t.Helper()
	keys, err := st.Keys(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	return len(keys)
}

func TestLoopbackClientsOnly(t *testing.T) {
	c, _ := newConsole(t)
	for _, tc := range []struct {
		remote     string
		behindAuth bool
		want       int
	}{
		{"127.0.0.1:5000", false, http.StatusOK},
		{"[::1]:5000", false, http.StatusOK},
		{"[::ffff:127.0.0.1]:5000", false, http.StatusOK},
		{"192.0.2.7:5000", false, http.StatusForbidden},
		{"[2001:db8::1]:5000", false, http.StatusForbidden},
		{"garbage", false, http.StatusForbidden},
		{"192.0.2.7:5000", true, http.StatusOK},
	} {
		c.BehindAuth = tc.behindAuth
		r := request("GET", "/", "")
		r.RemoteAddr = tc.remote
		if got := serve(c, r).Code; got != tc.want {
			t.Errorf("client %s (behind_auth %v): status %d, want %d", tc.remote, tc.behindAuth, got, tc.want)
		}
	}
}

func TestForeignHostRefused(t *testing.T) {
	c, _ := newConsole(t)
	for host, want := range map[string]int{
		"localhost:2020":             http.StatusOK,
		"LOCALHOST":                  http.StatusOK,
		"127.0.0.1:2020":             http.StatusOK,
		"[::1]:2020":                 http.StatusOK,
		"console.example.com":        http.StatusOK,
		"a.ops.example.com:443":      http.StatusOK,
		"ops.example.com":            http.StatusMisdirectedRequest,
		"a.b.ops.example.com":        http.StatusMisdirectedRequest,
		"attacker.example:2020":      http.StatusMisdirectedRequest,
		"localhost.attacker.example": http.StatusMisdirectedRequest,
		"":                           http.StatusMisdirectedRequest,
	} {
		r := request("GET", "/", "")
		r.Host = host
		w := serve(c, r)
		if w.Code != want {
			t.Errorf("Host %q: status %d, want %d", host, w.Code, want)
		}
		if got := w.Header().Get("X-Frame-Options"); got != "DENY" {
			t.Errorf("Host %q: X-Frame-Options %q, want DENY", host, got)
		}
	}
}

func TestCrossOriginWritesRefused(t *testing.T) {
	c, st := newConsole(t)
	refused := [][]string{
		{"Sec-Fetch-Site", "cross-site"},
		{"Sec-Fetch-Site", "same-site"},
		{"Origin", "http://attacker.example"},
		{"Origin", "http://localhost:2021"},
		{"Origin", "null"},
	}
	for _, h := range refused {
		w := serve(c, request("POST", "/accounts/acme/keys", "name=evil", h...))
		if w.Code != http.StatusForbidden {
			t.Errorf("POST with %s: %q: status %d, want 403", h[0], h[1], w.Code)
		}
		w = serve(c, request("POST", "/accounts/acme/balance", "amount_usd=5", h...))
		if w.Code != http.StatusForbidden {
			t.Errorf("top-up with %s: %q: status %d, want 403", h[0], h[1], w.Code)
		}
	}
	if n := keyCount(t, st); n != 0 {
		t.Fatalf("refused writes made %d keys", n)
	}
	acc, _ := st.Account(context.Background(), "acme")
	if *acc.Balance != pricing.USD(10) {
		t.Fatalf("refused top-ups changed the balance to %s", acc.Balance)
	}
	// The same form from the console's own pages is served.
	w := serve(c, request("POST", "/accounts/acme/keys", "name=ok", "Origin", "http://localhost:2020", "Sec-Fetch-Site", "same-origin"))
	if w.Code != http.StatusCreated {
		t.Fatalf("same-origin POST: status %d, want 201: %s", w.Code, w.Body)
	}
	if !strings.Contains(w.Body.String(), `<output id="new-key">sk-`) {
		t.Fatalf("the new key is not shown:\n%s", w.Body)
	}
	if n := keyCount(t, st); n != 1 {
		t.Fatalf("%d keys after one same-origin POST, want 1", n)
	}
}

func TestBalanceForm(t *testing.T) {
	c, st := newConsole(t)
	same := []string{"Sec-Fetch-Site", "same-origin"}
	for _, tc := range []struct {
		form string
		want int
		msg  string
	}{
		{"amount_usd=2.50", http.StatusSeeOther, ""},
		{"amount_usd=-1&reason=", http.StatusBadRequest, "reason: required"},
		{"amount_usd=-1&reason=refund+of+a+test", http.StatusSeeOther, ""},
		{"amount_usd=1&reason=gift", http.StatusBadRequest, "reason: only for a negative amount"},
		{"amount_usd=abc", http.StatusBadRequest, "amount:"},
		{"amount_usd=-100&reason=too+much", http.StatusBadRequest, "below zero"},
	} {
		w := serve(c, request("POST", "/accounts/acme/balance", tc.form, same...))
		if w.Code != tc.want || !strings.Contains(w.Body.String(), tc.msg) {
			t.Errorf("%s: status %d, want %d with %q:\n%s", tc.form, w.Code, tc.want, tc.msg, w.Body)
		}
	}
	acc, _ := st.Account(context.Background(), "acme")
	if want := pricing.USD(10) + pricing.Micro(2_500_000) - pricing.USD(1); *acc.Balance != want {
		t.Fatalf("balance %s, want %s", acc.Balance, want)
	}
	page := serve(c, request("GET", "/accounts/acme", "")).Body.String()
	for _, s := range []string{"top_up", "adjustment", "refund of a test", "$11.5"} {
		if !strings.Contains(page, s) {
			t.Errorf("account page lacks %q", s)
		}
	}
}

func TestRevokeOnlyThisAccountsKey(t *testing.T) {
	c, st := newConsole(t)
	ctx := context.Background()
	if err := st.CreateAccount(ctx, store.Account{ID: "other", Plan: store.PlanPaid, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	k := store.Key{ID: store.NewID("key"), AccountID: "other", Name: "theirs", Hash: store.HashSecret("sk-x"), CreatedAt: time.Now()}
	if err := st.CreateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	same := []string{"Sec-Fetch-Site", "same-origin"}
	w := serve(c, request("POST", "/accounts/acme/keys/"+url.PathEscape(k.ID)+"/revoke", "x=1", same...))
	if w.Code != http.StatusNotFound {
		t.Fatalf("revoking another account's key: status %d, want 404", w.Code)
	}
	w = serve(c, request("POST", "/accounts/other/keys/"+url.PathEscape(k.ID)+"/revoke", "x=1", same...))
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/accounts/other" {
		t.Fatalf("revoke: status %d Location %q, want 303 /accounts/other", w.Code, w.Header().Get("Location"))
	}
	if keys, _ := st.Keys(ctx, "other"); len(keys) != 0 {
		t.Fatalf("%d keys left after revoking", len(keys))
	}
}

func FuzzHostAllowed(f *testing.F) {
	for _, s := range []string{"localhost", "localhost:2020", "[::1]:1", "127.9.9.9", "x.ops.example.com", "ops.example.com", "evil", "", ":", "[", "LocalHost.", "::1"} {
		f.Add(s)
	}
	hosts := []string{"console.example.com", "*.ops.example.com"}
	f.Fuzz(func(t *testing.T, host string) {
		if !hostAllowed(host, hosts) {
			return
		}
		h := strings.ToLower(host)
		if !strings.Contains(h, "localhost") && !strings.Contains(h, "example.com") && !strings.Contains(h, "127.") && !strings.Contains(h, ":") {
			t.Fatalf("%q accepted", host)
		}
	})
}

func FuzzBalanceForm(f *testing.F) {
	for _, s := range []string{"amount_usd=1", "amount_usd=-1&reason=x", "amount_usd=1e3", "amount_usd=%00", "reason=a&amount_usd=-0.000000001", "amount_usd=99999999999999999999"} {
		f.Add(s)
	}
	c, st := newConsole(f)
	f.Fuzz(func(t *testing.T, form string) {
		w := serve(c, request("POST", "/accounts/acme/balance", form, "Sec-Fetch-Site", "same-origin"))
		if w.Code >= 500 {
			t.Fatalf("%q: status %d", form, w.Code)
		}
		acc, err := st.Account(context.Background(), "acme")
		if err != nil || acc.Balance == nil || *acc.Balance < 0 {
			t.Fatalf("%q: balance %v (%v)", form, acc.Balance, err)
		}
	})
}

func TestSpendChart(t *testing.T) {
	s := func(x string) *string { return &x }
	from := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	rows := []usage.Row{
		{Day: s("2026-03-02"), Model: s("b-model"), Requests: 1, Cost: pricing.Micro(3000)},
		{Day: s("2026-03-02"), Model: s("a-model"), Requests: 2, Cost: pricing.Micro(1000)},
		{Day: s("2026-03-05"), Model: s("a-model"), Requests: 1, Cost: pricing.Micro(2000)},
		{Day: s("2026-02-01"), Model: s("a-model"), Requests: 1, Cost: pricing.Micro(9000)}, // before the plot
	}
	c := spendChart(rows[:3], from, 7)
	if c.Max != pricing.Micro(4000) {
		t.Fatalf("max %s, want 0.004", c.Max)
	}
	if len(c.Legend) != 2 || c.Legend[0].Model != "a-model" || c.Legend[0].Cost != pricing.Micro(3000) || c.Legend[1].Model != "b-model" {
		t.Fatalf("legend %+v, want a-model $0.003 then b-model", c.Legend)
	}
	if len(c.Bars) != 3 {
		t.Fatalf("%d bars, want 3", len(c.Bars))
	}
	plot := float64(chartHeight - chartBottom - chartTop)
	// The biggest day fills the plot: its two parts stack to its height.
	if got := c.Bars[0].H + c.Bars[1].H; got != plot {
		t.Errorf("2026-03-02 stacks to %v, want %v", got, plot)
	}
	if c.Bars[1].Y+c.Bars[1].H != c.Bars[0].Y {
		t.Errorf("second part at %v+%v, want on top of the first at %v", c.Bars[1].Y, c.Bars[1].H, c.Bars[0].Y)
	}
	if c.Bars[2].H != plot/2 || c.Bars[2].X <= c.Bars[0].X {
		t.Errorf("2026-03-05 bar %+v: want half the plot, right of 2026-03-02", c.Bars[2])
	}
	if got := spendChart(rows[3:], from, 7); len(got.Bars) != 0 {
		t.Errorf("a day outside the plot drew %d bars", len(got.Bars))
	}
	if got := spendChart(nil, from, 7); len(got.Bars) != 0 || len(got.Legend) != 0 || len(got.Labels) != 1 {
		t.Errorf("no rows: %d bars, %d legend items, %d labels; want 0, 0, 1", len(got.Bars), len(got.Legend), len(got.Labels))
	}
}

func TestUnknownAccount(t *testing.T) {
	c, _ := newConsole(t)
	for _, path := range []string{"/accounts/nobody", "/usage?account=nobody"} {
		if w := serve(c, request("GET", path, "")); w.Code != http.StatusNotFound {
			t.Errorf("GET %s: status %d, want 404", path, w.Code)
		}
	}
	if w := serve(c, request("GET", "/usage?days=3", "")); w.Code != http.StatusBadRequest {
		t.Errorf("GET /usage?days=3: status %d, want 400", w.Code)
	}
}

// evil is text stored before the admin API refused it: printed raw it
// would clear a terminal, break a line and turn text around.
const evil = "gpt\x1b[2J\nFORGED\u202e\x7f"

// evilShown is how a page shows it.
const evilShown = `gpt\u001b[2J\nFORGED\u202e\u007f`

// Names, reasons, models and MCP tools reach every page as text: their
// control characters are written as visible escapes, whatever template
// prints them.
func TestPagesShowControlsEscaped(t *testing.T) {
	c, st := newConsole(t)
	ctx := context.Background()
	now := time.Now().UTC()
	if err := st.CreateKey(ctx, store.Key{ID: "key_evil", AccountID: "acme", Name: evil, Hash: "h", Models: []string{evil}, MCPTools: []string{evil}, CreatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdateAccount(ctx, "acme", func(a *store.Account) error {
		b := *a.Balance - pricing.USD(1)
		a.Balance = &b
		return nil
	}, store.Movement{Kind: store.JournalAdjustment, Reason: evil}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Settle(ctx, &store.Entry{RequestID: "req_evil", AccountID: "acme", Endpoint: "apps", Model: evil, Units: 1, Unit: "action", Cost: pricing.Micro(1000), Time: now}); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/accounts/acme", "/usage", "/usage?account=acme"} {
		w := serve(c, request("GET", path, ""))
		body := w.Body.String()
		if w.Code != http.StatusOK {
			t.Fatalf("GET %s: %d", path, w.Code)
		}
		if strings.ContainsAny(body, "\x1b\x7f\u202e\r\t") {
			t.Errorf("GET %s: a control character reached the page", path)
		}
		if n := strings.Count(body, evilShown); n < 2 {
			t.Errorf("GET %s: %q shown %d times, want 2 or more:\n%s", path, evilShown, n, body)
		}
	}
	// The key's MCP tools, in the key table and in its tools form.
	page := serve(c, request("GET", "/accounts/acme", "")).Body.String()
	if !strings.Contains(page, `<td>`+evilShown+`</td><td>`+evilShown+`</td>`) || !strings.Contains(page, `name="mcp_tools" value="`+evilShown+`"`) {
		t.Errorf("the key's MCP tools are not shown escaped:\n%s", page)
	}
	// A refused form shows what it held, escaped too.
	w := serve(c, request("POST", "/accounts/acme/keys", "name="+url.QueryEscape(evil)))
	if w.Code != http.StatusBadRequest || strings.ContainsAny(w.Body.String(), "\x1b\x7f\u202e") || !strings.Contains(w.Body.String(), `value="`+evilShown+`"`) {
		t.Errorf("refused key form: %d\n%s", w.Code, w.Body)
	}
}

// endsInText reports whether p's last command is text, but for the
// escapers html/template adds after it.
func endsInText(p *parse.PipeNode) bool {
	for i := len(p.Cmds) - 1; i >= 0; i-- {
		id, ok := p.Cmds[i].Args[0].(*parse.IdentifierNode)
		switch {
		case !ok:
			return false
		case id.Ident == textHelper:
			return true
		case !strings.HasPrefix(id.Ident, "_html_template_"):
			return false
		}
	}
	return false
}

// Every template's printing actions go through text; those that only set
// a variable do not.
func TestEveryActionPrintsText(t *testing.T) {
	for _, tt := range pages.Templates() {
		var check func(parse.Node)
		check = func(n parse.Node) {
			switch n := n.(type) {
			case *parse.ListNode:
				if n != nil {
					for _, c := range n.Nodes {
						check(c)
					}
				}
			case *parse.ActionNode:
				if len(n.Pipe.Decl) == 0 && !endsInText(n.Pipe) {
					t.Errorf("template %s: %s does not print through %s", tt.Name(), n, textHelper)
				}
			case *parse.IfNode:
				check(n.List)
				check(n.ElseList)
			case *parse.RangeNode:
				check(n.List)
				check(n.ElseList)
			case *parse.WithNode:
				check(n.List)
				check(n.ElseList)
			}
		}
		if tt.Tree != nil {
			check(tt.Tree.Root)
		}
	}
}

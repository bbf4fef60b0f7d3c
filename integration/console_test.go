package integration

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/caddy-gw/caddy-gw/handlers/fetch"
	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// browserTimeout bounds one browser test's whole run.
const browserTimeout = 90 * time.Second

// browserErrors collects what pages report as wrong: uncaught
// exceptions, console errors and error entries of the browser log (a
// refused style sheet or a failed load among them).
type browserErrors struct {
	mu   sync.Mutex
	list []string
}

func (b *browserErrors) add(m chromedp.ConsoleMessage) {
	if !m.IsException() && m.Type != "error" && m.Type != "assert" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.list = append(b.list, m.String())
}

func (b *browserErrors) take() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	l := b.list
	b.list = nil
	return l
}

// startBrowser starts headless Chromium the way the gateway's page reader
// does (its sandbox on; as an unprivileged user when the test runs as
// root) and returns its context and the errors its pages report.
func startBrowser(t *testing.T) (context.Context, *browserErrors) {
	t.Helper()
	var exe string
	for _, b := range fetch.Browsers {
		if p, err := exec.LookPath(b); err == nil {
			exe = p
			break
		}
	}
	if exe == "" {
		t.Fatal("no headless Chromium on this machine (want chromium-headless-shell)")
	}
	profile, err := os.MkdirTemp("", "gw-console-browser-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(profile) })
	root := os.Geteuid() == 0
	if root {
		if err := os.Chown(profile, fetch.BrowserUID, fetch.BrowserGID); err != nil {
			t.Fatal(err)
		}
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.Headless, chromedp.UserDataDir(profile),
		chromedp.Flag("no-sandbox", false), chromedp.Flag("disable-gpu", true),
		chromedp.WindowSize(1000, 800),
		chromedp.ModifyCmdFunc(func(cmd *exec.Cmd) {
			cmd.Env = fetch.BrowserEnv(profile)
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			if root {
				cmd.SysProcAttr.Credential = &syscall.Credential{Uid: fetch.BrowserUID, Gid: fetch.BrowserGID, Groups: []uint32{}}
			}
		}),
	)
	ctx, cancelTime := context.WithTimeout(context.Background(), browserTimeout)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelBrowser(); cancelAlloc(); cancelTime() })
	errs := &browserErrors{}
	messages := chromedp.Console(bctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			errs.add(m)
		}
	}()
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	return bctx, errs
}

// run runs browser actions, failing the test on an error or on any error
// the page reported.
func run(t *testing.T, ctx context.Context, errs *browserErrors, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if l := errs.take(); len(l) > 0 {
		t.Fatalf("%s: the page reported errors: %q", what, l)
	}
}

// value runs one browser action that gives a value.
func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// TestConsoleBrowser drives the operator console in headless Chromium: each
// view loads without an error, a key made there works on the API until it
// is revoked there, a top-up and an adjustment show in the journal, and
// the usage plot shows the model and cost of a call just made.
func TestConsoleBrowser(t *testing.T) {
	g, oa := startWithFakes(t, exampleCaddyfile(t))
	g.createAccount(t, map[string]any{"id": "acme", "plan": "paid", "cleared": true, "balance_usd": "20.00"})
	g.createAccount(t, map[string]any{"id": "zeta", "plan": "free"})
	ctx, errs := startBrowser(t)
	base := g.ConsoleURL

	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	run(t, ctx, errs, "accounts view", chromedp.Navigate(base+"/"), chromedp.WaitVisible(css("#accounts")))
	accounts := value(t, ctx, "accounts table", chromedp.Text(css("#accounts tbody")))
	for _, s := range []string{"acme", "$20", "zeta", "billed afterwards"} {
		if !strings.Contains(accounts, s) {
			t.Errorf("accounts view lacks %q: %q", s, accounts)
		}
	}
	if path := os.Getenv("GW_CONSOLE_SCREENSHOT"); path != "" {
		png := value(t, ctx, "screenshot", chromedp.FullScreenshot(100))
		if !filepath.IsAbs(path) {
			path = filepath.Join("..", path)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// A key made in the console works on the API.
	run(t, ctx, errs, "create a key",
		chromedp.Navigate(base+"/accounts/acme"),
		chromedp.SendKeys(css("#key-name"), "browser key"),
		chromedp.Click(chromedp.Search(`//button[normalize-space()="Create key"]`)),
		chromedp.WaitVisible(css("#new-key")))
	secret := strings.TrimSpace(value(t, ctx, "the new key", chromedp.Text(css("#new-key"))))
	if !strings.HasPrefix(secret, "sk-") {
		t.Fatalf("the console showed key %q, want sk-...", secret)
	}
	if r := g.do(t, http.MethodGet, "/v1/models", "", bearer(secret)...); r.Status != http.StatusOK {
		t.Fatalf("GET /v1/models with the console's key: %d %s", r.Status, r.Body)
	}

	// A call with it shows in the usage plot, at its ledger cost.
	oa.Push(fake.Script{Text: "hello", Usage: fake.Usage{Input: 1200, Output: 300}})
	if r := g.do(t, http.MethodPost, "/v1/chat/completions", `{"model":"gw-pinned-gpt-4.1-mini","max_tokens":500,"messages":[{"role":"user","content":"hi"}]}`, bearer(secret)...); r.Status != http.StatusOK {
		t.Fatalf("chat with the console's key: %d %s", r.Status, r.Body)
	}
	ledger := g.adminJSON(t, http.MethodGet, "/gw/accounts/acme/ledger", nil, http.StatusOK).JSON(t)["data"].([]any)
	if len(ledger) != 1 {
		t.Fatalf("ledger has %d entries, want 1", len(ledger))
	}
	entry := ledger[0].(map[string]any)
	model, cost := entry["model"].(string), entry["cost_usd"].(string)
	run(t, ctx, errs, "usage view", chromedp.Navigate(base+"/usage?account=acme"), chromedp.WaitVisible(css("#spend-chart")))
	legend := value(t, ctx, "legend", chromedp.Text(css("#legend")))
	byModel := value(t, ctx, "calls by model", chromedp.Text(css("#by-model tbody")))
	bars := value(t, ctx, "bars", chromedp.Evaluate[int](`document.querySelectorAll("#spend-chart rect").length`))
	if want := model + ": $" + cost; !strings.Contains(legend, want) {
		t.Errorf("usage legend %q lacks %q", legend, want)
	}
	if bars != 1 {
		t.Errorf("the spend chart has %d bars, want 1 (one call, one day, one model)", bars)
	}
	if want := model + "\t1\t1200\t300\t$" + cost; !strings.Contains(byModel, want) {
		t.Errorf("calls and tokens table %q lacks %q", byModel, want)
	}
	run(t, ctx, errs, "usage of every account", chromedp.Navigate(base+"/usage"), chromedp.WaitVisible(css("#spend-chart")))

	// Revoked in the console, the key stops working.
	revoke := chromedp.Search(`//button[starts-with(@aria-label, "Revoke key browser key")]`)
	run(t, ctx, errs, "revoke the key",
		chromedp.Navigate(base+"/accounts/acme"),
		chromedp.Click(revoke),
		chromedp.WaitNotPresent(revoke))
	if r := g.do(t, http.MethodGet, "/v1/models", "", bearer(secret)...); r.Status != http.StatusUnauthorized {
		t.Fatalf("GET /v1/models with the revoked key: %d, want 401", r.Status)
	}

	// A top-up and an adjustment show in the journal, newest first.
	apply := chromedp.Search(`//button[normalize-space()="Apply"]`)
	run(t, ctx, errs, "top up and adjust",
		chromedp.SendKeys(css("#amount"), "7.25"),
		chromedp.Click(apply),
		chromedp.WaitVisible(chromedp.Search(`//table[@id="journal"]//td[normalize-space()="top_up"]`)),
		chromedp.SendKeys(css("#amount"), "-0.25"),
		chromedp.SendKeys(css("#reason"), "goodwill reversal"),
		chromedp.Click(apply),
		chromedp.WaitVisible(chromedp.Search(`//table[@id="journal"]//td[normalize-space()="adjustment"]`)))
	first := value(t, ctx, "journal", chromedp.Text(css("#journal tbody tr:nth-child(1)")))
	second := value(t, ctx, "journal", chromedp.Text(css("#journal tbody tr:nth-child(2)")))
	balance := g.getAccount(t, "acme")["balance_usd"].(string)
	if want := "adjustment\t-$0.25\t$" + balance + "\tgoodwill reversal"; !strings.Contains(first, want) {
		t.Errorf("newest journal row %q lacks %q", first, want)
	}
	if !strings.Contains(second, "top_up\t$7.25\t") {
		t.Errorf("second journal row %q: want the top-up of $7.25", second)
	}
	if l := errs.take(); len(l) > 0 {
		t.Fatalf("the pages reported errors: %q", l)
	}

	// On a phone's width no page scrolls sideways (wide tables scroll in
	// their own box).
	run(t, ctx, errs, "narrow screen", chromedp.EmulateViewport(360, 740))
	for _, path := range []string{"/", "/accounts/acme", "/usage?account=acme"} {
		run(t, ctx, errs, "narrow "+path, chromedp.Navigate(base+path), chromedp.WaitVisible(css("main")))
		if w := value(t, ctx, "page width", chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); w > 360 {
			t.Errorf("%s is %d px wide on a 360 px screen", path, w)
		}
	}
}

// TestConsoleKeyCaps drives a key's caps in headless Chromium: the
// account's page shows the key's spend of its caps, its caps form sets
// one cap and removes another, the page then shows the new caps against
// the same spend, the admin API holds them, and a call past the new daily
// cap is refused.
func TestConsoleKeyCaps(t *testing.T) {
	g, oa := startWithFakes(t, exampleCaddyfile(t))
	g.createAccount(t, map[string]any{"id": "acme", "plan": "paid", "cleared": true, "balance_usd": "20.00"})
	secret, keyID := g.createKey(t, "acme", map[string]any{"name": "capped", "daily_cap_usd": "5", "total_cap_usd": "12.5"})
	oa.Push(fake.Script{Text: "hello", Usage: fake.Usage{Input: 1200, Output: 300}})
	if r := g.do(t, http.MethodPost, "/v1/chat/completions", `{"model":"gw-pinned-gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`, bearer(secret)...); r.Status != http.StatusOK || r.Header.Get("X-Gw-Cost-Usd") != "0.00096" {
		t.Fatalf("chat with the capped key: %d %s %s", r.Status, r.Header.Get("X-Gw-Cost-Usd"), r.Body)
	}
	ctx, errs := startBrowser(t)
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	spendCells := chromedp.Evaluate[[]string](`[...document.querySelectorAll("#keys tbody td.num")].map(e => e.innerText)`)

	run(t, ctx, errs, "account view", chromedp.Navigate(g.ConsoleURL+"/accounts/acme"), chromedp.WaitVisible(css("#keys")))
	if got, want := value(t, ctx, "spend cells", spendCells), []string{"$0.00096 of $5.00", "$0.00096", "$0.00096 of $12.50"}; !slices.Equal(got, want) {
		t.Errorf("the key's spend cells read %q, want %q", got, want)
	}
	if got := value(t, ctx, "daily cap field", chromedp.Value(css("#daily-"+keyID))); got != "5.00" {
		t.Errorf("the daily cap field holds %q, want 5.00", got)
	}

	// Set a daily cap below today's spend and a monthly one; remove the
	// total cap.
	run(t, ctx, errs, "set the caps",
		chromedp.Click(css("#caps-"+keyID+" summary")),
		chromedp.WaitVisible(css("#daily-"+keyID)),
		chromedp.Clear(css("#daily-"+keyID)),
		chromedp.SendKeys(css("#daily-"+keyID), "0.0005"),
		chromedp.SendKeys(css("#monthly-"+keyID), "30"),
		chromedp.Clear(css("#total-"+keyID)),
		chromedp.Click(chromedp.Search(`//button[@aria-label="Set the caps of key capped (`+keyID+`)"]`)),
		chromedp.WaitVisible(chromedp.Search(`//table[@id="keys"]//td[normalize-space()="$0.00096 of $0.0005"]`)))
	if got, want := value(t, ctx, "spend cells", spendCells), []string{"$0.00096 of $0.0005", "$0.00096 of $30.00", "$0.00096"}; !slices.Equal(got, want) {
		t.Errorf("after setting the caps the key's spend cells read %q, want %q", got, want)
	}
	k := g.adminJSON(t, http.MethodGet, "/gw/keys/"+keyID, nil, http.StatusOK).JSON(t)
	if k["daily_cap_usd"] != "0.0005" || k["monthly_cap_usd"] != "30.00" || k["total_cap_usd"] != nil {
		t.Errorf("the admin API holds caps %v, %v, %v; want 0.0005, 30.00, null", k["daily_cap_usd"], k["monthly_cap_usd"], k["total_cap_usd"])
	}
	if r := g.do(t, http.MethodPost, "/v1/chat/completions", `{"model":"gw-pinned-gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`, bearer(secret)...); r.Status != http.StatusPaymentRequired || r.Header.Get("X-Gw-Hold-Reason") != "key_daily_cap" {
		t.Errorf("a call past the new daily cap: %d (%s) %s, want 402 key_daily_cap", r.Status, r.Header.Get("X-Gw-Hold-Reason"), r.Body)
	}

	// A refused cap shows why, with the form open on what it held; the
	// page is the answer's 400, which the browser reports as its one
	// error.
	if err := chromedp.Do(ctx,
		chromedp.Click(css("#caps-"+keyID+" summary")),
		chromedp.Clear(css("#daily-"+keyID)),
		chromedp.SendKeys(css("#daily-"+keyID), "1.0000000001"),
		chromedp.Click(chromedp.Search(`//button[@aria-label="Set the caps of key capped (`+keyID+`)"]`)),
		chromedp.WaitVisible(css("p.error"))); err != nil {
		t.Fatalf("a refused cap: %v", err)
	}
	if got := errs.take(); len(got) != 1 || !strings.Contains(got[0], "status of 400 (Bad Request)") {
		t.Errorf("the refused cap's page reported %q, want its 400 alone", got)
	}
	if got, want := value(t, ctx, "error", chromedp.Text(css("p.error"))), "daily_cap_usd: amount must be a decimal number of US dollars with at most 9 decimals"; got != want {
		t.Errorf("the refusal reads %q, want %q", got, want)
	}
	if got := value(t, ctx, "daily cap field", chromedp.Value(css("#daily-"+keyID))); got != "1.0000000001" {
		t.Errorf("the refused form's daily cap field holds %q, want what was typed", got)
	}
	if k := g.adminJSON(t, http.MethodGet, "/gw/keys/"+keyID, nil, http.StatusOK).JSON(t); k["daily_cap_usd"] != "0.0005" {
		t.Errorf("a refused form changed the daily cap to %v", k["daily_cap_usd"])
	}
}

// TestConsoleOrgs drives organizations in headless Chromium: the
// navigation leads to them, the creation form makes one, its caps form
// sets caps the admin API then holds, an account's page refuses an
// unknown organization with the admin API's reason and puts the account
// in this one, a call's cost shows as the organization's spend of its
// caps on its page, in the list and in its accounts table, a cap set
// below that spend refuses the next call, deleting it while the account
// belongs to it shows the refusal, and once the account left it is
// deleted.
func TestConsoleOrgs(t *testing.T) {
	g, oa := startWithFakes(t, exampleCaddyfile(t))
	g.createAccount(t, map[string]any{"id": "acme", "plan": "paid", "cleared": true, "balance_usd": "20.00"})
	secret, _ := g.createKey(t, "acme", map[string]any{"name": "k"})
	ctx, errs := startBrowser(t)
	base := g.ConsoleURL
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	fact := func(id string) string {
		t.Helper()
		return strings.TrimSpace(value(t, ctx, id, chromedp.Text(css("#"+id))))
	}
	// refused runs actions that end on a refusal's page: the browser
	// reports its status as its one error, and the page shows why.
	refused := func(what, status, why string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, append(actions, chromedp.WaitVisible(css("p.error")))...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if got := errs.take(); len(got) != 1 || !strings.Contains(got[0], "status of "+status) {
			t.Errorf("%s: the page reported %q, want its %s alone", what, got, status)
		}
		if got := value(t, ctx, "error", chromedp.Text(css("p.error"))); got != why {
			t.Errorf("%s: the refusal reads %q, want %q", what, got, why)
		}
	}

	run(t, ctx, errs, "start page", chromedp.Navigate(base+"/"), chromedp.WaitVisible(css("nav")))
	if got, want := value(t, ctx, "navigation", chromedp.Evaluate[[]string](`[...document.querySelectorAll("nav a")].map(e => e.innerText)`)), []string{"Accounts", "Organizations", "Usage"}; !slices.Equal(got, want) {
		t.Fatalf("the navigation reads %q, want %q", got, want)
	}
	run(t, ctx, errs, "organizations view",
		chromedp.Click(chromedp.Search(`//nav/a[normalize-space()="Organizations"]`)),
		chromedp.WaitVisible(css("#orgs")))
	if got := value(t, ctx, "organizations", chromedp.Text(css("#orgs tbody"))); !strings.Contains(got, "No organizations yet.") {
		t.Errorf("the organizations table reads %q before any was made", got)
	}
	run(t, ctx, errs, "create an organization",
		chromedp.SendKeys(css("#new-org-id"), "acme-group"),
		chromedp.SendKeys(css("#new-org-name"), "Acme Group"),
		chromedp.SendKeys(css("#new-org-daily"), "5"),
		chromedp.Click(chromedp.Search(`//button[normalize-space()="Create organization"]`)),
		chromedp.WaitVisible(css("#org-today")))
	if got := fact("org-name") + "|" + fact("org-today") + "|" + fact("org-month"); got != "Acme Group|$0.00 of $5.00|$0.00" {
		t.Errorf("the new organization's facts read %q", got)
	}

	// Its caps form sets a daily and a monthly cap.
	run(t, ctx, errs, "set the caps",
		chromedp.Clear(css("#org-daily")),
		chromedp.SendKeys(css("#org-daily"), "2"),
		chromedp.SendKeys(css("#org-monthly"), "30"),
		chromedp.Click(chromedp.Search(`//button[normalize-space()="Set caps"]`)),
		chromedp.WaitVisible(chromedp.Search(`//dd[@id="org-month" and normalize-space()="$0.00 of $30.00"]`)))
	o := g.adminJSON(t, http.MethodGet, "/gw/orgs/acme-group", nil, http.StatusOK).JSON(t)
	if o["name"] != "Acme Group" || o["daily_cap_usd"] != "2.00" || o["monthly_cap_usd"] != "30.00" {
		t.Errorf("the admin API holds %v, %v, %v; want Acme Group, 2.00, 30.00", o["name"], o["daily_cap_usd"], o["monthly_cap_usd"])
	}

	// An account's page refuses an unknown organization, then joins this
	// one and links to it.
	refused("an unknown organization", "400", "org: no such organization",
		chromedp.Navigate(base+"/accounts/acme"),
		chromedp.SendKeys(css("#org"), "nobody"),
		chromedp.Click(chromedp.Search(`//button[normalize-space()="Set organization"]`)))
	if got := value(t, ctx, "org field", chromedp.Value(css("#org"))); got != "nobody" {
		t.Errorf("the refused form's field holds %q, want what was typed", got)
	}
	if got := g.getAccount(t, "acme")["org"]; got != nil {
		t.Errorf("a refused form put acme in %v", got)
	}
	run(t, ctx, errs, "join the organization",
		chromedp.Clear(css("#org")),
		chromedp.SendKeys(css("#org"), "acme-group"),
		chromedp.Click(chromedp.Search(`//button[normalize-space()="Set organization"]`)),
		chromedp.WaitVisible(css(`#account-org a[href="/orgs/acme-group"]`)))
	if got := g.getAccount(t, "acme")["org"]; got != "acme-group" {
		t.Errorf("the admin API puts acme in %v, want acme-group", got)
	}

	// A call's cost is the organization's spend, of its caps.
	oa.Push(fake.Script{Text: "hello", Usage: fake.Usage{Input: 1200, Output: 300}})
	r := g.do(t, http.MethodPost, "/v1/chat/completions", `{"model":"gw-pinned-gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`, bearer(secret)...)
	if r.Status != http.StatusOK {
		t.Fatalf("chat of an account in the organization: %d %s", r.Status, r.Body)
	}
	cost := r.Header.Get("X-Gw-Cost-Usd")
	spend := g.adminJSON(t, http.MethodGet, "/gw/orgs/acme-group", nil, http.StatusOK).JSON(t)["spend"].(map[string]any)
	if cost != "0.00096" || spend["today_usd"] != cost || spend["month_usd"] != cost || spend["total_usd"] != cost {
		t.Fatalf("the call cost %q and the organization spent %v; want 0.00096 each", cost, spend)
	}
	run(t, ctx, errs, "the organization's page",
		chromedp.Click(css(`#account-org a`)),
		chromedp.WaitVisible(css("#members")))
	if got, want := fact("org-today")+"|"+fact("org-month")+"|"+fact("org-total"), "$0.00096 of $2.00|$0.00096 of $30.00|$0.00096"; got != want {
		t.Errorf("the organization's spend reads %q, want %q", got, want)
	}
	members := value(t, ctx, "members", chromedp.Evaluate[[]string](`[...document.querySelectorAll("#members tbody tr")].map(e => e.innerText)`))
	if want := []string{"acme\tpaid\t$19.99904\t$0.00096\t$0.00096\t$0.00096"}; !slices.Equal(members, want) {
		t.Errorf("the organization's accounts read %q, want %q", members, want)
	}
	run(t, ctx, errs, "a member's page", chromedp.Click(css(`#members a[href="/accounts/acme"]`)), chromedp.WaitVisible(css("#keys")))
	run(t, ctx, errs, "organizations list", chromedp.Navigate(base+"/orgs"), chromedp.WaitVisible(css("#orgs")))
	row := value(t, ctx, "list row", chromedp.Evaluate[[]string](`[...document.querySelectorAll("#orgs tbody td")].map(e => e.innerText)`))
	if want := []string{"Acme Group", "$0.00096 of $2.00", "$0.00096 of $30.00", "$0.00096"}; !slices.Equal(row, want) {
		t.Errorf("the organizations list reads %q, want %q", row, want)
	}

	// A daily cap set below today's spend refuses the next call.
	run(t, ctx, errs, "lower the daily cap",
		chromedp.Click(chromedp.Search(`//table[@id="orgs"]//a[normalize-space()="acme-group"]`)),
		chromedp.WaitVisible(css("#org-daily")),
		chromedp.Clear(css("#org-daily")),
		chromedp.SendKeys(css("#org-daily"), "0.0005"),
		chromedp.Click(chromedp.Search(`//button[normalize-space()="Set caps"]`)),
		chromedp.WaitVisible(chromedp.Search(`//dd[@id="org-today" and normalize-space()="$0.00096 of $0.0005"]`)))
	if r := g.do(t, http.MethodPost, "/v1/chat/completions", `{"model":"gw-pinned-gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`, bearer(secret)...); r.Status != http.StatusPaymentRequired || r.Header.Get("X-Gw-Hold-Reason") != "org_daily_cap" {
		t.Errorf("a call past the organization's new daily cap: %d (%s) %s, want 402 org_daily_cap", r.Status, r.Header.Get("X-Gw-Hold-Reason"), r.Body)
	}

	// On a phone's width its pages do not scroll sideways.
	run(t, ctx, errs, "narrow screen", chromedp.EmulateViewport(360, 740))
	for _, path := range []string{"/orgs", "/orgs/acme-group"} {
		run(t, ctx, errs, "narrow "+path, chromedp.Navigate(base+path), chromedp.WaitVisible(css("main")))
		if w := value(t, ctx, "page width", chromedp.Evaluate[int](`document.documentElement.scrollWidth`)); w > 360 {
			t.Errorf("%s is %d px wide on a 360 px screen", path, w)
		}
	}

	// While the account belongs to it, it is not deleted; once the
	// account left, it is.
	refused("delete with an account", "409", `organization "acme-group" still has accounts; move them out first`,
		chromedp.Click(chromedp.Search(`//button[normalize-space()="Delete organization"]`)))
	g.adminJSON(t, http.MethodGet, "/gw/orgs/acme-group", nil, http.StatusOK)
	run(t, ctx, errs, "leave the organization",
		chromedp.Navigate(base+"/accounts/acme"),
		chromedp.Clear(css("#org")),
		chromedp.Click(chromedp.Search(`//button[normalize-space()="Set organization"]`)),
		chromedp.WaitVisible(chromedp.Search(`//dd[@id="account-org" and normalize-space()="none"]`)))
	run(t, ctx, errs, "delete the organization",
		chromedp.Navigate(base+"/orgs/acme-group"),
		chromedp.Click(chromedp.Search(`//button[normalize-space()="Delete organization"]`)),
		chromedp.WaitVisible(chromedp.Search(`//table[@id="orgs"]//td[normalize-space()="No organizations yet."]`)))
	g.adminJSON(t, http.MethodGet, "/gw/orgs/acme-group", nil, http.StatusNotFound)
}

// consolePost sends a form to the console with the given headers.
func consolePost(t *testing.T, g *gateway, path, form string, header ...string) response {
	t.Helper()
	return g.send(t, g.ConsoleURL+path, http.MethodPost, []byte(form), append([]string{"Content-Type", "application/x-www-form-urlencoded"}, header...))
}

// TestConsoleRefusesCrossOrigin checks that the built gateway's console
// refuses a write from another origin, and makes nothing, while the same
// form from its own origin makes a key.
func TestConsoleRefusesCrossOrigin(t *testing.T) {
	g := startGateway(t, gwOptions{})
	g.createAccount(t, map[string]any{"id": "acme", "plan": "paid", "cleared": true})
	for _, h := range [][]string{
		{"Sec-Fetch-Site", "cross-site"},
		{"Origin", "http://attacker.example"},
		{"Origin", "http://attacker.example", "Sec-Fetch-Site", "cross-site"},
	} {
		if r := consolePost(t, g, "/accounts/acme/keys", "name=evil", h...); r.Status != http.StatusForbidden {
			t.Errorf("POST with %q: status %d, want 403", h, r.Status)
		}
	}
	keys := g.adminJSON(t, http.MethodGet, "/gw/accounts/acme/keys", nil, http.StatusOK).JSON(t)["data"].([]any)
	if len(keys) != 0 {
		t.Fatalf("refused writes made %d keys", len(keys))
	}
	r := consolePost(t, g, "/accounts/acme/keys", "name=mine", "Origin", g.ConsoleURL, "Sec-Fetch-Site", "same-origin")
	if r.Status != http.StatusCreated || !strings.Contains(string(r.Body), `<output id="new-key">sk-`) {
		t.Fatalf("same-origin POST: status %d, want 201 showing the key", r.Status)
	}
	keys = g.adminJSON(t, http.MethodGet, "/gw/accounts/acme/keys", nil, http.StatusOK).JSON(t)["data"].([]any)
	if len(keys) != 1 || keys[0].(map[string]any)["name"] != "mine" {
		t.Fatalf("keys after the same-origin POST: %v, want one named mine", keys)
	}
	if got := r.Header.Get("Content-Security-Policy"); !strings.Contains(got, "frame-ancestors 'none'") {
		t.Errorf("Content-Security-Policy %q: want frame-ancestors 'none'", got)
	}
}

// TestConsoleBehindBasicAuth checks that basic_auth in the console's site
// runs before the console (the directive's order) when it is configured
// with behind_auth.
func TestConsoleBehindBasicAuth(t *testing.T) {
	out, err := exec.Command(caddyBin, "hash-password", "--plaintext", "console-pass").Output()
	if err != nil {
		t.Fatalf("caddy hash-password: %v", err)
	}
	cfg := exampleCaddyfile(t)
	const plain = "\tgw_console\n}"
	if !strings.Contains(cfg, plain) {
		t.Fatalf("Caddyfile.example lacks the console site's %q", plain)
	}
	cfg = strings.Replace(cfg, plain, "\tgw_console {\n\t\tbehind_auth\n\t}\n\tbasic_auth {\n\t\tops "+strings.TrimSpace(string(out))+"\n\t}\n}", 1)
	g := startGateway(t, gwOptions{Caddyfile: cfg})
	g.createAccount(t, map[string]any{"id": "acme", "plan": "paid", "cleared": true})
	if r := g.send(t, g.ConsoleURL+"/", http.MethodGet, nil, nil); r.Status != http.StatusUnauthorized {
		t.Fatalf("GET / without credentials: %d, want 401", r.Status)
	}
	r := g.send(t, g.ConsoleURL+"/", http.MethodGet, nil, []string{"Authorization", "Basic " + base64.StdEncoding.EncodeToString([]byte("ops:console-pass"))})
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `<a href="/accounts/acme">acme</a>`) {
		t.Fatalf("GET / with credentials: %d, want 200 listing acme:\n%s", r.Status, r.Body)
	}
}

// TestConsoleRefusesForeignHost checks that a console whose site names no
// host (GW_CONSOLE=:port) still answers only loopback names: a page whose
// own name was pointed at 127.0.0.1 (DNS rebinding) reads nothing.
func TestConsoleRefusesForeignHost(t *testing.T) {
	port := freePorts(t, 1)[0]
	g := startGateway(t, gwOptions{Env: map[string]string{"GW_CONSOLE": ":" + port}})
	g.createAccount(t, map[string]any{"id": "acme", "plan": "paid", "cleared": true})
	url := "http://127.0.0.1:" + port + "/"
	for host, want := range map[string]int{
		"attacker.example:" + port: http.StatusMisdirectedRequest,
		"localhost:" + port:        http.StatusOK,
		"127.0.0.1:" + port:        http.StatusOK,
	} {
		r := g.send(t, url, http.MethodGet, nil, []string{"Host", host})
		if r.Status != want {
			t.Errorf("Host %s: status %d, want %d", host, r.Status, want)
		}
		if listed := strings.Contains(string(r.Body), "/accounts/acme"); listed != (want == http.StatusOK) {
			t.Errorf("Host %s: accounts listed %v, want %v", host, listed, want == http.StatusOK)
		}
	}
}

// listening returns the local addresses of the TCP sockets that listen on
// port, read from the kernel's tables (/proc/net/tcp and tcp6).
func listening(t *testing.T, port string) []netip.Addr {
	t.Helper()
	p, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		t.Fatal(err)
	}
	wantPort := fmt.Sprintf("%04X", p)
	var addrs []netip.Addr
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			t.Fatalf("reading the kernel's sockets: %v", err)
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 4 || f[3] != "0A" { // 0A: LISTEN
				continue
			}
			hexIP, hexPort, _ := strings.Cut(f[1], ":")
			if hexPort != wantPort {
				continue
			}
			raw, err := hex.DecodeString(hexIP)
			if err != nil || (len(raw) != 4 && len(raw) != 16) {
				t.Fatalf("%s: local address %q", table, f[1])
			}
			// The kernel writes each 32-bit word in the host's order
			// (little-endian here).
			for w := 0; w < len(raw); w += 4 {
				raw[w], raw[w+1], raw[w+2], raw[w+3] = raw[w+3], raw[w+2], raw[w+1], raw[w]
			}
			a, _ := netip.AddrFromSlice(raw)
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// TestConsoleListensOnLoopback: Caddyfile.example's console site listens
// on loopback addresses only (not on every interface, turning others away
// itself): 127.0.0.1 and [::1] whether GW_CONSOLE names localhost, an
// address or no host at all, and it answers there.
func TestConsoleListensOnLoopback(t *testing.T) {
	t.Parallel()
	for _, host := range []string{"localhost", "127.0.0.1", ""} {
		t.Run("host "+cmp.Or(host, "none"), func(t *testing.T) {
			t.Parallel()
			port := freePorts(t, 1)[0]
			g := startGateway(t, gwOptions{Env: map[string]string{"GW_CONSOLE": host + ":" + port}})
			g.createAccount(t, map[string]any{"id": "acme", "plan": "paid", "cleared": true})
			got := listening(t, port)
			slices.SortFunc(got, netip.Addr.Compare)
			want := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.IPv6Loopback()}
			if !slices.Equal(got, want) {
				t.Fatalf("the console's port %s is listened on at %v, want %v", port, got, want)
			}
			for _, ip := range []string{"127.0.0.1", "[::1]"} {
				r := g.send(t, "http://"+ip+":"+port+"/", http.MethodGet, nil, []string{"Host", cmp.Or(host, "localhost") + ":" + port})
				if r.Status != http.StatusOK || !strings.Contains(string(r.Body), "/accounts/acme") {
					t.Errorf("GET / on %s: %d\n%s", ip, r.Status, r.Body)
				}
			}
		})
	}
}

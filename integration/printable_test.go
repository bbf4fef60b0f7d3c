package integration

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/printable"
	"github.com/caddy-gw/caddy-gw/internal/store"
	"github.com/caddy-gw/caddy-gw/internal/store/cached"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// hostile is a name written before the admin API refused control
// characters: printed raw it clears the screen, homes the cursor, ends
// the line and forges a row of the ledger's table.
const hostile = "gpt\x1b[2J\x1b[H\nreq_forged  chat  gpt-4.1  1 token  $0.00\u202e"

// hostileShown is how the command line and the console show it.
const hostileShown = `gpt\u001b[2J\u001b[H\nreq_forged  chat  gpt-4.1  1 token  $0.00\u202e`

// writeHostile stops g and writes, straight into its store, a key named
// hostile, an adjustment for the reason hostile and a ledger entry of the
// model hostile on account acme (prepaid 10 USD), then starts g again: a
// store that holds what the admin API and the gateway no longer accept.
func writeHostile(t *testing.T, g *gateway) {
	t.Helper()
	g.createAccount(t, map[string]any{"id": "acme", "plan": "paid", "cleared": true, "balance_usd": "10"})
	g.stop(t)
	st, err := cached.Open(g.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	now := time.Now().UTC()
	err = st.CreateKey(ctx, store.Key{ID: "key_hostile", AccountID: "acme", Name: hostile, Hash: store.HashSecret("sk-unused"), CreatedAt: now,
		MCPTools: []string{hostile}})
	if err == nil {
		_, err = st.UpdateAccount(ctx, "acme", func(a *store.Account) error {
			b := *a.Balance - pricing.USD(1)
			a.Balance = &b
			return nil
		}, store.Movement{Kind: store.JournalAdjustment, Reason: hostile})
	}
	if err == nil {
		_, err = st.Settle(ctx, &store.Entry{RequestID: "req_hostile", AccountID: "acme", KeyID: "key_hostile", Endpoint: "apps",
			Model: hostile, Units: 1, Unit: "action", Cost: pricing.Micro(2500), Time: now})
	}
	if cerr := st.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	g.start(t)
}

// plainText fails the test when out holds a character a terminal acts
// on (line breaks aside) or does not show hostile escaped.
func plainText(t *testing.T, what, out string) {
	t.Helper()
	for _, r := range strings.ReplaceAll(out, "\n", "") {
		if !printable.Shown(r) {
			t.Errorf("%s printed %U:\n%q", what, r, out)
			return
		}
	}
	if !strings.Contains(out, hostileShown) {
		t.Errorf("%s does not show %q:\n%q", what, hostileShown, out)
	}
}

// roundTrips checks that --json printed the admin API's answer to path,
// value for value, control characters included, as text.
func roundTrips(t *testing.T, g *gateway, what string, r cliResult, path string) {
	t.Helper()
	sameAsAdmin(t, g, r, path)
	if !strings.Contains(r.stdout, `\u001b[2J\u001b[H\nreq_forged`) || strings.ContainsAny(r.stdout, "\x1b\u202e") || strings.Count(r.stdout, "\n") != 1 {
		t.Errorf("%s: %q", what, r.stdout)
	}
}

// TestCLIPrintsText: names, reasons, models and MCP tools that a store
// holds with control characters (from before the admin API refused them)
// print as text: every table keeps one line per row, the cells show the
// escapes, and --json carries the exact values with no raw control
// character.
func TestCLIPrintsText(t *testing.T) {
	t.Parallel()
	g := startGateway(t, gwOptions{})
	writeHostile(t, g)

	r := g.gw(t, "ledger", "acme").ok(t, "ledger")
	lines(t, "ledger", r.stdout,
		`WHEN +REQUEST +ENDPOINT +MODEL +UNITS +COST`,
		justNow+` +req_hostile +apps +`+regexpQuote(hostileShown)+` +1 action +\$0\.0025`)
	plainText(t, "ledger", r.stdout)
	roundTrips(t, g, "ledger --json", g.gw(t, "ledger", "acme", "--json").ok(t, "ledger --json"), "/gw/accounts/acme/ledger")

	r = g.gw(t, "usage", "--account", "acme", "--by", "model,key").ok(t, "usage")
	lines(t, "usage", r.stdout,
		`MODEL +KEY +REQUESTS +INPUT TOKENS +OUTPUT TOKENS +COST`,
		regexpQuote(hostileShown)+` +key_hostile +1 +0 +0 +\$0\.0025`,
		`Total +1 +\$0\.0025`)
	plainText(t, "usage", r.stdout)
	roundTrips(t, g, "usage --json", g.gw(t, "usage", "--account", "acme", "--by", "model", "--json").ok(t, "usage --json"),
		"/gw/usage?account=acme&group_by=model")

	r = g.gw(t, "keys", "list", "acme").ok(t, "keys list")
	lines(t, "keys list", r.stdout,
		`KEY +NAME +MODELS +MCP TOOLS +EXPIRES +DAILY CAP +MONTHLY CAP +TOTAL CAP +CREATED`,
		`key_hostile +`+regexpQuote(hostileShown)+` +all +`+regexpQuote(hostileShown)+` +never +none +none +none +`+justNow)
	plainText(t, "keys list", r.stdout)
	roundTrips(t, g, "keys list --json", g.gw(t, "keys", "list", "acme", "--json").ok(t, "keys list --json"), "/gw/accounts/acme/keys")

	r = g.gw(t, "keys", "show", "key_hostile").ok(t, "keys show")
	lines(t, "keys show", r.stdout,
		`Key          key_hostile`,
		`Name         `+regexpQuote(hostileShown),
		`Models       all`,
		`MCP tools    `+regexpQuote(hostileShown),
		`Expires      never`,
		`Daily cap    none`,
		`Monthly cap  none`,
		`Total cap    none`,
		`Spent        \$0\.0025 today, \$0\.0025 this month, \$0\.0025 in all`,
		`Created      `+justNow)
	plainText(t, "keys show", r.stdout)
	roundTrips(t, g, "keys show --json", g.gw(t, "keys", "show", "key_hostile", "--json").ok(t, "keys show --json"), "/gw/keys/key_hostile")

	r = g.gw(t, "journal", "acme").ok(t, "journal")
	lines(t, "journal", r.stdout,
		`WHEN +KIND +AMOUNT +BALANCE AFTER +REQUEST OR REASON`,
		justNow+` +charge +-\$0\.0025 +\$8\.9975 +req_hostile`,
		justNow+` +adjustment +-\$1\.00 +\$9\.00 +`+regexpQuote(hostileShown),
		justNow+` +set +\$10\.00 +\$10\.00 *`)
	plainText(t, "journal", r.stdout)
	roundTrips(t, g, "journal --json", g.gw(t, "journal", "acme", "--json").ok(t, "journal --json"), "/gw/accounts/acme/journal")

	// The console shows them as text too.
	for _, path := range []string{"/accounts/acme", "/usage?account=acme"} {
		resp := g.send(t, g.ConsoleURL+path, http.MethodGet, nil, nil)
		if resp.Status != http.StatusOK || strings.ContainsAny(string(resp.Body), "\x1b\u202e") || !strings.Contains(string(resp.Body), hostileShown) {
			t.Errorf("console %s: %d\n%s", path, resp.Status, resp.Body)
		}
	}
}

// regexpQuote quotes s for the patterns of lines.
func regexpQuote(s string) string { return regexp.QuoteMeta(s) }

// TestAdminRefusesControlCharacters: the admin API stores no key name,
// model id, reason or account id holding control characters or too long
// (400 naming the field), and the command line says so.
func TestAdminRefusesControlCharacters(t *testing.T) {
	t.Parallel()
	g := startGateway(t, gwOptions{})
	g.createAccount(t, map[string]any{"id": "acme", "plan": "paid", "cleared": true, "balance_usd": "10"})
	const notShown = "must be printable text: no control characters (line breaks, tabs, escapes) and valid UTF-8"
	for _, c := range []struct {
		method, path string
		body         map[string]any
		msg          string
	}{
		{"POST", "/gw/accounts/acme/keys", map[string]any{"name": hostile}, "name: " + notShown},
		{"POST", "/gw/accounts/acme/keys", map[string]any{"name": "laptop\ttab"}, "name: " + notShown},
		{"POST", "/gw/accounts/acme/keys", map[string]any{"name": strings.Repeat("k", 129)}, "name: at most 128 characters"},
		{"POST", "/gw/accounts/acme/keys", map[string]any{"name": "k", "models": []string{"gpt\x1b[2J"}}, `models: "gpt\x1b[2J": ` + notShown},
		{"PATCH", "/gw/accounts/acme", map[string]any{"add_balance_usd": "-1", "reason": hostile}, "reason: " + notShown},
		{"PATCH", "/gw/accounts/acme", map[string]any{"add_balance_usd": "-1", "reason": strings.Repeat("r", 501)}, "reason: at most 500 characters"},
		{"POST", "/gw/accounts", map[string]any{"id": "acme\x1b[2J"}, "id: required, 1 to 64 letters, digits, '.', '_' or '-'"},
		{"POST", "/gw/accounts", map[string]any{"id": "acme\nFORGED"}, "id: required, 1 to 64 letters, digits, '.', '_' or '-'"},
	} {
		resp := g.adminJSON(t, c.method, c.path, c.body, http.StatusBadRequest)
		if !sameJSON(string(resp.Body), mustJSONText(t, map[string]any{"error": c.msg})) {
			t.Errorf("%s %s %v: %s, want the error %q", c.method, c.path, c.body, resp.Body, c.msg)
		}
	}
	// Nothing was stored.
	if keys := g.adminJSON(t, http.MethodGet, "/gw/accounts/acme/keys", nil, http.StatusOK).JSON(t)["data"].([]any); len(keys) != 0 {
		t.Errorf("keys %v", keys)
	}
	if a := g.getAccount(t, "acme"); a["balance_usd"] != "10.00" {
		t.Errorf("balance %v", a["balance_usd"])
	}
	g.gw(t, "keys", "create", "acme", "--name", hostile).fails(t, "keys create --name hostile",
		"creating a key of account acme: name: "+notShown)
	g.gw(t, "accounts", "top-up", "acme", "-1", "--reason", "refund\x1b[2J").fails(t, "top-up --reason with an escape",
		"account acme: reason: "+notShown)
}

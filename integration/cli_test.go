package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// cliResult is one run of the command line.
type cliResult struct {
	stdout, stderr string
	code           int
}

// cli runs bin/caddy with args in dir (a fresh folder when empty), with
// none of the gateway's variables set but env, and returns what it printed
// and its exit status.
func cli(t testing.TB, dir string, env map[string]string, args ...string) cliResult {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	vars := map[string]string{"HOME": dir, "XDG_CONFIG_HOME": dir, "XDG_DATA_HOME": dir}
	for k, v := range env {
		vars[k] = v
	}
	cmd := exec.Command(caddyBin, args...)
	cmd.Dir = dir
	cmd.Env = processEnv(vars)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("running %v: %v", args, err)
	}
	return cliResult{out.String(), errOut.String(), code}
}

// gw runs `caddy gw args... --address <g's admin endpoint>`.
func (g *gateway) gw(t testing.TB, args ...string) cliResult {
	t.Helper()
	return cli(t, "", nil, append(append([]string{"gw"}, args...), "--address", g.AdminAddr)...)
}

// ok checks a run succeeded with nothing on stderr.
func (r cliResult) ok(t testing.TB, what string) cliResult {
	t.Helper()
	if r.code != 0 || r.stderr != "" {
		t.Fatalf("%s: exit %d\nstdout %s\nstderr %s", what, r.code, r.stdout, r.stderr)
	}
	return r
}

// fails checks a run failed with exit status 1, nothing on stdout, and
// exactly the error line on stderr.
func (r cliResult) fails(t testing.TB, what, errLine string) {
	t.Helper()
	if r.code != 1 || r.stdout != "" || r.stderr != "Error: "+errLine+"\n" {
		t.Errorf("%s: exit %d\nstdout %q\nstderr %q\nwant exit 1 and stderr %q", what, r.code, r.stdout, r.stderr, "Error: "+errLine+"\n")
	}
}

// sameAsAdmin checks that --json printed what the admin API answers to
// GET path.
func sameAsAdmin(t testing.TB, g *gateway, r cliResult, path string) {
	t.Helper()
	want := g.adminJSON(t, http.MethodGet, path, nil, http.StatusOK)
	if !sameJSON(r.stdout, string(want.Body)) || !strings.HasSuffix(r.stdout, "}\n") {
		t.Errorf("--json printed\n%s\nGET %s answers\n%s", r.stdout, path, want.Body)
	}
}

// lines matches output line by line against patterns (regular
// expressions, anchored).
func lines(t testing.TB, what, out string, patterns ...string) {
	t.Helper()
	got := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(got) != len(patterns) {
		t.Errorf("%s: %d lines, want %d:\n%s", what, len(got), len(patterns), out)
		return
	}
	for i, p := range patterns {
		if !regexp.MustCompile("^" + p + "$").MatchString(got[i]) {
			t.Errorf("%s: line %d is %q, want %q", what, i+1, got[i], p)
		}
	}
}

// justNow is how a time of this test reads for people.
const justNow = `(now|\d+ seconds? ago)`

// TestCLIAccounts: accounts are created, shown, listed, changed and their
// balance moved by `caddy gw accounts`, and the journal lists and checks
// the movements; tables for people, the admin API's JSON with --json,
// refusals on stderr with exit status 1.
func TestCLIAccounts(t *testing.T) {
	t.Parallel()
	g := startGateway(t, gwOptions{})
	r := g.gw(t, "accounts", "create", "acme", "--plan", "paid", "--cleared", "--balance", "20", "--daily-cap", "5.5", "--abilities", "speech, images").ok(t, "create")
	lines(t, "create", r.stdout,
		`Account      acme`,
		`Plan         paid, cleared`,
		`Org          none`,
		`Balance      \$20\.00`,
		`Low balance  none`,
		`Daily cap    \$5\.50`,
		`Monthly cap  none`,
		`Abilities    speech, images`,
		`Billing      list prices`,
		`Spent        \$0\.00 today, \$0\.00 this month, \$0\.00 in all`,
		`Created      `+justNow)
	g.gw(t, "accounts", "create", "acme", "--plan", "paid").fails(t, "create again", `creating account acme: account "acme" already exists`)
	g.gw(t, "accounts", "create", "other").fails(t, "create without a plan", `required flag(s) "plan" not set`)
	g.gw(t, "accounts", "create", "bad id", "--plan", "free").fails(t, "create a bad id", "creating account bad id: id: required, 1 to 64 letters, digits, '.', '_' or '-'")
	g.gw(t, "accounts", "create", "other", "--plan", "gold").fails(t, "create on a bad plan", `creating account other: plan: must be "free" or "paid"`)
	r = g.gw(t, "accounts", "create", "json-co", "--plan", "free", "--json").ok(t, "create --json")
	sameAsAdmin(t, g, r, "/gw/accounts/json-co")
	if !strings.Contains(r.stdout, `"balance_usd":null`) {
		t.Errorf("create --json: %s", r.stdout)
	}

	// Changes: only the settings given; none and all clear.
	r = g.gw(t, "accounts", "update", "json-co", "--monthly-cap", "100", "--payg", "--json").ok(t, "update")
	if a := decodeJSON(t, r.stdout).(map[string]any); a["monthly_cap_usd"] != "100.00" || a["payg"] != true || a["plan"] != "free" {
		t.Errorf("update: %s", r.stdout)
	}
	r = g.gw(t, "accounts", "update", "json-co", "--monthly-cap", "none", "--abilities", "all", "--json").ok(t, "update to none")
	if a := decodeJSON(t, r.stdout).(map[string]any); a["monthly_cap_usd"] != nil || len(a["abilities"].([]any)) != 8 {
		t.Errorf("update to none: %s", r.stdout)
	}
	g.gw(t, "accounts", "update", "json-co").fails(t, "update nothing", "nothing to change: give a setting (see --help)")
	g.gw(t, "accounts", "update", "nobody", "--cleared").fails(t, "update nobody", "account nobody: not found")

	// Top-ups and adjustments, exact to the nano-dollar.
	r = g.gw(t, "accounts", "top-up", "acme", "10.000000001").ok(t, "top-up")
	if !strings.Contains(r.stdout, "Balance      $30.000000001\n") {
		t.Errorf("top-up:\n%s", r.stdout)
	}
	r = g.gw(t, "accounts", "top-up", "acme", "-2.5", "--reason", "a duplicate top-up", "--json").ok(t, "adjustment")
	if a := decodeJSON(t, r.stdout).(map[string]any); a["balance_usd"] != "27.500000001" {
		t.Errorf("adjustment: %s", r.stdout)
	}
	g.gw(t, "accounts", "top-up", "acme", "-1").fails(t, "adjustment without a reason",
		"account acme: reason: required (a non-empty string) when add_balance_usd is below zero")
	g.gw(t, "accounts", "top-up", "acme", "-100", "--reason", "too much").fails(t, "adjustment past zero",
		"account acme: add_balance_usd: the balance would go below zero (it is 27.500000001)")
	g.gw(t, "accounts", "top-up", "acme", "ten").fails(t, "top-up of words",
		"account acme: add_balance_usd: amount must be a decimal number of US dollars with at most 9 decimals")
	g.gw(t, "accounts", "top-up", "acme").fails(t, "top-up without an amount", "accepts 2 arg(s), received 1")
	g.gw(t, "accounts", "top-up", "json-co", "1").fails(t, "top-up of an account billed afterwards",
		"account json-co: add_balance_usd: the account is billed afterwards (balance_usd is null); set balance_usd to make it prepaid")

	// Listing and showing.
	r = g.gw(t, "accounts", "list").ok(t, "list")
	lines(t, "list", r.stdout,
		`ACCOUNT  PLAN                 ORG   BALANCE        TODAY  THIS MONTH  IN ALL  CREATED`,
		`acme     paid, cleared        none  \$27\.500000001  \$0\.00  \$0\.00       \$0\.00   `+justNow,
		`json-co  free, pay as you go  none  billed after   \$0\.00  \$0\.00       \$0\.00   `+justNow)
	sameAsAdmin(t, g, g.gw(t, "accounts", "list", "--json").ok(t, "list --json"), "/gw/accounts")
	sameAsAdmin(t, g, g.gw(t, "accounts", "show", "acme", "--json").ok(t, "show --json"), "/gw/accounts/acme")
	g.gw(t, "accounts", "show", "nobody").fails(t, "show nobody", "account nobody: not found")
	g.gw(t, "accounts", "show").fails(t, "show without an id", "accepts 1 arg(s), received 0")

	// The journal of the movements, and the check of every journal.
	r = g.gw(t, "journal", "acme").ok(t, "journal")
	lines(t, "journal", r.stdout,
		`WHEN +KIND +AMOUNT +BALANCE AFTER +REQUEST OR REASON`,
		justNow+` +adjustment +-\$2\.50 +\$27\.500000001 +a duplicate top-up`,
		justNow+` +top_up +\$10\.000000001 +\$30\.000000001 *`,
		justNow+` +set +\$20\.00 +\$20\.00 *`)
	sameAsAdmin(t, g, g.gw(t, "journal", "acme", "--json").ok(t, "journal --json"), "/gw/accounts/acme/journal")
	r = g.gw(t, "journal", "--check").ok(t, "journal --check")
	if r.stdout != "Every account's journal adds up to its balance, and every charge has its ledger entry.\n" {
		t.Errorf("journal --check: %q", r.stdout)
	}
	sameAsAdmin(t, g, g.gw(t, "journal", "--check", "--json").ok(t, "journal --check --json"), "/gw/journal/check")
	g.gw(t, "journal").fails(t, "journal of nobody", "give an account ID, or --check to check every account")
	g.gw(t, "journal", "acme", "--check").fails(t, "journal of one, checked", "--check checks every account: give no ID with it")
	g.gw(t, "journal", "acme", "--limit", "0").fails(t, "journal --limit 0", "journal of account acme: limit: must be a whole number from 1 to 1000")
}

// TestCLIKeys: a key made by `caddy gw keys create` is printed once and
// works at once within its model list; listing never shows secrets; a
// revoked key stops working.
func TestCLIKeys(t *testing.T) {
	t.Parallel()
	g, oa, _, _ := chatGateway(t)
	oa.SetDefault(fake.Script{Text: "ok", Usage: fake.Usage{Input: 10, Output: 10}})
	g.createAccount(t, map[string]any{"id": "acme", "plan": "paid", "cleared": true, "balance_usd": "5"})
	r := g.gw(t, "keys", "create", "acme", "--name", "laptop", "--models", "gw-pinned-gpt-4.1-mini").ok(t, "keys create")
	lines(t, "keys create", r.stdout,
		`Key key_[0-9a-f]+ \(laptop\) of account acme:`,
		``,
		`  sk-\S+`,
		``,
		`This is the only time the key is shown: store it now\.`)
	secret := regexp.MustCompile(`sk-\S+`).FindString(r.stdout)
	keyID := regexp.MustCompile(`key_[0-9a-f]+`).FindString(r.stdout)
	chat := func(model string) response {
		return g.do(t, http.MethodPost, "/v1/chat/completions", `{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`, bearer(secret)...)
	}
	if resp := chat("gw-pinned-gpt-4.1-mini"); resp.Status != http.StatusOK {
		t.Fatalf("the new key: %d %s", resp.Status, resp.Body)
	}
	if resp := chat("gw-pinned-o4-mini"); resp.Status == http.StatusOK || !strings.Contains(string(resp.Body), "model_not_allowed") {
		t.Fatalf("a model outside the key's list: %d %s", resp.Status, resp.Body)
	}

	r = g.gw(t, "keys", "create", "acme", "--expires", "2030-01-02T03:04:05Z", "--json").ok(t, "keys create --json")
	k := decodeJSON(t, r.stdout).(map[string]any)
	if k["name"] != "cli" || k["models"] != nil || k["expires_at"] != "2030-01-02T03:04:05Z" || !strings.HasPrefix(k["key"].(string), "sk-") {
		t.Errorf("keys create --json: %s", r.stdout)
	}
	g.gw(t, "keys", "create", "acme", "--expires", "tomorrow").fails(t, "keys create --expires tomorrow",
		"creating a key of account acme: expires_at: must be an RFC 3339 time")
	g.gw(t, "keys", "create", "nobody").fails(t, "keys create for nobody", "creating a key of account nobody: not found")

	r = g.gw(t, "keys", "list", "acme").ok(t, "keys list")
	lines(t, "keys list", r.stdout,
		`KEY +NAME +MODELS +MCP TOOLS +EXPIRES +DAILY CAP +MONTHLY CAP +TOTAL CAP +CREATED`,
		keyID+` +laptop +gw-pinned-gpt-4\.1-mini +all +never +none +none +none +`+justNow,
		k["id"].(string)+` +cli +all +all +(in )?\d+ years( from now)? +none +none +none +`+justNow)
	if strings.Contains(r.stdout, "sk-") {
		t.Errorf("keys list shows a secret:\n%s", r.stdout)
	}
	sameAsAdmin(t, g, g.gw(t, "keys", "list", "acme", "--json").ok(t, "keys list --json"), "/gw/accounts/acme/keys")
	g.gw(t, "keys", "list", "nobody").fails(t, "keys of nobody", "keys of account nobody: not found")

	r = g.gw(t, "keys", "revoke", keyID).ok(t, "keys revoke")
	if r.stdout != "Revoked key "+keyID+": it no longer works.\n" {
		t.Errorf("keys revoke: %q", r.stdout)
	}
	if resp := chat("gw-pinned-gpt-4.1-mini"); resp.Status != http.StatusUnauthorized {
		t.Fatalf("a revoked key: %d %s", resp.Status, resp.Body)
	}
	g.gw(t, "keys", "revoke", keyID).fails(t, "revoke twice", "key "+keyID+": not found")
	r = g.gw(t, "keys", "revoke", k["id"].(string), "--json").ok(t, "keys revoke --json")
	if !sameJSON(r.stdout, `{"id":"`+k["id"].(string)+`","revoked":true}`) {
		t.Errorf("keys revoke --json: %s", r.stdout)
	}
}

// TestCLIKeyCaps: a key's caps are set when `caddy gw keys create` makes
// it, shown with its spend by `keys show` and in `keys list`, changed and
// removed (`none`) by `keys update`; the key's spend is its ledger's, and
// a call past a cap is refused.
func TestCLIKeyCaps(t *testing.T) {
	t.Parallel()
	g, oa, _, _ := chatGateway(t)
	oa.SetDefault(fake.Script{Text: "ok", Usage: fake.Usage{Input: 12345, Output: 1000}})
	g.createAccount(t, map[string]any{"id": "acme", "plan": "paid", "cleared": true, "balance_usd": "5"})
	r := g.gw(t, "keys", "create", "acme", "--name", "capped", "--daily-cap", "0.006538", "--total-cap", "1.000000001").ok(t, "keys create with caps")
	lines(t, "keys create with caps", r.stdout,
		`Key key_[0-9a-f]+ \(capped\) of account acme, capped at \$0\.006538 a day and \$1\.000000001 in all:`,
		``,
		`  sk-\S+`,
		``,
		`This is the only time the key is shown: store it now\.`)
	secret := regexp.MustCompile(`sk-\S+`).FindString(r.stdout)
	keyID := regexp.MustCompile(`key_[0-9a-f]+`).FindString(r.stdout)
	chat := func() response {
		return g.do(t, http.MethodPost, "/v1/chat/completions", `{"model":"gw-pinned-gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`, bearer(secret)...)
	}
	if resp := chat(); resp.Status != http.StatusOK || resp.Header.Get("X-Gw-Cost-Usd") != "0.006538" {
		t.Fatalf("chat: %d %s %s", resp.Status, resp.Header.Get("X-Gw-Cost-Usd"), resp.Body)
	}

	r = g.gw(t, "keys", "show", keyID).ok(t, "keys show")
	lines(t, "keys show", r.stdout,
		`Key          `+keyID,
		`Name         capped`,
		`Models       all`,
		`MCP tools    all`,
		`Expires      never`,
		`Daily cap    \$0\.006538`,
		`Monthly cap  none`,
		`Total cap    \$1\.000000001`,
		`Spent        \$0\.006538 today, \$0\.006538 this month, \$0\.006538 in all`,
		`Created      `+justNow)
	sameAsAdmin(t, g, g.gw(t, "keys", "show", keyID, "--json").ok(t, "keys show --json"), "/gw/keys/"+keyID)
	g.gw(t, "keys", "show", "key_nobody").fails(t, "keys show of no key", "key key_nobody: not found")

	// The daily cap is spent: the next call is refused.
	if resp := chat(); resp.Status != http.StatusPaymentRequired || resp.Header.Get("X-Gw-Hold-Reason") != "key_daily_cap" {
		t.Fatalf("a call past the daily cap: %d (%s) %s", resp.Status, resp.Header.Get("X-Gw-Hold-Reason"), resp.Body)
	}

	// Raised, the cap admits it; removed, it is none.
	r = g.gw(t, "keys", "update", keyID, "--daily-cap", "2.5", "--monthly-cap", "30", "--name", "raised").ok(t, "keys update")
	lines(t, "keys update", r.stdout,
		`Key          `+keyID,
		`Name         raised`,
		`Models       all`,
		`MCP tools    all`,
		`Expires      never`,
		`Daily cap    \$2\.50`,
		`Monthly cap  \$30\.00`,
		`Total cap    \$1\.000000001`,
		`Spent        \$0\.006538 today, \$0\.006538 this month, \$0\.006538 in all`,
		`Created      `+justNow)
	if resp := chat(); resp.Status != http.StatusOK {
		t.Fatalf("a call within the raised cap: %d %s", resp.Status, resp.Body)
	}
	r = g.gw(t, "keys", "update", keyID, "--total-cap", "none", "--json").ok(t, "keys update --json")
	sameAsAdmin(t, g, r, "/gw/keys/"+keyID)
	k := decodeJSON(t, r.stdout).(map[string]any)
	if k["daily_cap_usd"] != "2.50" || k["monthly_cap_usd"] != "30.00" || k["total_cap_usd"] != nil || k["name"] != "raised" ||
		!sameJSON(mustJSONText(t, k["spend"]), `{"today_usd":"0.013076","month_usd":"0.013076","total_usd":"0.013076"}`) {
		t.Errorf("keys update --total-cap none --json: %s", r.stdout)
	}
	r = g.gw(t, "keys", "list", "acme").ok(t, "keys list")
	lines(t, "keys list", r.stdout,
		`KEY +NAME +MODELS +MCP TOOLS +EXPIRES +DAILY CAP +MONTHLY CAP +TOTAL CAP +CREATED`,
		keyID+` +raised +all +all +never +\$2\.50 +\$30\.00 +none +`+justNow)

	g.gw(t, "keys", "update", keyID).fails(t, "keys update of nothing", "nothing to change: give a setting (see --help)")
	g.gw(t, "keys", "update", keyID, "--daily-cap=-1").fails(t, "a negative cap", "key "+keyID+": daily_cap_usd: must not be negative")
	g.gw(t, "keys", "update", keyID, "--monthly-cap", "ten").fails(t, "a cap in words",
		"key "+keyID+": monthly_cap_usd: amount must be a decimal number of US dollars with at most 9 decimals")
	g.gw(t, "keys", "update", "key_nobody", "--daily-cap", "1").fails(t, "keys update of no key", "key key_nobody: not found")
	g.gw(t, "keys", "create", "acme", "--total-cap", "1.0000000001").fails(t, "keys create with a cap past the nano-dollar",
		"creating a key of account acme: total_cap_usd: amount must be a decimal number of US dollars with at most 9 decimals")
}

// TestCLIKeyMCPTools: `caddy gw keys create --mcp-tools` makes a key with
// the MCP gateway's tools it may call (`none` for none), `keys show` and
// `keys list` show them, `keys update --mcp-tools` replaces them, `none`
// empties them and `all` lets the key call every tool again; a malformed
// glob is refused with the admin API's message; `--abilities` takes
// mcp_gateway.
func TestCLIKeyMCPTools(t *testing.T) {
	t.Parallel()
	g := startGateway(t, gwOptions{})
	r := g.gw(t, "accounts", "create", "acme", "--plan", "paid", "--abilities", "mcp_gateway").ok(t, "accounts create --abilities mcp_gateway")
	if !strings.Contains(r.stdout, "\nAbilities    mcp_gateway\n") {
		t.Errorf("accounts create --abilities mcp_gateway:\n%s", r.stdout)
	}
	r = g.gw(t, "keys", "create", "acme", "--name", "agent", "--mcp-tools", "github__*,*__read_*", "--json").ok(t, "keys create --mcp-tools")
	agent := decodeJSON(t, r.stdout).(map[string]any)
	if fmt.Sprint(agent["mcp_tools"]) != "[github__* *__read_*]" {
		t.Errorf("keys create --mcp-tools --json: %s", r.stdout)
	}
	id := agent["id"].(string)
	r = g.gw(t, "keys", "create", "acme", "--name", "locked", "--mcp-tools", "none", "--json").ok(t, "keys create --mcp-tools none")
	locked := decodeJSON(t, r.stdout).(map[string]any)
	if tools, ok := locked["mcp_tools"].([]any); !ok || len(tools) != 0 {
		t.Errorf("keys create --mcp-tools none --json: %s", r.stdout)
	}
	r = g.gw(t, "keys", "show", id).ok(t, "keys show")
	lines(t, "keys show", r.stdout,
		`Key          `+id,
		`Name         agent`,
		`Models       all`,
		`MCP tools    github__\*, \*__read_\*`,
		`Expires      never`,
		`Daily cap    none`,
		`Monthly cap  none`,
		`Total cap    none`,
		`Spent        \$0\.00 today, \$0\.00 this month, \$0\.00 in all`,
		`Created      `+justNow)
	r = g.gw(t, "keys", "list", "acme").ok(t, "keys list")
	lines(t, "keys list", r.stdout,
		`KEY +NAME +MODELS +MCP TOOLS +EXPIRES +DAILY CAP +MONTHLY CAP +TOTAL CAP +CREATED`,
		id+` +agent +all +github__\*, \*__read_\* +never +none +none +none +`+justNow,
		locked["id"].(string)+` +locked +all +none +never +none +none +none +`+justNow)

	// Replaced, emptied, every tool again.
	r = g.gw(t, "keys", "update", id, "--mcp-tools", "docs__search").ok(t, "keys update --mcp-tools")
	if !strings.Contains(r.stdout, "\nMCP tools    docs__search\n") {
		t.Errorf("keys update --mcp-tools docs__search:\n%s", r.stdout)
	}
	r = g.gw(t, "keys", "update", id, "--mcp-tools", "none", "--json").ok(t, "keys update --mcp-tools none")
	sameAsAdmin(t, g, r, "/gw/keys/"+id)
	if tools, ok := decodeJSON(t, r.stdout).(map[string]any)["mcp_tools"].([]any); !ok || len(tools) != 0 {
		t.Errorf("keys update --mcp-tools none --json: %s", r.stdout)
	}
	r = g.gw(t, "keys", "update", id, "--mcp-tools", "all", "--json").ok(t, "keys update --mcp-tools all")
	sameAsAdmin(t, g, r, "/gw/keys/"+id)
	if k := decodeJSON(t, r.stdout).(map[string]any); k["mcp_tools"] != nil || k["name"] != "agent" {
		t.Errorf("keys update --mcp-tools all --json: %s", r.stdout)
	}
	r = g.gw(t, "keys", "show", id).ok(t, "keys show after all")
	if !strings.Contains(r.stdout, "\nMCP tools    all\n") {
		t.Errorf("keys show after --mcp-tools all:\n%s", r.stdout)
	}

	g.gw(t, "keys", "update", id, "--mcp-tools", "github__[").fails(t, "keys update with a malformed glob",
		"key "+id+`: mcp_tools: "github__[": not a valid glob (syntax error in pattern)`)
	g.gw(t, "keys", "create", "acme", "--mcp-tools", "a__*,b__[").fails(t, "keys create with a malformed glob",
		`creating a key of account acme: mcp_tools: "b__[": not a valid glob (syntax error in pattern)`)
	if k := g.adminJSON(t, http.MethodGet, "/gw/keys/"+id, nil, http.StatusOK).JSON(t); k["mcp_tools"] != nil {
		t.Errorf("a refused update changed the key: %v", k)
	}
}

// TestCLIOrgs: `caddy gw orgs` creates an organization with a cap, shows
// it with what its accounts spent, changes and removes its caps, and
// deletes it only once no account belongs to it; `--org` on `accounts
// create` and `accounts update` puts an account in it and takes it out
// (`none`), and the account list and card name it.
func TestCLIOrgs(t *testing.T) {
	t.Parallel()
	g, oa, _, _ := chatGateway(t)
	oa.SetDefault(fake.Script{Text: "ok", Usage: fake.Usage{Input: 12345, Output: 1000}})
	r := g.gw(t, "orgs", "create", "acme-group", "--name", "Acme Group", "--daily-cap", "0.006538").ok(t, "orgs create")
	lines(t, "orgs create", r.stdout,
		`Organization  acme-group`,
		`Name          Acme Group`,
		`Daily cap     \$0\.006538`,
		`Monthly cap   none`,
		`Spent         \$0\.00 today, \$0\.00 this month, \$0\.00 in all`,
		`Created       `+justNow)
	g.gw(t, "orgs", "create", "acme-group").fails(t, "orgs create again", `creating organization acme-group: organization "acme-group" already exists`)
	g.gw(t, "orgs", "create", "other", "--monthly-cap", "ten").fails(t, "orgs create with a cap in words",
		"creating organization other: monthly_cap_usd: amount must be a decimal number of US dollars with at most 9 decimals")

	r = g.gw(t, "accounts", "create", "acme", "--plan", "paid", "--cleared", "--balance", "5", "--org", "acme-group").ok(t, "accounts create --org")
	lines(t, "accounts create --org", r.stdout,
		`Account      acme`,
		`Plan         paid, cleared`,
		`Org          acme-group`,
		`Balance      \$5\.00`,
		`Low balance  none`,
		`Daily cap    none`,
		`Monthly cap  none`,
		`Abilities    .*`,
		`Billing      list prices`,
		`Spent        \$0\.00 today, \$0\.00 this month, \$0\.00 in all`,
		`Created      `+justNow)
	g.gw(t, "accounts", "create", "other", "--plan", "paid", "--org", "nobody").fails(t, "accounts create in no organization",
		"creating account other: org: no such organization")
	secret, _ := g.createKey(t, "acme", map[string]any{"name": "k"})
	chat := func() response {
		return g.do(t, http.MethodPost, "/v1/chat/completions", `{"model":"gw-pinned-gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`, bearer(secret)...)
	}
	if resp := chat(); resp.Status != http.StatusOK || resp.Header.Get("X-Gw-Cost-Usd") != "0.006538" {
		t.Fatalf("chat: %d %s %s", resp.Status, resp.Header.Get("X-Gw-Cost-Usd"), resp.Body)
	}

	r = g.gw(t, "orgs", "show", "acme-group").ok(t, "orgs show")
	lines(t, "orgs show", r.stdout,
		`Organization  acme-group`,
		`Name          Acme Group`,
		`Daily cap     \$0\.006538`,
		`Monthly cap   none`,
		`Spent         \$0\.006538 today, \$0\.006538 this month, \$0\.006538 in all`,
		`Created       `+justNow)
	sameAsAdmin(t, g, g.gw(t, "orgs", "show", "acme-group", "--json").ok(t, "orgs show --json"), "/gw/orgs/acme-group")
	g.gw(t, "orgs", "show", "nobody").fails(t, "orgs show of no organization", "organization nobody: not found")
	if resp := chat(); resp.Status != http.StatusPaymentRequired || resp.Header.Get("X-Gw-Hold-Reason") != "org_daily_cap" {
		t.Fatalf("a call past the organization's daily cap: %d (%s) %s", resp.Status, resp.Header.Get("X-Gw-Hold-Reason"), resp.Body)
	}

	// Raised, the cap admits it; removed, it is none.
	r = g.gw(t, "orgs", "update", "acme-group", "--daily-cap", "2.5", "--monthly-cap", "30", "--name", "Acme").ok(t, "orgs update")
	lines(t, "orgs update", r.stdout,
		`Organization  acme-group`,
		`Name          Acme`,
		`Daily cap     \$2\.50`,
		`Monthly cap   \$30\.00`,
		`Spent         \$0\.006538 today, \$0\.006538 this month, \$0\.006538 in all`,
		`Created       `+justNow)
	if resp := chat(); resp.Status != http.StatusOK {
		t.Fatalf("a call within the raised cap: %d %s", resp.Status, resp.Body)
	}
	r = g.gw(t, "orgs", "update", "acme-group", "--daily-cap", "none", "--json").ok(t, "orgs update --daily-cap none")
	sameAsAdmin(t, g, r, "/gw/orgs/acme-group")
	o := decodeJSON(t, r.stdout).(map[string]any)
	if o["daily_cap_usd"] != nil || o["monthly_cap_usd"] != "30.00" || o["name"] != "Acme" ||
		!sameJSON(mustJSONText(t, o["spend"]), `{"today_usd":"0.013076","month_usd":"0.013076","total_usd":"0.013076"}`) {
		t.Errorf("orgs update --daily-cap none --json: %s", r.stdout)
	}
	g.gw(t, "orgs", "update", "acme-group").fails(t, "orgs update of nothing", "nothing to change: give a setting (see --help)")
	g.gw(t, "orgs", "update", "acme-group", "--daily-cap=-1").fails(t, "a negative cap", "organization acme-group: daily_cap_usd: must not be negative")
	r = g.gw(t, "orgs", "list").ok(t, "orgs list")
	lines(t, "orgs list", r.stdout,
		`ORG +NAME +DAILY CAP +MONTHLY CAP +TODAY +THIS MONTH +IN ALL +CREATED`,
		`acme-group +Acme +none +\$30\.00 +\$0\.013076 +\$0\.013076 +\$0\.013076 +`+justNow)
	sameAsAdmin(t, g, g.gw(t, "orgs", "list", "--json").ok(t, "orgs list --json"), "/gw/orgs")
	r = g.gw(t, "accounts", "list").ok(t, "accounts list")
	lines(t, "accounts list", r.stdout,
		`ACCOUNT +PLAN +ORG +BALANCE +TODAY +THIS MONTH +IN ALL +CREATED`,
		`acme +paid, cleared +acme-group +\$4\.986924 +\$0\.013076 +\$0\.013076 +\$0\.013076 +`+justNow,
		`default +paid, cleared +none +billed after +\$0\.00 +\$0\.00 +\$0\.00 +`+justNow)

	// Deleted only once no account belongs to it.
	g.gw(t, "orgs", "delete", "acme-group").fails(t, "orgs delete while an account belongs to it",
		"organization acme-group still has accounts: move each out first (caddy gw accounts update ID --org none)")
	r = g.gw(t, "accounts", "update", "acme", "--org", "none", "--json").ok(t, "accounts update --org none")
	if a := decodeJSON(t, r.stdout).(map[string]any); a["org"] != nil {
		t.Errorf("accounts update --org none: %s", r.stdout)
	}
	r = g.gw(t, "orgs", "delete", "acme-group").ok(t, "orgs delete")
	if r.stdout != "Deleted organization acme-group.\n" {
		t.Errorf("orgs delete: %q", r.stdout)
	}
	g.adminJSON(t, http.MethodGet, "/gw/orgs/acme-group", nil, http.StatusNotFound)
	g.gw(t, "orgs", "delete", "acme-group").fails(t, "orgs delete again", "organization acme-group: not found")
	r = g.gw(t, "orgs", "list").ok(t, "orgs list of none")
	if r.stdout != "No organizations.\n" {
		t.Errorf("orgs list of none: %q", r.stdout)
	}
}

// TestCLIWebhooks: `caddy gw webhooks` creates a webhook and prints its
// secret once (the one its deliveries are signed with), refuses an
// unknown event type naming the flag, lists and shows webhooks, and
// shows the delivery log of a charge that crosses half of a daily cap
// and the account's low-balance mark (set with `accounts create
// --low-balance`): delivered to a receiver that takes them, pending with
// the receiver's answer at one that refuses; then deletes them.
func TestCLIWebhooks(t *testing.T) {
	t.Parallel()
	g, oa, _, _ := chatGateway(t)
	oa.SetDefault(fake.Script{Text: "ok", Usage: fake.Usage{Input: 12345, Output: 1000}})
	ok := newHookReceiver(t, "", nil)
	refusing := newHookReceiver(t, "0123456789abcdef", func(int, hookEvent) int { return http.StatusInternalServerError })
	refusing.answer = "nope"

	r := g.gw(t, "accounts", "create", "acme", "--plan", "paid", "--cleared", "--balance", "1", "--daily-cap", "0.01", "--low-balance", "0.995").ok(t, "accounts create --low-balance")
	lines(t, "accounts create --low-balance", r.stdout,
		`Account      acme`,
		`Plan         paid, cleared`,
		`Org          none`,
		`Balance      \$1\.00`,
		`Low balance  \$0\.995`,
		`Daily cap    \$0\.01`,
		`Monthly cap  none`,
		`Abilities    .*`,
		`Billing      list prices`,
		`Spent        \$0\.00 today, \$0\.00 this month, \$0\.00 in all`,
		`Created      `+justNow)

	r = g.gw(t, "webhooks", "create", "--url", ok.url(), "--events", "cap.threshold,balance.low").ok(t, "webhooks create")
	lines(t, "webhooks create", r.stdout,
		`Webhook wh_[0-9a-f]{24} sends cap\.threshold, balance\.low to `+regexp.QuoteMeta(ok.url())+`, signed with the secret:`,
		``,
		`  whsec_[A-Za-z0-9_-]{43}`,
		``,
		`This is the only time the secret is shown: store it now\. Each delivery's X-Gw-Signature`,
		`header is "sha256=" and the hex HMAC-SHA256 of the body keyed with it\.`)
	m := regexp.MustCompile(`^Webhook (wh_[0-9a-f]{24}) .*\n\n  (whsec_\S+)\n`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("webhooks create: %q", r.stdout)
	}
	id := m[1]
	ok.setSecret(m[2]) // what the receiver gets is signed with the printed secret
	r = g.gw(t, "webhooks", "create", "--url", refusing.url(), "--events", "balance.low", "--secret", "0123456789abcdef", "--json").ok(t, "webhooks create --json")
	other := decodeJSON(t, r.stdout).(map[string]any)
	otherID, _ := other["id"].(string)
	if other["secret"] != "0123456789abcdef" || other["url"] != refusing.url() {
		t.Fatalf("webhooks create --json: %s", r.stdout)
	}
	g.gw(t, "webhooks", "create", "--url", ok.url(), "--events", "cap.threshold,cap.reached").fails(t, "webhooks create of an unknown event type",
		`creating a webhook: --events: "cap.reached" is not an event type (known: cap.threshold, balance.low, key.revoked)`)
	g.gw(t, "webhooks", "create", "--url", ok.url()).fails(t, "webhooks create without events", `required flag(s) "events" not set`)

	r = g.gw(t, "webhooks", "list").ok(t, "webhooks list")
	lines(t, "webhooks list", r.stdout,
		`WEBHOOK +URL +EVENTS +CREATED`,
		id+` +`+regexp.QuoteMeta(ok.url())+` +cap\.threshold, balance\.low +`+justNow,
		otherID+` +`+regexp.QuoteMeta(refusing.url())+` +balance\.low +`+justNow)
	sameAsAdmin(t, g, g.gw(t, "webhooks", "list", "--json").ok(t, "webhooks list --json"), "/gw/webhooks")
	r = g.gw(t, "webhooks", "show", id).ok(t, "webhooks show")
	lines(t, "webhooks show", r.stdout,
		`Webhook  `+id,
		`URL      `+regexp.QuoteMeta(ok.url()),
		`Events   cap\.threshold, balance\.low`,
		`Created  `+justNow)
	if r := g.gw(t, "webhooks", "deliveries", id).ok(t, "webhooks deliveries of none"); r.stdout != "No deliveries.\n" {
		t.Errorf("webhooks deliveries of none: %q", r.stdout)
	}

	// $0.006538 of a $0.01 daily cap (past half of it), and the balance
	// from $1.00 to $0.993462, below its $0.995 mark.
	secretKey, _ := g.createKey(t, "acme", map[string]any{"name": "k"})
	resp := g.do(t, http.MethodPost, "/v1/chat/completions", `{"model":"gw-pinned-gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`, bearer(secretKey)...)
	if resp.Status != http.StatusOK || resp.Header.Get("X-Gw-Cost-Usd") != "0.006538" {
		t.Fatalf("chat: %d %s %s", resp.Status, resp.Header.Get("X-Gw-Cost-Usd"), resp.Body)
	}
	waitLogged(t, g, "webhook delivered", id, 2)
	waitLogged(t, g, "webhook delivery failed", otherID, 1)

	r = g.gw(t, "webhooks", "deliveries", id).ok(t, "webhooks deliveries")
	lines(t, "webhooks deliveries", r.stdout,
		`WHEN +EVENT +ACCOUNT +STATUS +ATTEMPTS +LAST ANSWER +NEXT ATTEMPT`,
		justNow+` +balance\.low \(\$0\.993462 left\) +acme +delivered +1 +HTTP 204 +none`,
		justNow+` +cap\.threshold \(50% of daily_cap\) +acme +delivered +1 +HTTP 204 +none`)
	sameAsAdmin(t, g, g.gw(t, "webhooks", "deliveries", id, "--json").ok(t, "webhooks deliveries --json"), "/gw/webhooks/"+id+"/deliveries")
	r = g.gw(t, "webhooks", "deliveries", id, "--limit", "1").ok(t, "webhooks deliveries --limit 1")
	lines(t, "webhooks deliveries --limit 1", r.stdout,
		`WHEN +EVENT +ACCOUNT +STATUS +ATTEMPTS +LAST ANSWER +NEXT ATTEMPT`,
		justNow+` +balance\.low \(\$0\.993462 left\) +acme +delivered +1 +HTTP 204 +none`)
	r = g.gw(t, "webhooks", "deliveries", otherID).ok(t, "webhooks deliveries refused")
	lines(t, "webhooks deliveries refused", r.stdout,
		`WHEN +EVENT +ACCOUNT +STATUS +ATTEMPTS +LAST ANSWER +NEXT ATTEMPT`,
		justNow+` +balance\.low \(\$0\.993462 left\) +acme +pending +[1-9]\d* +HTTP 500: nope +(now|\d+ seconds? from now)`)

	// What the receiver took, each signed with the secret the command
	// printed (the receiver checks).
	if got := describe(ok.waitAccepted(t, 2)); len(got) != 2 || !strings.HasPrefix(got[0], "cap.threshold") || !strings.HasPrefix(got[1], "balance.low") {
		t.Fatalf("the receiver took %q", got)
	}

	// The mark removed, the card says none.
	r = g.gw(t, "accounts", "update", "acme", "--low-balance", "none").ok(t, "accounts update --low-balance none")
	if !strings.Contains(r.stdout, "Balance      $0.993462\nLow balance  none\n") {
		t.Errorf("accounts update --low-balance none:\n%s", r.stdout)
	}

	r = g.gw(t, "webhooks", "delete", id).ok(t, "webhooks delete")
	if r.stdout != "Deleted webhook "+id+": its pending deliveries will not be sent.\n" {
		t.Errorf("webhooks delete: %q", r.stdout)
	}
	g.gw(t, "webhooks", "delete", id).fails(t, "webhooks delete again", "webhook "+id+": not found")
	g.gw(t, "webhooks", "deliveries", id).fails(t, "deliveries of a deleted webhook", "deliveries of webhook "+id+": not found")
	r = g.gw(t, "webhooks", "delete", otherID, "--json").ok(t, "webhooks delete --json")
	if !sameJSON(r.stdout, `{"deleted":true,"id":"`+otherID+`"}`) {
		t.Errorf("webhooks delete --json: %s", r.stdout)
	}
	if r := g.gw(t, "webhooks", "list").ok(t, "webhooks list of none"); r.stdout != "No webhooks.\n" {
		t.Errorf("webhooks list of none: %q", r.stdout)
	}
}

// TestCLIUsageAndLedger: `caddy gw usage` and `caddy gw ledger` show the
// charges of billed calls: exact figures in a table, the admin API's JSON
// with --json, refused parameters named by their flags.
func TestCLIUsageAndLedger(t *testing.T) {
	t.Parallel()
	g, oa, _, _ := chatGateway(t)
	oa.SetDefault(fake.Script{Text: "ok", Usage: fake.Usage{Input: 12345, Output: 1000}})
	key := g.newAccountKey(t, map[string]any{"id": "acme", "plan": "paid", "cleared": true, "balance_usd": "5"})
	var ids []string
	for range 2 {
		resp := g.do(t, http.MethodPost, "/v1/chat/completions", `{"model":"gw-pinned-gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`, bearer(key)...)
		if resp.Status != http.StatusOK || resp.Header.Get("X-Gw-Cost-Usd") != "0.006538" {
			t.Fatalf("chat: %d %s %s", resp.Status, resp.Header.Get("X-Gw-Cost-Usd"), resp.Body)
		}
		ids = append(ids, resp.Header.Get("X-Gw-Request-Id"))
	}
	r := g.gw(t, "usage", "--account", "acme", "--by", "model").ok(t, "usage")
	want := "" +
		"MODEL         REQUESTS  INPUT TOKENS  OUTPUT TOKENS  COST\n" +
		"gpt-4.1-mini  2         24,690        2,000          $0.013076\n" +
		"Total         2                                      $0.013076\n"
	if r.stdout != want {
		t.Errorf("usage:\n%s\nwant\n%s", r.stdout, want)
	}
	sameAsAdmin(t, g, g.gw(t, "usage", "--json").ok(t, "usage --json"), "/gw/usage?group_by=day")
	sameAsAdmin(t, g, g.gw(t, "usage", "--by", "key,account", "--from", "2026-01-01", "--json").ok(t, "usage --by --json"),
		"/gw/usage?group_by=key,account&from=2026-01-01")
	r = g.gw(t, "usage", "--to", "2000-01-01").ok(t, "usage of days without charges")
	if r.stdout != "No charges in these days.\n" {
		t.Errorf("usage of days without charges: %q", r.stdout)
	}
	g.gw(t, "usage", "--by", "week").fails(t, "usage --by week", `usage: --by: "week" is not a grouping (known: day, model, account, key, org, comma-separated)`)
	g.gw(t, "usage", "--from", "2026-13-01").fails(t, "usage --from", `usage: --from: "2026-13-01" is not a date of the form YYYY-MM-DD`)
	g.gw(t, "usage", "--account", "nobody").fails(t, "usage of nobody", "usage: not found")

	r = g.gw(t, "ledger", "acme").ok(t, "ledger")
	lines(t, "ledger", r.stdout,
		`WHEN +REQUEST +ENDPOINT +MODEL +UNITS +COST`,
		justNow+` +`+ids[1]+` +chat +gpt-4\.1-mini +13,345 token +\$0\.006538`,
		justNow+` +`+ids[0]+` +chat +gpt-4\.1-mini +13,345 token +\$0\.006538`)
	sameAsAdmin(t, g, g.gw(t, "ledger", "acme", "--limit", "1", "--json").ok(t, "ledger --json"), "/gw/accounts/acme/ledger?limit=1")
	g.gw(t, "ledger", "nobody").fails(t, "ledger of nobody", "ledger of account nobody: not found")
}

// TestCLIAdminAddress: without --address the command line finds the admin
// endpoint as `caddy reload` does: the Caddyfile in the current folder, or
// --config, else localhost:2019; an endpoint that does not answer is an
// error naming it.
func TestCLIAdminAddress(t *testing.T) {
	t.Parallel()
	g := startGateway(t, gwOptions{BootstrapKey: "sk-cli-bootstrap-0123456789abcdefghijklmn"})
	// The gateway's own folder holds its Caddyfile, which reads GW_ADMIN.
	env := map[string]string{"GW_ADMIN": g.AdminAddr}
	r := cli(t, g.dir, env, "gw", "accounts", "list", "--json").ok(t, "the Caddyfile in the folder")
	sameAsAdmin(t, g, r, "/gw/accounts")
	r = cli(t, "", env, "gw", "accounts", "show", "default", "--json", "--config", g.ConfigPath).ok(t, "--config")
	sameAsAdmin(t, g, r, "/gw/accounts/default")

	port := freePorts(t, 1)[0]
	cli(t, "", nil, "gw", "accounts", "list", "--address", "127.0.0.1:"+port).fails(t, "an endpoint that does not answer",
		"the admin endpoint 127.0.0.1:"+port+" did not answer (is the gateway running? --address names another): dial tcp 127.0.0.1:"+port+": connect: connection refused")

	// No config: Caddy's default address, with the Origin Caddy's own
	// commands send.
	ln, err := net.Listen("tcp", "127.0.0.1:2019")
	if err != nil {
		t.Skipf("localhost:2019 is taken here (%v): the default address cannot be tried", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/gw/accounts" || r.Header.Get("Origin") != "http://localhost:2019" {
			http.Error(w, `{"error":"unexpected request"}`, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": []any{map[string]any{"id": "at-2019"}}, "has_more": false})
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	r = cli(t, "", nil, "gw", "accounts", "list", "--json").ok(t, "the default address")
	if !sameJSON(r.stdout, `{"object":"list","data":[{"id":"at-2019"}],"has_more":false}`) {
		t.Errorf("the default address: %s", r.stdout)
	}
}

// TestCLIHelp: `caddy help gw` documents the subcommands; a misused one
// fails with exit status 1.
func TestCLIHelp(t *testing.T) {
	t.Parallel()
	r := cli(t, "", nil, "help", "gw").ok(t, "caddy help gw")
	for _, want := range []string{"caddy gw [command]", "accounts ", "keys ", "journal ", "ledger ", "usage ", "move-store ", "--address", "--json",
		"caddy gw usage --account acme --from 2026-03-01 --by day,model"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("caddy help gw lacks %q:\n%s", want, r.stdout)
		}
	}
	r = cli(t, "", nil, "help", "gw", "accounts", "top-up").ok(t, "caddy help gw accounts top-up")
	if !strings.Contains(r.stdout, "caddy gw accounts top-up ID USD [--reason TEXT]") || !strings.Contains(r.stdout, "--reason string") {
		t.Errorf("caddy help gw accounts top-up:\n%s", r.stdout)
	}
	r = cli(t, "", nil, "gw", "accounts", "top-up", "--help").ok(t, "top-up --help")
	if !strings.Contains(r.stdout, "takes it back") {
		t.Errorf("top-up --help:\n%s", r.stdout)
	}
	cli(t, "", nil, "gw", "nope").fails(t, "an unknown subcommand", `unknown command "nope" for "caddy gw"`)
	cli(t, "", nil, "gw", "keys", "list").fails(t, "keys list without an id", "accepts 1 arg(s), received 0")
	// move-store is gw-move-store under gw (Caddy logs its error).
	if r := cli(t, "", nil, "gw", "move-store"); r.code != 1 || !strings.Contains(r.stderr, "--from and --to (or GW_DATABASE_URL) are required") {
		t.Errorf("move-store without folders: exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestNodesCLI: the command line on two nodes of one PostgreSQL: what it
// makes through one node, the other lists and serves, and its usage
// figures and journal are the shared ledger's.
func TestNodesCLI(t *testing.T) {
	t.Parallel()
	e := newNodes(t, 2, "")
	a, b := e.nodes[0], e.nodes[1]
	a.gw(t, "accounts", "create", "shared", "--plan", "paid", "--cleared", "--balance", "3").ok(t, "create on node 0")
	r := b.gw(t, "keys", "create", "shared", "--json").ok(t, "keys create on node 1")
	secret := decodeJSON(t, r.stdout).(map[string]any)["key"].(string)
	b.gw(t, "accounts", "top-up", "shared", "-0.5", "--reason", "a correction").ok(t, "adjustment on node 1")
	for i := range 2 {
		if resp := e.chat(t, i, secret); resp.Status != http.StatusOK {
			t.Fatalf("chat on node %d: %d %s", i, resp.Status, resp.Body)
		}
	}
	for _, g := range e.nodes {
		sameAsAdmin(t, a, g.gw(t, "accounts", "list", "--json").ok(t, "accounts list"), "/gw/accounts")
		sameAsAdmin(t, a, g.gw(t, "usage", "--by", "account,key,model", "--json").ok(t, "usage"), "/gw/usage?group_by=account,key,model")
		sameAsAdmin(t, a, g.gw(t, "journal", "shared", "--json").ok(t, "journal"), "/gw/accounts/shared/journal")
		sameAsAdmin(t, a, g.gw(t, "ledger", "shared", "--json").ok(t, "ledger"), "/gw/accounts/shared/ledger")
	}
	r = b.gw(t, "usage", "--account", "shared", "--json").ok(t, "usage of the account")
	if rep := decodeJSON(t, r.stdout).(map[string]any); rep["total"].(map[string]any)["requests"] != float64(2) {
		t.Errorf("usage on node 1: %s", r.stdout)
	}
	if r := a.gw(t, "journal", "--check").ok(t, "journal --check"); !strings.HasPrefix(r.stdout, "Every account's journal adds up") {
		t.Errorf("journal --check: %s", r.stdout)
	}
}

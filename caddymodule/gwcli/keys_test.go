package gwcli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/caddy-gw/caddy-gw/internal/admin"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// A key's card shows its caps ("none" where it has none), its MCP tools
// and what was spent with it, exact to the nano-dollar.
func TestKeyCard(t *testing.T) {
	daily, total := pricing.Micro(5_500_000), pricing.USD(1234)
	k := admin.Key{ID: "key_1", Name: "laptop", Models: []string{"gpt-4.1-mini", "o4-mini"}, MCPTools: []string{"github__*", "*__read_*"}, CreatedAt: time.Now().Add(-time.Hour),
		DailyCap: &daily, TotalCap: &total, Spend: &admin.Spend{Today: 1, Month: pricing.Micro(6538), Total: pricing.USD(2)}}
	var b bytes.Buffer
	if err := keyCard(&b, k); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"Key          key_1\n" +
		"Name         laptop\n" +
		"Models       gpt-4.1-mini, o4-mini\n" +
		"MCP tools    github__*, *__read_*\n" +
		"Expires      never\n" +
		"Daily cap    $5.50\n" +
		"Monthly cap  none\n" +
		"Total cap    $1,234.00\n" +
		"Spent        $0.000000001 today, $0.006538 this month, $2.00 in all\n" +
		"Created      1 hour ago\n"
	if b.String() != want {
		t.Errorf("key card:\n%s\nwant\n%s", b.String(), want)
	}
}

// The key list has a column per cap, and one of the MCP tools: all, none
// or the globs.
func TestKeyTableCaps(t *testing.T) {
	monthly := pricing.USD(50)
	at := time.Now().Add(-2 * time.Hour)
	var b bytes.Buffer
	if err := keyTable(&b, []admin.Key{{ID: "key_1", Name: "a", CreatedAt: at, MonthlyCap: &monthly},
		{ID: "key_2", Name: "b", Models: []string{}, MCPTools: []string{}, CreatedAt: at},
		{ID: "key_3", Name: "c", MCPTools: []string{"github__*", "docs__search"}, CreatedAt: at}}); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"KEY    NAME  MODELS  MCP TOOLS                EXPIRES  DAILY CAP  MONTHLY CAP  TOTAL CAP  CREATED\n" +
		"key_1  a     all     all                      never    none       $50.00       none       2 hours ago\n" +
		"key_2  b     none    none                     never    none       none         none       2 hours ago\n" +
		"key_3  c     all     github__*, docs__search  never    none       none         none       2 hours ago\n"
	if b.String() != want {
		t.Errorf("key table:\n%s\nwant\n%s", b.String(), want)
	}
}

// A new key's first line names the caps it has, and only those.
func TestKeyCreatedCaps(t *testing.T) {
	one, two, three := pricing.USD(1), pricing.USD(2), pricing.Micro(3_000_001)
	for _, c := range []struct {
		k    admin.Key
		want string
	}{
		{admin.Key{}, "Key key_1 (n) of account acme:"},
		{admin.Key{TotalCap: &three}, "Key key_1 (n) of account acme, capped at $3.000001 in all:"},
		{admin.Key{DailyCap: &one, TotalCap: &three}, "Key key_1 (n) of account acme, capped at $1.00 a day and $3.000001 in all:"},
		{admin.Key{DailyCap: &one, MonthlyCap: &two, TotalCap: &three}, "Key key_1 (n) of account acme, capped at $1.00 a day, $2.00 a month and $3.000001 in all:"},
	} {
		c.k.ID, c.k.Name, c.k.Key = "key_1", "n", "sk-gw-x"
		var b bytes.Buffer
		if err := keyCreated(&b, "acme", c.k); err != nil {
			t.Fatal(err)
		}
		want := c.want + "\n\n  sk-gw-x\n\nThis is the only time the key is shown: store it now.\n"
		if b.String() != want {
			t.Errorf("new key:\n%q\nwant\n%q", b.String(), want)
		}
	}
}

// sent is one request the fake admin endpoint received.
type sent struct {
	Method, Path string
	Body         map[string]any
}

// fakeAdmin is an admin endpoint on loopback that answers every request
// with answer and records what it was sent.
func fakeAdmin(t *testing.T, status int, answer string) (string, *[]sent) {
	t.Helper()
	var got []sent
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := sent{Method: r.Method, Path: r.URL.EscapedPath()}
		if b, _ := io.ReadAll(r.Body); len(b) > 0 {
			if err := json.Unmarshal(b, &s.Body); err != nil {
				t.Errorf("%s %s: body %q is not a JSON object", r.Method, r.URL, b)
			}
		}
		got = append(got, s)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://"), &got
}

// runGW runs `caddy gw args...` against the admin endpoint at addr and
// returns what it printed and its error.
func runGW(addr string, args ...string) (string, error) {
	cmd := &cobra.Command{Use: "gw", SilenceErrors: true, SilenceUsage: true}
	Setup(cmd)
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs(append(args, "--address", addr))
	err := cmd.Execute()
	return out.String(), err
}

// keyAnswer is the admin API's answer for a key.
const keyAnswer = `{"id":"key_1","name":"laptop","models":null,"expires_at":null,"created_at":"2026-01-02T03:04:05Z",` +
	`"daily_cap_usd":"5.00","monthly_cap_usd":null,"total_cap_usd":"20.00","mcp_tools":["github__*","*__read_*"],` +
	`"spend":{"today_usd":"0.25","month_usd":"1.50","total_usd":"3.00"}}`

// The key commands send the caps given, "none" as null, and nothing for a
// cap not given; --mcp-tools sends its globs (a quoted one may hold a
// comma), "none" as an empty list and "all" as null; a key id is one path
// segment.
func TestKeyCommandsSend(t *testing.T) {
	for _, c := range []struct {
		args []string
		want sent
	}{
		{[]string{"keys", "create", "acme", "--name", "laptop", "--daily-cap", "5", "--total-cap", "20.000000001"},
			sent{"POST", "/gw/accounts/acme/keys", map[string]any{"name": "laptop", "daily_cap_usd": "5", "total_cap_usd": "20.000000001"}}},
		{[]string{"keys", "create", "acme"}, sent{"POST", "/gw/accounts/acme/keys", map[string]any{"name": "cli"}}},
		{[]string{"keys", "update", "key_1", "--daily-cap", "none", "--monthly-cap", "7.5"},
			sent{"PATCH", "/gw/keys/key_1", map[string]any{"daily_cap_usd": nil, "monthly_cap_usd": "7.5"}}},
		{[]string{"keys", "update", "key_1", "--name", "desk", "--total-cap", "none"},
			sent{"PATCH", "/gw/keys/key_1", map[string]any{"name": "desk", "total_cap_usd": nil}}},
		{[]string{"keys", "show", "key/../1"}, sent{"GET", "/gw/keys/key%2F..%2F1", nil}},
		{[]string{"keys", "create", "acme", "--mcp-tools", "github__*,docs__search"},
			sent{"POST", "/gw/accounts/acme/keys", map[string]any{"name": "cli", "mcp_tools": []any{"github__*", "docs__search"}}}},
		{[]string{"keys", "create", "acme", "--mcp-tools", "none"}, sent{"POST", "/gw/accounts/acme/keys", map[string]any{"name": "cli", "mcp_tools": []any{}}}},
		{[]string{"keys", "create", "acme", "--mcp-tools", ""}, sent{"POST", "/gw/accounts/acme/keys", map[string]any{"name": "cli", "mcp_tools": []any{}}}},
		{[]string{"keys", "create", "acme", "--mcp-tools", "all"}, sent{"POST", "/gw/accounts/acme/keys", map[string]any{"name": "cli", "mcp_tools": nil}}},
		{[]string{"keys", "update", "key_1", "--mcp-tools", "*__read_*", "--mcp-tools", `"db__[a,b]*"`},
			sent{"PATCH", "/gw/keys/key_1", map[string]any{"mcp_tools": []any{"*__read_*", "db__[a,b]*"}}}},
		{[]string{"keys", "update", "key_1", "--mcp-tools", "none"}, sent{"PATCH", "/gw/keys/key_1", map[string]any{"mcp_tools": []any{}}}},
		{[]string{"keys", "update", "key_1", "--mcp-tools", "all", "--name", "desk"},
			sent{"PATCH", "/gw/keys/key_1", map[string]any{"name": "desk", "mcp_tools": nil}}},
		{[]string{"keys", "update", "key_1", "--mcp-tools", "all,none"}, sent{"PATCH", "/gw/keys/key_1", map[string]any{"mcp_tools": []any{"all", "none"}}}},
	} {
		addr, got := fakeAdmin(t, http.StatusOK, keyAnswer)
		if _, err := runGW(addr, c.args...); err != nil {
			t.Errorf("%q: %v", c.args, err)
			continue
		}
		if len(*got) != 1 || !sameSent((*got)[0], c.want) {
			t.Errorf("%q sent %+v, want %+v", c.args, *got, c.want)
		}
	}
}

func sameSent(a, b sent) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// `keys show` and `keys update` print the key's card, or with --json the
// answer as it came; an update of nothing sends nothing; a refusal names
// the key.
func TestKeyCommandsPrint(t *testing.T) {
	addr, got := fakeAdmin(t, http.StatusOK, keyAnswer)
	out, err := runGW(addr, "keys", "show", "key_1")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Key          key_1\n", "MCP tools    github__*, *__read_*\n", "Daily cap    $5.00\n", "Monthly cap  none\n", "Total cap    $20.00\n",
		"Spent        $0.25 today, $1.50 this month, $3.00 in all\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("keys show:\n%s\nlacks %q", out, want)
		}
	}
	out, err = runGW(addr, "keys", "update", "key_1", "--daily-cap", "5", "--json")
	if err != nil || out != keyAnswer+"\n" {
		t.Errorf("keys update --json: %q, %v", out, err)
	}
	n := len(*got)
	if _, err := runGW(addr, "keys", "update", "key_1"); err == nil || err.Error() != "nothing to change: give a setting (see --help)" {
		t.Errorf("keys update of nothing: %v", err)
	}
	if len(*got) != n {
		t.Errorf("keys update of nothing sent %+v", (*got)[n:])
	}

	addr, _ = fakeAdmin(t, http.StatusBadRequest, `{"error":"daily_cap_usd: amount must be a decimal number of US dollars with at most 9 decimals"}`)
	if _, err := runGW(addr, "keys", "update", "key_1", "--daily-cap", "five"); err == nil ||
		err.Error() != "key key_1: daily_cap_usd: amount must be a decimal number of US dollars with at most 9 decimals" {
		t.Errorf("a refused cap: %v", err)
	}
}

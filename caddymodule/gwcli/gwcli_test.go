package gwcli

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile" // the Caddyfile adapter

	"github.com/caddy-gw/caddy-gw/internal/admin"
	"github.com/caddy-gw/caddy-gw/internal/usage"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// evil is a value that would clear the screen and forge a table line if
// printed raw.
const evil = "gpt\x1b[2J\x1b[H\nreq_forged  chat  gpt  1 token  $0.00\u202e\x7f"

// evilShown is how a table shows it.
const evilShown = `gpt\u001b[2J\u001b[H\nreq_forged  chat  gpt  1 token  $0.00\u202e\u007f`

// Every table prints its cells escaped: one line per row, nothing a
// terminal acts on.
func TestTablesEscape(t *testing.T) {
	at := time.Now().Add(-time.Hour)
	s := evil
	for _, c := range []struct {
		name  string
		print func(*bytes.Buffer) error
		lines int
	}{
		{"ledger", func(b *bytes.Buffer) error {
			return ledgerTable(b, []admin.Charge{{RequestID: evil, Endpoint: evil, Model: evil, Units: 1, Unit: evil, Time: at}})
		}, 2},
		{"usage", func(b *bytes.Buffer) error {
			return usageTable(b, usage.Report{Data: []usage.Row{{Day: &s, Model: &s, Account: &s, KeyID: &s}}})
		}, 3},
		{"keys", func(b *bytes.Buffer) error {
			return keyTable(b, []admin.Key{{ID: evil, Name: evil, Models: []string{evil}, MCPTools: []string{evil}, CreatedAt: at}})
		}, 2},
		{"journal", func(b *bytes.Buffer) error {
			return journalTable(b, []admin.Movement{{Time: at, Kind: evil, Reason: evil}})
		}, 2},
		{"accounts", func(b *bytes.Buffer) error {
			return accountTable(b, []admin.Account{{ID: evil, Org: &s, CreatedAt: at}})
		}, 2},
		{"account", func(b *bytes.Buffer) error {
			return accountCard(b, admin.Account{ID: evil, Abilities: []string{evil}, Org: &s, CreatedAt: at})
		}, 11},
		{"webhooks", func(b *bytes.Buffer) error {
			return webhookTable(b, []admin.Webhook{{ID: evil, URL: evil, Events: []string{evil}, CreatedAt: at}})
		}, 2},
		{"webhook", func(b *bytes.Buffer) error {
			return webhookCard(b, admin.Webhook{ID: evil, URL: evil, Events: []string{evil}, CreatedAt: at})
		}, 4},
		{"new webhook", func(b *bytes.Buffer) error {
			return webhookCreated(b, admin.Webhook{ID: evil, URL: evil, Events: []string{evil}, Secret: evil})
		}, 6},
		{"deliveries", func(b *bytes.Buffer) error {
			status := 500
			return deliveryTable(b, []admin.Delivery{{Type: evil, Account: evil, Status: evil, Attempts: 1, LastStatus: &status, LastError: &s, CreatedAt: at,
				Event: json.RawMessage(`{"key_id":` + strconv.Quote(evil) + `}`)}})
		}, 2},
		{"orgs", func(b *bytes.Buffer) error { return orgTable(b, []admin.Org{{ID: evil, Name: evil, CreatedAt: at}}) }, 2},
		{"org", func(b *bytes.Buffer) error { return orgCard(b, admin.Org{ID: evil, Name: evil, CreatedAt: at}) }, 6},
		{"check", func(b *bytes.Buffer) error {
			return checkReport(b, checkResult{Problems: []admin.Problem{{Account: evil, UnledgeredCharges: []string{evil}}}})
		}, 2},
		{"new key", func(b *bytes.Buffer) error { return keyCreated(b, evil, admin.Key{ID: evil, Name: evil, Key: evil}) }, 5},
		{"key", func(b *bytes.Buffer) error {
			return keyCard(b, admin.Key{ID: evil, Name: evil, Models: []string{evil}, MCPTools: []string{evil}, CreatedAt: at, Spend: &admin.Spend{}})
		}, 10},
	} {
		var b bytes.Buffer
		if err := c.print(&b); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if n := strings.Count(out, "\n"); n != c.lines || strings.ContainsAny(strings.ReplaceAll(out, "\n", ""), "\x1b\x7f\u202e\r\t") {
			t.Errorf("%s: %d lines, want %d, or a control character:\n%q", c.name, n, c.lines, out)
		}
		if !strings.Contains(out, evilShown) {
			t.Errorf("%s: %q does not show %q", c.name, out, evilShown)
		}
	}
}

// --json prints the same values with every character that is not
// printable escaped, and refuses what is not JSON.
func TestPrintJSON(t *testing.T) {
	var out bytes.Buffer
	e := &env{out: &out}
	raw, _ := json.Marshal(map[string]any{"data": []any{map[string]any{"model": evil}}})
	if err := e.printJSON(append(raw, '\n')); err != nil {
		t.Fatal(err)
	}
	want := `{"data":[{"model":"gpt\u001b[2J\u001b[H\nreq_forged  chat  gpt  1 token  $0.00\u202e\u007f"}]}` + "\n"
	if out.String() != want {
		t.Errorf("printed %q, want %q", out.String(), want)
	}
	var a, b any
	if json.Unmarshal(raw, &a) != nil || json.Unmarshal(out.Bytes(), &b) != nil || !reflect.DeepEqual(a, b) {
		t.Errorf("printed %v, answered %v", b, a)
	}
	if err := e.printJSON([]byte("not json\x1b[2J")); !errors.Is(err, errNotJSON) {
		t.Errorf("not JSON: %v", err)
	}
}

// Errors print escaped, and still unwrap.
func TestShownError(t *testing.T) {
	err := shown(errors.Join(errJournal, errors.New("account "+evil)))
	if strings.ContainsAny(err.Error(), "\x1b\x7f\u202e") || !strings.Contains(err.Error(), evilShown) || !errors.Is(err, errJournal) {
		t.Errorf("%q", err)
	}
	if shown(nil) != nil {
		t.Error("shown(nil) is not nil")
	}
}

func TestUSD(t *testing.T) {
	for _, c := range []struct {
		m    pricing.Money
		want string
	}{
		{0, "$0.00"},
		{1, "$0.000000001"},
		{pricing.USD(1234567) + pricing.NanoPerUSD/2, "$1,234,567.50"},
		{-pricing.USD(2) - pricing.NanoPerUSD/2, "-$2.50"},
		{pricing.USD(999), "$999.00"},
	} {
		if got := usd(c.m); got != c.want {
			t.Errorf("usd(%d) = %q, want %q", int64(c.m), got, c.want)
		}
	}
}

// The admin address is --address, else the config's (a named file, or the
// Caddyfile in the current folder, adapted), else Caddy's default.
func TestAdminAddress(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	t.Setenv("GW_TEST_ADMIN", "127.0.0.1:4242")
	caddyfile := write("Caddyfile", "{\n\tadmin {$GW_TEST_ADMIN}\n}\n")
	named := write("gw.caddyfile", "{\n\tadmin 127.0.0.1:5151\n}\n")
	jsonCfg := write("gw.json", `{"admin":{"listen":"unix//run/gw-admin.sock"}}`)
	noAdmin := write("plain.json", `{}`)
	bad := write("bad.caddyfile", "{\n\tadmin\n")

	t.Chdir(dir)
	for _, c := range []struct {
		address, config, adapter, want string
	}{
		{"10.0.0.1:2019", caddyfile, "", "10.0.0.1:2019"},
		{"", "", "", "127.0.0.1:4242"}, // the Caddyfile here, its placeholder filled
		{"", named, "", "127.0.0.1:5151"},
		{"", jsonCfg, "", "unix//run/gw-admin.sock"},
		{"", noAdmin, "", "localhost:2019"},
	} {
		got, err := AdminAddress(c.address, c.config, c.adapter)
		if err != nil || got != c.want {
			t.Errorf("AdminAddress(%q, %q, %q) = %q, %v; want %q", c.address, c.config, c.adapter, got, err, c.want)
		}
	}
	if _, err := AdminAddress("", bad, ""); err == nil {
		t.Error("a config that does not adapt gave an address")
	}
	if _, err := AdminAddress("", "", "caddyfile"); err == nil || err.Error() != "--adapter needs --config" {
		t.Errorf("--adapter alone: %v", err)
	}
	t.Chdir(t.TempDir())
	if got, err := AdminAddress("", "", ""); err != nil || got != "localhost:2019" {
		t.Errorf("no config: %q, %v", got, err)
	}
}

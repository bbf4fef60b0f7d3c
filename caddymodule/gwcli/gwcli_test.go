package gwcli

import (
	"os"
	"path/filepath"
	"testing"

	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile" // the Caddyfile adapter

	"github.com/caddy-gw/caddy-gw/pricing"
)

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

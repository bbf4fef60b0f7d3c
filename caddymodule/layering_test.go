package caddymodule

import (
	"os/exec"
	"strings"
	"testing"
)

// caddyFree are the package trees that must build without Caddy: only
// caddymodule (and the commands) adapt the gateway to Caddy.
var caddyFree = []string{"../internal/...", "../handlers/...", "../mcp/...", "../pricing/..."}

// TestOnlyCaddymoduleImportsCaddy keeps every package under internal/,
// handlers/, mcp/ and pricing/ free of Caddy, directly or through what it
// imports, so the gateway's logic is plain Go that Caddy only hosts.
func TestOnlyCaddymoduleImportsCaddy(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	args := append([]string{"list", "-deps", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`}, caddyFree...)
	out, err := exec.Command("go", args...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, " ")
		n++
		if strings.HasPrefix(pkg, "github.com/caddyserver/") {
			continue
		}
		for _, imp := range strings.Fields(imports) {
			if strings.HasPrefix(imp, "github.com/caddyserver/") {
				t.Errorf("%s imports %s", pkg, imp)
			}
		}
	}
	if n < len(caddyFree) {
		t.Fatalf("go list named %d packages, want at least %d", n, len(caddyFree))
	}
}

// module is the gateway's module path.
const module = "github.com/caddy-gw/caddy-gw/"

// above are the package trees that sit above internal/: the endpoint
// packages, the route table and the Caddy glue.
var above = []string{"handlers/", "mcp", "routes", "caddymodule"}

// TestInternalImportsNoEndpoint keeps every package under internal/ below
// the endpoints: none imports handlers/, mcp/, routes/ or caddymodule/,
// directly or through what it imports. And no endpoint package imports
// another: what two endpoints share lives under internal/.
func TestInternalImportsNoEndpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	deps := func(patterns ...string) map[string][]string {
		args := append([]string{"list", "-f", `{{.ImportPath}}{{range .Deps}} {{.}}{{end}}`}, patterns...)
		out, err := exec.Command("go", args...).Output()
		if err != nil {
			t.Fatalf("go list: %v", err)
		}
		m := map[string][]string{}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Fields(line)
			m[f[0]] = f[1:]
		}
		return m
	}
	internal := deps("../internal/...")
	if len(internal) < 10 {
		t.Fatalf("go list named %d packages under internal/", len(internal))
	}
	for pkg, ds := range internal {
		for _, d := range ds {
			for _, a := range above {
				if strings.HasPrefix(d, module+a) {
					t.Errorf("%s imports %s", pkg, d)
				}
			}
		}
	}
	handlers := deps("../handlers/...")
	for pkg, ds := range handlers {
		for _, d := range ds {
			if strings.HasPrefix(d, module+"handlers/") {
				t.Errorf("%s imports %s", pkg, d)
			}
		}
	}
}

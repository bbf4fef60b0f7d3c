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

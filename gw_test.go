package caddygw_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/caddyserver/caddy/v2"

	_ "github.com/caddy-gw/caddy-gw"
)

// Importing the module root, as xcaddy does, registers every module of
// the gateway.
func TestRootRegistersModules(t *testing.T) {
	for _, id := range []string{"gw", "http.handlers.gw", "admin.api.gw"} {
		if _, err := caddy.GetModule(id); err != nil {
			t.Errorf("module %s: %v", id, err)
		}
	}
}

// The build manifest imports the module root (its package defaults to the
// module path), so `go run ./cmd/gwbuild` builds what xcaddy builds and the
// integration tests run that binary.
func TestManifestImportsModuleRoot(t *testing.T) {
	b, err := os.ReadFile("xcaddy.json")
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Plugins []struct{ Module, Path, Package string }
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if len(m.Plugins) == 0 || m.Plugins[0].Module != "github.com/caddy-gw/caddy-gw" ||
		(m.Plugins[0].Package != "" && m.Plugins[0].Package != m.Plugins[0].Module) {
		t.Fatalf("xcaddy.json plugins %+v: want this module, imported by its root", m.Plugins)
	}
}

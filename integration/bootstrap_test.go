package integration

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The bootstrap key is created once: revoked through the admin API, it
// stays revoked across a restart and a reload.
func TestBootstrapKeyRevokedStaysRevoked(t *testing.T) {
	t.Parallel()
	const boot = "sk-bootstrap-revoked-test-0123456789abcdef"
	g := startGateway(t, gwOptions{BootstrapKey: boot})
	if r := g.do(t, http.MethodGet, "/v1/models", "", bearer(boot)...); r.Status != http.StatusOK {
		t.Fatalf("bootstrap key: %d %s", r.Status, r.Body)
	}
	keys := g.adminJSON(t, http.MethodGet, "/gw/accounts/"+"default"+"/keys", nil, http.StatusOK).JSON(t)
	var listed []map[string]any
	b, _ := json.Marshal(keys["data"])
	_ = json.Unmarshal(b, &listed)
	if len(listed) != 1 {
		t.Fatalf("default's keys: %v", keys)
	}
	g.deleteKey(t, listed[0]["id"].(string))
	refused := func(t *testing.T, when string) {
		t.Helper()
		if r := g.do(t, http.MethodGet, "/v1/models", "", bearer(boot)...); r.Status != http.StatusUnauthorized {
			t.Fatalf("revoked bootstrap key %s: %d %s", when, r.Status, r.Body)
		}
	}
	refused(t, "at once")
	g.reload(t)
	refused(t, "after a reload")
	g.restart(t)
	refused(t, "after a restart")
}

// A weak bootstrap key stops the gateway from starting (caddy validate
// provisions the config as a start does), without printing the key.
func TestBootstrapKeyWeakRefused(t *testing.T) {
	t.Parallel()
	for _, key := range []string{"sk-local-dev-key", "sk-" + strings.Repeat("ab", 20), "pk-" + strings.Repeat("0123456789", 4)} {
		cmd := exec.Command(caddyBin, "validate", "--config", filepath.Join("..", "Caddyfile.example"), "--adapter", "caddyfile")
		cmd.Env = processEnv(map[string]string{"GW_BOOTSTRAP_KEY": key, "GW_DATA_DIR": t.TempDir(), "XDG_DATA_HOME": t.TempDir(), "XDG_CONFIG_HOME": t.TempDir()})
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "bootstrap key must be") {
			t.Fatalf("validate with %q: %v\n%s", key, err, out)
		}
		if strings.Contains(string(out), key) {
			t.Fatalf("the output repeats the key:\n%s", out)
		}
	}
}

// Caddyfile.example's access log leaves out both headers that carry keys.
func TestAccessLogWithoutKeys(t *testing.T) {
	t.Parallel()
	const boot = "sk-bootstrap-accesslog-test-0123456789abcdef"
	g := startGateway(t, gwOptions{BootstrapKey: boot})
	g.do(t, http.MethodGet, "/v1/models", "", bearer(boot)...)
	g.do(t, http.MethodGet, "/v1/models", "", apiKey(boot)...)
	g.waitLog(t, func(log string) bool { return strings.Count(log, `"uri":"/v1/models"`) >= 2 }, "two access log lines")
	if log := g.log.String(); strings.Contains(log, boot) {
		t.Fatalf("the log holds the key:\n%s", log)
	}
}

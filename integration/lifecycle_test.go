package integration

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// validateRun is one `caddy validate` of the built binary.
type validateRun struct {
	ok  bool
	out string
}

// validate runs `bin/caddy validate` on config (a Caddyfile when adapter
// is "caddyfile", else JSON) with the environment env.
func validate(t *testing.T, env []string, config, adapter string) validateRun {
	t.Helper()
	config, err := filepath.Abs(config)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"validate", "--config", config}
	if adapter != "" {
		args = append(args, "--adapter", adapter)
	}
	cmd := exec.Command(caddyBin, args...)
	cmd.Env = env
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		if _, exited := err.(*exec.ExitError); !exited {
			t.Fatalf("running caddy validate: %v", err)
		}
	}
	return validateRun{ok: err == nil, out: string(out)}
}

// adaptJSON adapts the Caddyfile config with env and writes the JSON next
// to the test's files, returning its path.
func adaptJSON(t *testing.T, env []string, config string) string {
	t.Helper()
	cmd := exec.Command(caddyBin, "adapt", "--config", config, "--adapter", "caddyfile")
	cmd.Env = env
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("caddy adapt: %v\n%s", err, errOut.String())
	}
	path := filepath.Join(t.TempDir(), "caddy.json")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// treeHashes is every file under dir (relative path → SHA-256 of its
// bytes, folders as "dir").
func treeHashes(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		if d.IsDir() {
			out[rel] = "dir"
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		out[rel] = hex.EncodeToString(sum[:])
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameTree fails the test when two treeHashes differ, naming the files.
func sameTree(t *testing.T, before, after map[string]string) {
	t.Helper()
	var changed []string
	for p, h := range before {
		if after[p] != h {
			changed = append(changed, p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			changed = append(changed, p+" (new)")
		}
	}
	slices.Sort(changed)
	if len(changed) > 0 {
		t.Fatalf("files of the data folder changed: %v", changed)
	}
}

// freshEnv is a process environment whose data folder does not exist yet,
// with Caddy's own folders inside the test; vars add to it.
func freshEnv(t *testing.T, vars map[string]string) (env []string, dataDir string) {
	t.Helper()
	dataDir = filepath.Join(t.TempDir(), "data")
	all := map[string]string{
		"GW_DATA_DIR":      dataDir,
		"GW_BOOTSTRAP_KEY": "sk-validate-bootstrap-0123456789abcdefghij",
		"HOME":             t.TempDir(),
		"XDG_CONFIG_HOME":  t.TempDir(),
		"XDG_DATA_HOME":    t.TempDir(),
	}
	for k, v := range vars {
		all[k] = v
	}
	return processEnv(all), dataDir
}

// `caddy validate` checks a config and changes nothing: on a fresh data
// folder it creates none, Caddyfile or JSON.
func TestValidateCreatesNoDataFolder(t *testing.T) {
	t.Parallel()
	example := filepath.Join("..", "Caddyfile.example")
	env, dataDir := freshEnv(t, nil)
	for _, c := range []struct{ name, config, adapter string }{
		{"Caddyfile", example, "caddyfile"},
		{"JSON", adaptJSON(t, env, example), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := validate(t, env, c.config, c.adapter)
			if !r.ok || !strings.Contains(r.out, "Valid configuration") {
				t.Fatalf("validate: %s", r.out)
			}
			if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
				t.Fatalf("the data folder %s exists after validate (%v)", dataDir, err)
			}
		})
	}
}

// On the data folder of a running node that has served billed calls,
// `caddy validate` (Caddyfile or JSON, same environment as the node)
// leaves every file byte for byte as it was, and the node serves on.
func TestValidateLeavesLiveNodeUntouched(t *testing.T) {
	t.Parallel()
	g, oa, _, _ := chatGateway(t)
	oa.SetDefault(fake.Script{Text: "billed", Usage: fake.Usage{Input: 400, Output: 300}})
	key := g.newAccountKey(t, map[string]any{"id": "live", "plan": "paid", "cleared": true, "balance_usd": "3.00"})
	chat := func() {
		t.Helper()
		if r := g.do(t, http.MethodPost, "/v1/chat/completions", `{"model":"gw-pinned-gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`, bearer(key)...); r.Status != http.StatusOK {
			t.Fatalf("chat: %d %s", r.Status, r.Body)
		}
	}
	for range 3 {
		chat()
	}
	// Reading the ledger waits until the store holds every charge: the
	// node writes nothing more until the next call.
	if n := len(ledgerOf(t, g, "live")); n != 3 {
		t.Fatalf("ledger holds %d charges, want 3", n)
	}
	balance := balanceOf(t, g, "live")
	before := treeHashes(t, g.DataDir)
	if len(before) < 3 {
		t.Fatalf("the node's data folder holds %v", before)
	}
	for _, c := range []struct{ name, config, adapter string }{
		{"Caddyfile", g.ConfigPath, "caddyfile"},
		{"JSON", adaptJSON(t, g.env, g.ConfigPath), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			if r := validate(t, g.env, c.config, c.adapter); !r.ok {
				t.Fatalf("validate: %s", r.out)
			}
			sameTree(t, before, treeHashes(t, g.DataDir))
		})
	}
	if got := balanceOf(t, g, "live"); got != balance {
		t.Fatalf("balance %s after validate, %s before", got, balance)
	}
	chat()
	if n := len(ledgerOf(t, g, "live")); n != 4 {
		t.Fatalf("ledger holds %d charges after one more call, want 4", n)
	}
}

// connCounter is a listener the test owns: it counts the connections that
// reach it and closes each at once.
type connCounter struct {
	ln   net.Listener
	mu   sync.Mutex
	n    int
	wait sync.WaitGroup
}

func newConnCounter(t *testing.T) *connCounter {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &connCounter{ln: ln}
	c.wait.Add(1)
	go func() {
		defer c.wait.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.mu.Lock()
			c.n++
			c.mu.Unlock()
			conn.Close()
		}
	}()
	t.Cleanup(func() { ln.Close(); c.wait.Wait() })
	return c
}

// others returns how many connections arrived besides one the test makes
// now: the listener accepts in order, so once the test's own connection
// is counted every earlier one is too.
func (c *connCounter) others(t *testing.T) int {
	t.Helper()
	conn, err := net.Dial("tcp", c.ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	// The listener counts it, then closes it: the read ends then.
	_, _ = conn.Read(make([]byte, 1))
	conn.Close()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n - 1
}

// With several-node settings, `caddy validate` connects to neither
// PostgreSQL nor Redis.
func TestValidateConnectsNowhere(t *testing.T) {
	t.Parallel()
	example := filepath.Join("..", "Caddyfile.example")
	for _, c := range []struct{ name, variable, url string }{
		{"PostgreSQL", "GW_DATABASE_URL", "postgres://gw:secret@%s/gw"},
		{"Redis", "GW_REDIS_URL", "redis://%s/0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			lc := newConnCounter(t)
			env, dataDir := freshEnv(t, map[string]string{c.variable: fmt.Sprintf(c.url, lc.ln.Addr())})
			r := validate(t, env, example, "caddyfile")
			if n := lc.others(t); n != 0 {
				t.Fatalf("validate connected %d times to %s", n, c.name)
			}
			if !r.ok {
				t.Fatalf("validate: %s", r.out)
			}
			if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
				t.Fatalf("the data folder %s exists after validate (%v)", dataDir, err)
			}
		})
	}
}

// A decide_model that is not a model of a chat-completions-style provider
// is refused by validate (and so at start), not by every decision call.
func TestValidateRefusesDecideModel(t *testing.T) {
	t.Parallel()
	example := filepath.Join("..", "Caddyfile.example")
	for _, c := range []struct{ model, says string }{
		{"claude-haiku-4-5", `decide_model "claude-haiku-4-5": its provider "anthropic" is not chat-completions-style`},
		{"gpt-5-nowhere", `decide_model "gpt-5-nowhere": no such model in the catalogue`},
	} {
		t.Run(c.model, func(t *testing.T) {
			t.Parallel()
			env, dataDir := freshEnv(t, map[string]string{"GW_DECIDE_MODEL": c.model})
			r := validate(t, env, example, "caddyfile")
			// Caddy logs the error as JSON: its quotes are escaped.
			if r.ok || !strings.Contains(strings.ReplaceAll(r.out, `\"`, `"`), c.says) {
				t.Fatalf("validate with decide_model %s: ok=%v\n%s", c.model, r.ok, r.out)
			}
			if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
				t.Fatalf("the data folder %s exists after validate (%v)", dataDir, err)
			}
		})
	}
}

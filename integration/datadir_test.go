package integration

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// lockFileName is the lock file a gateway keeps in its data folder.
const lockFileName = "gw.lock"

// runSecond runs `bin/caddy run` on g's config and data folder, on ports
// of its own, and returns its stderr and exit error once it has exited. A
// second process that serves instead fails the test.
func runSecond(t *testing.T, g *gateway) (string, error) {
	t.Helper()
	ports := freePorts(t, 2)
	env := append(slices.Clone(g.env), "GW_ADDRESS=127.0.0.1:"+ports[0], "GW_ADMIN=127.0.0.1:"+ports[1])
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, caddyBin, "run", "--config", g.ConfigPath, "--adapter", "caddyfile")
	cmd.Env = env
	cmd.Dir = t.TempDir()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var log strings.Builder
	sc := bufio.NewScanner(stderr)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		log.WriteString(sc.Text() + "\n")
		if logMsg(sc.Bytes()) == readyMsg {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("a second process serves on the data folder %s:\n%s", g.DataDir, log.String())
		}
	}
	err = cmd.Wait()
	return log.String(), err
}

// lockHolders returns the ids of the processes holding a lock on the data
// folder's lock file, as the kernel lists them (/proc/locks).
func lockHolders(t *testing.T, dataDir string) []int {
	t.Helper()
	fi, err := os.Stat(filepath.Join(dataDir, lockFileName))
	if err != nil {
		t.Fatalf("the data folder's lock file: %v", err)
	}
	ino := fi.Sys().(*syscall.Stat_t).Ino
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		t.Skipf("no /proc/locks here: %v", err)
	}
	var pids []int
	for _, line := range strings.Split(string(b), "\n") {
		// 1: FLOCK  ADVISORY  WRITE 4242 fd:01:1234567 0 EOF
		f := strings.Fields(line)
		if len(f) < 6 || f[1] == "->" || f[1] != "FLOCK" {
			continue
		}
		dev := strings.Split(f[5], ":")
		if dev[len(dev)-1] != strconv.FormatUint(ino, 10) {
			continue
		}
		pid, _ := strconv.Atoi(f[4])
		pids = append(pids, pid)
	}
	return pids
}

// One process per data folder: a second `caddy run` on a live node's
// folder exits non-zero naming the folder, before or after the first
// reloads; the first serves on and holds the folder's lock once, a reload
// included; gw-move-store refuses the folder and changes nothing in it.
func TestOneProcessPerDataFolder(t *testing.T) {
	t.Parallel()
	g, oa, _, _ := chatGateway(t)
	oa.SetDefault(fake.Script{Text: "mine", Usage: fake.Usage{Input: 100, Output: 100}})
	key := g.newAccountKey(t, map[string]any{"id": "owner", "plan": "paid", "cleared": true, "balance_usd": "1.00"})
	calls := 0
	serves := func(t *testing.T) {
		t.Helper()
		if r := g.do(t, http.MethodPost, "/v1/chat/completions", `{"model":"gw-pinned-gpt-4.1-mini","messages":[{"role":"user","content":"hi"}]}`, bearer(key)...); r.Status != http.StatusOK {
			t.Fatalf("the first process: %d %s", r.Status, r.Body)
		}
		calls++
		if n := len(ledgerOf(t, g, "owner")); n != calls {
			t.Fatalf("ledger holds %d charges, want %d", n, calls)
		}
	}
	refused := func(t *testing.T) {
		t.Helper()
		log, err := runSecond(t, g)
		if err == nil || !strings.Contains(log, "the data folder "+g.DataDir+" is in use by process "+strconv.Itoa(g.pid(t))) {
			t.Fatalf("second process on %s: %v\n%s", g.DataDir, err, log)
		}
		if pids := lockHolders(t, g.DataDir); !slices.Equal(pids, []int{g.pid(t)}) {
			t.Fatalf("lock holders %v, want only the first process %d", pids, g.pid(t))
		}
	}
	serves(t)
	refused(t)
	serves(t)
	g.reload(t)
	serves(t)
	refused(t)
	serves(t)

	t.Run("gw-move-store", func(t *testing.T) {
		before := treeHashes(t, g.DataDir)
		db := newConnCounter(t)
		out, err := exec.Command(caddyBin, "gw-move-store", "--from", g.DataDir, "--to", fmt.Sprintf("postgres://gw:secret@%s/gw", db.ln.Addr())).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "the data folder "+g.DataDir+" is in use by process "+strconv.Itoa(g.pid(t))) {
			t.Fatalf("gw-move-store on a live node's folder: %v\n%s", err, out)
		}
		if n := db.others(t); n != 0 {
			t.Fatalf("gw-move-store connected %d times to PostgreSQL", n)
		}
		sameTree(t, before, treeHashes(t, g.DataDir))
		serves(t)
	})
}

// Package testsvc starts the real servers that tests of the several-nodes
// backends run against (Debian's redis-server; PostgreSQL later), each in
// its own temporary folder, listening on a Unix socket only, stopped when
// the test ends. Tests are never pointed at a mock: when the server is not
// installed they are skipped on a developer's machine and fail under CI
// (CI=true), where .ci/run installs it.
package testsvc

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// startWait bounds how long a server may take to accept connections.
const startWait = 20 * time.Second

// need returns the path of a server binary, or skips (fails under CI).
func need(t testing.TB, bin string) string {
	t.Helper()
	path, err := exec.LookPath(bin)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not installed; .ci/run must install it", bin)
		}
		t.Skipf("%s is not installed", bin)
	}
	return path
}

// Redis starts a redis-server for the test and returns its URL
// (unix://<socket>). Nothing is persisted.
func Redis(t testing.TB) string {
	t.Helper()
	bin := need(t, "redis-server")
	dir := t.TempDir()
	sock := filepath.Join(dir, "redis.sock")
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "--port", "0", "--unixsocket", sock, "--unixsocketperm", "700",
		"--save", "", "--appendonly", "no", "--dir", dir)
	start(t, cmd, cancel, "ready to accept connections")
	return "unix://" + sock
}

// start runs cmd and waits until its output shows the line saying it is
// ready (or it exits, or startWait passes). cancel stops it when the test
// ends.
func start(t testing.TB, cmd *exec.Cmd, cancel context.CancelFunc, ready string) {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("starting %s: %v", cmd.Path, err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	up := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		said := false
		for sc.Scan() {
			if !said && strings.Contains(strings.ToLower(sc.Text()), strings.ToLower(ready)) {
				said = true
				up <- true
			}
		}
		if !said {
			up <- false
		}
	}()
	select {
	case ok := <-up:
		if !ok {
			t.Fatalf("%s exited before it was ready", cmd.Path)
		}
	case <-time.After(startWait):
		t.Fatalf("%s was not ready within %v", cmd.Path, startWait)
	}
}

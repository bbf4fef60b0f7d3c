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
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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
	return RedisServer(t).URL()
}

// RedisSrv is a redis-server a test may stop and start again on the same
// socket (a fault and its end). Nothing is saved unless the test asks
// (SAVE): a start loads what the last SAVE wrote, as a restart from a
// snapshot does.
type RedisSrv struct {
	t        testing.TB
	bin, dir string
	cancel   func()
	// port is the loopback TCP port a primary also listens on (0: none),
	// and primary the port a replica follows (0: it is no replica).
	port, primary int
}

// RedisServer starts a redis-server for the test.
func RedisServer(t testing.TB) *RedisSrv {
	t.Helper()
	r := &RedisSrv{t: t, bin: need(t, "redis-server"), dir: t.TempDir()}
	r.Start()
	return r
}

// RedisPrimary starts a redis-server for the test that also listens on a
// loopback TCP port, so that a replica (Replica) can follow it.
func RedisPrimary(t testing.TB) *RedisSrv {
	t.Helper()
	r := &RedisSrv{t: t, bin: need(t, "redis-server"), dir: t.TempDir(), port: freePort(t)}
	r.Start()
	return r
}

// Replica starts a redis-server on a socket of its own that replicates r
// (a RedisPrimary) and returns once it holds r's data. A test promotes it
// with REPLICAOF NO ONE, as a failover does.
func (r *RedisSrv) Replica() *RedisSrv {
	r.t.Helper()
	if r.port == 0 {
		r.t.Fatal("testsvc: a replica needs a RedisPrimary")
	}
	rep := &RedisSrv{t: r.t, bin: r.bin, dir: r.t.TempDir(), primary: r.port}
	rep.Start()
	return rep
}

// freePort is a loopback TCP port free when asked.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// URL is the server's address.
func (r *RedisSrv) URL() string { return "unix://" + filepath.Join(r.dir, "redis.sock") }

// Start starts the server (again).
func (r *RedisSrv) Start() {
	r.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	args := []string{"--port", strconv.Itoa(r.port), "--unixsocket", filepath.Join(r.dir, "redis.sock"), "--unixsocketperm", "700",
		"--save", "", "--appendonly", "no", "--dir", r.dir}
	ready := "ready to accept connections"
	if r.port != 0 {
		args = append(args, "--bind", "127.0.0.1", "--repl-diskless-sync-delay", "0")
	}
	if r.primary != 0 {
		args = append(args, "--replicaof", "127.0.0.1", strconv.Itoa(r.primary))
		ready = "MASTER <-> REPLICA sync: Finished with success"
	}
	cmd := exec.CommandContext(ctx, r.bin, args...)
	exited := start(r.t, cmd, cancel, ready)
	r.cancel = func() {
		cancel()
		<-exited
	}
}

// Stop kills the server (what it held is lost) and waits for it to exit.
func (r *RedisSrv) Stop() { r.cancel() }

// start runs cmd and waits until its output shows the line saying it is
// ready (or it exits, or startWait passes). cancel stops it when the test
// ends.
func start(t testing.TB, cmd *exec.Cmd, cancel context.CancelFunc, ready string) (exited <-chan struct{}) {
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
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
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
		_ = cmd.Wait() // after the last read of its output
		close(done)
	}()
	select {
	case ok := <-up:
		if !ok {
			t.Fatalf("%s exited before it was ready", cmd.Path)
		}
	case <-time.After(startWait):
		t.Fatalf("%s was not ready within %v", cmd.Path, startWait)
	}
	return done
}

// postgresBinDirs are where Debian installs the server's programs.
var postgresBinDirs = []string{"/usr/lib/postgresql/17/bin", "/usr/lib/postgresql/16/bin", "/usr/lib/postgresql/15/bin"}

// PG is a PostgreSQL server started for a test.
type PG struct {
	dir string
	n   atomic.Int64
	// start and stop run the server and stop it (a fault and its end).
	start, stop func()
}

// Stop stops the server at once (pg_ctl -m immediate) and waits for it.
func (pg *PG) Stop() { pg.stop() }

// Start starts the stopped server again on the same data and socket.
func (pg *PG) Start() { pg.start() }

// URL is the address of database db on the server.
func (pg *PG) URL(db string) string {
	return "postgres:///" + db + "?host=" + pg.dir + "&user=postgres&sslmode=disable"
}

// NewDatabase creates an empty database on the server and returns its URL.
func (pg *PG) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("gw_%d", pg.n.Add(1))
	conn, err := pgx.Connect(context.Background(), pg.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	return pg.URL(name)
}

// Postgres starts a PostgreSQL server for the test (its own initdb in a
// temporary folder, a Unix socket only, fsync off: the tests prove
// behaviour, not durability) and returns a URL to a fresh database on it.
func Postgres(t testing.TB) string {
	t.Helper()
	pg := PostgresServer(t)
	return pg.NewDatabase(t)
}

// PostgresServer starts a PostgreSQL server for the test. As root the
// server runs as the postgres user, as PostgreSQL requires.
func PostgresServer(t testing.TB) *PG {
	t.Helper()
	bin := ""
	for _, d := range postgresBinDirs {
		if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
			bin = d
			break
		}
	}
	if bin == "" {
		need(t, "postgres") // skips, or fails under CI
		bin = filepath.Dir(need(t, "postgres"))
	}
	dir, err := os.MkdirTemp("", "gw-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	run := func(name string, args ...string) *exec.Cmd {
		if os.Geteuid() == 0 {
			return exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(bin, name)}, args...)...)
		}
		return exec.Command(filepath.Join(bin, name), args...)
	}
	if os.Geteuid() == 0 {
		if out, err := exec.Command("chown", "postgres:postgres", dir).CombinedOutput(); err != nil {
			t.Fatalf("chown: %v: %s", err, out)
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := run("initdb", "-D", data, "--auth=trust", "-U", "postgres", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v: %s", err, out)
	}
	pg := &PG{dir: dir}
	pg.start = func() {
		cmd := run("postgres", "-D", data, "-c", "listen_addresses=", "-c", "unix_socket_directories="+dir,
			"-c", "fsync=off", "-c", "max_connections=200")
		// runuser does not pass signals on: pg_ctl stops the server.
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan struct{})
		go func() {
			<-ctx.Done()
			_ = run("pg_ctl", "stop", "-D", data, "-m", "immediate", "-w").Run()
			close(stopped)
		}()
		exited := start(t, cmd, cancel, "database system is ready to accept connections")
		pg.stop = func() { cancel(); <-stopped; <-exited }
	}
	pg.start()
	return pg
}

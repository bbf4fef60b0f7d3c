package integration

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/integration/fake"
)

// Time limits of the harness. They bound waits; nothing sleeps.
const (
	// startTimeout bounds the wait for "serving initial configuration".
	startTimeout = 30 * time.Second
	// stopTimeout bounds the wait for the process to exit after SIGINT
	// before it is killed.
	stopTimeout = 15 * time.Second
	// logTimeout bounds the wait for an expected log line.
	logTimeout = 10 * time.Second
	// requestTimeout bounds one HTTP request of a test.
	requestTimeout = 15 * time.Second
)

// readyMsg is the "msg" of Caddy's log line once `caddy run` serves its
// config: listeners and the admin endpoint are up by then.
const readyMsg = "serving initial configuration"

// caddyBin is the absolute path of the gateway binary under test.
var caddyBin string

// TestMain finds the gateway binary under test: GW_CADDY_BIN when set,
// otherwise bin/caddy, built from the working tree first (see
// buildGateway), so `go test ./...` in a fresh clone needs nothing else.
func TestMain(m *testing.M) {
	bin := os.Getenv("GW_CADDY_BIN")
	if bin == "" {
		built, err := buildGateway()
		if err != nil {
			fmt.Fprintf(os.Stderr, "integration: building the gateway binary: %v\n"+
				"integration: scripts/test.sh builds it and runs every test; or set GW_CADDY_BIN to a built binary\n", err)
			os.Exit(1)
		}
		bin = built
	}
	abs, err := checkExecutable(bin)
	if err != nil {
		fmt.Fprintf(os.Stderr, "integration: gateway binary %s: %v\n"+
			"integration: run `go run ./cmd/gwbuild` (in the repository root) or scripts/test.sh, or set GW_CADDY_BIN\n", bin, err)
		os.Exit(1)
	}
	caddyBin = abs
	os.Exit(m.Run())
}

// checkExecutable returns bin's absolute path when it is an executable file.
func checkExecutable(bin string) (string, error) {
	abs, err := filepath.Abs(bin)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(abs)
	if err != nil {
		return "", err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return "", fmt.Errorf("not an executable file")
	}
	return abs, nil
}

// buildGateway builds bin/caddy from the repository root with
// `go run ./cmd/gwbuild` (the environment, GOFLAGS included, applies) and
// returns its path. It always builds: a binary left from older sources
// would be tested silently, and the Go build cache makes a build of
// unchanged sources quick. It also lists every source folder, so a cached
// result of this package is reused only for the sources it was tested on.
func buildGateway() (string, error) {
	root, err := filepath.Abs("..")
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(root, "xcaddy.json")); err != nil {
		return "", fmt.Errorf("no repository root at %s: %w", root, err)
	}
	if err := recordSources(root); err != nil {
		return "", err
	}
	fmt.Fprintln(os.Stderr, "integration: building bin/caddy with `go run ./cmd/gwbuild` (GW_CADDY_BIN unset)")
	cmd := exec.Command("go", "run", "./cmd/gwbuild")
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go run ./cmd/gwbuild: %w", err)
	}
	return strings.TrimSpace(out.String()), nil
}

// sourceSkips are the folders of the repository root that hold no sources
// of the binary: version control, build output, data and caches.
var sourceSkips = []string{".git", "bin", "data", ".cache"}

// recordSources lists every folder under root but sourceSkips. go test
// records each listing (names, sizes and modification times of the
// entries) among the test's inputs, so an edit anywhere invalidates a
// cached result of this package.
func recordSources(root string) error {
	return filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && filepath.Dir(path) == root && slices.Contains(sourceSkips, d.Name()) {
			return filepath.SkipDir
		}
		return nil
	})
}

// gwOptions configures startGateway.
type gwOptions struct {
	// BootstrapKey, when set, is passed as GW_BOOTSTRAP_KEY: the gateway
	// makes sure account "default" (paid, cleared) holds this key.
	BootstrapKey string
	// Caddyfile is the config's text; empty means ../Caddyfile.example.
	Caddyfile string
	// Env adds or overrides environment variables of the process.
	Env map[string]string
	// Bin is the binary to run; empty means the gateway binary under test.
	Bin string
}

// gateway is one running bin/caddy process with its ports, data folder and
// log. Its methods take the calling test's t, so a failure is reported on
// the subtest that made the call.
type gateway struct {
	// BaseURL is the site, http://127.0.0.1:<port>; requests must use this
	// host (the site matches it).
	BaseURL string
	// AdminURL is Caddy's admin endpoint, http://127.0.0.1:<port>; its Host
	// header must be exactly this address.
	AdminURL string
	// Addr and AdminAddr are the host:port of the two.
	Addr, AdminAddr string
	// DataDir is the folder of the embedded store (GW_DATA_DIR).
	DataDir string
	// ConfigPath is the Caddyfile the process runs.
	ConfigPath string
	// UpstreamURL is the unused loopback address the providers point at.
	UpstreamURL string
	// ConsoleURL is the operator console's site (GW_CONSOLE).
	ConsoleURL string

	dir    string
	bin    string
	env    []string
	client *http.Client
	log    *logBuffer

	mu   sync.Mutex
	proc *process
}

// process is one run of the binary.
type process struct {
	cmd     *exec.Cmd
	ready   chan struct{} // closed when readyMsg was logged
	exited  chan struct{} // closed when the process has exited
	waitErr error         // set before exited is closed
}

// startGateway starts bin/caddy on fresh loopback ports with an empty data
// folder and waits until it serves. The process is stopped (and its log
// printed, if the test failed) when t ends. Benchmarks use it too.
func startGateway(t testing.TB, opts gwOptions) *gateway {
	t.Helper()
	dir := t.TempDir()
	g := &gateway{
		DataDir:    filepath.Join(dir, "data"),
		ConfigPath: filepath.Join(dir, "Caddyfile"),
		dir:        dir,
		bin:        cmp.Or(opts.Bin, caddyBin),
		log:        newLogBuffer(),
		client: &http.Client{
			Timeout:   requestTimeout,
			Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 16},
			// Redirects are asserted, not followed.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	config := opts.Caddyfile
	if config == "" {
		config = exampleCaddyfile(t)
	}
	if err := os.WriteFile(g.ConfigPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"home", "xdg-config", "xdg-data"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		g.stop(t)
		// A gateway built with -race (GW_CADDY_BIN) reports data races on
		// its output: any is a failure.
		if strings.Contains(g.log.String(), "WARNING: DATA RACE") {
			t.Errorf("the gateway reported a data race")
		}
		if t.Failed() {
			t.Logf("caddy log (%s):\n%s", g.BaseURL, g.log.String())
		}
	})
	for try := 1; ; try++ {
		g.place(freePorts(t, 5), opts)
		if !g.try(t) {
			return g
		}
		if try == portTries {
			t.Fatalf("caddy exited %d times: a port of its config was taken; its log follows at the end of the test", try)
		}
		g.log = newLogBuffer() // another process took a port: fresh ones
	}
}

// place puts g on ports (its site, admin endpoint, upstream stand-in,
// console and fallback site) and sets its environment: opts.Env over the
// test defaults.
func (g *gateway) place(ports []string, opts gwOptions) {
	g.Addr = "127.0.0.1:" + ports[0]
	g.AdminAddr = "127.0.0.1:" + ports[1]
	g.UpstreamURL = "http://127.0.0.1:" + ports[2]
	g.ConsoleURL = "http://127.0.0.1:" + ports[3]
	g.BaseURL = "http://" + g.Addr
	g.AdminURL = "http://" + g.AdminAddr
	vars := map[string]string{
		"GW_ADDRESS":            g.Addr,
		"GW_ADMIN":              g.AdminAddr,
		"GW_DATA_DIR":           g.DataDir,
		"GW_OPENAI_BASE_URL":    g.UpstreamURL + "/v1",
		"GW_ANTHROPIC_BASE_URL": g.UpstreamURL,
		"GW_SEARCH_BASE_URL":    g.UpstreamURL + "/v1",
		"OPENAI_API_KEY":        "sk-upstream-openai-test",
		"ANTHROPIC_API_KEY":     "sk-upstream-anthropic-test",
		"GW_SEARCH_API_KEY":     "sk-upstream-search-test",
		"GW_CONSOLE":            "127.0.0.1:" + ports[3],
		// The fallback site gets a port of its own too: left to choose
		// one (":0"), Caddy could be given a port just handed to another
		// gateway, which then shares it (SO_REUSEPORT) and sees some of
		// its requests answered 421 by this one.
		"GW_FALLBACK_ADDRESS": ":" + ports[4],
		// Caddy's autosave and certificate storage stay inside the test.
		"HOME":            filepath.Join(g.dir, "home"),
		"XDG_CONFIG_HOME": filepath.Join(g.dir, "xdg-config"),
		"XDG_DATA_HOME":   filepath.Join(g.dir, "xdg-data"),
	}
	if opts.BootstrapKey != "" {
		vars["GW_BOOTSTRAP_KEY"] = opts.BootstrapKey
	}
	for k, v := range opts.Env {
		vars[k] = v
	}
	g.env = processEnv(vars)
}

// processEnv is this process's environment without the variables that
// steer the gateway or its SDKs, plus vars.
func processEnv(vars map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if _, set := vars[name]; set {
			continue
		}
		if strings.HasPrefix(name, "GW_") || strings.HasPrefix(name, "OPENAI_") ||
			strings.HasPrefix(name, "ANTHROPIC_") || strings.HasPrefix(name, "XDG_") ||
			strings.HasPrefix(name, "CADDY") {
			continue
		}
		env = append(env, kv)
	}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return env
}

// exampleCaddyfile returns the text of ../Caddyfile.example.
func exampleCaddyfile(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "Caddyfile.example"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// exampleSite returns Caddyfile.example with its site's body replaced by
// body (the lines between the site's braces).
func exampleSite(t testing.TB, body string) string {
	t.Helper()
	ex := exampleCaddyfile(t)
	const site = "http://{$GW_ADDRESS::8080} {"
	i := strings.Index(ex, site)
	if i < 0 {
		t.Fatalf("Caddyfile.example has no site %q", site)
	}
	return ex[:i] + site + "\n" + body + "\n}\n"
}

// siteRoot writes files (path → content) into a new folder and returns it.
func siteRoot(t testing.TB, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, body := range files {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// startWithFakes starts the two fake providers and a gateway on cfg
// pointed at them; it returns the gateway and the chat-completions-style
// fake (which also serves audio and images).
func startWithFakes(t *testing.T, cfg string) (*gateway, *fake.Upstream) {
	t.Helper()
	return startWithFakesKey(t, cfg, "")
}

// startWithFakesKey is startWithFakes with the bootstrap key boot.
func startWithFakesKey(t *testing.T, cfg, boot string) (*gateway, *fake.Upstream) {
	t.Helper()
	oa, an := fake.NewOpenAI(), fake.NewAnthropic()
	t.Cleanup(oa.Close)
	t.Cleanup(an.Close)
	return startGateway(t, gwOptions{BootstrapKey: boot, Caddyfile: cfg,
		Env: map[string]string{"GW_OPENAI_BASE_URL": oa.URL, "GW_ANTHROPIC_BASE_URL": an.URL}}), oa
}

// freePorts returns n distinct loopback ports that were free a moment ago.
func freePorts(t testing.TB, n int) []string {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	var ports []string
	var lns []net.Listener
	for len(ports) < n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		// Caddy listens with SO_REUSEPORT: two gateways given one port
		// would both bind it and share its connections, so a port is
		// handed out once per test process.
		if portsGiven[port] {
			continue
		}
		portsGiven[port] = true
		ports = append(ports, port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}

var (
	portsMu    sync.Mutex
	portsGiven = map[string]bool{}
)

// start runs the binary and waits for readyMsg on its stderr.
func (g *gateway) start(t testing.TB) {
	t.Helper()
	if g.try(t) {
		t.Fatalf("caddy exited: a port of its config was taken; its log follows at the end of the test")
	}
}

// portTries is how often startGateway picks fresh ports when another
// process took one of them between their choice and caddy's bind.
const portTries = 3

// try starts the process and waits until it serves; portTaken is true
// when it exited because an address it was to listen on was in use.
func (g *gateway) try(t testing.TB) (portTaken bool) {
	t.Helper()
	args := []string{g.bin, "run", "--config", g.ConfigPath, "--adapter", "caddyfile"}
	if cpus := os.Getenv("GW_BENCH_GATEWAY_CPUS"); cpus != "" {
		// The benchmarks pin the gateway to its own CPUs (scripts/hotpath.sh).
		args = append([]string{"taskset", "-c", cpus}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = g.env
	cmd.Dir = g.dir
	cmd.Stdout = g.log
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", g.bin, err)
	}
	p := &process{cmd: cmd, ready: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		// Read every line (so the pipe never blocks), watch for readyMsg,
		// and reap the process once its stderr is closed.
		r := bufio.NewReader(stderr)
		signalled := false
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				g.log.Write(line)
				if !signalled && logMsg(line) == readyMsg {
					signalled = true
					close(p.ready)
				}
			}
			if err != nil {
				break
			}
		}
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()

	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case <-p.ready:
	case <-p.exited:
		if strings.Contains(g.log.String(), "bind: address already in use") {
			return true
		}
		t.Fatalf("caddy exited before serving its config (%v); its log follows at the end of the test", p.waitErr)
	case <-timer.C:
		_ = cmd.Process.Kill()
		<-p.exited
		t.Fatalf("caddy did not log %q within %s; its log follows at the end of the test", readyMsg, startTimeout)
	}
	g.mu.Lock()
	g.proc = p
	g.mu.Unlock()
	return false
}

// stop sends SIGINT and waits for the process to exit, killing it after
// stopTimeout. It is a no-op when the process is not running.
// pid is the running process's id.
func (g *gateway) pid(t testing.TB) int {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.proc == nil {
		t.Fatal("the gateway is not running")
	}
	return g.proc.cmd.Process.Pid
}

func (g *gateway) stop(t testing.TB) {
	t.Helper()
	g.mu.Lock()
	p := g.proc
	g.proc = nil
	g.mu.Unlock()
	if p == nil {
		return
	}
	defer g.client.CloseIdleConnections()
	if err := p.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Errorf("signalling caddy: %v", err)
	}
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	select {
	case <-p.exited:
		if p.waitErr != nil {
			t.Errorf("caddy exited with %v after SIGINT", p.waitErr)
		}
	case <-timer.C:
		_ = p.cmd.Process.Kill()
		<-p.exited
		t.Errorf("caddy did not exit within %s of SIGINT; killed", stopTimeout)
	}
}

// kill ends the process with SIGKILL: no shutdown, no draining, as a
// crash would.
func (g *gateway) kill(t testing.TB) {
	t.Helper()
	g.mu.Lock()
	p := g.proc
	g.proc = nil
	g.mu.Unlock()
	if p == nil {
		return
	}
	defer g.client.CloseIdleConnections()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatalf("killing caddy: %v", err)
	}
	<-p.exited
}

// restart stops the process and starts it again on the same config, data
// folder and ports.
func (g *gateway) restart(t testing.TB) {
	t.Helper()
	g.stop(t)
	g.log.WriteString("--- integration: restart ---\n")
	g.start(t)
}

// reload adapts the Caddyfile (with the process's environment) and POSTs
// the JSON to the admin endpoint's /load, forcing a reload even though the
// config is unchanged. It returns once Caddy has logged "load complete".
func (g *gateway) reload(t testing.TB) {
	t.Helper()
	loads := g.log.count(`"msg":"load complete"`)
	if resp := g.load(t, nil); resp.Status != http.StatusOK {
		t.Fatalf("POST /load: %d %s", resp.Status, resp.Body)
	}
	g.waitLog(t, func(log string) bool {
		return strings.Count(log, `"msg":"load complete"`) > loads
	}, `"load complete"`)
	// The old config's server closes its idle keep-alive connections as it
	// stops; a request sent on one at that moment would be reset. Clients
	// of a reloaded Caddy dial again, as this one does now.
	g.client.CloseIdleConnections()
}

// load adapts the gateway's Caddyfile with env overriding its environment
// and POSTs the JSON to the admin /load, returning the answer (a reload
// that fails leaves the running config in place).
func (g *gateway) load(t testing.TB, env map[string]string) response {
	t.Helper()
	cmd := exec.Command(caddyBin, "adapt", "--config", g.ConfigPath, "--adapter", "caddyfile")
	cmd.Env = slices.Clone(g.env)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v) // the last value of a key wins
	}
	cmd.Dir = g.dir
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	cfg, err := cmd.Output()
	if err != nil {
		t.Fatalf("caddy adapt: %v\n%s", err, errOut.String())
	}
	if !json.Valid(cfg) {
		t.Fatalf("caddy adapt printed no JSON:\n%s", cfg)
	}
	r := g.adminDo(t, http.MethodPost, "/load", cfg, "Content-Type", "application/json", "Cache-Control", "must-revalidate")
	// The old config's servers close their idle connections as the new
	// one starts; a POST sent on one the client still holds would fail
	// with EOF (a client retries only idempotent requests), so the next
	// request dials afresh.
	g.client.CloseIdleConnections()
	return r
}

// waitLog waits until cond holds for the log so far.
func (g *gateway) waitLog(t testing.TB, cond func(string) bool, what string) {
	t.Helper()
	timer := time.NewTimer(logTimeout)
	defer timer.Stop()
	for {
		log, changed := g.log.snapshot()
		if cond(log) {
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			t.Fatalf("caddy did not log %s within %s; its log follows at the end of the test", what, logTimeout)
		}
	}
}

// logMsg returns the "msg" of one JSON log line, or "".
func logMsg(line []byte) string {
	var l struct {
		Msg string `json:"msg"`
	}
	if json.Unmarshal(line, &l) != nil {
		return ""
	}
	return l.Msg
}

// logBuffer collects the process's output; waiters are woken on each write.
type logBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	changed chan struct{}
}

func newLogBuffer() *logBuffer { return &logBuffer{changed: make(chan struct{})} }

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, err := l.buf.Write(p)
	close(l.changed)
	l.changed = make(chan struct{})
	return n, err
}

func (l *logBuffer) WriteString(s string) { l.Write([]byte(s)) }

func (l *logBuffer) String() string {
	s, _ := l.snapshot()
	return s
}

// snapshot returns the log so far and a channel closed at the next write.
func (l *logBuffer) snapshot() (string, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String(), l.changed
}

func (l *logBuffer) count(sub string) int { return strings.Count(l.String(), sub) }

// response is a fully read HTTP answer.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a generic value, failing the test if it is
// not JSON.
func (r response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("body is not a JSON object (%v): %q", err, r.Body)
	}
	return v
}

// do sends a request to the site. header is name, value pairs (a "Host"
// pair replaces the request's host). A non-empty body is sent as JSON
// unless a Content-Type is given.
func (g *gateway) do(t testing.TB, method, path, body string, header ...string) response {
	t.Helper()
	if body != "" && !hasHeader(header, "Content-Type") {
		header = append(header, "Content-Type", "application/json")
	}
	return g.send(t, g.BaseURL+path, method, []byte(body), header)
}

// adminDo sends a request to the admin endpoint.
func (g *gateway) adminDo(t testing.TB, method, path string, body []byte, header ...string) response {
	t.Helper()
	return g.send(t, g.AdminURL+path, method, body, header)
}

func (g *gateway) send(t testing.TB, url, method string, body []byte, header []string) response {
	t.Helper()
	if len(header)%2 != 0 {
		t.Fatalf("header list %q: want name, value pairs", header)
	}
	var rd io.Reader
	if len(body) > 0 {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(header); i += 2 {
		if strings.EqualFold(header[i], "Host") {
			req.Host = header[i+1] // the client sends req.Host, never a Host header
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := g.client.Do(req)
	if err != nil && (method == http.MethodGet || method == http.MethodHead) {
		// A connection the old config's server took as it stopped (a
		// reload) can be closed unanswered; a client sends an idempotent
		// request again, once.
		resp, err = g.client.Do(req)
	}
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading body: %v", method, url, err)
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: b}
}

func hasHeader(header []string, name string) bool {
	for i := 0; i+1 < len(header); i += 2 {
		if strings.EqualFold(header[i], name) {
			return true
		}
	}
	return false
}

// bearer and apiKey are the two ways a key travels.
func bearer(key string) []string { return []string{"Authorization", "Bearer " + key} }
func apiKey(key string) []string { return []string{"X-Api-Key", key} }

// adminJSON sends body (nil: none) as JSON to the admin API and checks
// the status.
func (g *gateway) adminJSON(t testing.TB, method, path string, body any, wantStatus int) response {
	t.Helper()
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	resp := g.adminDo(t, method, path, b, "Content-Type", "application/json")
	if resp.Status != wantStatus {
		t.Fatalf("%s %s: status %d, want %d; body %s", method, path, resp.Status, wantStatus, resp.Body)
	}
	return resp
}

// createAccount creates an account (POST /gw/accounts, 201) and returns it.
func (g *gateway) createAccount(t testing.TB, body map[string]any) map[string]any {
	t.Helper()
	return g.adminJSON(t, http.MethodPost, "/gw/accounts", body, http.StatusCreated).JSON(t)
}

// getAccount returns GET /gw/accounts/{id} (200).
func (g *gateway) getAccount(t testing.TB, id string) map[string]any {
	t.Helper()
	return g.adminJSON(t, http.MethodGet, "/gw/accounts/"+id, nil, http.StatusOK).JSON(t)
}

// createKey creates a key for the account (POST /gw/accounts/{id}/keys,
// 201) and returns its secret and id.
func (g *gateway) createKey(t testing.TB, accountID string, body map[string]any) (secret, id string) {
	t.Helper()
	k := g.adminJSON(t, http.MethodPost, "/gw/accounts/"+accountID+"/keys", body, http.StatusCreated).JSON(t)
	secret, _ = k["key"].(string)
	id, _ = k["id"].(string)
	if !strings.HasPrefix(secret, "sk-") || id == "" {
		t.Fatalf("created key %v: want a key starting sk- and an id", k)
	}
	return secret, id
}

// deleteKey deletes a key (DELETE /gw/keys/{id}, 204).
func (g *gateway) deleteKey(t testing.TB, id string) {
	t.Helper()
	g.adminJSON(t, http.MethodDelete, "/gw/keys/"+id, nil, http.StatusNoContent)
}

// newAccountKey creates an account and one key of it, returning the secret.
func (g *gateway) newAccountKey(t testing.TB, account map[string]any) string {
	t.Helper()
	g.createAccount(t, account)
	secret, _ := g.createKey(t, account["id"].(string), map[string]any{"name": "test"})
	return secret
}

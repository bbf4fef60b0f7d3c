package integration

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/caddy-gw/caddy-gw/pricing"
)

// A rendered page stays outside: its WebRTC sends no STUN over UDP to a
// loopback port (UDP would bypass the proxy and its address guard), and
// the browser the gateway starts holds none of the gateway's environment
// (provider keys, bootstrap key), runs as an unprivileged user when the
// gateway is root, and keeps Chromium's sandbox (no --no-sandbox; the
// renderer under a seccomp filter).
//
// The page asks for a STUN binding at a UDP port the test listens on and
// answers (so ICE gathering ends at once if a packet arrives); an image on
// the page is held until the page reports that gathering ended, so the
// render cannot finish before the page's report.
func TestFetchRenderStaysOutside(t *testing.T) {
	t.Parallel()
	stun, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stun.Close() })
	packets := make(chan struct{}, 64)
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := stun.ReadFrom(buf)
			if err != nil {
				return
			}
			select {
			case packets <- struct{}{}:
			default:
			}
			if resp := stunBindingSuccess(buf[:n], from.(*net.UDPAddr)); resp != nil {
				_, _ = stun.WriteTo(resp, from)
			}
		}
	}()

	var (
		gatewayPID atomic.Int64
		once       sync.Once
		gathered   = make(chan struct{})
		state      string
		procs      []browserProcess
	)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/page":
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			fmt.Fprintf(w, `<!doctype html><html><head><title>Peer</title></head><body><div id="app"></div>
<img src="/gate" alt="">
<script>
function report(s) { fetch("/gathered?state=" + encodeURIComponent(s)).catch(() => {}); }
try {
  const pc = new RTCPeerConnection({iceServers: [{urls: "stun:127.0.0.1:%d"}]});
  pc.createDataChannel("probe");
  pc.onicegatheringstatechange = () => { if (pc.iceGatheringState === "complete") report("complete"); };
  pc.createOffer().then(o => pc.setLocalDescription(o)).catch(e => report("error " + e));
} catch (e) { report("error " + e); }
document.getElementById("app").innerHTML = "<article><h2>Peer page</h2><p>This page asks for a STUN binding on a loopback port while it loads, which a rendered read must never send.</p><p>A second paragraph keeps the article long enough for the reader to pick it up as the main content.</p></article>";
</script></body></html>`, stun.LocalAddr().(*net.UDPAddr).Port)
		case "/gathered":
			once.Do(func() {
				state = r.URL.Query().Get("state")
				procs = descendants(t, int(gatewayPID.Load()))
				close(gathered)
			})
		case "/gate":
			select {
			case <-gathered:
			case <-r.Context().Done():
				return
			}
			w.Header().Set("Content-Type", "image/gif")
			_, _ = w.Write([]byte("GIF89a\x01\x00\x01\x00\x00\x00\x00;"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(site.Close)
	secrets := map[string]string{
		"GW_FETCH_ALLOW":     strings.TrimPrefix(site.URL, "http://"),
		"GW_OPENAI_API_KEY":  "sk-provider-secret-openai",
		"GW_REDIS_PASSWORD":  "redis-secret-password",
		"GW_TEST_DB_SECRET":  "postgres://gw:db-secret@127.0.0.1:1/gw",
		"GW_BOOTSTRAP_EXTRA": "sk-bootstrap-secret",
	}
	g := startGateway(t, gwOptions{BootstrapKey: "sk-bootstrapkeysecret0123456789abcdefghijkl", Env: secrets})
	gatewayPID.Store(int64(g.pid(t)))
	key := g.newAccountKey(t, map[string]any{"id": "peer", "plan": "paid", "cleared": true, "balance_usd": "1.00"})

	r := g.do(t, http.MethodPost, "/v1/fetch", `{"url":"`+site.URL+`/page","render":true}`, bearer(key)...)
	if r.Status != http.StatusOK || !strings.Contains(gjson.GetBytes(r.Body, "markdown").String(), "Peer page") {
		t.Fatalf("render: %d %s", r.Status, r.Body)
	}
	select {
	case <-gathered:
	default:
		t.Fatal("the render finished before the page reported on ICE gathering")
	}
	if state != "complete" {
		t.Fatalf("ICE gathering: %q, want complete", state)
	}
	// Gathering is complete: any STUN request was sent before. A short
	// grace for the reader goroutine to have picked it up.
	select {
	case <-packets:
		t.Error("the rendered page sent a UDP packet to a loopback port")
	case <-time.After(250 * time.Millisecond):
	}

	// The browser's processes, as they were while the page ran.
	gatewayEnv := map[string]bool{}
	for _, kv := range g.env {
		gatewayEnv[kv] = true
	}
	renderers, sandboxed := 0, 0
	for _, p := range procs {
		var leaked []string
		for _, kv := range p.env {
			name, _, _ := strings.Cut(kv, "=")
			if gatewayEnv[kv] && name != "PATH" && name != "LANG" && name != "TZ" {
				leaked = append(leaked, name)
			}
			for _, secret := range append([]string{"sk-bootstrapkeysecret0123456789abcdefghijkl", "sk-upstream-openai-test"}, valuesOf(secrets)...) {
				if strings.Contains(kv, secret) && !slices.Contains(leaked, name) {
					leaked = append(leaked, name)
				}
			}
		}
		if len(leaked) > 0 {
			t.Errorf("browser process %d (%s) has the gateway's %s", p.pid, p.name, strings.Join(leaked, ", "))
		}
		if os.Geteuid() == 0 && (p.uid == 0 || p.euid == 0) {
			t.Errorf("browser process %d (%s) runs as root", p.pid, p.name)
		}
		if strings.Contains(p.cmdline, "--no-sandbox") {
			t.Errorf("browser process %d runs without its sandbox: %s", p.pid, p.cmdline)
		}
		if strings.Contains(p.cmdline, "--type=renderer") {
			renderers++
			if p.seccomp == "2" {
				sandboxed++
			}
		}
	}
	if len(procs) == 0 || renderers == 0 || sandboxed != renderers {
		t.Errorf("%d browser processes, %d renderers, %d of them under a seccomp filter", len(procs), renderers, sandboxed)
	}
	if l := ledgerOf(t, g, "peer"); len(l) != 1 {
		t.Errorf("ledger %v, want the one render", l)
	}
}

func valuesOf(m map[string]string) []string {
	var v []string
	for k, s := range m {
		if k != "GW_FETCH_ALLOW" {
			v = append(v, s)
		}
	}
	return v
}

// stunBindingSuccess answers a STUN binding request (RFC 5389) with a
// success response naming from as the mapped address; nil for anything
// else.
func stunBindingSuccess(req []byte, from *net.UDPAddr) []byte {
	const cookie = 0x2112A442
	if len(req) < 20 || binary.BigEndian.Uint16(req[0:2]) != 0x0001 || binary.BigEndian.Uint32(req[4:8]) != cookie {
		return nil
	}
	ip := from.IP.To4()
	if ip == nil {
		return nil
	}
	resp := make([]byte, 32)
	binary.BigEndian.PutUint16(resp[0:2], 0x0101) // binding success
	binary.BigEndian.PutUint16(resp[2:4], 12)
	copy(resp[4:20], req[4:20])                     // cookie and transaction id
	binary.BigEndian.PutUint16(resp[20:22], 0x0020) // XOR-MAPPED-ADDRESS
	binary.BigEndian.PutUint16(resp[22:24], 8)
	resp[25] = 0x01 // IPv4
	binary.BigEndian.PutUint16(resp[26:28], uint16(from.Port)^uint16(cookie>>16))
	binary.BigEndian.PutUint32(resp[28:32], binary.BigEndian.Uint32(ip)^cookie)
	return resp
}

// browserProcess is what the test reads of one process the gateway started.
type browserProcess struct {
	pid       int
	name      string
	cmdline   string
	env       []string
	uid, euid int
	seccomp   string
}

// descendants reads every process below pid (not pid itself).
func descendants(t *testing.T, pid int) []browserProcess {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Error(err)
		return nil
	}
	children := map[int][]int{}
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
		if len(fields) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(fields[1])
		children[ppid] = append(children[ppid], p)
	}
	var out []browserProcess
	queue := children[pid]
	for len(queue) > 0 {
		p := queue[0]
		queue = append(queue[1:], children[p]...)
		dir := filepath.Join("/proc", strconv.Itoa(p))
		cmdline, err1 := os.ReadFile(filepath.Join(dir, "cmdline"))
		environ, err2 := os.ReadFile(filepath.Join(dir, "environ"))
		status, err3 := os.ReadFile(filepath.Join(dir, "status"))
		if err1 != nil || err2 != nil || err3 != nil {
			continue // gone already
		}
		bp := browserProcess{pid: p, cmdline: strings.ReplaceAll(string(bytes.TrimRight(cmdline, "\x00")), "\x00", " "), uid: -1, euid: -1}
		bp.name, _, _ = strings.Cut(bp.cmdline, " ")
		for _, kv := range strings.Split(string(environ), "\x00") {
			if kv != "" {
				bp.env = append(bp.env, kv)
			}
		}
		for _, line := range strings.Split(string(status), "\n") {
			k, v, _ := strings.Cut(line, ":")
			f := strings.Fields(v)
			switch {
			case k == "Uid" && len(f) >= 2:
				bp.uid, _ = strconv.Atoi(f[0])
				bp.euid, _ = strconv.Atoi(f[1])
			case k == "Seccomp" && len(f) == 1:
				bp.seccomp = f[0]
			}
		}
		out = append(out, bp)
	}
	return out
}

// Rendering changes how a page is read, never what fails or what is
// billed: a redirect to a blocked address (the address never contacted),
// to a scheme other than http(s), a site's 404 or 500, a type that is not
// a page and a page over the size limit answer what a plain read answers,
// and nothing is billed.
func TestFetchRenderFailsLikePlain(t *testing.T) {
	t.Parallel()
	var inside atomic.Int64
	blocked := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inside.Add(1)
		_, _ = w.Write([]byte("<html><body><p>an internal page</p></body></html>"))
	}))
	t.Cleanup(blocked.Close)
	blockedHost := strings.TrimPrefix(blocked.URL, "http://")
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-blocked":
			http.Redirect(w, r, blocked.URL+"/inside", http.StatusFound)
		case "/to-blocked-https":
			http.Redirect(w, r, "https://"+blockedHost+"/inside", http.StatusFound)
		case "/to-file":
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		case "/moves-on":
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte(`<html><body><p>Moving on.</p><script>location.replace("` + blocked.URL + `/inside")</script></body></html>`))
		case "/broken":
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte("<html><body><h1>Internal Server Error</h1><p>Something broke on our side.</p></body></html>"))
		case "/logo.png":
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write([]byte("\x89PNG\r\n\x1a\n"))
		case "/huge":
			// Over the page limit, yet cheap to render: one long comment.
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte("<html><body><p>a big page</p><!--" + strings.Repeat("x", 6<<20) + "--></body></html>"))
		default:
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte("<html><body><h1>Not found</h1><p>There is no such page here.</p></body></html>"))
		}
	}))
	t.Cleanup(site.Close)
	g := startGateway(t, gwOptions{Env: map[string]string{"GW_FETCH_ALLOW": strings.TrimPrefix(site.URL, "http://")}})
	key := g.newAccountKey(t, map[string]any{"id": "unlucky", "plan": "paid", "cleared": true, "balance_usd": "1.00"})
	for _, tc := range []struct {
		path   string
		status int
		want   string
	}{
		{"/to-blocked", 400, `{"error":"blocked target: 127.0.0.1 resolves to a non-public address"}`},
		{"/to-blocked-https", 400, `{"error":"blocked target: 127.0.0.1 resolves to a non-public address"}`},
		{"/to-file", 400, `{"error":"blocked target: only http and https URLs are read"}`},
		{"/missing", 502, `{"error":"provider failed: the site answered 404"}`},
		{"/broken", 502, `{"error":"provider failed: the site answered 500"}`},
		{"/logo.png", 502, `{"error":"provider failed: image/png is not a page that can be read"}`},
		{"/huge", 502, `{"error":"provider failed: the page is larger than 5242880 bytes"}`},
	} {
		t.Run(strings.TrimPrefix(tc.path, "/"), func(t *testing.T) {
			for _, render := range []bool{false, true} {
				r := g.do(t, http.MethodPost, "/v1/fetch", fmt.Sprintf(`{"url":%q,"render":%t}`, site.URL+tc.path, render), bearer(key)...)
				if r.Header.Get("X-Gw-Cost-Usd") != "" {
					t.Errorf("render %t: billed %s", render, r.Header.Get("X-Gw-Cost-Usd"))
				}
				expectError(t, r, tc.status, tc.want, "req-")
			}
		})
	}
	// A page whose script moves it on to a blocked address: a plain read
	// never runs the script; a rendered read is refused, not billed.
	expectError(t, g.do(t, http.MethodPost, "/v1/fetch", `{"url":"`+site.URL+`/moves-on","render":true}`, bearer(key)...), 400,
		`{"error":"blocked target: 127.0.0.1 resolves to a non-public address"}`, "req-")
	if n := inside.Load(); n != 0 {
		t.Errorf("the blocked address was contacted %d times", n)
	}
	if l := ledgerOf(t, g, "unlucky"); len(l) != 0 {
		t.Errorf("failed reads were billed: %v", l)
	}
	if b := balanceOf(t, g, "unlucky"); b != pricing.USD(1) {
		t.Errorf("balance %s, want 1.00", b)
	}
}

package netguard

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// stub resolves names from a table and records every address dialled;
// it never dials anything but the loopback test server it is told of.
type stub struct {
	mu     sync.Mutex
	names  map[string][]string
	dialed []string
	real   string // host:port really dialled (the allowed test server)
}

func (s *stub) lookup(_ context.Context, host string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, a := range s.names[host] {
		out = append(out, netip.MustParseAddr(a))
	}
	if out == nil {
		return nil, errors.New("no such host")
	}
	return out, nil
}

func (s *stub) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	s.mu.Lock()
	s.dialed = append(s.dialed, addr)
	s.mu.Unlock()
	if addr == s.real {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	return nil, errors.New("stub: not dialled")
}

func guard(s *stub, allow ...string) *Guard {
	g := New(allow)
	g.LookupIP, g.Dial = s.lookup, s.dial
	return g
}

// Every non-public range is refused before anything is dialled, whether
// written as an address or reached through a name; public addresses are
// dialled by address, not by name.
func TestDialRefusesNonPublic(t *testing.T) {
	s := &stub{names: map[string][]string{
		"private.test":  {"10.1.2.3"},
		"rebind.test":   {"93.184.216.34", "127.0.0.1"},
		"metadata.test": {"169.254.169.254"},
		"public.test":   {"93.184.216.34"},
		"v6.test":       {"2606:2800:220:1:248:1893:25c8:1946"},
	}}
	g := guard(s)
	for _, addr := range []string{
		"10.0.0.1:80", "172.16.5.4:443", "192.168.1.1:80", "127.0.0.1:8080", "169.254.169.254:80", "100.64.0.1:80",
		"0.0.0.0:80", "[::1]:80", "[fe80::1]:80", "[fc00::1]:80", "[fd12:3456::1]:80", "[::ffff:127.0.0.1]:80", "[::ffff:10.0.0.1]:80",
		"private.test:80", "rebind.test:443", "metadata.test:80",
	} {
		_, err := g.DialContext(context.Background(), "tcp", addr)
		var be *BlockedError
		if !errors.As(err, &be) {
			t.Errorf("%s: %v, want blocked", addr, err)
		}
	}
	if len(s.dialed) != 0 {
		t.Fatalf("dialled %v", s.dialed)
	}
	for _, addr := range []string{"public.test:443", "v6.test:80", "93.184.216.34:8080"} {
		if _, err := g.DialContext(context.Background(), "tcp", addr); err == nil || errors.Is(err, ErrBlocked) {
			t.Errorf("%s: %v, want the stub's dial error", addr, err)
		}
	}
	want := "93.184.216.34:443 [2606:2800:220:1:248:1893:25c8:1946]:80 93.184.216.34:8080"
	if strings.Join(s.dialed, " ") != want {
		t.Fatalf("dialled %v, want %s", s.dialed, want)
	}
}

// Check gives DialContext's verdict without connecting.
func TestCheck(t *testing.T) {
	s := &stub{names: map[string][]string{"private.test": {"10.1.2.3"}, "public.test": {"93.184.216.34"}}}
	g := guard(s, "127.0.0.1:9")
	for addr, blocked := range map[string]bool{"private.test:80": true, "10.0.0.1:443": true, "public.test:443": false, "127.0.0.1:9": false} {
		if err := g.Check(context.Background(), addr); errors.Is(err, ErrBlocked) != blocked || (!blocked && err != nil) {
			t.Errorf("%s: %v, want blocked %v", addr, err, blocked)
		}
	}
	if err := g.Check(context.Background(), "nowhere.test:80"); err == nil || errors.Is(err, ErrBlocked) {
		t.Errorf("unknown name: %v, want a resolution error", err)
	}
	if len(s.dialed) != 0 {
		t.Fatalf("Check dialled %v", s.dialed)
	}
}

func TestCheckURL(t *testing.T) {
	for raw, blocked := range map[string]bool{
		"https://example.com/a": false, "http://93.184.216.34/": false, "http://[2606:2800::1]/": false, "http://cafe.de/": false,
		"http://1e100.net/": false, "ftp://example.com/": true, "file:///etc/passwd": true, "http:///x": true,
		"http://2130706433/": true, "http://0177.0.0.1/": true, "http://0x7f000001/": true, "http://0x7f.1/": true, "http://127.1/": true,
		"gopher://x/": true,
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := CheckURL(u) != nil; got != blocked {
			t.Errorf("%s: blocked %v, want %v", raw, got, blocked)
		}
	}
}

// A redirect to a private address is refused (and not dialled); the
// allow list is the only exception.
func TestRedirects(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-private":
			http.Redirect(w, r, "http://private.test/secret", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		default:
			_, _ = w.Write([]byte("ok"))
		}
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	s := &stub{names: map[string][]string{"private.test": {"10.0.0.7"}}, real: host}
	c := guard(s, host).Client(0)
	resp, err := c.Get(srv.URL + "/page")
	if err != nil {
		t.Fatalf("allowed host: %v", err)
	}
	resp.Body.Close()
	_, err = c.Get(srv.URL + "/to-private")
	if !errors.Is(err, ErrBlocked) {
		t.Fatalf("redirect to a private address: %v", err)
	}
	if _, err := c.Get(srv.URL + "/loop"); err == nil || !strings.Contains(err.Error(), "redirects") {
		t.Fatalf("redirect loop: %v", err)
	}
	for _, d := range s.dialed {
		if d != host {
			t.Fatalf("dialled %s", d)
		}
	}
	// Without the allow list the loopback server itself is refused.
	if _, err := guard(&stub{}).Client(0).Get(srv.URL + "/page"); !errors.Is(err, ErrBlocked) {
		t.Fatalf("loopback without the allow list: %v", err)
	}
}

func FuzzCheckURL(f *testing.F) {
	for _, s := range []string{"http://example.com/", "http://2130706433/", "http://[::ffff:127.0.0.1]/", "https://a.b.c:8443/x?y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err != nil {
			return
		}
		if CheckURL(u) == nil && u.Scheme != "http" && u.Scheme != "https" {
			t.Fatalf("accepted %q", raw)
		}
	})
}

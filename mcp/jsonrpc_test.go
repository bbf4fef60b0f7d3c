package mcp

import (
	"net"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		body string
		code int // 0: accepted
		kind string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, 0, "request"},
		{`{"jsonrpc":"2.0","id":"a","method":"tools/list","params":{}}`, 0, "request"},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, 0, "notification"},
		{`{"jsonrpc":"2.0","id":3,"result":{}}`, 0, "response"},
		{`{"jsonrpc":"2.0","id":1,"method":"ping","id":2}`, gwerr.RPCParseError, ""},
		{`not json`, gwerr.RPCParseError, ""},
		{strings.Repeat("[", 100), gwerr.RPCParseError, ""},
		{`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, gwerr.RPCInvalidRequest, ""},
		{`{"jsonrpc":"1.0","id":1,"method":"ping"}`, gwerr.RPCInvalidRequest, ""},
		{`{"jsonrpc":"2.0","id":null,"method":"ping"}`, gwerr.RPCInvalidRequest, ""},
		{`{"jsonrpc":"2.0","id":{},"method":"ping"}`, gwerr.RPCInvalidRequest, ""},
		{`{"jsonrpc":"2.0","id":1}`, gwerr.RPCInvalidRequest, ""},
		{`{"jsonrpc":"2.0","id":1,"method":5}`, gwerr.RPCInvalidRequest, ""},
	} {
		m, err := Parse([]byte(tc.body))
		if tc.code != 0 {
			if err == nil || err.Code != tc.code || err.Status != 400 {
				t.Errorf("%s: %+v, want code %d", tc.body, err, tc.code)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.body, err)
			continue
		}
		kind := "response"
		if m.IsRequest() {
			kind = "request"
		} else if m.IsNotification() {
			kind = "notification"
		}
		if kind != tc.kind {
			t.Errorf("%s: %s, want %s", tc.body, kind, tc.kind)
		}
	}
}

func TestNegotiate(t *testing.T) {
	if Negotiate("2025-03-26") != "2025-03-26" || Negotiate("2030-01-01") != LatestVersion || Negotiate("") != LatestVersion {
		t.Fatal("Negotiate")
	}
}

// Host and Origin each pass only on a loopback name, a site host (any
// port; a wildcard stands for one label) or an allowed host (a host:port
// entry only on that port); a missing Origin passes, a missing Host not.
func TestOriginAllowed(t *testing.T) {
	allowed := []string{"gw.example:8080", "app.example"}
	site := []string{"api.example.org", "*.tenants.example.org"}
	for _, tc := range []struct {
		host, origin string
		want         bool
	}{
		{"localhost:8080", "", true},
		{"localhost:8080", "http://localhost:9999", true},
		{"127.0.0.1:8080", "http://127.0.0.1:8080", true},
		{"[::1]:8080", "http://[::1]", true},
		{"LOCALHOST", "", true},
		{"gw.example:8080", "https://GW.example:8080", true},
		{"app.example:3000", "https://app.example:3000", true},
		{"api.example.org:8443", "https://api.example.org", true},
		{"a.tenants.example.org", "https://b.tenants.example.org", true},
		{"localhost", "http://evil.example", false},
		{"localhost", "null", false},
		{"localhost", "file://localhost", false},
		{"localhost", "http://gw.example", false},
		{"localhost", "http://gw.example:8081", false},
		{"evil.example.com", "", false},
		{"evil.example.com", "http://evil.example.com", false},
		{"evil.example.com", "http://localhost", false},
		{"localhost.evil.example.com", "", false},
		{"127.0.0.1.nip.io", "", false},
		{"a.b.tenants.example.org", "", false},
		{"tenants.example.org", "", false},
		{"", "", false},
		{"[::1", "", false},
	} {
		r := httptest.NewRequest("POST", "http://placeholder/mcp", nil)
		r.Host = tc.host
		if tc.origin != "" {
			r.Header.Set("Origin", tc.origin)
		}
		r = r.WithContext(WithSiteHosts(r.Context(), site))
		if got := OriginAllowed(r, allowed); got != tc.want {
			t.Errorf("Host %q, Origin %q: %v, want %v", tc.host, tc.origin, got, tc.want)
		}
	}
}

// Whatever the Host and Origin headers hold, with no site hosts and
// nothing allowed only loopback names pass.
func FuzzOriginAllowed(f *testing.F) {
	for _, s := range [][2]string{{"localhost:8080", ""}, {"evil.example", "http://evil.example"}, {"[::1]:1", "http://[::1]"},
		{"127.0.0.1", "https://127.0.0.1:443"}, {"LocalHost.", "http://localhost"}, {"[", "%"}} {
		f.Add(s[0], s[1])
	}
	loopback := func(hostport string) bool {
		h := hostport
		if x, _, err := net.SplitHostPort(hostport); err == nil {
			h = x
		}
		switch strings.ToLower(strings.Trim(h, "[]")) {
		case "localhost", "127.0.0.1", "::1":
			return true
		}
		return false
	}
	f.Fuzz(func(t *testing.T, host, origin string) {
		r := httptest.NewRequest("POST", "http://placeholder/mcp", nil)
		r.Host = host
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		if !OriginAllowed(r, nil) {
			return
		}
		if !loopback(host) {
			t.Fatalf("Host %q passed", host)
		}
		if u, err := url.Parse(origin); origin != "" && (err != nil || !loopback(u.Host)) {
			t.Fatalf("Origin %q passed", origin)
		}
	})
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{`{"jsonrpc":"2.0","id":1,"method":"ping"}`, `{"jsonrpc":"2.0","method":"x"}`, `[1]`, `{"jsonrpc":"2.0","id":"a","result":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Parse(b)
		if err != nil {
			if err.Status != 400 || (err.Code != gwerr.RPCParseError && err.Code != gwerr.RPCInvalidRequest) {
				t.Fatalf("error %+v", err)
			}
			return
		}
		if m.JSONRPC != "2.0" || (m.Method == "" && len(m.Result) == 0 && len(m.Error) == 0) {
			t.Fatalf("accepted %q as %+v", b, m)
		}
	})
}

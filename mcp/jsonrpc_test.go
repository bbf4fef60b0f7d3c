package mcp

import (
	"net/http/httptest"
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

func TestNegotiateAndOrigin(t *testing.T) {
	if Negotiate("2025-03-26") != "2025-03-26" || Negotiate("2030-01-01") != LatestVersion || Negotiate("") != LatestVersion {
		t.Fatal("Negotiate")
	}
	r := httptest.NewRequest("POST", "http://gw.example:8080/mcp", nil)
	allowed := []string{"gw.example:8080", "app.example"}
	for origin, want := range map[string]bool{"": true, "http://localhost:9999": true, "http://127.0.0.1:8080": true, "http://[::1]": true,
		"http://gw.example:8080": true, "https://GW.example:8080": true, "https://app.example:3000": true,
		"http://evil.example": false, "null": false, "http://gw.example": false, "http://gw.example:8081": false} {
		r.Header.Set("Origin", origin)
		if origin == "" {
			r.Header.Del("Origin")
		}
		if got := OriginAllowed(r, allowed); got != want {
			t.Errorf("Origin %q: %v", origin, got)
		}
	}
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

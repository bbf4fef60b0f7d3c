package integration

import (
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// hostsGateway starts the example Caddyfile (plus gw lines) with its site
// at address (host:port or :port) and env, on the loopback port it
// returns (base is http://127.0.0.1:<port>), holding a paid account's key.
func hostsGateway(t *testing.T, gwLines string, address func(port string) map[string]string) (g *gateway, base, port, key string) {
	t.Helper()
	port = freePorts(t, 1)[0]
	g = startGateway(t, gwOptions{Caddyfile: withGW(t, gwLines), Env: address(port)})
	key = g.newAccountKey(t, map[string]any{"id": "hosts", "plan": "paid", "cleared": true})
	return g, "http://127.0.0.1:" + port, port, key
}

// mcpAt sends one JSON-RPC message to url as key with the header pairs.
func mcpAt(t *testing.T, g *gateway, url, key, body string, header ...string) response {
	t.Helper()
	h := append(bearer(key), "Content-Type", "application/json", "Accept", "application/json, text/event-stream")
	return g.send(t, url, http.MethodPost, []byte(body), append(h, header...))
}

// The example's default site answers every host name, so both MCP servers
// check Host and Origin themselves: loopback names, the names the site
// is configured with, and mcp_allowed_hosts pass; any other name is
// refused with -32001 (403) whether it comes as the Host, the Origin or
// both, as a page whose name was rebound to the gateway sends them. The
// gateway's other routes answer any host.
func TestMCPHostsDefaultSite(t *testing.T) {
	t.Parallel()
	g, base, port, key := hostsGateway(t, "\t\tmcp_allowed_hosts gw.example.net", func(port string) map[string]string {
		return map[string]string{"GW_ADDRESS": ":" + port}
	})
	for _, path := range []string{"/mcp", "/mcp-tools/"} {
		for _, tc := range []struct {
			name, host, origin string
			ok                 bool
		}{
			{"rebound name as Host and Origin", "evil.example.com", "http://evil.example.com", false},
			{"rebound name as Host, no Origin", "evil.example.com", "", false},
			{"rebound Host, loopback Origin", "evil.example.com:" + port, "http://localhost:3000", false},
			{"loopback Host, rebound Origin", "localhost:" + port, "http://evil.example.com", false},
			{"a name that ends like a loopback one", "localhost.evil.example.com", "", false},
			{"localhost", "localhost:" + port, "http://localhost:" + port, true},
			{"127.0.0.1 without Origin", "127.0.0.1:" + port, "", true},
			{"[::1]", "[::1]:" + port, "http://[::1]:" + port, true},
			{"an allowed host", "gw.example.net", "https://gw.example.net", true},
		} {
			t.Run(path+" "+tc.name, func(t *testing.T) {
				h := []string{"Host", tc.host}
				if tc.origin != "" {
					h = append(h, "Origin", tc.origin)
				}
				r := mcpAt(t, g, base+path, key, mcpInit, h...)
				if !tc.ok {
					wantRPCError(t, tc.host, r, http.StatusForbidden, -32001)
					return
				}
				if r.Status != http.StatusOK || !gjson.Valid(sseData(r.Body)) || gjson.Get(sseData(r.Body), "result.serverInfo.name").String() == "" {
					t.Fatalf("%d %s", r.Status, r.Body)
				}
			})
		}
	}
	if r := g.send(t, base+"/v1/models", http.MethodGet, nil, append(bearer(key), "Host", "api.example.org")); r.Status != http.StatusOK {
		t.Fatalf("the model list on another host name: %d %s", r.Status, r.Body)
	}
}

// A site that names its host (GW_ADDRESS gw.test:<port>) serves the MCP
// servers on that name, which is neither loopback nor listed in
// mcp_allowed_hosts; with GW_FALLBACK_ADDRESS on the same port every other
// host name is answered 421 in JSON, never an empty 200.
func TestMCPHostsNamedSite(t *testing.T) {
	t.Parallel()
	g, base, port, key := hostsGateway(t, "", func(port string) map[string]string {
		return map[string]string{"GW_ADDRESS": "gw.test:" + port, "GW_FALLBACK_ADDRESS": ":" + port}
	})
	for _, path := range []string{"/mcp", "/mcp-tools/"} {
		r := mcpAt(t, g, base+path, key, mcpInit, "Host", "gw.test:"+port, "Origin", "http://gw.test:"+port)
		if r.Status != http.StatusOK || gjson.Get(sseData(r.Body), "result.serverInfo.name").String() == "" {
			t.Fatalf("%s on the site's own name: %d %s", path, r.Status, r.Body)
		}
		for _, host := range []string{"evil.example.com", "127.0.0.1:" + port} {
			r := mcpAt(t, g, base+path, key, mcpInit, "Host", host, "Origin", "http://"+host)
			if r.Status != http.StatusMisdirectedRequest || r.Header.Get("Content-Type") != "application/json" ||
				gjson.GetBytes(r.Body, "error.code").String() != "misdirected_request" || gjson.GetBytes(r.Body, "error.message").String() == "" {
				t.Fatalf("%s on %s: %d %v %s", path, host, r.Status, r.Header, r.Body)
			}
		}
	}
	if r := g.send(t, base+"/v1/models", http.MethodGet, nil, append(bearer(key), "Host", "evil.example.com")); r.Status != http.StatusMisdirectedRequest {
		t.Fatalf("the model list on another host name: %d %s", r.Status, r.Body)
	}
}

// sseData is the data line of a one-event stream, or the body itself.
func sseData(body []byte) string {
	s := string(body)
	if _, data, ok := strings.Cut(s, "data: "); ok {
		s, _, _ = strings.Cut(data, "\n")
	}
	return s
}

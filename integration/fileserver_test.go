package integration

import (
	"net/http"
	"strings"
	"testing"
)

// A site that serves files beside the gateway (`gw` and `file_server`,
// in Caddy's directive order) gets its files under the gateway's own
// prefixes too: the gateway answers its routes, and its JSON 404 only
// where the file server has nothing to serve.
func TestGatewayBesideFileServer(t *testing.T) {
	t.Parallel()
	files := map[string]string{"images/logo.png": "PNG bytes", "audio/intro.txt": "an intro", "index.html": "<p>home</p>"}
	cfg := exampleSite(t, "\troot * "+siteRoot(t, files)+"\n\tgw\n\tfile_server")
	const boot = "sk-bootstrap-fileserver-test-0123456789abcdef"
	g := startGateway(t, gwOptions{BootstrapKey: boot, Caddyfile: cfg})

	for path, body := range map[string]string{"/images/logo.png": files["images/logo.png"], "/audio/intro.txt": files["audio/intro.txt"], "/index.html": files["index.html"]} {
		r := g.do(t, http.MethodGet, path, "")
		if r.Status != http.StatusOK || string(r.Body) != body {
			t.Errorf("GET %s: %d %q, want 200 %q", path, r.Status, r.Body, body)
		}
		if id := r.Header.Get("X-Gw-Request-Id"); id != "" {
			t.Errorf("GET %s: served by the gateway (request id %s), want the file server", path, id)
		}
	}

	// An API route is still the gateway's.
	r := g.do(t, http.MethodGet, "/v1/models", "", bearer(boot)...)
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"gw-auto"`) {
		t.Errorf("GET /v1/models: %d %s", r.Status, r.Body)
	}
	expectRequestID(t, r, "req-")

	// Own paths the file server has nothing for answer the gateway's 404.
	const (
		chat     = `{"error":{"message":"<string>","type":"not_found_error","param":null,"code":"not_found"}}`
		messages = `{"type":"error","error":{"type":"not_found_error","message":"<string>"}}`
	)
	for _, tc := range []struct{ method, path, want, hint string }{
		{"POST", "/v1/unknown", chat, "no route /v1/unknown on this gateway"},
		{"GET", "/images/missing.png", chat, "no route /images/missing.png"},
		{"POST", "/chat/completions", chat, g.BaseURL + "/v1 (it is missing /v1)"},
		{"POST", "/messages", messages, "the messages-style base address is " + g.BaseURL + "/alt"},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			r := g.do(t, tc.method, tc.path, `{}`, bearer(boot)...)
			expectError(t, r, http.StatusNotFound, tc.want, "req-")
			if !strings.Contains(string(r.Body), tc.hint) {
				t.Errorf("body %s does not say %q", r.Body, tc.hint)
			}
		})
	}

	// Any other missing path is the file server's own 404.
	if r := g.do(t, http.MethodGet, "/missing.html", ""); r.Status != http.StatusNotFound || r.Header.Get("X-Gw-Request-Id") != "" {
		t.Errorf("GET /missing.html: %d (request id %q), want the file server's 404", r.Status, r.Header.Get("X-Gw-Request-Id"))
	}
}

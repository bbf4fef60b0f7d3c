package fetch

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/gwerr"
	"github.com/caddy-gw/caddy-gw/internal/netguard"
	"github.com/caddy-gw/caddy-gw/internal/pipeline"
)

func TestMarkdown(t *testing.T) {
	base, _ := url.Parse("https://example.com/post")
	md, err := Markdown(`<html><head><title>T</title></head><body><nav>menu</nav><article><p>First paragraph with enough words to count as the article body of this page.</p>`+
		`<p>Second paragraph with a <a href="/x">link</a> and <em>emphasis</em> that keeps going for a while longer.</p></article></body></html>`, base)
	if err != nil || !strings.Contains(md, "[link](https://example.com/x)") || !strings.Contains(md, "*emphasis*") {
		t.Fatalf("markdown %q, %v", md, err)
	}
}

func TestSocial(t *testing.T) {
	for host, want := range map[string]bool{"instagram.com": true, "www.facebook.com": true, "m.x.com": true, "x.com.": true,
		"example.com": false, "notx.com": false, "reddit.community": false} {
		if social(host) != want {
			t.Errorf("%s: %v", host, !want)
		}
	}
}

func FuzzMarkdown(f *testing.F) {
	f.Add("<p>hi</p>")
	f.Add("<article><h1>t</h1><table><tr><td>x</td></tr></table></article>")
	f.Add(strings.Repeat("<div>", 200))
	base, _ := url.Parse("https://example.com/")
	f.Fuzz(func(t *testing.T, html string) {
		_, _ = Markdown(html, base) // must not panic or hang
	})
}

// No browser on the machine: render answers 503 capability_unavailable
// (before any money is reserved).
func TestRenderWithoutBrowser(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	h := &Handler{Guard: netguard.New(nil)}
	r := httptest.NewRequest(http.MethodPost, "/v1/fetch", strings.NewReader(`{"url":"https://example.com/","render":true}`))
	err := h.Serve(&pipeline.Call{W: httptest.NewRecorder(), R: r})
	e := gwerr.As(err)
	if gwerr.Fetch.Status(e) != http.StatusServiceUnavailable || gwerr.Fetch.Code(e) != "capability_unavailable" {
		t.Fatalf("err %v", err)
	}
}

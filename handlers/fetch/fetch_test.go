package fetch

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

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

func TestMarkdownTables(t *testing.T) {
	for _, tc := range []struct{ name, html, want string }{
		{"header cells", `<table><thead><tr><th>Name</th><th>Value</th></tr></thead><tbody><tr><td>alpha</td><td>1</td></tr><tr><td>beta</td><td>2</td></tr></tbody></table>`,
			"| Name | Value |\n| --- | --- |\n| alpha | 1 |\n| beta | 2 |"},
		{"no header cells", `<table><tr><td>a</td><td>b</td></tr><tr><td>c</td><td>d</td></tr></table>`,
			"| a | b |\n| --- | --- |\n| c | d |"},
		{"pipes and line breaks", `<table><tr><th>k</th><th>v</th></tr><tr><td>x | y</td><td>one<br>two
three</td></tr><tr><td><code>a|b</code></td><td>back\slash|</td></tr></table>`,
			"| k | v |\n| --- | --- |\n| x \\| y | one two three |\n| `a\\|b` | back\\\\slash\\| |"},
		{"short rows and colspan", `<table><tr><th colspan="2">wide</th><th>c</th></tr><tr><td>only</td></tr></table>`,
			"| wide |  | c |\n| --- | --- | --- |\n| only |  |  |"},
		{"caption", `<table><caption>Prices</caption><tr><th>p</th></tr><tr><td>1</td></tr></table>`,
			"Prices\n\n| p |\n| --- |\n| 1 |"},
		{"nested table stays in its cell", `<table><tr><th>outer</th></tr><tr><td><table><tr><td>in</td></tr></table></td></tr></table>`,
			"| outer |\n| --- |\n| \\| in \\| \\| --- \\| |"},
		{"empty table", `<p>before</p><table></table><p>after</p>`, "before\n\nafter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			md, err := markdownConverter.ConvertString(tc.html)
			if err != nil || strings.TrimSpace(md) != tc.want {
				t.Fatalf("markdown\n%s\nwant\n%s (%v)", md, tc.want, err)
			}
		})
	}
}

func FuzzMarkdown(f *testing.F) {
	f.Add("<p>hi</p>")
	f.Add("<article><h1>t</h1><table><tr><td>x</td></tr></table></article>")
	f.Add(strings.Repeat("<div>", 200))
	f.Add("<table><thead><tr><th>a|b</th><th>c<br>d</th></tr></thead><tbody><tr><td colspan=3>e</td></tr></tbody></table>")
	f.Add("<table><tr><td><table><tr><td>in</td></tr></table></td><td><ul><li>x</li><li>y</li></ul></td></tr></table>")
	f.Add("<table><caption>c</caption><tr><td colspan=999999999>x</td></tr><tr></tr></table>")
	base, _ := url.Parse("https://example.com/")
	f.Fuzz(func(t *testing.T, html string) {
		_, _ = Markdown(html, base) // must not panic or hang
	})
}

// A table of any cell text comes out as a GFM table: one line per row and
// the delimiter row, each with one unescaped "|" per column and one more.
func FuzzMarkdownTable(f *testing.F) {
	f.Add("Name", "Value", "alpha", "1")
	f.Add("a|b", "c\nd", `\|`, "*x*")
	f.Add("", " ", "\u00a0", "|||")
	f.Fuzz(func(t *testing.T, a, b, c, d string) {
		cell := func(s string) string { return html.EscapeString(s) }
		md, err := markdownConverter.ConvertString("<table><tr><th>" + cell(a) + "</th><th>" + cell(b) + "</th></tr><tr><td>" +
			cell(c) + "</td><td>" + cell(d) + "</td></tr></table>")
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(md), "\n")
		if len(lines) != 3 || lines[1] != "| --- | --- |" {
			t.Fatalf("not a 2x2 table: %q", md)
		}
		for _, line := range lines {
			if n := unescapedPipes(line); n != 3 || !strings.HasPrefix(line, "| ") || !strings.HasSuffix(line, " |") {
				t.Fatalf("row %q has %d column separators: %q", line, n, md)
			}
		}
	})
}

// unescapedPipes counts the "|" of s that no backslash escapes.
func unescapedPipes(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '|':
			n++
		}
	}
	return n
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

// The browser's environment is its own profile directory and PATH, LANG
// and TZ: nothing else of the gateway's.
func TestBrowserEnv(t *testing.T) {
	t.Setenv("PATH", "/usr/bin:/bin")
	t.Setenv("LANG", "C.UTF-8")
	t.Setenv("GW_OPENAI_API_KEY", "sk-secret")
	t.Setenv("GW_BOOTSTRAP_KEY", "sk-bootstrap")
	t.Setenv("HOME", "/root")
	t.Setenv("TZ", "")
	os.Unsetenv("TZ") // t.Setenv puts it back afterwards
	got := strings.Join(BrowserEnv("/tmp/profile"), " ")
	want := "HOME=/tmp/profile XDG_CONFIG_HOME=/tmp/profile/.config XDG_CACHE_HOME=/tmp/profile/.cache PATH=/usr/bin:/bin LANG=C.UTF-8"
	if got != want {
		t.Fatalf("env %s, want %s", got, want)
	}
}

// A browser that cannot start (here a stand-in that exits at once; on a
// kernel that refuses its sandbox, Chromium does the same) makes rendering
// unavailable: 503 capability_unavailable, and the cause is logged.
func TestRenderBrowserFailsToStart(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} { // the browser's user (nobody, under root) runs it
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, Browsers[0]), []byte("#!/bin/sh\necho 'No usable sandbox!'\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":/usr/bin:/bin")
	h := &Handler{Guard: netguard.New([]string{"127.0.0.1:9"})}
	h.init()
	core, logs := observer.New(zap.ErrorLevel)
	u, _ := url.Parse("http://127.0.0.1:9/")
	_, err := h.readRendered(context.Background(), u, zap.New(core))
	e := gwerr.As(err)
	if gwerr.Fetch.Status(e) != http.StatusServiceUnavailable || gwerr.Fetch.Code(e) != "capability_unavailable" {
		t.Fatalf("err %v", err)
	}
	// The browser's own words reach the log.
	if l := logs.FilterMessage("page reading: the browser did not start").All(); len(l) != 1 ||
		!strings.Contains(fmt.Sprint(l[0].ContextMap()["error"]), "No usable sandbox!") {
		t.Fatalf("logs %v", logs.All())
	}
}

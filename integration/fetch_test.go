package integration

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/tidwall/gjson"
)

const articleHTML = `<!doctype html><html><head><meta charset="iso-8859-1"><title>Caf&eacute; notes</title></head><body>
<nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<article><h2>Why caf` + "\xe9" + ` matters</h2>
<p>Coffee houses were places where people met, read newspapers and argued about the news of the day for hours on end.</p>
<p>They were sometimes called <strong>penny universities</strong>, because for the price of a cup anyone could listen to the conversation.</p>
<p>Many of the institutions we know today, from insurance markets to stock exchanges, began in rooms full of coffee drinkers.</p>
</article><footer>Copyright</footer></body></html>`

// Page reading through the built gateway against a local test site reached
// through GW_FETCH_ALLOW: Markdown of the main content from the page's own
// charset, the final URL after redirects, plain text, the refusals of the
// flat table, the six-hour cache (not billed) and the web_fetch tool.
func TestFetch(t *testing.T) {
	t.Parallel()
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/article":
			w.Header().Set("Content-Type", "text/html; charset=iso-8859-1")
			_, _ = w.Write([]byte(articleHTML))
		case "/moved":
			http.Redirect(w, r, "/article", http.StatusMovedPermanently)
		case "/notes.txt":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = w.Write([]byte("plain notes\nline two"))
		case "/logo.png":
			w.Header().Set("Content-Type", "image/png")
			_, _ = w.Write([]byte("\x89PNG\r\n\x1a\n"))
		case "/huge":
			w.Header().Set("Content-Type", "text/html")
			_, _ = w.Write([]byte(strings.Repeat("<p>x</p>", 1<<20)))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(site.Close)
	host := strings.TrimPrefix(site.URL, "http://")
	g := startGateway(t, gwOptions{Env: map[string]string{"GW_FETCH_ALLOW": host}})
	key := g.newAccountKey(t, map[string]any{"id": "reader", "plan": "paid", "cleared": true, "balance_usd": "1.00"})

	r := g.do(t, http.MethodPost, "/v1/fetch", `{"url":"`+site.URL+`/moved"}`, bearer(key)...)
	if r.Status != http.StatusOK {
		t.Fatalf("fetch: %d %s", r.Status, r.Body)
	}
	md := gjson.GetBytes(r.Body, "markdown").String()
	if gjson.GetBytes(r.Body, "format").String() != "markdown" || gjson.GetBytes(r.Body, "url").String() != site.URL+"/article" ||
		!strings.Contains(md, "**penny universities**") || !strings.Contains(md, "café") || strings.Contains(md, "Copyright") {
		t.Fatalf("page %s", r.Body)
	}
	if r.Header.Get("X-Gw-Cost-Usd") != "0.002" {
		t.Fatalf("cost %q", r.Header.Get("X-Gw-Cost-Usd"))
	}
	// The same URL again: from the cache, not billed.
	r2 := g.do(t, http.MethodPost, "/v1/fetch", `{"url":"`+site.URL+`/moved"}`, bearer(key)...)
	if r2.Status != 200 || r2.Header.Get("X-Gw-Cost-Usd") != "0.00" || gjson.GetBytes(r2.Body, "markdown").String() != md {
		t.Fatalf("cached read: %d %v %s", r2.Status, r2.Header, r2.Body)
	}
	if r := g.do(t, http.MethodPost, "/v1/fetch", `{"url":"`+site.URL+`/notes.txt"}`, bearer(key)...); r.Status != 200 ||
		gjson.GetBytes(r.Body, "markdown").String() != "plain notes\nline two" {
		t.Fatalf("plain text: %d %s", r.Status, r.Body)
	}
	for _, tc := range []struct {
		name, body string
		status     int
		want       string
	}{
		{"not JSON", `{"url":`, 400, `{"error":"body must be JSON"}`},
		{"no url", `{}`, 400, `{"error":"url required"}`},
		{"blank url", `{"url":" "}`, 400, `{"error":"url required"}`},
		{"metadata address", `{"url":"http://169.254.169.254/latest/meta-data/"}`, 400, `{"error":"blocked target: 169.254.169.254 resolves to a non-public address"}`},
		{"private address", `{"url":"http://10.0.0.1/"}`, 400, `{"error":"blocked target: 10.0.0.1 resolves to a non-public address"}`},
		{"loopback", `{"url":"http://127.0.0.1:9/"}`, 400, `{"error":"blocked target: 127.0.0.1 resolves to a non-public address"}`},
		{"decimal address", `{"url":"http://2130706433/"}`, 400, `{"error":"blocked target: a numeric host must be a plain IP address"}`},
		{"not http", `{"url":"file:///etc/passwd"}`, 400, `{"error":"blocked target: only http and https URLs are read"}`},
		{"social network", `{"url":"https://www.instagram.com/someone/"}`, 400, `{"error":"social_blocked","message":"<string>"}`},
		{"not a page", `{"url":"` + site.URL + `/logo.png"}`, 502, `{"error":"provider failed: image/png is not a page that can be read"}`},
		{"missing page", `{"url":"` + site.URL + `/nope"}`, 502, `{"error":"provider failed: the site answered 404"}`},
		{"huge page", `{"url":"` + site.URL + `/huge"}`, 502, `{"error":"provider failed: the page is larger than 5242880 bytes"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expectError(t, g.do(t, http.MethodPost, "/v1/fetch", tc.body, bearer(key)...), tc.status, tc.want, "req-")
		})
	}
	// Two billed reads: the first of the article and the plain text.
	if l := ledgerOf(t, g, "reader"); len(l) != 2 {
		t.Fatalf("ledger %v", l)
	}
	// The web_fetch tool: a plain read through the route.
	s := mcpSession(t, g.BaseURL+"/mcp-tools/", key)
	res, err := s.CallTool(context.Background(), &sdk.CallToolParams{Name: "web_fetch", Arguments: map[string]any{"url": site.URL + "/notes.txt"}})
	if err != nil || res.IsError {
		t.Fatalf("web_fetch: %v %+v", err, res)
	}
	if out := structured(t, res); out["markdown"] != "plain notes\nline two" || out["cost_microcents"] != float64(0) {
		t.Fatalf("web_fetch %v", out)
	}
}

// render: true loads the page in headless Chromium first, so text a
// script writes is read; the page's own requests go through the address
// guard too: a beacon on a loopback address outside GW_FETCH_ALLOW is
// never reached.
func TestFetchRender(t *testing.T) {
	t.Parallel()
	var beaconHits atomic.Int64
	beacon := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { beaconHits.Add(1) }))
	t.Cleanup(beacon.Close)
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(`<!doctype html><html><head><title>Built by script</title></head><body><div id="app"></div>
<img src="` + beacon.URL + `/img">
<script>
fetch("` + beacon.URL + `/fetch").catch(() => {});
document.getElementById("app").innerHTML = "<article><h2>Rendered heading</h2><p>This paragraph was written by a script after the page loaded, which a plain read never sees.</p><p>A second paragraph keeps the article long enough for the reader to pick it up as the main content.</p></article>";
</script></body></html>`))
	}))
	t.Cleanup(site.Close)
	g := startGateway(t, gwOptions{Env: map[string]string{"GW_FETCH_ALLOW": strings.TrimPrefix(site.URL, "http://")}})
	key := g.newAccountKey(t, map[string]any{"id": "renderer", "plan": "paid", "cleared": true, "balance_usd": "1.00"})

	plain := g.do(t, http.MethodPost, "/v1/fetch", `{"url":"`+site.URL+`/app"}`, bearer(key)...)
	if plain.Status != 200 || strings.Contains(string(plain.Body), "written by a script") {
		t.Fatalf("plain read: %d %s", plain.Status, plain.Body)
	}
	r := g.do(t, http.MethodPost, "/v1/fetch", `{"url":"`+site.URL+`/app","render":true}`, bearer(key)...)
	if r.Status != 200 {
		t.Fatalf("render: %d %s", r.Status, r.Body)
	}
	if md := gjson.GetBytes(r.Body, "markdown").String(); !strings.Contains(md, "written by a script") || !strings.Contains(md, "Rendered heading") {
		t.Fatalf("rendered markdown %q", md)
	}
	if r.Header.Get("X-Gw-Cost-Usd") != "0.005" {
		t.Fatalf("render cost %q", r.Header.Get("X-Gw-Cost-Usd"))
	}
	if n := beaconHits.Load(); n != 0 {
		t.Fatalf("the page's scripts reached a loopback address %d times", n)
	}
	// A rendered read of a blocked target is refused before any browser.
	expectError(t, g.do(t, http.MethodPost, "/v1/fetch", `{"url":"http://10.1.2.3/","render":true}`, bearer(key)...), 400,
		`{"error":"blocked target: 10.1.2.3 resolves to a non-public address"}`, "req-")
}

// A site slower than the read's time-out: 502 provider failed, not
// billed. (The time-out is 25 s by default; the test lowers it with the
// fetch_timeout option.)
func TestFetchSlowPage(t *testing.T) {
	t.Parallel()
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // never answers: the gateway gives up first
	}))
	t.Cleanup(site.Close)
	g := startGateway(t, gwOptions{Caddyfile: withGW(t, "\t\tfetch_timeout 500ms"), Env: map[string]string{"GW_FETCH_ALLOW": strings.TrimPrefix(site.URL, "http://")}})
	key := g.newAccountKey(t, map[string]any{"id": "patient", "plan": "paid", "cleared": true, "balance_usd": "1.00"})
	expectError(t, g.do(t, http.MethodPost, "/v1/fetch", `{"url":"`+site.URL+`/slow"}`, bearer(key)...), 502,
		`{"error":"provider failed: the site took longer than 500ms"}`, "req-")
	if l := ledgerOf(t, g, "patient"); len(l) != 0 {
		t.Fatalf("a failed read was billed: %v", l)
	}
}

// The page cache is kept per account: a page one account read is a fresh,
// billed read for another (its cost tells nothing of what others read),
// and a hit only for the account that read it.
func TestFetchCachePerAccount(t *testing.T) {
	t.Parallel()
	var reads atomic.Int64
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reads.Add(1)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("a page only some accounts read"))
	}))
	t.Cleanup(site.Close)
	g := startGateway(t, gwOptions{Env: map[string]string{"GW_FETCH_ALLOW": strings.TrimPrefix(site.URL, "http://")}})
	keyA := g.newAccountKey(t, map[string]any{"id": "reader-a", "plan": "paid", "cleared": true, "balance_usd": "1.00"})
	keyB := g.newAccountKey(t, map[string]any{"id": "reader-b", "plan": "paid", "cleared": true, "balance_usd": "1.00"})
	body := `{"url":"` + site.URL + `/private-notes"}`
	for i, step := range []struct {
		key, cost string
		reads     int64
	}{
		{keyA, "0.002", 1}, // A reads: billed
		{keyB, "0.002", 2}, // B reads the same URL: a fresh read, billed
		{keyA, "0.00", 2},  // A again: its own cached read
		{keyB, "0.00", 2},  // B again: its own cached read
	} {
		r := g.do(t, http.MethodPost, "/v1/fetch", body, bearer(step.key)...)
		if r.Status != http.StatusOK || gjson.GetBytes(r.Body, "markdown").String() != "a page only some accounts read" {
			t.Fatalf("read %d: %d %s", i, r.Status, r.Body)
		}
		if got := r.Header.Get("X-Gw-Cost-Usd"); got != step.cost {
			t.Errorf("read %d: cost %q, want %q", i, got, step.cost)
		}
		if n := reads.Load(); n != step.reads {
			t.Errorf("read %d: the site was read %d times, want %d", i, n, step.reads)
		}
	}
	for _, account := range []string{"reader-a", "reader-b"} {
		if l := ledgerOf(t, g, account); len(l) != 1 {
			t.Errorf("%s: ledger %v, want one read", account, l)
		}
	}
}

const tablesHTML = `<!doctype html><html><head><title>Metals</title></head><body><article>
<h2>Metal prices</h2>
<p>The table below lists the metals that the workshop keeps in stock this week, with their reference values as counted on Monday morning.</p>
<table><thead><tr><th>Name</th><th>Value</th></tr></thead><tbody>
<tr><td>alpha</td><td>1</td></tr><tr><td>beta</td><td>2</td></tr></tbody></table>
<p>The second table has no header cells: its first row names the columns, as many simple tables on the web do.</p>
<table><tr><td>Metal</td><td>Note</td></tr><tr><td>iron | steel</td><td>first line<br>second
line</td></tr><tr><td><p>copper</p><p>wire</p></td><td><code>a|b</code></td></tr></table>
<p>Prices change every week, so the workshop prints a new copy of these tables every Monday for the counter.</p></article></body></html>`

// Page reading keeps tables as GFM tables: the header row (the first row
// when the table has no header cells), a delimiter row, one line per row;
// a "|" in a cell is escaped and a cell's line breaks become spaces.
func TestFetchTables(t *testing.T) {
	t.Parallel()
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(tablesHTML))
	}))
	t.Cleanup(site.Close)
	g := startGateway(t, gwOptions{Env: map[string]string{"GW_FETCH_ALLOW": strings.TrimPrefix(site.URL, "http://")}})
	key := g.newAccountKey(t, map[string]any{"id": "tabler", "plan": "paid", "cleared": true, "balance_usd": "1.00"})
	r := g.do(t, http.MethodPost, "/v1/fetch", `{"url":"`+site.URL+`/metals"}`, bearer(key)...)
	if r.Status != http.StatusOK {
		t.Fatalf("fetch: %d %s", r.Status, r.Body)
	}
	md := gjson.GetBytes(r.Body, "markdown").String()
	for _, table := range []string{
		"| Name | Value |\n| --- | --- |\n| alpha | 1 |\n| beta | 2 |\n",
		"| Metal | Note |\n| --- | --- |\n| iron \\| steel | first line second line |\n| copper wire | `a\\|b` |\n",
	} {
		if !strings.Contains(md, "\n\n"+table+"\n") {
			t.Errorf("no table\n%s\nin\n%s", table, md)
		}
	}
}

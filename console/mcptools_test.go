package console

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"
	"testing"
	"time"

	"github.com/caddy-gw/caddy-gw/internal/store"
)

// addToolsKey stores a key of account with the given MCP tools.
func addToolsKey(t testing.TB, st store.Store, account, id string, tools []string) {
	t.Helper()
	k := store.Key{ID: id, AccountID: account, Name: "k " + id, Hash: store.HashSecret("sk-" + id), CreatedAt: time.Now(), MCPTools: tools}
	if err := st.CreateKey(context.Background(), k); err != nil {
		t.Fatal(err)
	}
}

// storedTools prints a stored key's MCP tools: "all" for nil, "none" for
// an empty list, else the globs quoted in their order.
func storedTools(t *testing.T, st store.Store, id string) string {
	t.Helper()
	k, err := st.Key(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case k.MCPTools == nil:
		return "all"
	case len(k.MCPTools) == 0:
		return "none"
	}
	return fmt.Sprintf("%q", k.MCPTools)
}

// An account's page shows each key's MCP tools (all, none or its globs)
// in the key table, and each key's tools form holds them.
func TestKeysShowMCPTools(t *testing.T) {
	c, st := newConsole(t)
	addToolsKey(t, st, "acme", "key_all", nil)
	addToolsKey(t, st, "acme", "key_none", []string{})
	addToolsKey(t, st, "acme", "key_some", []string{"github__*", "*__read_*"})
	w := serve(c, request("GET", "/accounts/acme", ""))
	page := w.Body.String()
	if w.Code != http.StatusOK {
		t.Fatalf("GET /accounts/acme: %d", w.Code)
	}
	for _, s := range []string{
		`<th scope="col">Models</th><th scope="col">MCP tools</th>`,
		`<td><code>key_all</code></td><td>all</td><td>all</td>`,
		`<td><code>key_none</code></td><td>all</td><td>none</td>`,
		`<td><code>key_some</code></td><td>all</td><td>github__*, *__read_*</td>`,
		`<form method="post" action="/accounts/acme/keys/key_some/tools" class="stack">`,
		`<input id="mcp-tools-key_all" name="mcp_tools" value="">`,
		`<input id="mcp-tools-key_none" name="mcp_tools" value="none">`,
		`<input id="mcp-tools-key_some" name="mcp_tools" value="github__*, *__read_*">`,
		`<input id="key-mcp-tools" name="mcp_tools" value="">`,
		`<details class="caps" id="mcp-key_some"><summary>MCP tools of key k key_some (<code>key_some</code>)</summary>`,
	} {
		if !strings.Contains(page, s) {
			t.Errorf("the page lacks %s", s)
		}
	}
}

// The create form gives the new key the MCP tools it holds: globs, none,
// or every tool when empty; a refused glob shows why with what the form
// held and makes no key.
func TestCreateKeyMCPTools(t *testing.T) {
	c, st := newConsole(t)
	same := []string{"Sec-Fetch-Site", "same-origin"}
	for _, tc := range []struct {
		tools, want string
	}{
		{"github__*, docs__search", `["github__*" "docs__search"]`},
		{" github__* ,, ", `["github__*"]`},
		{"none", "none"},
		{"all", "all"},
		{"", "all"},
	} {
		form := url.Values{"name": {"agent"}, "mcp_tools": {tc.tools}}.Encode()
		w := serve(c, request("POST", "/accounts/acme/keys", form, same...))
		if w.Code != http.StatusCreated {
			t.Fatalf("create with %q: %d\n%s", tc.tools, w.Code, w.Body)
		}
		keys, err := st.Keys(context.Background(), "acme")
		if err != nil {
			t.Fatal(err)
		}
		if got := storedTools(t, st, keys[len(keys)-1].ID); got != tc.want {
			t.Errorf("create with %q: stored %s, want %s", tc.tools, got, tc.want)
		}
	}
	n := keyCount(t, st)
	w := serve(c, request("POST", "/accounts/acme/keys", "name=bad&mcp_tools=github__%5B", same...))
	body := w.Body.String()
	if w.Code != http.StatusBadRequest || !strings.Contains(body, `<p class="error" role="alert">mcp_tools: &#34;github__[&#34;: not a valid glob (syntax error in pattern)</p>`) ||
		!strings.Contains(body, `<input id="key-mcp-tools" name="mcp_tools" value="github__[">`) {
		t.Errorf("a bad glob: %d\n%s", w.Code, body)
	}
	if keyCount(t, st) != n {
		t.Error("a refused create form made a key")
	}
}

// The tools form sets a key's MCP tools, empties them (none) and lets it
// call every tool again (empty or all); a refused one shows why with what
// it held and changes nothing; another account's key is not changed, nor
// is a key from another origin.
func TestMCPToolsForm(t *testing.T) {
	c, st := newConsole(t)
	ctx := context.Background()
	addToolsKey(t, st, "acme", "key_1", nil)
	same := []string{"Sec-Fetch-Site", "same-origin"}
	post := func(key, form string) *http.Response {
		return serve(c, request("POST", "/accounts/acme/keys/"+url.PathEscape(key)+"/tools", form, same...)).Result()
	}
	for _, step := range []struct{ form, want string }{
		{"mcp_tools=github__*,+docs__search", `["github__*" "docs__search"]`},
		{"mcp_tools=none", "none"},
		{"mcp_tools=*__read_*", `["*__read_*"]`},
		{"mcp_tools=", "all"},
		{"mcp_tools=db__%3F", `["db__?"]`},
		{"mcp_tools=all", "all"},
	} {
		r := post("key_1", step.form)
		if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != "/accounts/acme" {
			t.Fatalf("tools form %s: %d %q, want 303 /accounts/acme", step.form, r.StatusCode, r.Header.Get("Location"))
		}
		if got := storedTools(t, st, "key_1"); got != step.want {
			t.Errorf("tools form %s: stored %s, want %s", step.form, got, step.want)
		}
	}
	if r := post("key_1", "mcp_tools=a__b"); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("tools form: %d", r.StatusCode)
	}
	for _, tc := range []struct {
		key, form string
		status    int
		msg       string
	}{
		{"key_1", "mcp_tools=a__%5B", http.StatusBadRequest, `mcp_tools: &#34;a__[&#34;: not a valid glob (syntax error in pattern)`},
		{"key_1", "mcp_tools=a__" + strings.Repeat("x", 200), http.StatusBadRequest, `mcp_tools: &#34;a__` + strings.Repeat("x", 200) + `&#34;: at most 200 characters`},
		{"key_1", "name=x", http.StatusBadRequest, "mcp_tools: the form lacks it"},
		{"key_nobody", "mcp_tools=a__b", http.StatusNotFound, "no key key_nobody on this account"},
	} {
		w := serve(c, request("POST", "/accounts/acme/keys/"+tc.key+"/tools", tc.form, same...))
		if w.Code != tc.status || !strings.Contains(w.Body.String(), `<p class="error" role="alert">`+tc.msg+`</p>`) {
			t.Errorf("%s %s: %d, want %d with %q:\n%s", tc.key, tc.form, w.Code, tc.status, tc.msg, w.Body)
		}
	}
	// A refused form is shown open, with what it held; the create form
	// does not take it for its own.
	w := serve(c, request("POST", "/accounts/acme/keys/key_1/tools", "mcp_tools=a__*,+b__%5B", same...))
	for _, s := range []string{`<details class="caps" id="mcp-key_1" open>`, `<input id="mcp-tools-key_1" name="mcp_tools" value="a__*, b__[">`,
		`<input id="key-mcp-tools" name="mcp_tools" value="">`} {
		if !strings.Contains(w.Body.String(), s) {
			t.Errorf("the refused form's page lacks %s", s)
		}
	}
	if got := storedTools(t, st, "key_1"); got != `["a__b"]` {
		t.Errorf("refused forms changed the tools to %s", got)
	}

	// Another account's key is not changed from this account's page.
	if err := st.CreateAccount(ctx, store.Account{ID: "other", Plan: store.PlanPaid, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	addToolsKey(t, st, "other", "key_theirs", nil)
	if r := post("key_theirs", "mcp_tools=none"); r.StatusCode != http.StatusNotFound {
		t.Errorf("another account's key: %d, want 404", r.StatusCode)
	}
	if got := storedTools(t, st, "key_theirs"); got != "all" {
		t.Errorf("another account's key got the tools %s", got)
	}
	// From another origin, nothing is changed.
	w = serve(c, request("POST", "/accounts/acme/keys/key_1/tools", "mcp_tools=none", "Sec-Fetch-Site", "cross-site"))
	if got := storedTools(t, st, "key_1"); w.Code != http.StatusForbidden || got != `["a__b"]` {
		t.Errorf("a cross-site tools form: %d, tools %s", w.Code, got)
	}
}

// FuzzMCPToolsForm: whatever the tools form holds, the console never
// answers 5xx, and the key's tools stay null or well-formed globs.
func FuzzMCPToolsForm(f *testing.F) {
	for _, s := range []string{"mcp_tools=github__*", "mcp_tools=none", "mcp_tools=", "mcp_tools=all", "mcp_tools=a__%5B", "mcp_tools=%00",
		"mcp_tools=,,,", "mcp_tools=a__b&mcp_tools=c__d", "x=1", "mcp_tools=%E2%80%AE"} {
		f.Add(s)
	}
	c, st := newConsole(f)
	addToolsKey(f, st, "acme", "key_1", nil)
	f.Fuzz(func(t *testing.T, form string) {
		w := serve(c, request("POST", "/accounts/acme/keys/key_1/tools", form, "Sec-Fetch-Site", "same-origin"))
		if w.Code >= 500 {
			t.Fatalf("%q: status %d", form, w.Code)
		}
		k, err := st.Key(context.Background(), "key_1")
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range k.MCPTools {
			if _, err := path.Match(g, ""); g == "" || err != nil {
				t.Fatalf("%q: stored glob %q", form, g)
			}
		}
	})
}

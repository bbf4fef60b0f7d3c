package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/printable"
	"github.com/caddy-gw/caddy-gw/internal/store"
)

// showTools prints a stored key's MCP tools: "all" for nil, "none" for
// an empty list, else the globs quoted in their order.
func showTools(k store.Key) string {
	switch {
	case k.MCPTools == nil:
		return "all"
	case len(k.MCPTools) == 0:
		return "none"
	}
	return fmt.Sprintf("%q", k.MCPTools)
}

// A key's mcp_tools are set when it is made (absent or null: every tool;
// an empty list: none), shown wherever the key is, replaced, emptied and
// cleared (null) by PATCH, and kept by a PATCH of something else.
func TestKeyMCPTools(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.create(`{"id":"acme"}`)
	stored := func(id, want string) {
		t.Helper()
		if k, err := e.st.Key(ctx, id); err != nil || showTools(k) != want {
			t.Errorf("stored key %s: mcp_tools %s, %v; want %s", id, showTools(k), err, want)
		}
	}

	// Made with a list: the answer shows it with the secret.
	r := e.do("POST", "/gw/accounts/acme/keys", `{"name":"agent","mcp_tools":["github__*","*__read_*","docs__search"]}`)
	m, _ := r.body.(map[string]any)
	id, _ := m["id"].(string)
	secret, _ := m["key"].(string)
	some := keyJSON(id, "agent", map[string]any{"mcp_tools": []any{"github__*", "*__read_*", "docs__search"}})
	made := keyJSON(id, "agent", some)
	made["key"] = secret
	e.expect(r, http.StatusCreated, made)
	stored(id, `["github__*" "*__read_*" "docs__search"]`)

	// Made with an empty list, with null and without: none, all, all.
	r = e.do("POST", "/gw/accounts/acme/keys", `{"name":"none","mcp_tools":[]}`)
	none, _ := r.body.(map[string]any)["id"].(string)
	made = keyJSON(none, "none", map[string]any{"mcp_tools": []any{}, "key": r.body.(map[string]any)["key"]})
	e.expect(r, http.StatusCreated, made)
	stored(none, "none")
	nulls, _ := e.makeKey("acme", `{"name":"nulls","mcp_tools":null}`)
	stored(nulls, "all")
	plain, _ := e.makeKey("acme", `{"name":"plain"}`)
	stored(plain, "all")

	// The list and GET of one key show them.
	list := []any{some, keyJSON(none, "none", map[string]any{"mcp_tools": []any{}}), keyJSON(nulls, "nulls", nil), keyJSON(plain, "plain", nil)}
	e.expect(e.do("GET", "/gw/accounts/acme/keys", ""), http.StatusOK, map[string]any{"object": "list", "data": list})
	withSpend := func(k map[string]any) map[string]any {
		out := keyJSON(k["id"].(string), k["name"].(string), k)
		out["spend"] = noSpend
		return out
	}
	e.expect(e.do("GET", "/gw/keys/"+id, ""), http.StatusOK, withSpend(some))
	e.expect(e.do("GET", "/gw/keys/"+none, ""), http.StatusOK, withSpend(keyJSON(none, "none", map[string]any{"mcp_tools": []any{}})))

	// PATCH sets a list on a key of every tool, replaces it, keeps it
	// through a change of something else, empties it and clears it.
	for _, step := range []struct {
		what, body string
		want       map[string]any
		stored     string
	}{
		{"set", `{"mcp_tools":["docs__*"]}`, map[string]any{"mcp_tools": []any{"docs__*"}}, `["docs__*"]`},
		{"replaced", `{"mcp_tools":["a__b","c__[xy]"]}`, map[string]any{"mcp_tools": []any{"a__b", "c__[xy]"}}, `["a__b" "c__[xy]"]`},
		{"kept by a rename and a cap", `{"name":"renamed","daily_cap_usd":"1"}`,
			map[string]any{"name": "renamed", "daily_cap_usd": "1.00", "mcp_tools": []any{"a__b", "c__[xy]"}}, `["a__b" "c__[xy]"]`},
		{"emptied", `{"mcp_tools":[]}`, map[string]any{"name": "renamed", "daily_cap_usd": "1.00", "mcp_tools": []any{}}, "none"},
		{"cleared", `{"mcp_tools":null}`, map[string]any{"name": "renamed", "daily_cap_usd": "1.00", "mcp_tools": nil}, "all"},
	} {
		want := keyJSON(plain, "plain", step.want)
		want["spend"] = noSpend
		e.expect(e.do("PATCH", "/gw/keys/"+plain, step.body), http.StatusOK, want)
		stored(plain, step.stored)
		delete(want, "spend")
		e.expect(e.do("GET", "/gw/accounts/acme/keys", ""), http.StatusOK, map[string]any{"object": "list",
			"data": []any{list[0], list[1], list[2], want}})
	}
	// A key with a list cleared back to every tool.
	e.expect(e.do("PATCH", "/gw/keys/"+id, `{"mcp_tools":null}`), http.StatusOK, withSpend(keyJSON(id, "agent", nil)))
	stored(id, "all")
	// The secret still finds the key, with its tools.
	if k, err := e.st.KeyByHash(ctx, store.HashSecret(secret)); err != nil || k.ID != id || k.MCPTools != nil {
		t.Fatalf("key by its secret after PATCH: %+v, %v", k, err)
	}
}

// A glob at the bounds (MaxMCPToolGlob characters, MaxMCPTools globs) is
// accepted as it is.
func TestKeyMCPToolsAtTheBounds(t *testing.T) {
	e := newEnv(t)
	e.create(`{"id":"acme"}`)
	long := "s__" + strings.Repeat("é", MaxMCPToolGlob-4) + "*"
	many := make([]string, MaxMCPTools)
	for i := range many {
		many[i] = fmt.Sprintf("server%d__*", i)
	}
	for _, list := range [][]string{{long}, many} {
		r := e.do("POST", "/gw/accounts/acme/keys", mustJSON(t, map[string]any{"name": "k", "mcp_tools": list}))
		if r.status != http.StatusCreated || fmt.Sprint(r.body.(map[string]any)["mcp_tools"]) != fmt.Sprint(list) {
			t.Errorf("POST with %d globs (the first %d characters): %d %.200s", len(list), len([]rune(list[0])), r.status, r.raw)
		}
		id, _ := r.body.(map[string]any)["id"].(string)
		if k, err := e.st.Key(context.Background(), id); err != nil || fmt.Sprint(k.MCPTools) != fmt.Sprint(list) {
			t.Errorf("stored: %v, %v", k.MCPTools, err)
		}
	}
}

// mustJSON is v as JSON text.
func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Every malformed mcp_tools is a 400 naming the field, on POST and on
// PATCH alike; none makes a key or changes one.
func TestKeyMCPToolsErrors(t *testing.T) {
	e := newEnv(t)
	e.create(`{"id":"acme"}`)
	id, _ := e.makeKey("acme", `{"name":"k","mcp_tools":["docs__*"]}`)
	const notList = "mcp_tools: must be a list of globs over <server>__<tool> names, or null for every tool"
	tooMany := make([]string, MaxMCPTools+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf(`"s%d__*"`, i)
	}
	long := strings.Repeat("x", MaxMCPToolGlob+1)
	cases := []struct {
		name, tools, msg string
	}{
		{"a string", `"github__*"`, notList},
		{"an object", `{"github":"*"}`, notList},
		{"a number", `7`, notList},
		{"true", `true`, notList},
		{"a list of numbers", `[1,2]`, notList},
		{"a list of lists", `[["a__b"]]`, notList},
		{"an empty glob", `["docs__*",""]`, "mcp_tools: a glob must not be empty"},
		{"a null glob", `["docs__*",null]`, "mcp_tools: a glob must not be empty"},
		{"a glob too long", `["` + long + `"]`, fmt.Sprintf("mcp_tools: %q: at most 200 characters", long)},
		{"a glob with an escape", `["a__\u001b[2J"]`, `mcp_tools: "a__\x1b[2J": ` + printable.ErrNotShown.Error()},
		{"a glob with a line break", `["a__b\nc"]`, `mcp_tools: "a__b\nc": ` + printable.ErrNotShown.Error()},
		{"an unclosed class", `["github__["]`, `mcp_tools: "github__[": not a valid glob (syntax error in pattern)`},
		{"an unclosed class after a star", `["github__*["]`, `mcp_tools: "github__*[": not a valid glob (syntax error in pattern)`},
		{"a trailing escape", `["a__\\"]`, `mcp_tools: "a__\\": not a valid glob (syntax error in pattern)`},
		{"a bad range", `["a__[a-b-c]"]`, `mcp_tools: "a__[a-b-c]": not a valid glob (syntax error in pattern)`},
		{"a bad glob after good ones", `["a__*","b__*","c__["]`, `mcp_tools: "c__[": not a valid glob (syntax error in pattern)`},
		{"too many globs", "[" + strings.Join(tooMany, ",") + "]", "mcp_tools: at most 100 globs"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			e.expectError(e.do("POST", "/gw/accounts/acme/keys", `{"name":"bad","mcp_tools":`+tc.tools+`}`), http.StatusBadRequest, tc.msg)
			e.expectError(e.do("PATCH", "/gw/keys/"+id, `{"name":"changed","mcp_tools":`+tc.tools+`}`), http.StatusBadRequest, tc.msg)
		})
	}
	e.t = t
	// Of an unknown key, a good list is 404.
	e.expectError(e.do("PATCH", "/gw/keys/key_nope", `{"mcp_tools":["a__b"]}`), http.StatusNotFound, "not found")
	// Nothing changed, and no key was made.
	want := keyJSON(id, "k", map[string]any{"mcp_tools": []any{"docs__*"}})
	e.expect(e.do("GET", "/gw/accounts/acme/keys", ""), http.StatusOK, map[string]any{"object": "list", "data": []any{want}})
}

package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// keyShape is the admin API's JSON of a key (its secret only in the
// answer that made it, its spend only when read alone) with no caps, every
// model and no expiry, and the given mcp_tools (JSON text).
func keyShape(id, name, tools string, secret, spend bool) string {
	s := `{"id":"` + id + `","name":"` + name + `","models":null,"expires_at":null,"created_at":"<string>",` +
		`"daily_cap_usd":null,"monthly_cap_usd":null,"total_cap_usd":null,"mcp_tools":` + tools
	if secret {
		s += `,"key":"<string>"`
	}
	if spend {
		s += `,"spend":{"today_usd":"0.00","month_usd":"0.00","total_usd":"0.00"}`
	}
	return s + "}"
}

// adminExpect sends body (JSON text; "" for none) to the admin API and
// checks the status and the whole answer.
func (g *gateway) adminExpect(t testing.TB, method, path, body string, status int, want string) response {
	t.Helper()
	var b []byte
	if body != "" {
		b = []byte(body)
	}
	r := g.adminDo(t, method, path, b, "Content-Type", "application/json")
	if r.Status != status || r.Header.Get("Content-Type") != "application/json" {
		t.Errorf("%s %s %s: %d (%s) %s, want %d", method, path, body, r.Status, r.Header.Get("Content-Type"), r.Body, status)
	}
	matchJSON(t, r.Body, want)
	return r
}

// TestKeyMCPTools: the admin API of the built gateway takes the
// mcp_gateway ability, makes keys with mcp_tools (absent: every tool,
// null; an empty list: none), shows them wherever the key is, sets,
// empties and clears them with PATCH, refuses malformed ones with 400
// naming the field, and keeps them across a restart.
func TestKeyMCPTools(t *testing.T) {
	t.Parallel()
	g := startGateway(t, gwOptions{})
	acct := g.createAccount(t, map[string]any{"id": "acme", "plan": "paid", "cleared": true})
	if got := fmt.Sprint(acct["abilities"]); got != "[transcription speech images search fetch decide apps mcp_gateway]" {
		t.Errorf("a new account's abilities: %s", got)
	}
	only := g.createAccount(t, map[string]any{"id": "toolsonly", "plan": "paid", "abilities": []string{"mcp_gateway"}})
	if got := fmt.Sprint(only["abilities"]); got != "[mcp_gateway]" {
		t.Errorf("an account of the mcp_gateway ability alone: %s", got)
	}
	g.adminExpect(t, http.MethodPatch, "/gw/accounts/acme", `{"abilities":["mcp_gateways"]}`, http.StatusBadRequest,
		`{"error":"abilities: unknown ability \"mcp_gateways\" (known: [transcription speech images search fetch decide apps mcp_gateway])"}`)

	// Made with a list, with none, without.
	r := g.adminExpect(t, http.MethodPost, "/gw/accounts/acme/keys", `{"name":"agent","mcp_tools":["github__*","*__read_*"]}`, http.StatusCreated,
		keyShape("<string>", "agent", `["github__*","*__read_*"]`, true, false))
	agent := r.JSON(t)["id"].(string)
	r = g.adminExpect(t, http.MethodPost, "/gw/accounts/acme/keys", `{"name":"none","mcp_tools":[]}`, http.StatusCreated,
		keyShape("<string>", "none", `[]`, true, false))
	none := r.JSON(t)["id"].(string)
	r = g.adminExpect(t, http.MethodPost, "/gw/accounts/acme/keys", `{"name":"every"}`, http.StatusCreated,
		keyShape("<string>", "every", `null`, true, false))
	every := r.JSON(t)["id"].(string)
	listed := func(agentTools, noneTools, everyTools string) string {
		return `{"object":"list","data":[` + keyShape(agent, "agent", agentTools, false, false) + "," +
			keyShape(none, "none", noneTools, false, false) + "," + keyShape(every, "every", everyTools, false, false) + "]}"
	}
	g.adminExpect(t, http.MethodGet, "/gw/accounts/acme/keys", "", http.StatusOK, listed(`["github__*","*__read_*"]`, `[]`, `null`))
	g.adminExpect(t, http.MethodGet, "/gw/keys/"+agent, "", http.StatusOK, keyShape(agent, "agent", `["github__*","*__read_*"]`, false, true))

	// PATCH sets, replaces, empties and clears (null: every tool again).
	g.adminExpect(t, http.MethodPatch, "/gw/keys/"+every, `{"mcp_tools":["docs__search"]}`, http.StatusOK,
		keyShape(every, "every", `["docs__search"]`, false, true))
	g.adminExpect(t, http.MethodPatch, "/gw/keys/"+none, `{"mcp_tools":null}`, http.StatusOK, keyShape(none, "none", `null`, false, true))
	g.adminExpect(t, http.MethodPatch, "/gw/keys/"+agent, `{"mcp_tools":[]}`, http.StatusOK, keyShape(agent, "agent", `[]`, false, true))
	g.adminExpect(t, http.MethodGet, "/gw/accounts/acme/keys", "", http.StatusOK, listed(`[]`, `null`, `["docs__search"]`))

	// Refused: 400 naming the field, on POST and PATCH, changing nothing.
	tooMany := make([]string, 101)
	for i := range tooMany {
		tooMany[i] = fmt.Sprintf(`"s%d__*"`, i)
	}
	for _, c := range []struct{ tools, msg string }{
		{`["github__["]`, `mcp_tools: \"github__[\": not a valid glob (syntax error in pattern)`},
		{`["a__*","b__[z-a-]"]`, `mcp_tools: \"b__[z-a-]\": not a valid glob (syntax error in pattern)`},
		{`[""]`, `mcp_tools: a glob must not be empty`},
		{`"github__*"`, `mcp_tools: must be a list of globs over <server>__<tool> names, or null for every tool`},
		{`["` + strings.Repeat("x", 201) + `"]`, `mcp_tools: \"` + strings.Repeat("x", 201) + `\": at most 200 characters`},
		{"[" + strings.Join(tooMany, ",") + "]", `mcp_tools: at most 100 globs`},
	} {
		g.adminExpect(t, http.MethodPost, "/gw/accounts/acme/keys", `{"name":"bad","mcp_tools":`+c.tools+`}`, http.StatusBadRequest, `{"error":"`+c.msg+`"}`)
		g.adminExpect(t, http.MethodPatch, "/gw/keys/"+every, `{"mcp_tools":`+c.tools+`}`, http.StatusBadRequest, `{"error":"`+c.msg+`"}`)
	}
	g.adminExpect(t, http.MethodPatch, "/gw/keys/key_nobody", `{"mcp_tools":["a__b"]}`, http.StatusNotFound, `{"error":"not found"}`)

	// Kept by the store across a restart, and still nothing else made.
	g.restart(t)
	g.adminExpect(t, http.MethodGet, "/gw/accounts/acme/keys", "", http.StatusOK, listed(`[]`, `null`, `["docs__search"]`))
}

// TestNodesKeyMCPTools: on two nodes of one PostgreSQL, a key's mcp_tools
// set through one node's admin API are what the other shows, and cleared
// through the other, the first shows them cleared.
func TestNodesKeyMCPTools(t *testing.T) {
	t.Parallel()
	e := newNodes(t, 2, "")
	a, b := e.nodes[0], e.nodes[1]
	a.createAccount(t, map[string]any{"id": "shared", "plan": "paid", "cleared": true})
	r := a.adminExpect(t, http.MethodPost, "/gw/accounts/shared/keys", `{"name":"agent","mcp_tools":["github__*"]}`, http.StatusCreated,
		keyShape("<string>", "agent", `["github__*"]`, true, false))
	id := r.JSON(t)["id"].(string)
	b.adminExpect(t, http.MethodGet, "/gw/keys/"+id, "", http.StatusOK, keyShape(id, "agent", `["github__*"]`, false, true))
	b.adminExpect(t, http.MethodPatch, "/gw/keys/"+id, `{"mcp_tools":[]}`, http.StatusOK, keyShape(id, "agent", `[]`, false, true))
	a.adminExpect(t, http.MethodGet, "/gw/accounts/shared/keys", "", http.StatusOK, `{"object":"list","data":[`+keyShape(id, "agent", `[]`, false, false)+`]}`)
	b.adminExpect(t, http.MethodPatch, "/gw/keys/"+id, `{"mcp_tools":null}`, http.StatusOK, keyShape(id, "agent", `null`, false, true))
	a.adminExpect(t, http.MethodGet, "/gw/keys/"+id, "", http.StatusOK, keyShape(id, "agent", `null`, false, true))
}

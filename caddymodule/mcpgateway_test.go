package caddymodule

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
)

// A configuration of the MCP gateway's servers that cannot work is
// refused when it is loaded (caddy validate too), naming the server and
// what is wrong.
func TestMCPServersValidate(t *testing.T) {
	for _, tc := range []struct{ servers, urls, want string }{
		{`[{"name":"github","url":"https://mcp.example.com/x","auth":{"kind":"bearer","token":"t"},"allow":["get_*"],"price":"0.002"}]`, `[]`, ""},
		{`[]`, `["docs=http://10.0.0.7/mcp,wiki=https://w.example.com/mcp"]`, ""},
		{`[{"name":"a_","url":"http://x/mcp"}]`, `[]`, `mcp_server a_: a name is 1 to 64 characters`},
		{`[{"name":"a__b","url":"http://x/mcp"}]`, `[]`, `mcp_server a__b: a name is`},
		{`[{"name":"has space","url":"http://x/mcp"}]`, `[]`, `a name is`},
		{`[{"name":"s","url":"ftp://x/mcp"}]`, `[]`, `mcp_server s: url: "ftp://x/mcp" is not an http or https URL`},
		{`[{"name":"s","url":"http://x/mcp","auth":{"kind":"basic"}}]`, `[]`, `auth: "basic" is not none, bearer or oauth_client_credentials`},
		{`[{"name":"s","url":"http://x/mcp","auth":{"kind":"bearer"}}]`, `[]`, `auth bearer: the token is empty`},
		{`[{"name":"s","url":"http://x/mcp","auth":{"kind":"oauth_client_credentials","token_url":"http://a/t","client_id":"i"}}]`, `[]`, `the client id and secret are required`},
		{`[{"name":"s","url":"http://x/mcp","auth":{"kind":"oauth_client_credentials","token_url":"nope","client_id":"i","client_secret":"s"}}]`, `[]`, `token url: "nope"`},
		{`[{"name":"s","url":"http://x/mcp","deny":["[a-"]}]`, `[]`, `allow/deny: "[a-" is not a glob`},
		{`[{"name":"s","url":"http://x/mcp","price":"-0.01"}]`, `[]`, `price: -0.01 is below zero`},
		{`[{"name":"s","url":"http://x/mcp","tool_prices":{"bad name":"0.1"}}]`, `[]`, `tool_price bad name 0.10`},
		{`[{"name":"s","url":"http://x/mcp"},{"name":"s","url":"http://y/mcp"}]`, `[]`, `mcp_server s: declared twice`},
		{`[{"name":"docs","url":"http://x/mcp"}]`, `["docs=http://y/mcp"]`, `mcp_server docs: declared twice`},
		{`[]`, `["docs"]`, `mcp_servers: "docs" is not name=url`},
	} {
		cfg := new(caddy.Config)
		src := `{"apps":{"gw":{"mcp_servers":` + tc.servers + `,"mcp_server_urls":` + tc.urls + `}}}`
		if err := caddy.StrictUnmarshalJSON([]byte(src), cfg); err != nil {
			t.Fatal(err)
		}
		err := caddy.Validate(cfg)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s %s: validate says %v, want %q", tc.servers, tc.urls, err, tc.want)
		}
	}
}

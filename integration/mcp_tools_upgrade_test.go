package integration

import (
	"context"
	"net/http"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// listPrice reads an ability alias's list_price_microcents from GET
// /v1/models.
func listPrice(t *testing.T, g *gateway, key, alias string) int64 {
	t.Helper()
	r := g.do(t, http.MethodGet, "/v1/models", "", bearer(key)...)
	for _, row := range r.JSON(t)["data"].([]any) {
		m := row.(map[string]any)
		if p, ok := m["list_price_microcents"].(float64); ok && m["id"] == alias {
			return int64(p)
		}
	}
	t.Fatalf("no list price of %s in %s", alias, r.Body)
	return 0
}

// upgrade_url is the operator's billing page, GW_BILLING_URL in
// Caddyfile.example: every premium_locked and payment_required tool error
// carries it, no other code does, and without GW_BILLING_URL none has the
// field.
func TestMCPToolsUpgradeURL(t *testing.T) {
	t.Parallel()
	const billing = "https://billing.example.test/plans?from=tools"
	for _, tc := range []struct {
		name, url string
	}{{"GW_BILLING_URL set", billing}, {"GW_BILLING_URL empty", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{}
			if tc.url != "" {
				env["GW_BILLING_URL"] = tc.url
			}
			g := startGateway(t, gwOptions{Env: env})
			free := g.newAccountKey(t, map[string]any{"id": "free", "plan": "free"})
			broke := g.newAccountKey(t, map[string]any{"id": "broke", "plan": "paid", "cleared": true, "balance_usd": "0.00"})
			capped := g.newAccountKey(t, map[string]any{"id": "capped", "plan": "paid", "cleared": true, "daily_cap_usd": "0.00"})
			searchOnly := g.newAccountKey(t, map[string]any{"id": "searcher", "plan": "paid", "cleared": true, "abilities": []string{"search"}})
			withURL := func(obj map[string]any) map[string]any {
				if tc.url != "" {
					obj["upgrade_url"] = tc.url
				}
				return obj
			}
			for _, c := range []struct {
				name, key, tool string
				args            map[string]any
				want            map[string]any
			}{
				{"a paid tool on a Free plan", free, "image_generate", map[string]any{"prompt": "a fox"}, withURL(map[string]any{
					"error": "premium_locked", "capability": "images", "message": "images needs a paid plan with a cleared payment",
					"retryable": false, "price_microcents": listPrice(t, g, free, "gw-image")})},
				{"web_fetch on a Free plan", free, "web_fetch", map[string]any{"url": "https://example.com/"}, withURL(map[string]any{
					"error": "payment_required", "capability": "fetch", "message": "fetch needs a paid plan with a cleared payment", "retryable": false})},
				{"a spent balance", broke, "web_search", map[string]any{"query": "weather"}, withURL(map[string]any{
					"error": "payment_required", "capability": "search", "message": "the prepaid balance is used up; add credit to continue", "retryable": false})},
				{"a daily cap reached", capped, "speak", map[string]any{"text": "hello"}, withURL(map[string]any{
					"error": "payment_required", "capability": "speech", "message": "the account's daily spend cap is reached", "retryable": false})},
				{"an ability switched off", searchOnly, "image_generate", map[string]any{"prompt": "a fox"}, map[string]any{
					"error": "ability_disabled", "capability": "images", "message": "images is not switched on for this account", "retryable": false}},
				{"a bad argument", searchOnly, "web_search", map[string]any{"query": " "}, map[string]any{
					"error": "invalid_request", "capability": "search", "message": "query is required", "retryable": false}},
			} {
				s := mcpSession(t, g.BaseURL+"/mcp-tools/", c.key)
				res, err := s.CallTool(context.Background(), &sdk.CallToolParams{Name: c.tool, Arguments: c.args})
				if err != nil || !res.IsError {
					t.Fatalf("%s: %v %+v", c.name, err, res)
				}
				if got, want := jsonText(t, structured(t, res)), jsonText(t, c.want); got != want {
					t.Errorf("%s: error object %s\nwant %s", c.name, got, want)
				}
				// The text block is the same object.
				if text, ok := res.Content[0].(*sdk.TextContent); !ok || text.Text != jsonText(t, c.want) {
					t.Errorf("%s: text content %+v", c.name, res.Content[0])
				}
			}
		})
	}
}

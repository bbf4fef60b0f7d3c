package integration

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-gw/caddy-gw/pricing"
)

// Every paid tool's description in tools/list carries the plan and an
// advisory cost per call computed from the configured prices (changed
// here from the example's, so no fixed text can pass), and
// list_capabilities gives the same figures.
func TestMCPToolsListPrices(t *testing.T) {
	t.Parallel()
	app := sdk.NewServer(&sdk.Implementation{Name: "tracker", Version: "1"}, nil)
	appSrv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return app }, nil))
	t.Cleanup(appSrv.Close)
	cfg := withGW(t, "\t\tfetch_price 0.0031\n\t\tapp_action_price 0.0042")
	const searchLine = "price_per_search 0.025"
	if !strings.Contains(cfg, searchLine) {
		t.Fatalf("Caddyfile.example has no %q", searchLine)
	}
	cfg = strings.Replace(cfg, searchLine, "price_per_search 0.027", 1)
	g := startGateway(t, gwOptions{Caddyfile: cfg, Env: map[string]string{"GW_APPS": "tracker=" + appSrv.URL}})
	paid := g.newAccountKey(t, map[string]any{"id": "lister", "plan": "paid", "cleared": true})
	free := g.newAccountKey(t, map[string]any{"id": "browser", "plan": "free"})

	// The advisory cost of each paid tool: a plain page read, one search,
	// one image at gw-image's price, the 10 seconds a clip is billed at
	// least, 200 characters of speech, one app action.
	want := map[string]int64{
		"web_fetch":      3100,
		"web_search":     27000,
		"image_generate": listPrice(t, g, paid, "gw-image"),
		"transcribe":     listPrice(t, g, paid, "gw-voice") * pricing.TranscriptionMinBilledSeconds,
		"speak":          listPrice(t, g, paid, "gw-voice-speak") * 200,
		"apps_execute":   4200,
	}
	const plan = "Needs a paid plan with a cleared payment."
	for _, who := range []struct {
		name   string
		header []string
	}{{"paid", bearer(paid)}, {"free", bearer(free)}, {"no key", nil}} {
		s := toolsSessionWith(t, g.BaseURL+"/mcp-tools/", who.header...)
		res, err := s.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		seen := 0
		for _, tl := range res.Tools {
			p, isPaid := want[tl.Name]
			cost := fmt.Sprintf("Advisory cost per call: %d microcents (%s USD)", p, pricing.Micro(p))
			switch {
			case isPaid && (!strings.Contains(tl.Description, plan) || !strings.Contains(tl.Description, cost)):
				t.Errorf("%s: %s's description %q lacks %q or %q", who.name, tl.Name, tl.Description, plan, cost)
			case !isPaid && (strings.Contains(tl.Description, plan) || strings.Contains(tl.Description, "Advisory cost")):
				t.Errorf("%s: unpaid %s's description %q names a plan or cost", who.name, tl.Name, tl.Description)
			}
			if isPaid {
				seen++
			}
		}
		if seen != len(want) {
			t.Errorf("%s: %d paid tools listed, want %d", who.name, seen, len(want))
		}
	}

	// list_capabilities: est_microcents per ability, the same figures.
	s := mcpSession(t, g.BaseURL+"/mcp-tools/", paid)
	res, err := s.CallTool(context.Background(), &sdk.CallToolParams{Name: "list_capabilities"})
	if err != nil || res.IsError {
		t.Fatalf("list_capabilities: %v %+v", err, res)
	}
	enabled := structured(t, res)["enabled"].(map[string]any)
	for ability, tool := range map[string]string{"fetch": "web_fetch", "search": "web_search", "images": "image_generate", "transcription": "transcribe", "speech": "speak"} {
		entry, _ := enabled[ability].(map[string]any)
		if entry["premium"] != true || entry["est_microcents"] != float64(want[tool]) {
			t.Errorf("list_capabilities %s: %v, want est_microcents %d", ability, entry, want[tool])
		}
	}
}

package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestConsoleKeyMCPTools drives a key's MCP tools in headless Chromium:
// the create form makes a key with the globs typed, which the key table
// and the admin API then show; the key's tools form empties them (none),
// lets the key call every tool again (an empty field) and sets new globs,
// each shown in the table and held by the admin API; a malformed glob is
// refused with the admin API's reason, the form open on what it held,
// and changes nothing.
func TestConsoleKeyMCPTools(t *testing.T) {
	g := startGateway(t, gwOptions{})
	g.createAccount(t, map[string]any{"id": "acme", "plan": "paid", "cleared": true, "abilities": []string{"mcp_gateway"}})
	ctx, errs := startBrowser(t)
	css := func(sel string) chromedp.CSS { return chromedp.CSS(sel) }
	adminTools := func(id string) string {
		t.Helper()
		k := g.adminJSON(t, http.MethodGet, "/gw/keys/"+id, nil, http.StatusOK).JSON(t)
		return mustJSONText(t, k["mcp_tools"])
	}
	// cellPath is the XPath of the key's MCP tools cell in the key table.
	cellPath := func(id string) string {
		return `//table[@id="keys"]//tr[td/code[normalize-space()="` + id + `"]]/td[3]`
	}
	toolsCell := func(id string) chromedp.Action[string] { return chromedp.Text(chromedp.Search(cellPath(id))) }

	// Made with globs in the create form.
	run(t, ctx, errs, "create a key with MCP tools",
		chromedp.Navigate(g.ConsoleURL+"/accounts/acme"),
		chromedp.SendKeys(css("#key-name"), "agent"),
		chromedp.SendKeys(css("#key-mcp-tools"), "github__*, *__read_*"),
		chromedp.Click(chromedp.Search(`//button[normalize-space()="Create key"]`)),
		chromedp.WaitVisible(css("#new-key")))
	keys := g.adminJSON(t, http.MethodGet, "/gw/accounts/acme/keys", nil, http.StatusOK).JSON(t)["data"].([]any)
	if len(keys) != 1 {
		t.Fatalf("the account has %d keys, want 1", len(keys))
	}
	id := keys[0].(map[string]any)["id"].(string)
	if got := adminTools(id); got != `["github__*","*__read_*"]` {
		t.Errorf("the admin API holds mcp_tools %s, want [\"github__*\",\"*__read_*\"]", got)
	}
	if got := value(t, ctx, "MCP tools cell", toolsCell(id)); got != "github__*, *__read_*" {
		t.Errorf("the key table shows MCP tools %q", got)
	}

	// The tools form: none, every tool, new globs.
	field, button := css("#mcp-tools-"+id), chromedp.Search(fmt.Sprintf(`//button[@aria-label="Set the MCP tools of key agent (%s)"]`, id))
	for _, step := range []struct{ typed, cell, admin string }{
		{"none", "none", `[]`},
		{"", "all", `null`},
		{"docs__search, db__q?", "docs__search, db__q?", `["docs__search","db__q?"]`},
	} {
		actions := []chromedp.Action[chromedp.Void]{
			chromedp.Click(css("#mcp-" + id + " summary")),
			chromedp.WaitVisible(field),
			chromedp.Clear(field),
		}
		if step.typed != "" {
			actions = append(actions, chromedp.SendKeys(field, step.typed))
		}
		actions = append(actions, chromedp.Click(button),
			chromedp.WaitVisible(chromedp.Search(cellPath(id)+`[normalize-space()="`+step.cell+`"]`)))
		run(t, ctx, errs, "set the MCP tools to "+step.typed, actions...)
		if got := adminTools(id); got != step.admin {
			t.Errorf("after %q the admin API holds mcp_tools %s, want %s", step.typed, got, step.admin)
		}
		if got := value(t, ctx, "MCP tools cell", toolsCell(id)); got != step.cell {
			t.Errorf("after %q the key table shows MCP tools %q, want %q", step.typed, got, step.cell)
		}
		if got, want := value(t, ctx, "MCP tools field", chromedp.Value(field)), strings.TrimSpace(step.typed); got != want {
			t.Errorf("after %q the tools field holds %q, want %q", step.typed, got, want)
		}
	}

	// A malformed glob shows why, with the form open on what it held; the
	// page is the answer's 400, which the browser reports as its one
	// error.
	if err := chromedp.Do(ctx,
		chromedp.Click(css("#mcp-"+id+" summary")),
		chromedp.Clear(field),
		chromedp.SendKeys(field, "github__["),
		chromedp.Click(button),
		chromedp.WaitVisible(css("p.error"))); err != nil {
		t.Fatalf("a refused glob: %v", err)
	}
	if got := errs.take(); len(got) != 1 || !strings.Contains(got[0], "status of 400 (Bad Request)") {
		t.Errorf("the refused glob's page reported %q, want its 400 alone", got)
	}
	if got, want := value(t, ctx, "error", chromedp.Text(css("p.error"))), `mcp_tools: "github__[": not a valid glob (syntax error in pattern)`; got != want {
		t.Errorf("the refusal reads %q, want %q", got, want)
	}
	if got := value(t, ctx, "MCP tools field", chromedp.Value(field)); got != "github__[" {
		t.Errorf("the refused form's field holds %q, want what was typed", got)
	}
	if got := adminTools(id); got != `["docs__search","db__q?"]` {
		t.Errorf("a refused form changed mcp_tools to %s", got)
	}
}

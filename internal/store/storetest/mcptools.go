package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/store"
)

// showTools prints a key's MCP tools: "all" for nil, "none" for an empty
// list, else the globs quoted in their order.
func showTools(list []string) string {
	switch {
	case list == nil:
		return "all"
	case len(list) == 0:
		return "none"
	}
	return fmt.Sprintf("%q", list)
}

// A key's MCP tools are stored with it as given (nil: every tool; an
// empty list: none; globs in their order) and read back alike by Key,
// KeyByHash and Keys; UpdateKey sets, replaces, empties and clears them
// and keeps them when it changes something else; a key read is a copy.
func testKeyMCPTools(t *testing.T, st store.Store) {
	ctx := context.Background()
	mustAccount(t, st, store.Account{ID: "acme", Plan: store.PlanPaid})
	keys := []store.Key{
		{ID: "k-all", AccountID: "acme", Hash: "h-all"},
		{ID: "k-none", AccountID: "acme", Hash: "h-none", MCPTools: []string{}},
		{ID: "k-some", AccountID: "acme", Hash: "h-some", MCPTools: []string{"github__*", "*__read_*", "docs__search"}},
	}
	for _, k := range keys {
		if err := st.CreateKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	check := func(when, id, hash, want string) {
		t.Helper()
		if k, err := st.Key(ctx, id); err != nil || showTools(k.MCPTools) != want {
			t.Errorf("%s: Key(%s).MCPTools = %s, %v; want %s", when, id, showTools(k.MCPTools), err, want)
		}
		if k, err := st.KeyByHash(ctx, hash); err != nil || showTools(k.MCPTools) != want {
			t.Errorf("%s: KeyByHash(%s).MCPTools = %s, %v; want %s", when, hash, showTools(k.MCPTools), err, want)
		}
		list, err := st.Keys(ctx, "acme")
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range list {
			if k.ID == id && showTools(k.MCPTools) != want {
				t.Errorf("%s: Keys lists %s with MCPTools %s; want %s", when, id, showTools(k.MCPTools), want)
			}
		}
	}
	some := `["github__*" "*__read_*" "docs__search"]`
	check("made", "k-all", "h-all", "all")
	check("made", "k-none", "h-none", "none")
	check("made", "k-some", "h-some", some)

	// A key read is a copy: changing it changes nothing stored.
	k, err := st.KeyByHash(ctx, "h-some")
	if err != nil {
		t.Fatal(err)
	}
	k.MCPTools[0] = "changed"
	check("after changing a copy", "k-some", "h-some", some)

	update := func(id string, fn func(*store.Key), want string) {
		t.Helper()
		k, err := st.UpdateKey(ctx, id, func(k *store.Key) error { fn(k); return nil })
		if err != nil || showTools(k.MCPTools) != want {
			t.Fatalf("UpdateKey(%s) = %s, %v; want %s", id, showTools(k.MCPTools), err, want)
		}
	}
	update("k-all", func(k *store.Key) { k.MCPTools = []string{"docs__*"} }, `["docs__*"]`)
	check("set", "k-all", "h-all", `["docs__*"]`)
	update("k-all", func(k *store.Key) { k.MCPTools = []string{"a__b", "c__?"} }, `["a__b" "c__?"]`)
	check("replaced", "k-all", "h-all", `["a__b" "c__?"]`)
	update("k-all", func(k *store.Key) { k.Name = "renamed" }, `["a__b" "c__?"]`)
	check("kept by a rename", "k-all", "h-all", `["a__b" "c__?"]`)
	update("k-all", func(k *store.Key) { k.MCPTools = []string{} }, "none")
	check("emptied", "k-all", "h-all", "none")
	update("k-all", func(k *store.Key) { k.MCPTools = nil }, "all")
	check("cleared", "k-all", "h-all", "all")
	update("k-none", func(k *store.Key) { k.MCPTools = nil }, "all")
	check("cleared from none", "k-none", "h-none", "all")
	update("k-some", func(k *store.Key) { k.MCPTools = nil }, "all")
	check("cleared from a list", "k-some", "h-some", "all")
	// The other fields an update writes are untouched by the tools.
	if k, err := st.Key(ctx, "k-all"); err != nil || k.Name != "renamed" || k.Models != nil || k.HasCaps() {
		t.Errorf("k-all after the updates: %+v, %v", k, err)
	}
}

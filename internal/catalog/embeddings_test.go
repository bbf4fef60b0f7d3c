package catalog

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/caddy-gw/caddy-gw/pricing"
)

func price(m pricing.Money) *pricing.Money { return &m }

func embeddingModels() []EmbeddingModel {
	return []EmbeddingModel{
		{ID: "embed-small", Provider: "openai", InputPrice: price(pricing.Micro(20_000))},
		{ID: "embed-large", Provider: "openai", InputPrice: price(pricing.Micro(130_000))},
	}
}

func TestAddEmbeddingsValidation(t *testing.T) {
	for _, tc := range []struct {
		name   string
		models []EmbeddingModel
		def    string
		want   string
	}{
		{"no id", []EmbeddingModel{{Provider: "openai"}}, "", "embedding 0: id is required"},
		{"no price", []EmbeddingModel{{ID: "e", Provider: "openai"}}, "", "embedding e: price is required (0 is a price)"},
		{"unknown provider", []EmbeddingModel{{ID: "e", Provider: "nope"}}, "", `embedding e: unknown provider "nope"`},
		{"messages-style provider", []EmbeddingModel{{ID: "e", Provider: "anthropic"}}, "", `embedding e: provider "anthropic" is not chat-completions-style`},
		{"negative price", []EmbeddingModel{{ID: "e", Provider: "openai", InputPrice: price(-1)}}, "", "embedding e: the price must not be negative"},
		{"twice", []EmbeddingModel{{ID: "e", Provider: "openai", InputPrice: price(0)}, {ID: "e", Provider: "openai", InputPrice: price(0)}}, "", "embedding e: defined twice"},
		{"a chat model's id", []EmbeddingModel{{ID: "mini", Provider: "openai", InputPrice: price(0)}}, "", "embedding mini: the id is taken"},
		{"an alias's id", []EmbeddingModel{{ID: "quick", Provider: "openai", InputPrice: price(0)}}, "", "embedding quick: the id is taken"},
		{"the alias itself", []EmbeddingModel{{ID: AliasEmbed, Provider: "openai", InputPrice: price(0)}}, "", "embedding gw-embed: the id is taken"},
		{"a pinned id", []EmbeddingModel{{ID: "gw-pinned-e", Provider: "openai", InputPrice: price(0)}}, "", "embedding gw-pinned-e: the id is taken"},
		{"unknown default", embeddingModels(), "embed-huge", `embed_model "embed-huge": no such embedding model`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := mustNew(t, "", Alias{Name: "quick", Target: AliasFast})
			err := c.AddEmbeddings(tc.models, tc.def)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	if _, err := New(providers(), models(), nil, []Alias{{Name: AliasEmbed, Target: AliasFast}}, ""); err == nil ||
		!strings.Contains(err.Error(), "alias gw-embed: the name is reserved") {
		t.Errorf("an extra alias named gw-embed: %v", err)
	}
}

func TestEmbeddingResolves(t *testing.T) {
	c := mustNew(t, "")
	if err := c.AddEmbeddings(embeddingModels(), ""); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{
		AliasEmbed: "embed-small", "gw-pinned-embed-large": "embed-large", "embed-large": "embed-large", "embed-small": "embed-small",
		"mini": "", "gw-pinned-mini": "", "gw-auto": "", "": "", "gw-pinned-": "",
	} {
		m, ok := c.Embedding(id)
		if got := ""; ok {
			got = m.ID
			if got != want {
				t.Errorf("Embedding(%q) = %s, want %q", id, got, want)
			}
		} else if want != "" {
			t.Errorf("Embedding(%q) found nothing, want %s", id, want)
		}
	}
	c = mustNew(t, "")
	if err := c.AddEmbeddings(embeddingModels(), "embed-large"); err != nil {
		t.Fatal(err)
	}
	if m, ok := c.Embedding(AliasEmbed); !ok || m.ID != "embed-large" {
		t.Errorf("gw-embed with embed_model embed-large serves %+v", m)
	}
	if _, ok := mustNew(t, "").Embedding(AliasEmbed); ok {
		t.Errorf("gw-embed resolves in a catalogue without embedding models")
	}
}

func TestRowsEmbeddings(t *testing.T) {
	c, err := New(providers(), models()[:1], nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddEmbeddings(embeddingModels(), ""); err != nil {
		t.Fatal(err)
	}
	row := func(id, owner, capability string) map[string]any {
		return map[string]any{"id": id, "object": "model", "created": float64(Created), "owned_by": owner,
			"capability": capability, "entitlement": "open"}
	}
	for _, tc := range []struct {
		name      string
		allowlist []string
		want      []map[string]any
	}{
		{"every model", nil, []map[string]any{
			row("gw-auto", "gw", "chat"), row("gw-fast", "gw", "chat"), row("gw-standard", "gw", "chat"), row("gw-reasoning", "gw", "chat"),
			row("gw-embed", "gw", "embedding"),
			row("gw-pinned-mini", "openai", "chat"),
			row("gw-pinned-embed-small", "openai", "embedding"), row("gw-pinned-embed-large", "openai", "embedding"),
		}},
		{"a key listing the alias and a bare id", []string{"gw-embed", "embed-large"}, []map[string]any{
			row("gw-embed", "gw", "embedding"), row("gw-pinned-embed-large", "openai", "embedding"),
		}},
		{"a chat-only key", []string{"gw-auto"}, []map[string]any{row("gw-auto", "gw", "chat")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, paid := range []bool{true, false} {
				if got := rowsJSON(t, c.Rows(tc.allowlist, paid)); !reflect.DeepEqual(got, tc.want) {
					gb, _ := json.MarshalIndent(got, "", " ")
					t.Errorf("paid=%v rows =\n%s", paid, gb)
				}
			}
		})
	}
}

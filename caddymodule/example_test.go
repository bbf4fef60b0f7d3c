package caddymodule

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/pricing"
)

// TestExampleCaddyfile checks that Caddyfile.example adapts, that its
// catalogue validates, and that every lane has a model of each provider
// format with list prices.
func TestExampleCaddyfile(t *testing.T) {
	src, err := os.ReadFile("../Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	out, warn, err := caddyconfig.GetAdapter("caddyfile").Adapt(src, map[string]any{"filename": "Caddyfile.example"})
	if err != nil {
		t.Fatalf("adapt: %v", err)
	}
	if len(warn) > 0 {
		t.Errorf("adapt warnings: %v", warn)
	}
	var cfg struct {
		Apps struct {
			GW App `json:"gw"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	a := cfg.Apps.GW
	cat, err := catalog.New(a.catalogProviders(), a.Models, a.Abilities, a.Aliases, a.DecideModel)
	if err != nil {
		t.Fatalf("catalog: %v", err)
	}
	if err := cat.AddEmbeddings(a.Embeddings, a.EmbedModel); err != nil {
		t.Fatalf("embeddings: %v", err)
	}
	for id, price := range map[string]string{"text-embedding-3-small": "0.02", "text-embedding-3-large": "0.13", "text-embedding-ada-002": "0.10"} {
		m, ok := cat.Embedding(catalog.PinnedPrefix + id)
		if want, _ := pricing.ParseUSD(price); !ok || m.Rate() != want {
			t.Errorf("embedding %s: %+v, want the list price %s USD/M", id, m, price)
		}
	}
	if m, ok := cat.Embedding(catalog.AliasEmbed); !ok || m.ID != "text-embedding-3-small" {
		t.Errorf("gw-embed serves %+v, want text-embedding-3-small", m)
	}
	for _, lane := range catalog.Lanes {
		formats := map[string]bool{}
		for _, m := range cat.Models {
			if m.Lane == lane {
				if m.InputPrice <= 0 || m.OutputPrice <= 0 {
					t.Errorf("model %s: no list price", m.ID)
				}
				formats[cat.Providers[m.Provider].Format] = true
			}
		}
		if !formats[catalog.FormatOpenAI] || !formats[catalog.FormatAnthropic] {
			t.Errorf("lane %s: formats %v, want both", lane, formats)
		}
	}
	for _, aa := range catalog.AbilityAliases {
		ab, ok := cat.Abilities[aa.ID]
		if !ok || ab.PriceMicrocents == nil {
			t.Errorf("ability %s: missing or without a published price", aa.ID)
		}
	}
	if a.Store.Backend != "sqlite" || a.Store.Dir != "./data" {
		t.Errorf("store %+v, want sqlite in ./data by default", a.Store)
	}
	if a.BootstrapKey != "{env.GW_BOOTSTRAP_KEY}" {
		t.Errorf("bootstrap_key %q must stay a runtime placeholder", a.BootstrapKey)
	}
}

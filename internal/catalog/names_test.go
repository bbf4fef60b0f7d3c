package catalog

import (
	"testing"

	"github.com/caddy-gw/caddy-gw/pricing"
)

// Declares names exactly what the configuration declared: the models,
// the embedding models, the abilities' provider models, gw-decide when
// decision mode is on, and the declared services.
func TestDeclares(t *testing.T) {
	price := pricing.USD(0)
	c := mustNew(t, "mini")
	if err := c.AddEmbeddings([]EmbeddingModel{{ID: "embed-small", Provider: "openai", InputPrice: &price}}, ""); err != nil {
		t.Fatal(err)
	}
	c.Declare("fetch", "", "search-model")
	for name, want := range map[string]bool{
		"mini": true, "sonnet": true, "embed-small": true, "tts-1": true, "whisper-1": true, AliasDecide: true,
		"fetch": true, "search-model": true,
		"": false, "gw-pinned-mini": false, "Mini": false, "mini ": false, "other-model": false, "openai": false,
	} {
		if got := c.Declares(name); got != want {
			t.Errorf("Declares(%q) = %v, want %v", name, got, want)
		}
	}
	if mustNew(t, "").Declares(AliasDecide) {
		t.Error("gw-decide is declared without a decide model")
	}
	if !c.DeclaresProvider("anthropic") || c.DeclaresProvider("mini") || c.DeclaresProvider("") {
		t.Error("DeclaresProvider names something else than the providers")
	}
	var none *Catalog
	if none.Declares("mini") || none.DeclaresProvider("openai") {
		t.Error("a nil catalogue declares something")
	}
}

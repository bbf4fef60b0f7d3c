package catalog

import (
	"fmt"
	"slices"
	"strings"

	"github.com/caddy-gw/caddy-gw/pricing"
)

// Rate is the model's input price (0 when it has none, which AddEmbeddings
// refuses).
func (m *EmbeddingModel) Rate() pricing.Money {
	if m.InputPrice == nil {
		return 0
	}
	return *m.InputPrice
}

// AliasEmbed is the alias of the catalogue's default embedding model.
const AliasEmbed = "gw-embed"

// EmbeddingModel is a backing embedding model, served at POST
// /v1/embeddings as gw-pinned-<id> (or the bare id) and, when it is the
// default, as gw-embed.
type EmbeddingModel struct {
	// ID is the provider's model id (text-embedding-3-small).
	ID string `json:"id"`
	// Provider names the chat-completions-style Provider serving the model.
	Provider string `json:"provider"`
	// InputPrice is the list price in US dollars per million input
	// tokens. It is required (0 is a price): a model without one is never
	// served free by omission.
	InputPrice *pricing.Money `json:"input_price_usd_per_m"`
}

// AddEmbeddings validates the embedding models and adds them to the
// catalogue; def names the one gw-embed serves ("": the first).
func (c *Catalog) AddEmbeddings(models []EmbeddingModel, def string) error {
	if c.embedByID == nil {
		c.embedByID = map[string]*EmbeddingModel{}
	}
	for i := range models {
		m := models[i]
		if m.ID == "" {
			return fmt.Errorf("embedding %d: id is required", i)
		}
		p, ok := c.Providers[m.Provider]
		if !ok {
			return fmt.Errorf("embedding %s: unknown provider %q", m.ID, m.Provider)
		}
		if p.Format != FormatOpenAI {
			return fmt.Errorf("embedding %s: provider %q is not chat-completions-style (format %q)", m.ID, p.Name, FormatOpenAI)
		}
		if m.InputPrice == nil {
			return fmt.Errorf("embedding %s: price is required (0 is a price)", m.ID)
		}
		if *m.InputPrice < 0 {
			return fmt.Errorf("embedding %s: the price must not be negative", m.ID)
		}
		if _, dup := c.embedByID[m.ID]; dup {
			return fmt.Errorf("embedding %s: defined twice", m.ID)
		}
		if c.isReserved(m.ID) || c.isAlias(m.ID) || slices.Contains(c.Unpriced, m.ID) {
			return fmt.Errorf("embedding %s: the id is taken by a chat model or an alias", m.ID)
		}
		c.embedByID[m.ID] = &m
		c.Embeddings = append(c.Embeddings, &m)
	}
	switch {
	case def != "":
		if _, ok := c.embedByID[def]; !ok {
			return fmt.Errorf("embed_model %q: no such embedding model in the catalogue", def)
		}
		c.EmbedModel = def
	case len(c.Embeddings) > 0:
		c.EmbedModel = c.Embeddings[0].ID
	}
	return nil
}

func (c *Catalog) isAlias(id string) bool {
	for _, a := range c.Aliases {
		if a.Name == id {
			return true
		}
	}
	return false
}

// Embedding resolves a model id sent to the embeddings endpoint: gw-embed,
// gw-pinned-<id> or the bare id of an embedding model.
func (c *Catalog) Embedding(id string) (*EmbeddingModel, bool) {
	if id == AliasEmbed {
		id = c.EmbedModel
	}
	m, ok := c.embedByID[strings.TrimPrefix(id, PinnedPrefix)]
	return m, ok
}

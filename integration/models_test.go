package integration

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caddy-gw/caddy-gw/pricing"
)

// exampleCatalog is what Caddyfile.example declares: its backing models and
// its ability aliases with their row values.
type exampleCatalog struct {
	Models     []string
	Embeddings []string
	Abilities  map[string]exampleAbility
}

type exampleAbility struct {
	DisplayName     string
	PriceMicrocents int64
}

var (
	reModelBlock   = regexp.MustCompile(`^\s*model\s+(\S+)\s*\{\s*$`)
	reAbilityBlock = regexp.MustCompile(`^\s*ability\s+(\S+)\s*\{\s*$`)
	reEmbedBlock   = regexp.MustCompile(`^\s*embedding\s+(\S+)\s*\{\s*$`)
	reOption       = regexp.MustCompile(`^\s*(\S+)\s+(.+?)\s*$`)
)

// cloudProviders are the example's providers of the clouds' own APIs:
// the gateways of these tests have no credentials for them, so their
// models are left out.
var cloudProviders = map[string]bool{"gemini": true, "vertex": true, "bedrock": true}

// parseExample reads the model, embedding and ability blocks of a Caddyfile's global
// gw option; the models of cloudProviders are not listed.
func parseExample(t testing.TB, text string) exampleCatalog {
	t.Helper()
	c := exampleCatalog{Abilities: map[string]exampleAbility{}}
	var ability, model string
	for _, line := range strings.Split(text, "\n") {
		if model != "" {
			if strings.TrimSpace(line) == "}" {
				model = ""
			} else if m := reOption.FindStringSubmatch(line); m != nil && m[1] == "provider" && cloudProviders[m[2]] {
				c.Models = c.Models[:len(c.Models)-1]
				model = ""
			}
			continue
		}
		if ability != "" {
			if strings.TrimSpace(line) == "}" {
				ability = ""
				continue
			}
			m := reOption.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			a := c.Abilities[ability]
			switch m[1] {
			case "display_name":
				v := m[2]
				if u, err := strconv.Unquote(v); err == nil {
					v = u
				}
				a.DisplayName = v
			case "price": // USD per unit
				v, err := pricing.ParseUSD(m[2])
				if err != nil {
					t.Fatalf("Caddyfile.example: ability %s: price %q", ability, m[2])
				}
				a.PriceMicrocents = v.Microcents()
			case "image_price": // <quality> <size>=<USD>...: the row shows the lowest
				for _, pair := range strings.Fields(m[2])[1:] {
					_, amount, _ := strings.Cut(pair, "=")
					v, err := pricing.ParseUSD(amount)
					if err != nil {
						t.Fatalf("Caddyfile.example: ability %s: image_price %q", ability, pair)
					}
					if n := v.Microcents(); a.PriceMicrocents == 0 || n < a.PriceMicrocents {
						a.PriceMicrocents = n
					}
				}
			}
			c.Abilities[ability] = a
			continue
		}
		if m := reModelBlock.FindStringSubmatch(line); m != nil {
			c.Models = append(c.Models, m[1])
			model = m[1]
		} else if m := reEmbedBlock.FindStringSubmatch(line); m != nil {
			c.Embeddings = append(c.Embeddings, m[1])
		} else if m := reAbilityBlock.FindStringSubmatch(line); m != nil {
			ability = m[1]
			c.Abilities[ability] = exampleAbility{}
		}
	}
	if len(c.Models) == 0 || len(c.Abilities) == 0 || len(c.Embeddings) == 0 {
		t.Fatalf("Caddyfile.example: found %d models, %d embedding models and %d abilities; the parser is out of date",
			len(c.Models), len(c.Embeddings), len(c.Abilities))
	}
	return c
}

// The aliases GET /v1/models lists.
var (
	chatAliases = []string{"gw-auto", "gw-fast", "gw-standard", "gw-reasoning"}
	// abilityRows: capability, price unit and fewest billed units per
	// ability alias (transcription bills at least 10 s).
	abilityRows = map[string]struct {
		capability, unit string
		minUnits         float64
	}{
		"gw-image":          {"image", "image", 1},
		"gw-image-pro":      {"image", "image", 1},
		"gw-voice":          {"audio", "audio_second", 10},
		"gw-voice-accurate": {"audio", "audio_second", 10},
		"gw-voice-fast":     {"audio", "audio_second", 10},
		"gw-voice-speak":    {"speech", "character", 1},
		"gw-voice-speak-hd": {"speech", "character", 1},
	}
)

// expectedIDs is every id GET /v1/models lists for an unrestricted key on
// Caddyfile.example.
func expectedIDs(c exampleCatalog) []string {
	ids := append([]string{}, chatAliases...)
	ids = append(ids, "gw-decide")
	for id := range abilityRows {
		ids = append(ids, id)
	}
	for _, m := range c.Models {
		ids = append(ids, "gw-pinned-"+m)
	}
	if len(c.Embeddings) > 0 {
		ids = append(ids, "gw-embed")
	}
	for _, m := range c.Embeddings {
		ids = append(ids, "gw-pinned-"+m)
	}
	return ids
}

// rowsByID decodes a 200 model list into raw rows by id.
func rowsByID(t testing.TB, r response) map[string]map[string]any {
	t.Helper()
	modelIDs(t, r) // checks the wrapper
	var list struct {
		Data []map[string]any `json:"data"`
	}
	if err := json.Unmarshal(r.Body, &list); err != nil {
		t.Fatal(err)
	}
	rows := map[string]map[string]any{}
	for _, row := range list.Data {
		id := row["id"].(string)
		if _, dup := rows[id]; dup {
			t.Errorf("model id %s listed twice", id)
		}
		rows[id] = row
	}
	return rows
}

func TestBootstrapModelList(t *testing.T) {
	t.Parallel()
	const boot = "sk-bootstrap-models-test-0123456789"
	g := startGateway(t, gwOptions{BootstrapKey: boot})
	example := parseExample(t, exampleCaddyfile(t))
	want := expectedIDs(example)

	t.Run("openai-go lists every alias", func(t *testing.T) {
		client := openai.NewClient(option.WithBaseURL(g.BaseURL+"/v1"), option.WithAPIKey(boot), option.WithMaxRetries(0))
		page, err := client.Models.List(context.Background())
		if err != nil {
			t.Fatalf("Models.List: %v", err)
		}
		var got []string
		for _, m := range page.Data {
			got = append(got, m.ID)
			if m.Object != "model" || m.Created == 0 || m.OwnedBy == "" {
				t.Errorf("row %s: object %q created %d owned_by %q", m.ID, m.Object, m.Created, m.OwnedBy)
			}
			for _, f := range []string{"capability", "entitlement"} {
				if _, ok := m.JSON.ExtraFields[f]; !ok {
					t.Errorf("row %s: the SDK sees no %s field", m.ID, f)
				}
			}
		}
		if !sameSet(got, want) || len(got) != len(want) {
			t.Errorf("ids %v\nwant %v", got, want)
		}
	})

	t.Run("raw rows of the paid cleared bootstrap account", func(t *testing.T) {
		r := g.do(t, "GET", "/v1/models", "", bearer(boot)...)
		expectRequestID(t, r, "req-")
		rows := rowsByID(t, r)
		checkRows(t, rows, example, "paid_cleared")
		if len(rows) != len(want) {
			t.Errorf("%d rows, want %d", len(rows), len(want))
		}
	})

	t.Run("free account sees premium_locked", func(t *testing.T) {
		key := g.newAccountKey(t, map[string]any{"id": "free-models", "plan": "free"})
		rows := rowsByID(t, g.do(t, "GET", "/v1/models", "", bearer(key)...))
		checkRows(t, rows, example, "premium_locked")
	})

	t.Run("paid but uncleared account sees premium_locked", func(t *testing.T) {
		key := g.newAccountKey(t, map[string]any{"id": "uncleared-models", "plan": "paid", "cleared": false})
		rows := rowsByID(t, g.do(t, "GET", "/v1/models", "", bearer(key)...))
		checkRows(t, rows, example, "premium_locked")
	})
}

// checkRows checks every row's exact keys and values; paid is the
// entitlement of paid rows (ability rows and gw-decide).
func checkRows(t *testing.T, rows map[string]map[string]any, example exampleCatalog, paid string) {
	t.Helper()
	for _, id := range expectedIDs(example) {
		row, ok := rows[id]
		if !ok {
			t.Errorf("row %s missing", id)
			continue
		}
		b, _ := json.Marshal(row)
		if ab, isAbility := abilityRows[id]; isAbility {
			ex, declared := example.Abilities[id]
			if !declared {
				t.Errorf("ability %s is listed but not declared in Caddyfile.example", id)
				continue
			}
			want, _ := json.Marshal(map[string]any{
				"id": id, "object": "model", "created": anyNumber, "owned_by": anyString,
				"capability": ab.capability, "entitlement": paid,
				"display_name": ex.DisplayName, "list_price_microcents": ex.PriceMicrocents,
				"price_unit": ab.unit, "min_billed_units": ab.minUnits,
			})
			t.Run(id, func(t *testing.T) { matchJSON(t, b, string(want)) })
			continue
		}
		entitlement, capability := "open", "chat"
		if id == "gw-decide" {
			entitlement = paid
		}
		if id == "gw-embed" || slices.Contains(example.Embeddings, strings.TrimPrefix(id, "gw-pinned-")) {
			capability = "embedding"
		}
		want, _ := json.Marshal(map[string]any{
			"id": id, "object": "model", "created": anyNumber, "owned_by": anyString,
			"capability": capability, "entitlement": entitlement,
		})
		t.Run(id, func(t *testing.T) { matchJSON(t, b, string(want)) })
	}
}

package catalog

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/caddy-gw/caddy-gw/pricing"
)

// Created is the `created` timestamp of every model row: the gateway's
// ids are not dated, so the rows carry one fixed value (2026-01-01 UTC).
const Created int64 = 1767225600

// OwnedBy is the `owned_by` of alias rows; pinned rows carry their provider.
const OwnedBy = "gw"

// Row is one entry of GET /v1/models.
type Row struct {
	ID          string
	OwnedBy     string
	Capability  string
	Entitlement string
	// Ability rows only.
	DisplayName         string
	ListPriceMicrocents *int64 // nil: unpublished, written as null
	PriceUnit           string
	MinBilledUnits      int64
	ability             bool
}

// IsAbility reports whether the row is an ability row.
func (r *Row) IsAbility() bool { return r.ability }

type rowBase struct {
	ID          string `json:"id"`
	Object      string `json:"object"`
	Created     int64  `json:"created"`
	OwnedBy     string `json:"owned_by"`
	Capability  string `json:"capability"`
	Entitlement string `json:"entitlement"`
}

// MarshalJSON writes the standard fields on every row and the ability
// fields (list_price_microcents null when unpublished) on ability rows only.
func (r Row) MarshalJSON() ([]byte, error) {
	b := rowBase{ID: r.ID, Object: "model", Created: Created, OwnedBy: r.OwnedBy, Capability: r.Capability, Entitlement: r.Entitlement}
	if !r.ability {
		return json.Marshal(b)
	}
	return json.Marshal(struct {
		rowBase
		DisplayName         string `json:"display_name"`
		ListPriceMicrocents *int64 `json:"list_price_microcents"`
		PriceUnit           string `json:"price_unit"`
		MinBilledUnits      int64  `json:"min_billed_units"`
	}{b, r.DisplayName, r.ListPriceMicrocents, r.PriceUnit, r.MinBilledUnits})
}

// unitOf gives each ability capability its price unit and fewest billed units.
var unitOf = map[string]struct {
	unit string
	min  int64
}{
	CapImage:  {pricing.UnitImage, 1},
	CapAudio:  {pricing.UnitAudioSecond, pricing.TranscriptionMinBilledSeconds},
	CapSpeech: {pricing.UnitCharacter, 1},
}

// Allowed reports whether a key's allowlist (nil: every model) admits id.
// A pinned id is admitted by its bare model id too.
func Allowed(allowlist []string, id string) bool {
	if allowlist == nil {
		return true
	}
	return slices.Contains(allowlist, id) ||
		(strings.HasPrefix(id, PinnedPrefix) && slices.Contains(allowlist, strings.TrimPrefix(id, PinnedPrefix)))
}

// Rows lists the model rows a key sees: the chat aliases, the extra
// aliases, gw-decide when configured, gw-embed when there is an embedding
// model, the configured ability aliases, and one gw-pinned-<id> row per
// backing chat and embedding model, filtered by the allowlist.
// paidCleared is the account's state, from which entitlements follow.
func (c *Catalog) Rows(allowlist []string, paidCleared bool) []Row {
	paid := EntitlementPremiumLocked
	if paidCleared {
		paid = EntitlementPaidCleared
	}
	rows := []Row{}
	add := func(r Row) {
		if Allowed(allowlist, r.ID) {
			if r.OwnedBy == "" {
				r.OwnedBy = OwnedBy
			}
			rows = append(rows, r)
		}
	}
	for _, id := range []string{AliasAuto, AliasFast, AliasStandard, AliasReasoning} {
		add(Row{ID: id, Capability: CapChat, Entitlement: EntitlementOpen})
	}
	for _, a := range c.Aliases {
		add(Row{ID: a.Name, Capability: CapChat, Entitlement: EntitlementOpen})
	}
	if c.DecideModel != "" {
		add(Row{ID: AliasDecide, Capability: CapChat, Entitlement: paid})
	}
	if c.EmbedModel != "" {
		add(Row{ID: AliasEmbed, Capability: CapEmbedding, Entitlement: EntitlementOpen})
	}
	for _, aa := range AbilityAliases {
		a, ok := c.Abilities[aa.ID]
		if !ok {
			continue
		}
		u := unitOf[aa.Capability]
		add(Row{ID: aa.ID, Capability: aa.Capability, Entitlement: paid, DisplayName: a.DisplayName,
			ListPriceMicrocents: a.PriceMicrocents, PriceUnit: u.unit, MinBilledUnits: u.min, ability: true})
	}
	for _, m := range c.Models {
		add(Row{ID: PinnedPrefix + m.ID, OwnedBy: m.Provider, Capability: CapChat, Entitlement: EntitlementOpen})
	}
	for _, m := range c.Embeddings {
		add(Row{ID: PinnedPrefix + m.ID, OwnedBy: m.Provider, Capability: CapEmbedding, Entitlement: EntitlementOpen})
	}
	return rows
}

package catalog

import (
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

func i64(n int64) *int64 { return &n }

func providers() []Provider {
	return []Provider{
		{Name: "openai", Format: FormatOpenAI, BaseURL: "https://api.openai.com/v1/"},
		{Name: "anthropic", Format: FormatAnthropic, BaseURL: "https://api.anthropic.com",
			DialTimeout: 3 * time.Second, HeaderTimeout: 30 * time.Second, IdleTimeout: 15 * time.Second},
	}
}

func models() []Model {
	return []Model{
		{ID: "mini", Provider: "openai", Lane: LaneFast},
		{ID: "sonnet", Provider: "anthropic", Lane: LaneStandard},
		{ID: "big", Provider: "openai", Lane: LaneReasoning},
	}
}

func abilities() []Ability {
	return []Ability{
		// Deliberately not in AbilityAliases' order: rows follow that order.
		{Alias: "gw-voice-speak", Provider: "openai", Model: "tts-1", DisplayName: "Speech", PriceMicrocents: i64(26)},
		{Alias: "gw-image", Provider: "openai", Model: "img-1", DisplayName: "Image", PriceMicrocents: i64(10000)},
		{Alias: "gw-voice", Provider: "openai", Model: "whisper-1"}, // unpublished, default display name
	}
}

func mustNew(t *testing.T, decide string, aliases ...Alias) *Catalog {
	t.Helper()
	c, err := New(providers(), models(), abilities(), aliases, decide)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNewValidation(t *testing.T) {
	type parts struct {
		providers []Provider
		models    []Model
		abilities []Ability
		aliases   []Alias
	}
	base := func() parts { return parts{providers(), models(), abilities(), nil} }
	cases := []struct {
		name    string
		edit    func(*parts)
		wantErr string
	}{
		{"provider without name", func(p *parts) { p.providers[0].Name = "" }, "provider 0: name is required"},
		{"bad format", func(p *parts) { p.providers[0].Format = "grpc" }, `provider openai: format must be one of [openai anthropic gemini vertex bedrock]`},
		{"empty format", func(p *parts) { p.providers[1].Format = "" }, `provider anthropic: format must be`},
		{"no base url", func(p *parts) { p.providers[0].BaseURL = "" }, "provider openai: base_url is required"},
		{"bad auth", func(p *parts) { p.providers[0].Auth = "basic" }, "provider openai: auth must be one of [bearer api-key none]"},
		{"unpriced twice", func(p *parts) { p.models[0].Unpriced = true; p.models = append(p.models, p.models[0]) }, "model mini: defined twice"},
		{"duplicate provider", func(p *parts) { p.providers = append(p.providers, p.providers[0]) }, "provider openai: defined twice"},
		{"model without id", func(p *parts) { p.models[1].ID = "" }, "model 1: id is required"},
		{"unknown provider", func(p *parts) { p.models[0].Provider = "nope" }, `model mini: unknown provider "nope"`},
		{"bad lane", func(p *parts) { p.models[0].Lane = "turbo" }, "model mini: lane must be one of [fast standard reasoning]"},
		{"empty lane", func(p *parts) { p.models[2].Lane = "" }, "model big: lane must be one of"},
		{"duplicate model", func(p *parts) { p.models = append(p.models, Model{ID: "mini", Provider: "anthropic", Lane: LaneFast}) }, "model mini: defined twice"},
		{"unknown ability alias", func(p *parts) { p.abilities[0].Alias = "gw-video" }, `ability "gw-video": not an ability alias (gw-image, gw-image-pro, gw-voice, gw-voice-accurate, gw-voice-fast, gw-voice-speak, gw-voice-speak-hd)`},
		{"chat alias as ability", func(p *parts) { p.abilities[0].Alias = "gw-auto" }, `ability "gw-auto": not an ability alias (gw-image, gw-image-pro, gw-voice, gw-voice-accurate, gw-voice-fast, gw-voice-speak, gw-voice-speak-hd)`},
		{"gw-decide as ability", func(p *parts) { p.abilities[0].Alias = AliasDecide }, `ability "gw-decide": not an ability alias (gw-image, gw-image-pro, gw-voice, gw-voice-accurate, gw-voice-fast, gw-voice-speak, gw-voice-speak-hd)`},
		{"ability unknown provider", func(p *parts) { p.abilities[1].Provider = "nope" }, `ability gw-image: unknown provider "nope"`},
		{"ability without model", func(p *parts) { p.abilities[1].Model = "" }, "ability gw-image: model is required"},
		{"duplicate ability", func(p *parts) {
			p.abilities = append(p.abilities, Ability{Alias: "gw-image", Provider: "anthropic", Model: "x"})
		}, "ability gw-image: defined twice"},
		{"alias without name", func(p *parts) { p.aliases = []Alias{{Target: "gw-fast"}} }, "alias needs a name and a target"},
		{"alias without target", func(p *parts) { p.aliases = []Alias{{Name: "quick"}} }, "alias needs a name and a target"},
		{"alias named gw-auto", func(p *parts) { p.aliases = []Alias{{Name: "gw-auto", Target: "gw-fast"}} }, "alias gw-auto: the name is reserved"},
		{"alias named a lane alias", func(p *parts) { p.aliases = []Alias{{Name: "gw-reasoning", Target: "gw-fast"}} }, "alias gw-reasoning: the name is reserved"},
		{"alias named gw-decide", func(p *parts) { p.aliases = []Alias{{Name: "gw-decide", Target: "gw-fast"}} }, "alias gw-decide: the name is reserved"},
		{"alias named an ability", func(p *parts) { p.aliases = []Alias{{Name: "gw-voice-speak-hd", Target: "gw-fast"}} }, "alias gw-voice-speak-hd: the name is reserved"},
		{"alias named gw-pinned-x", func(p *parts) { p.aliases = []Alias{{Name: "gw-pinned-x", Target: "gw-fast"}} }, "alias gw-pinned-x: the name is reserved"},
		{"alias named a pinned model", func(p *parts) { p.aliases = []Alias{{Name: "gw-pinned-mini", Target: "gw-fast"}} }, "alias gw-pinned-mini: the name is reserved"},
		{"alias named a model id", func(p *parts) { p.aliases = []Alias{{Name: "sonnet", Target: "gw-fast"}} }, "alias sonnet: the name is reserved"},
		{"alias target an ability", func(p *parts) { p.aliases = []Alias{{Name: "pic", Target: "gw-image"}} }, `alias pic: target "gw-image" is not a chat alias or model`},
		{"alias target gw-decide", func(p *parts) { p.aliases = []Alias{{Name: "d", Target: "gw-decide"}} }, `alias d: target "gw-decide" is not a chat alias or model`},
		{"alias target unknown model", func(p *parts) { p.aliases = []Alias{{Name: "x", Target: "gpt-9"}} }, `alias x: target "gpt-9" is not a chat alias or model`},
		{"alias target unknown pinned", func(p *parts) { p.aliases = []Alias{{Name: "x", Target: "gw-pinned-gpt-9"}} }, `alias x: target "gw-pinned-gpt-9" is not a chat alias or model`},
		{"alias target another extra alias", func(p *parts) { p.aliases = []Alias{{Name: "a", Target: "gw-fast"}, {Name: "b", Target: "a"}} }, `alias b: target "a" is not a chat alias or model`},
		{"duplicate alias", func(p *parts) {
			p.aliases = []Alias{{Name: "quick", Target: "gw-fast"}, {Name: "quick", Target: "gw-reasoning"}}
		}, "alias quick: defined twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := base()
			tc.edit(&p)
			c, err := New(p.providers, p.models, p.abilities, p.aliases, "")
			if err == nil {
				t.Fatalf("New succeeded (%v), want error %q", c, tc.wantErr)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error = %q, want it to contain %q", err, tc.wantErr)
			}
			if c != nil {
				t.Errorf("catalog %v returned with the error", c)
			}
		})
	}
}

func TestNewAccepts(t *testing.T) {
	aliases := []Alias{
		{Name: "quick", Target: AliasFast}, {Name: "default", Target: AliasAuto},
		{Name: "claude", Target: "sonnet"}, {Name: "deep", Target: "gw-pinned-big"},
	}
	c, err := New(providers(), models(), abilities(), aliases, "mini")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.Aliases, aliases) {
		t.Errorf("Aliases = %v", c.Aliases)
	}
	if c.DecideModel != "mini" {
		t.Errorf("DecideModel = %q", c.DecideModel)
	}
	// Empty parts are a valid (empty) catalog.
	empty, err := New(nil, nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(empty.Providers) != 0 || len(empty.Models) != 0 || len(empty.Abilities) != 0 || len(empty.Aliases) != 0 {
		t.Errorf("empty catalog = %+v", empty)
	}
}

func TestNewDefaults(t *testing.T) {
	in := providers()
	c, err := New(in, models(), abilities(), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	oa := c.Providers["openai"]
	if oa.BaseURL != "https://api.openai.com/v1" {
		t.Errorf("BaseURL = %q, want the trailing slash trimmed", oa.BaseURL)
	}
	if oa.DialTimeout != DefaultDialTimeout || oa.HeaderTimeout != DefaultHeaderTimeout || oa.IdleTimeout != DefaultIdleTimeout {
		t.Errorf("openai timeouts = %v %v %v, want the defaults", oa.DialTimeout, oa.HeaderTimeout, oa.IdleTimeout)
	}
	if DefaultDialTimeout != 10*time.Second || DefaultHeaderTimeout != 120*time.Second || DefaultIdleTimeout != 60*time.Second {
		t.Errorf("default timeouts changed: %v %v %v", DefaultDialTimeout, DefaultHeaderTimeout, DefaultIdleTimeout)
	}
	an := c.Providers["anthropic"]
	if an.DialTimeout != 3*time.Second || an.HeaderTimeout != 30*time.Second || an.IdleTimeout != 15*time.Second {
		t.Errorf("anthropic timeouts = %v %v %v, want the configured ones", an.DialTimeout, an.HeaderTimeout, an.IdleTimeout)
	}
	// A negative timeout is replaced too.
	neg := providers()
	neg[0].DialTimeout = -1
	c2, err := New(neg, nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if c2.Providers["openai"].DialTimeout != DefaultDialTimeout {
		t.Errorf("negative dial timeout kept: %v", c2.Providers["openai"].DialTimeout)
	}
	// New does not write through to the caller's slices.
	if in[0].BaseURL != "https://api.openai.com/v1/" || in[0].DialTimeout != 0 {
		t.Errorf("caller's provider changed: %+v", in[0])
	}

	if got := c.Abilities["gw-voice"].DisplayName; got != "gw-voice" {
		t.Errorf("default display name = %q, want the alias", got)
	}
	if got := c.Abilities["gw-image"].DisplayName; got != "Image" {
		t.Errorf("display name = %q, want the configured one", got)
	}
	// Models keep config order and are found by id.
	var ids []string
	for _, m := range c.Models {
		ids = append(ids, m.ID)
	}
	if !slices.Equal(ids, []string{"mini", "sonnet", "big"}) {
		t.Errorf("Models order = %v", ids)
	}
	if m, ok := c.Model("sonnet"); !ok || m.Provider != "anthropic" || m.Lane != LaneStandard {
		t.Errorf("Model(sonnet) = %+v, %v", m, ok)
	}
	if _, ok := c.Model("gw-pinned-sonnet"); ok {
		t.Errorf("Model finds a pinned id")
	}
}

func TestAbilityCapability(t *testing.T) {
	want := map[string]string{
		"gw-image": CapImage, "gw-image-pro": CapImage,
		"gw-voice": CapAudio, "gw-voice-accurate": CapAudio, "gw-voice-fast": CapAudio,
		"gw-voice-speak": CapSpeech, "gw-voice-speak-hd": CapSpeech,
		"gw-auto": "", "gw-decide": "", "gw-voices": "", "": "",
	}
	for id, c := range want {
		if got := AbilityCapability(id); got != c {
			t.Errorf("AbilityCapability(%q) = %q, want %q", id, got, c)
		}
	}
}

// rowsJSON marshals rows and decodes them into generic values.
func rowsJSON(t *testing.T, rows []Row) []map[string]any {
	t.Helper()
	b, err := json.Marshal(rows)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func rowIDs(rows []Row) []string {
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.ID
	}
	return ids
}

func TestRowsExactJSON(t *testing.T) {
	c := mustNew(t, "mini", Alias{Name: "quick", Target: AliasFast})
	for _, paid := range []bool{true, false} {
		ent := EntitlementPremiumLocked
		if paid {
			ent = EntitlementPaidCleared
		}
		chat := func(id, owner string) map[string]any {
			return map[string]any{"id": id, "object": "model", "created": float64(Created), "owned_by": owner,
				"capability": "chat", "entitlement": "open"}
		}
		ability := func(id, capability, name string, price any, unit string, min float64) map[string]any {
			return map[string]any{"id": id, "object": "model", "created": float64(Created), "owned_by": "gw",
				"capability": capability, "entitlement": ent, "display_name": name,
				"list_price_microcents": price, "price_unit": unit, "min_billed_units": min}
		}
		decide := chat("gw-decide", "gw")
		decide["entitlement"] = ent
		want := []map[string]any{
			chat("gw-auto", "gw"), chat("gw-fast", "gw"), chat("gw-standard", "gw"), chat("gw-reasoning", "gw"),
			chat("quick", "gw"),
			decide,
			ability("gw-image", "image", "Image", float64(10000), "image", 1),
			ability("gw-voice", "audio", "gw-voice", nil, "audio_second", 10),
			ability("gw-voice-speak", "speech", "Speech", float64(26), "character", 1),
			chat("gw-pinned-mini", "openai"), chat("gw-pinned-sonnet", "anthropic"), chat("gw-pinned-big", "openai"),
		}
		got := rowsJSON(t, c.Rows(nil, paid))
		if !reflect.DeepEqual(got, want) {
			gb, _ := json.MarshalIndent(got, "", " ")
			wb, _ := json.MarshalIndent(want, "", " ")
			t.Errorf("paid=%v rows =\n%s\nwant\n%s", paid, gb, wb)
		}
	}
}

func TestRowsShape(t *testing.T) {
	c := mustNew(t, "mini")
	rows := c.Rows(nil, true)
	chatKeys := []string{"capability", "created", "entitlement", "id", "object", "owned_by"}
	abilityKeys := []string{"capability", "created", "display_name", "entitlement", "id", "list_price_microcents", "min_billed_units", "object", "owned_by", "price_unit"}
	for i, m := range rowsJSON(t, rows) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		want := chatKeys
		if rows[i].IsAbility() {
			want = abilityKeys
		}
		if !slices.Equal(keys, want) {
			t.Errorf("row %s keys = %v, want %v", rows[i].ID, keys, want)
		}
		if rows[i].IsAbility() != (m["capability"] != "chat") {
			t.Errorf("row %s: IsAbility %v with capability %v", rows[i].ID, rows[i].IsAbility(), m["capability"])
		}
	}
	// The unpublished price is written as an explicit null.
	b, err := json.Marshal(rows[slices.IndexFunc(rows, func(r Row) bool { return r.ID == "gw-voice" })])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"list_price_microcents":null`) {
		t.Errorf("gw-voice row %s lacks list_price_microcents: null", b)
	}
}

func TestRowsOrderAndPresence(t *testing.T) {
	every := []Ability{
		{Alias: "gw-voice-speak-hd", Provider: "openai", Model: "a"},
		{Alias: "gw-voice-fast", Provider: "openai", Model: "a"},
		{Alias: "gw-image-pro", Provider: "openai", Model: "a"},
		{Alias: "gw-voice-speak", Provider: "openai", Model: "a"},
		{Alias: "gw-voice-accurate", Provider: "openai", Model: "a"},
		{Alias: "gw-voice", Provider: "openai", Model: "a"},
		{Alias: "gw-image", Provider: "openai", Model: "a"},
	}
	cases := []struct {
		name      string
		abilities []Ability
		aliases   []Alias
		decide    string
		want      []string
	}{
		{"no decide model, no abilities", nil, nil, "",
			[]string{"gw-auto", "gw-fast", "gw-standard", "gw-reasoning", "gw-pinned-mini", "gw-pinned-sonnet", "gw-pinned-big"}},
		{"decide model set", nil, nil, "big",
			[]string{"gw-auto", "gw-fast", "gw-standard", "gw-reasoning", "gw-decide", "gw-pinned-mini", "gw-pinned-sonnet", "gw-pinned-big"}},
		{"every ability in catalogue order, aliases in config order", every, []Alias{{Name: "z", Target: "gw-auto"}, {Name: "a", Target: "mini"}}, "",
			[]string{"gw-auto", "gw-fast", "gw-standard", "gw-reasoning", "z", "a",
				"gw-image", "gw-image-pro", "gw-voice", "gw-voice-accurate", "gw-voice-fast", "gw-voice-speak", "gw-voice-speak-hd",
				"gw-pinned-mini", "gw-pinned-sonnet", "gw-pinned-big"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(providers(), models(), tc.abilities, tc.aliases, tc.decide)
			if err != nil {
				t.Fatal(err)
			}
			if got := rowIDs(c.Rows(nil, false)); !slices.Equal(got, tc.want) {
				t.Errorf("ids = %v\nwant %v", got, tc.want)
			}
		})
	}
	// Units and minimums by capability.
	c, err := New(providers(), models(), every, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range c.Rows(nil, true) {
		if !r.IsAbility() {
			continue
		}
		unit, minUnits := map[string]string{CapImage: "image", CapAudio: "audio_second", CapSpeech: "character"}[r.Capability],
			map[string]int64{CapImage: 1, CapAudio: 10, CapSpeech: 1}[r.Capability]
		if r.PriceUnit != unit || r.MinBilledUnits != minUnits || r.Entitlement != EntitlementPaidCleared || r.OwnedBy != OwnedBy {
			t.Errorf("row %+v: want unit %s, min %d", r, unit, minUnits)
		}
		if r.ListPriceMicrocents != nil || r.DisplayName != r.ID {
			t.Errorf("row %s: price %v, display %q", r.ID, r.ListPriceMicrocents, r.DisplayName)
		}
	}
}

func TestRowsEntitlements(t *testing.T) {
	c := mustNew(t, "mini", Alias{Name: "quick", Target: "gw-standard"})
	for _, paid := range []bool{true, false} {
		want := EntitlementPremiumLocked
		if paid {
			want = EntitlementPaidCleared
		}
		for _, r := range c.Rows(nil, paid) {
			switch {
			case r.ID == AliasDecide || r.IsAbility():
				if r.Entitlement != want {
					t.Errorf("paid=%v %s entitlement = %q, want %q", paid, r.ID, r.Entitlement, want)
				}
			default:
				if r.Entitlement != EntitlementOpen || r.Capability != CapChat {
					t.Errorf("paid=%v %s = %q/%q, want open chat", paid, r.ID, r.Capability, r.Entitlement)
				}
			}
		}
	}
}

func TestRowsAllowlist(t *testing.T) {
	c := mustNew(t, "mini", Alias{Name: "quick", Target: AliasFast})
	all := rowIDs(c.Rows(nil, true))
	cases := []struct {
		name      string
		allowlist []string
		want      []string
	}{
		{"nil is every row", nil, all},
		{"only gw-auto", []string{"gw-auto"}, []string{"gw-auto"}},
		{"bare model id admits its pinned row", []string{"sonnet"}, []string{"gw-pinned-sonnet"}},
		{"pinned id", []string{"gw-pinned-big"}, []string{"gw-pinned-big"}},
		{"abilities, decide and an extra alias, in row order", []string{"gw-voice", "gw-decide", "quick", "gw-image"}, []string{"quick", "gw-decide", "gw-image", "gw-voice"}},
		{"unconfigured ability has no row", []string{"gw-image-pro"}, []string{}},
		{"unknown id", []string{"gpt-9"}, []string{}},
		{"empty list", []string{}, []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rows := c.Rows(tc.allowlist, true)
			if rows == nil {
				t.Fatal("Rows returned nil")
			}
			if got := rowIDs(rows); !slices.Equal(got, tc.want) {
				t.Errorf("ids = %v, want %v", got, tc.want)
			}
			if len(tc.want) == 0 {
				b, err := json.Marshal(map[string]any{"object": "list", "data": rows})
				if err != nil {
					t.Fatal(err)
				}
				if string(b) != `{"data":[],"object":"list"}` {
					t.Errorf("JSON = %s, want data []", b)
				}
			}
		})
	}
	// An empty catalog still lists the chat aliases; an empty allowlist
	// gives an empty, non-nil list there too.
	empty, err := New(nil, nil, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := rowIDs(empty.Rows(nil, false)); !slices.Equal(got, []string{"gw-auto", "gw-fast", "gw-standard", "gw-reasoning"}) {
		t.Errorf("empty catalog rows = %v", got)
	}
	if rows := empty.Rows([]string{}, false); rows == nil || len(rows) != 0 {
		t.Errorf("empty allowlist rows = %#v", rows)
	}
}

func TestAllowed(t *testing.T) {
	cases := []struct {
		allowlist []string
		id        string
		want      bool
	}{
		{nil, "anything", true},
		{[]string{}, "gw-auto", false},
		{[]string{"gw-auto"}, "gw-auto", true},
		{[]string{"gw-auto"}, "gw-fast", false},
		{[]string{"mini"}, "gw-pinned-mini", true},
		{[]string{"mini"}, "mini", true},
		{[]string{"gw-pinned-mini"}, "mini", false},
		{[]string{"mini"}, "gw-pinned-minis", false},
		{[]string{"gw-image"}, "gw-image-pro", false},
	}
	for _, tc := range cases {
		if got := Allowed(tc.allowlist, tc.id); got != tc.want {
			t.Errorf("Allowed(%v, %q) = %v, want %v", tc.allowlist, tc.id, got, tc.want)
		}
	}
}

// gw-decide needs a model of a chat-completions-style provider; any other
// decide model says why.
func TestDecideTarget(t *testing.T) {
	m, p, err := mustNew(t, "mini").DecideTarget()
	if err != nil || m.ID != "mini" || p.Name != "openai" {
		t.Fatalf("mini: %v %v %v", m, p, err)
	}
	for decide, want := range map[string]string{
		"sonnet": `decide_model "sonnet": its provider "anthropic" is not chat-completions-style (format "openai")`,
		"nope":   `decide_model "nope": no such model in the catalogue`,
		"":       `decide_model "": no such model in the catalogue`,
	} {
		if _, _, err := mustNew(t, decide).DecideTarget(); err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %s", decide, err, want)
		}
	}
}

// TestUnpriced: a model the operator gave no price is left out of the
// catalogue (named in Unpriced); in JSON a model with neither price is
// unpriced, and so is one with only one of its prices; 0 is a price.
func TestUnpriced(t *testing.T) {
	for _, tc := range []struct {
		json     string
		unpriced bool
	}{
		{`{"id":"m","provider":"openai","lane":"fast"}`, true},
		{`{"id":"m","provider":"openai","lane":"fast","input_price_usd_per_m":"0","output_price_usd_per_m":"0"}`, false},
		{`{"id":"m","provider":"openai","lane":"fast","output_price_usd_per_m":"1.5"}`, true},
		{`{"id":"m","provider":"openai","lane":"fast","input_price_usd_per_m":"1.5"}`, true},
		{`{"id":"m","provider":"openai","lane":"fast","input_price_usd_per_m":"0","unpriced":true}`, true},
	} {
		var m Model
		if err := json.Unmarshal([]byte(tc.json), &m); err != nil {
			t.Fatal(err)
		}
		if m.Unpriced != tc.unpriced {
			t.Errorf("%s: unpriced %v, want %v", tc.json, m.Unpriced, tc.unpriced)
		}
	}
	ms := models()
	ms[0].Unpriced = true
	c, err := New(providers(), ms, nil, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Model(ms[0].ID); ok || len(c.Models) != len(ms)-1 || len(c.Unpriced) != 1 || c.Unpriced[0] != ms[0].ID {
		t.Fatalf("models %d, unpriced %v: want %s left out", len(c.Models), c.Unpriced, ms[0].ID)
	}
}

// A cloud provider naming no base URL gets its format's endpoint, with
// its location or region (defaulted when it names none) in it; it holds
// its credentials only with all its format needs.
func TestCloudDefaults(t *testing.T) {
	for _, c := range []struct {
		p       Provider
		base    string
		credits bool
	}{
		{Provider{Format: FormatGemini, APIKey: "k"}, "https://generativelanguage.googleapis.com", true},
		{Provider{Format: FormatGemini}, "https://generativelanguage.googleapis.com", false},
		{Provider{Format: FormatVertex, Project: "p", CredentialsFile: "/k.json"}, "https://us-east5-aiplatform.googleapis.com", true},
		{Provider{Format: FormatVertex, Location: "europe-west1", CredentialsFile: "/k.json"}, "https://europe-west1-aiplatform.googleapis.com", false},
		{Provider{Format: FormatBedrock, AccessKeyID: "a", SecretAccessKey: "s"}, "https://bedrock-runtime.us-east-1.amazonaws.com", true},
		{Provider{Format: FormatBedrock, Region: "eu-west-3", AccessKeyID: "a", BaseURL: "http://127.0.0.1:9"}, "http://127.0.0.1:9", false},
		{Provider{Format: FormatOpenAI, BaseURL: "http://127.0.0.1:9/v1"}, "http://127.0.0.1:9/v1", true},
	} {
		p := c.p
		p.setCloudDefaults()
		if p.BaseURL != c.base || p.HasCredentials() != c.credits {
			t.Errorf("%s %+v: base %q, credentials %v; want %q, %v", c.p.Format, c.p, p.BaseURL, p.HasCredentials(), c.base, c.credits)
		}
	}
	p := Provider{Format: FormatBedrock, Region: "eu-west-3"}
	if p.setCloudDefaults(); p.BaseURL != "https://bedrock-runtime.eu-west-3.amazonaws.com" || p.Region != "eu-west-3" {
		t.Errorf("bedrock in eu-west-3: %q", p.BaseURL)
	}
}

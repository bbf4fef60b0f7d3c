package caddymodule

import (
	"encoding/json"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-gw/caddy-gw/handlers/chat"
	"github.com/caddy-gw/caddy-gw/internal/catalog"
	"github.com/caddy-gw/caddy-gw/routes"
)

// TestConfigurationDocsListEveryOption keeps the Caddyfile reference of
// docs/configuration.md and the syntax block of parseGlobal's doc comment
// in step with the parser: every option of every block's table is in
// each, and neither names an option the parser does not read.
func TestConfigurationDocsListEveryOption(t *testing.T) {
	tables := map[string]options{
		"gw":         globalOptions(new(App)),
		"provider":   providerOptions(new(ProviderConfig)),
		"deployment": deploymentOptions(new(catalog.Deployment)),
		"model":      modelOptions(new(catalog.Model)),
		"embedding":  embeddingOptions(new(catalog.EmbeddingModel)),
		"ability":    abilityOptions(new(catalog.Ability)),
		"search":     searchOptions(new(SearchConfig)),
		"audio":      audioOptions(new(AudioConfig)),
		"images":     imagesOptions(new(ImagesConfig)),
		"money":      moneyOptions(new(MoneyConfig)),
		"limits":     limitsOptions(new(LimitsConfig)),
		"webhooks":   webhooksOptions(new(WebhooksConfig)),
		"runtime":    runtimeOptions(new(RuntimeConfig)),
		"mcp_server": mcpServerOptions(new(MCPServerConfig)),
	}
	parsed := map[string][]string{}
	for block, table := range tables {
		for name := range table {
			parsed[block] = append(parsed[block], name)
		}
	}
	for where, documented := range map[string]map[string][]string{
		"docs/configuration.md":          referenceOptions(t, docsReference(t)),
		"the doc comment of parseGlobal": referenceOptions(t, commentReference(t)),
	} {
		for _, name := range missing(parsed, documented) {
			t.Errorf("the option %s is not in %s", name, where)
		}
		for _, name := range missing(documented, parsed) {
			t.Errorf("%s documents an option %s that the parser does not read", where, name)
		}
	}
}

// missing lists the options of have (block to names) that want lacks, as
// "<block> <name>".
func missing(have, want map[string][]string) []string {
	var out []string
	for block, names := range have {
		for _, name := range names {
			if !slices.Contains(want[block], name) {
				out = append(out, block+" "+name)
			}
		}
	}
	return out
}

// docsReference returns the Caddyfile reference of
// docs/configuration.md.
func docsReference(t *testing.T) string {
	data, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, ref, ok := strings.Cut(string(data), "The global option's fields.")
	if !ok {
		t.Fatal(`docs/configuration.md: no "The global option's fields." section`)
	}
	_, ref, _ = strings.Cut(ref, "```caddyfile\n")
	ref, _, _ = strings.Cut(ref, "```")
	return ref
}

// commentReference returns the syntax block of parseGlobal's doc comment.
func commentReference(t *testing.T) string {
	data, err := os.ReadFile("caddyfile.go")
	if err != nil {
		t.Fatal(err)
	}
	_, doc, ok := strings.Cut(string(data), "// parseGlobal reads")
	if !ok {
		t.Fatal("caddyfile.go: no doc comment of parseGlobal")
	}
	doc, _, _ = strings.Cut(doc, "func parseGlobal")
	var b strings.Builder
	for _, line := range strings.Split(doc, "\n") {
		if code, ok := strings.CutPrefix(line, "//\t"); ok {
			b.WriteString(code + "\n")
		}
	}
	return b.String()
}

// referenceOptions reads the option names of the gw block of a Caddyfile
// reference, by block.
func referenceOptions(t *testing.T, ref string) map[string][]string {
	out := map[string][]string{}
	var stack []string // the open blocks, outermost first
	for _, line := range strings.Split(ref, "\n") {
		line, _, _ = strings.Cut(line, "#")
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		name := fields[0]
		switch {
		case name == "}":
			stack = stack[:len(stack)-1]
			continue
		case name == "{":
			stack = append(stack, "")
			continue
		}
		if slices.Contains(stack, "gw") {
			block := stack[len(stack)-1]
			out[block] = append(out[block], name)
		}
		if fields[len(fields)-1] == "{" {
			stack = append(stack, name)
		}
	}
	if len(stack) != 0 || len(out["gw"]) == 0 {
		t.Fatalf("the reference block is unbalanced or empty (open: %q):\n%s", stack, ref)
	}
	return out
}

// TestConfigurationDocsJSONExample validates the complete JSON config of
// docs/configuration.md as `caddy validate` does: every module decoded
// strictly, provisioned and validated, nothing opened.
func TestConfigurationDocsJSONExample(t *testing.T) {
	t.Setenv("GW_BOOTSTRAP_KEY", "") // the example's bootstrap key expands to nothing
	example := jsonSection(t)
	_, example, ok := strings.Cut(example, "### A complete config")
	if !ok {
		t.Fatal(`docs/configuration.md: no "### A complete config" in the JSON config section`)
	}
	_, example, _ = strings.Cut(example, "```json\n")
	example, _, ok = strings.Cut(example, "```")
	if !ok || strings.TrimSpace(example) == "" {
		t.Fatal("docs/configuration.md: the complete config has no json block")
	}
	cfg := new(caddy.Config)
	if err := caddy.StrictUnmarshalJSON([]byte(example), cfg); err != nil {
		t.Fatalf("the example is not a Caddy config: %v", err)
	}
	if err := caddy.Validate(cfg); err != nil {
		t.Fatalf("the example does not validate: %v", err)
	}
	var apps struct {
		Apps struct {
			GW App `json:"gw"`
		} `json:"apps"`
	}
	if err := json.Unmarshal([]byte(example), &apps); err != nil {
		t.Fatal(err)
	}
	if gw := apps.Apps.GW; len(gw.Providers) == 0 || len(gw.Models) == 0 {
		t.Errorf("the example names no provider or no model: %+v", gw)
	}
}

// jsonObjects are the objects the JSON config section documents, by the
// name of their heading.
var jsonObjects = map[string]reflect.Type{
	"gw":          reflect.TypeFor[App](),
	"providers":   reflect.TypeFor[ProviderConfig](),
	"deployments": reflect.TypeFor[catalog.Deployment](),
	"models":      reflect.TypeFor[catalog.Model](),
	"embeddings":  reflect.TypeFor[catalog.EmbeddingModel](),
	"abilities":   reflect.TypeFor[catalog.Ability](),
	"voices":      reflect.TypeFor[catalog.Voice](),
	"aliases":     reflect.TypeFor[catalog.Alias](),
	"betas":       reflect.TypeFor[chat.BetaPrice](),
	"store":       reflect.TypeFor[StoreConfig](),
	"money":       reflect.TypeFor[MoneyConfig](),
	"limits":      reflect.TypeFor[LimitsConfig](),
	"search":      reflect.TypeFor[SearchConfig](),
	"audio":       reflect.TypeFor[AudioConfig](),
	"images":      reflect.TypeFor[ImagesConfig](),
	"runtime":     reflect.TypeFor[RuntimeConfig](),
	"webhooks":    reflect.TypeFor[WebhooksConfig](),
	"mcp_servers": reflect.TypeFor[MCPServerConfig](),
}

// inlineObjects are objects documented in the type cell of their field's
// row ({"quality", "size", "price_usd"}), by heading and field.
var inlineObjects = map[[2]string]reflect.Type{
	{"abilities", "image_prices"}: reflect.TypeFor[catalog.ImagePrice](),
	{"abilities", "token_prices"}: reflect.TypeFor[catalog.ImageTokenPrices](),
	{"money", "ceiling"}:          reflect.TypeFor[CeilingConfig](),
	{"gw", "durability"}:          reflect.TypeFor[DurabilityConfig](),
}

// TestConfigurationDocsJSONFields keeps the JSON config reference of
// docs/configuration.md in step with the config types: every JSON field
// of every object has its row, and no row names a field the type lacks.
func TestConfigurationDocsJSONFields(t *testing.T) {
	rows := jsonRows(t, jsonSection(t))
	for heading, typ := range jsonObjects {
		documented, ok := rows[heading]
		if !ok {
			t.Errorf("no section for %s (%s)", heading, typ)
			continue
		}
		fields := jsonFields(typ)
		for _, name := range fields {
			if _, ok := documented[name]; !ok {
				t.Errorf("%s: the field %s is not documented", heading, name)
			}
		}
		for name, row := range documented {
			if !slices.Contains(fields, name) {
				t.Errorf("%s: the documented field %s is not one of %s's", heading, name, typ)
			}
			if inner, ok := inlineObjects[[2]string{heading, name}]; ok {
				for _, f := range jsonFields(inner) {
					if !strings.Contains(row, `"`+f+`"`) {
						t.Errorf("%s.%s: the field %q of %s is not in its row", heading, name, f, inner)
					}
				}
			}
		}
	}
	for heading := range rows {
		if _, ok := jsonObjects[heading]; !ok {
			t.Errorf("a section %s documents no known object", heading)
		}
	}
}

// jsonSection returns the "JSON config" section of
// docs/configuration.md.
func jsonSection(t *testing.T) string {
	data, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## JSON config\n")
	if !ok {
		t.Fatal(`docs/configuration.md: no "## JSON config" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	return section
}

// jsonRows reads the tables of the JSON config section: by the name of
// each "### `name`" heading, the rows of its table by their first cell's
// field name.
func jsonRows(t *testing.T, section string) map[string]map[string]string {
	out := map[string]map[string]string{}
	var heading string
	for _, line := range strings.Split(section, "\n") {
		if h, ok := strings.CutPrefix(line, "### "); ok {
			heading = ""
			if name, ok := strings.CutPrefix(h, "`"); ok {
				heading = strings.TrimSuffix(name, "`")
				out[heading] = map[string]string{}
			}
			continue
		}
		cell, ok := strings.CutPrefix(line, "| `")
		if !ok || heading == "" {
			continue
		}
		name, _, _ := strings.Cut(cell, "`")
		if _, dup := out[heading][name]; dup {
			t.Errorf("%s: the field %s has two rows", heading, name)
		}
		out[heading][name] = line
	}
	return out
}

// jsonFields lists the JSON names of a struct's exported fields, those of
// embedded structs included, without the fields JSON never carries.
func jsonFields(typ reflect.Type) []string {
	var out []string
	for f := range typ.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-":
		case f.Anonymous && name == "":
			out = append(out, jsonFields(f.Type)...)
		case name == "":
			out = append(out, f.Name)
		default:
			out = append(out, name)
		}
	}
	return out
}

// TestConfigurationDocsCompose keeps the composition section of
// docs/configuration.md true: its table names every family's directive,
// and its worked examples are the ones the adapt test checks.
func TestConfigurationDocsCompose(t *testing.T) {
	data, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "### Composing families")
	if !ok {
		t.Fatal("docs/configuration.md has no composing section")
	}
	section, _, _ = strings.Cut(section, "\n### ")
	for _, f := range routes.Families {
		if row := "| `" + familyDirective(f) + "` |"; !strings.Contains(section, row) {
			t.Errorf("the composing table has no row %s", row)
		}
	}
	adapt, err := os.ReadFile("testdata/caddyfile_adapt/composition.caddyfiletest")
	if err != nil {
		t.Fatal(err)
	}
	tested, _, _ := strings.Cut(string(adapt), "----------")
	blocks := strings.Split(section, "```caddyfile\n")[1:]
	if len(blocks) == 0 {
		t.Fatal("the composing section has no Caddyfile example")
	}
	for _, b := range blocks {
		b, _, _ = strings.Cut(b, "```")
		if !strings.Contains(tested, b) {
			t.Errorf("the example\n%s\nis not in testdata/caddyfile_adapt/composition.caddyfiletest", b)
		}
	}
}

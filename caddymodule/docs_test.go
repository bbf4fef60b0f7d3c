package caddymodule

import (
	"os"
	"slices"
	"strings"
	"testing"

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
		"runtime":    runtimeOptions(new(RuntimeConfig)),
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

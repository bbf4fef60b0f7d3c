package caddymodule

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-gw/caddy-gw/internal/catalog"
)

// TestConfigurationDocsListEveryOption keeps the Caddyfile reference of
// docs/configuration.md in step with the parser: every option of every
// block's table is in the reference, and the reference names no option
// the parser does not read.
func TestConfigurationDocsListEveryOption(t *testing.T) {
	tables := map[string]options{
		"gw":       globalOptions(new(App)),
		"provider": providerOptions(new(ProviderConfig)),
		"model":    modelOptions(new(catalog.Model)),
		"ability":  abilityOptions(new(catalog.Ability)),
		"search":   searchOptions(new(SearchConfig)),
		"audio":    audioOptions(new(AudioConfig)),
		"images":   imagesOptions(new(ImagesConfig)),
		"money":    moneyOptions(new(MoneyConfig)),
		"limits":   limitsOptions(new(LimitsConfig)),
	}
	documented := docsOptions(t)
	for block, table := range tables {
		for name := range table {
			if !slices.Contains(documented[block], name) {
				t.Errorf("the %s option %q is not in docs/configuration.md", block, name)
			}
		}
	}
	for block, names := range documented {
		table, ok := tables[block]
		if !ok {
			t.Errorf("docs/configuration.md documents a block %q the test knows no table of", block)
			continue
		}
		for _, name := range names {
			if _, ok := table[name]; !ok {
				t.Errorf("docs/configuration.md documents an option %q of the %s block that the parser does not read", name, block)
			}
		}
	}
}

// docsOptions reads the option names of the global gw block of
// docs/configuration.md's Caddyfile reference, by block.
func docsOptions(t *testing.T) map[string][]string {
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
		if len(stack) > 1 && slices.Contains(stack, "gw") {
			block := stack[len(stack)-1]
			out[block] = append(out[block], name)
		}
		if fields[len(fields)-1] == "{" {
			stack = append(stack, name)
		}
	}
	if len(stack) != 0 || len(out["gw"]) == 0 {
		t.Fatalf("docs/configuration.md: the reference block is unbalanced or empty (open: %q)", stack)
	}
	return out
}

package store

import (
	"path"
	"strings"
	"testing"
)

// A key's MCP tools: nil allows every tool, an empty list none, else the
// tools one of its globs matches as path.Match does; a malformed glob
// matches nothing, not even its own text.
func TestAllowsMCPTool(t *testing.T) {
	for _, c := range []struct {
		name  string
		globs []string
		tool  string
		want  bool
	}{
		{"nil list: every tool", nil, "github__create_issue", true},
		{"nil list: any name at all", nil, "", true},
		{"empty list: none", []string{}, "github__create_issue", false},
		{"exact name", []string{"github__create_issue"}, "github__create_issue", true},
		{"exact name, another tool", []string{"github__create_issue"}, "github__create_issues", false},
		{"exact name is case-sensitive", []string{"github__create_issue"}, "GitHub__create_issue", false},
		{"a server's every tool", []string{"github__*"}, "github__list_repos", true},
		{"a server's every tool, another server", []string{"github__*"}, "gitlab__list_repos", false},
		{"a server's glob needs its separator", []string{"github__*"}, "github_list", false},
		{"one kind of tool on every server", []string{"*__read_*"}, "docs__read_page", true},
		{"one kind of tool, another kind", []string{"*__read_*"}, "docs__write_page", false},
		{"the second glob matches", []string{"docs__search", "github__get_*"}, "github__get_file", true},
		{"no glob matches", []string{"docs__search", "github__get_*"}, "github__delete_repo", false},
		{"a character class", []string{"db__query_v[12]"}, "db__query_v2", true},
		{"a character class, outside it", []string{"db__query_v[12]"}, "db__query_v3", false},
		{"one character", []string{"db__q?"}, "db__qa", true},
		{"a star does not cross a slash", []string{"a__*"}, "a__b/c", false},
		{"an escaped star is a star", []string{`a__\*`}, "a__*", true},
		{"an escaped star, another name", []string{`a__\*`}, "a__x", false},
		{"a malformed glob matches nothing", []string{"github__["}, "github__[", false},
		{"a malformed glob, a name its start matches", []string{"github__*["}, "github__x", false},
		{"a malformed glob beside a good one", []string{"docs__[", "docs__*"}, "docs__search", true},
		{"a bad range", []string{"a__[z-a]"}, "a__b", false},
		{"a trailing escape", []string{`a__\`}, `a__\`, false},
	} {
		k := Key{MCPTools: c.globs}
		if got := k.AllowsMCPTool(c.tool); got != c.want {
			t.Errorf("%s: AllowsMCPTool(%q) with %q = %v, want %v", c.name, c.tool, c.globs, got, c.want)
		}
	}
}

// escapeGlob is name as a glob that matches it alone.
func escapeGlob(name string) string {
	var b strings.Builder
	for i := range len(name) {
		if strings.IndexByte(`*?[\`, name[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(name[i])
	}
	return b.String()
}

// AllowsMCPTool never panics; nil allows every name and an empty list
// none; a glob that allows a name is well formed; a name's escaped glob
// allows it.
func FuzzAllowsMCPTool(f *testing.F) {
	for _, s := range [][2]string{
		{"github__*", "github__create_issue"}, {"*__read_*", "docs__read_page"}, {"github__[", "github__["},
		{`a__\`, `a__\`}, {"[^a]__x", "b__x"}, {"", ""}, {"a__[z-a]", "a__b"}, {"*", "a/b"}, {"\xff*", "\xff"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, glob, name string) {
		if !(Key{}).AllowsMCPTool(name) {
			t.Fatalf("a nil list refuses %q", name)
		}
		if (Key{MCPTools: []string{}}).AllowsMCPTool(name) {
			t.Fatalf("an empty list allows %q", name)
		}
		if (Key{MCPTools: []string{glob}}).AllowsMCPTool(name) {
			if _, err := path.Match(glob, name); err != nil {
				t.Fatalf("malformed glob %q allows %q", glob, name)
			}
		}
		if !(Key{MCPTools: []string{escapeGlob(name)}}).AllowsMCPTool(name) {
			t.Fatalf("the escaped glob %q does not allow %q", escapeGlob(name), name)
		}
	})
}

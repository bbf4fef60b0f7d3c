package main

import (
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"testing"
)

// The binary gwbuild builds from the repository's manifest has the main
// package xcaddy v0.4.5 writes for `xcaddy build --with
// github.com/caddy-gw/caddy-gw=.`: Caddy's command, its standard modules
// and a blank import of the module root, so the integration tests run what
// xcaddy builds and a root that stops registering the gateway fails them.
func TestMainImportsLikeXcaddy(t *testing.T) {
	m, _, err := readManifest("../../xcaddy.json")
	if err != nil {
		t.Fatal(err)
	}
	got := mainImports(t, mainSource(m.Plugins, nil))
	want := []string{
		"caddycmd github.com/caddyserver/caddy/v2/cmd",
		"_ github.com/caddyserver/caddy/v2/modules/standard",
		"_ github.com/caddy-gw/caddy-gw",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("imports %q\nwant %q", got, want)
	}
}

// TestWith: -with adds a package of a plugin's module after the plugins,
// and refuses one from elsewhere.
func TestWith(t *testing.T) {
	m, _, err := readManifest("../../xcaddy.json")
	if err != nil {
		t.Fatal(err)
	}
	const bench = "github.com/caddy-gw/caddy-gw/integration/benchsync"
	if err := checkWith(m.Plugins, []string{bench}); err != nil {
		t.Fatal(err)
	}
	got := mainImports(t, mainSource(m.Plugins, []string{bench}))
	if want := "_ " + bench; len(got) != 4 || got[3] != want {
		t.Fatalf("imports %q, want %q last", got, want)
	}
	for _, pkg := range []string{"github.com/caddy-gw/caddy-gwx", "example.com/other"} {
		if err := checkWith(m.Plugins, []string{pkg}); err == nil {
			t.Errorf("-with %s: no error", pkg)
		}
	}
}

// mainImports lists a main.go's imports as "name path".
func mainImports(t *testing.T, src string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", src, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		name := ""
		if imp.Name != nil {
			name = imp.Name.Name
		}
		got = append(got, name+" "+path)
	}
	return got
}

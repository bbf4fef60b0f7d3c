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
	f, err := parser.ParseFile(token.NewFileSet(), "main.go", mainSource(m.Plugins), parser.ImportsOnly)
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
	want := []string{
		"caddycmd github.com/caddyserver/caddy/v2/cmd",
		"_ github.com/caddyserver/caddy/v2/modules/standard",
		"_ github.com/caddy-gw/caddy-gw",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("imports %q\nwant %q", got, want)
	}
}

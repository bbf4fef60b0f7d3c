// Command gwbuild builds a Caddy binary with plugins in it, the way xcaddy
// does, with nothing but Go (no xcaddy binary).
//
// It reads a build manifest, xcaddy.json by default:
//
//	{
//	  "caddy": "v2.11.9",
//	  "plugins": [
//	    {
//	      "module": "github.com/caddy-gw/caddy-gw",
//	      "path": "."
//	    }
//	  ],
//	  "output": "bin/caddy"
//	}
//
// The fields:
//   - caddy: the version of github.com/caddyserver/caddy/v2 to build.
//   - plugins: the Go modules to build in. Each has "module" (its module
//     path) and exactly one of "path" (a local directory, relative to the
//     manifest) or "version" (a module version). "package" is the import
//     path to blank-import so the plugin registers its Caddy modules; it
//     defaults to the module path, which is what xcaddy imports (this
//     repository's manifest relies on that default, so gwbuild and
//     `xcaddy build --with github.com/caddy-gw/caddy-gw` build the same).
//   - output: where to write the binary, relative to the manifest.
//
// gwbuild writes a main.go importing caddycmd, the standard modules and each
// plugin package into a temporary module (its go directive copied from the
// go.mod next to the manifest), adds the requirements and replacements with
// go mod edit, seeds go.sum from the local plugins, then runs go mod tidy and
// go build -trimpath -ldflags "-w -s". GOFLAGS from the environment applies;
// GOWORK is switched off. It prints the path of the binary.
//
// -with names one more package to blank-import (repeat it for more); it
// must be in one of the plugins' modules. The hot-path bench builds
// bin/caddy-bench so, with its fsync handler (integration/benchsync).
//
// Usage:
//
//	go run ./cmd/gwbuild [-manifest xcaddy.json] [-o path] [-with package]
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

type plugin struct {
	Module  string `json:"module"`
	Path    string `json:"path,omitempty"`
	Version string `json:"version,omitempty"`
	Package string `json:"package,omitempty"`
}

type manifest struct {
	Caddy   string   `json:"caddy"`
	Plugins []plugin `json:"plugins"`
	Output  string   `json:"output"`
}

func main() {
	manifestPath := flag.String("manifest", "xcaddy.json", "build manifest")
	output := flag.String("o", "", "output binary (overrides the manifest's output)")
	var with []string
	flag.Func("with", "one more package of a plugin's module to build in (repeatable)", func(pkg string) error {
		with = append(with, pkg)
		return nil
	})
	flag.Parse()
	out, err := build(*manifestPath, *output, with)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gwbuild:", err)
		os.Exit(1)
	}
	fmt.Println(out)
}

// mainSource is the main package of the binary: what xcaddy writes, Caddy's
// command and standard modules plus a blank import of each plugin's package
// (its module root unless the manifest names another), then each package
// of with.
func mainSource(plugins []plugin, with []string) string {
	var imports strings.Builder
	for _, p := range plugins {
		pkg := p.Package
		if pkg == "" {
			pkg = p.Module
		}
		fmt.Fprintf(&imports, "\t_ %q\n", pkg)
	}
	for _, pkg := range with {
		fmt.Fprintf(&imports, "\t_ %q\n", pkg)
	}
	return "package main\n\nimport (\n" +
		"\tcaddycmd \"github.com/caddyserver/caddy/v2/cmd\"\n\n" +
		"\t_ \"github.com/caddyserver/caddy/v2/modules/standard\"\n" +
		imports.String() + ")\n\nfunc main() {\n\tcaddycmd.Main()\n}\n"
}

func build(manifestPath, output string, with []string) (string, error) {
	m, baseDir, err := readManifest(manifestPath)
	if err != nil {
		return "", err
	}
	if err := checkWith(m.Plugins, with); err != nil {
		return "", err
	}
	if output == "" {
		output = filepath.Join(baseDir, m.Output)
	}
	if output, err = filepath.Abs(output); err != nil {
		return "", err
	}
	goVersion, err := goDirective(filepath.Join(baseDir, "go.mod"))
	if err != nil {
		return "", err
	}

	dir, err := os.MkdirTemp("", "gwbuild-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)

	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(mainSource(m.Plugins, with)), 0o644); err != nil {
		return "", err
	}
	goMod := "module gwbuild-main\n\ngo " + goVersion + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(goMod), 0o644); err != nil {
		return "", err
	}

	steps := [][]string{{"mod", "edit", "-require=github.com/caddyserver/caddy/v2@" + m.Caddy}}
	var sums []byte
	for _, p := range m.Plugins {
		if p.Path == "" {
			steps = append(steps, []string{"mod", "edit", "-require=" + p.Module + "@" + p.Version})
			continue
		}
		abs, err := filepath.Abs(filepath.Join(baseDir, p.Path))
		if err != nil {
			return "", err
		}
		steps = append(steps, []string{"mod", "edit",
			"-require=" + p.Module + "@v0.0.0", "-replace=" + p.Module + "=" + abs})
		// The local plugin's go.sum is a head start for go mod tidy.
		if sum, err := os.ReadFile(filepath.Join(abs, "go.sum")); err == nil {
			sums = append(sums, sum...)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sums, 0o644); err != nil {
		return "", err
	}
	steps = append(steps,
		[]string{"mod", "tidy"},
		[]string{"build", "-trimpath", "-ldflags", "-w -s", "-o", output, "."})
	for _, args := range steps {
		if err := goCmd(dir, args...); err != nil {
			return "", err
		}
	}
	return output, nil
}

// checkWith makes sure each package of with is in a plugin's module (the
// build requires no other).
func checkWith(plugins []plugin, with []string) error {
	for _, pkg := range with {
		if !slices.ContainsFunc(plugins, func(p plugin) bool { return pkg == p.Module || strings.HasPrefix(pkg, p.Module+"/") }) {
			return fmt.Errorf("-with %s: not a package of a plugin's module", pkg)
		}
	}
	return nil
}

func readManifest(path string) (manifest, string, error) {
	var m manifest
	data, err := os.ReadFile(path)
	if err != nil {
		return m, "", err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return m, "", fmt.Errorf("%s: %w", path, err)
	}
	if m.Caddy == "" || m.Output == "" {
		return m, "", fmt.Errorf("%s: \"caddy\" and \"output\" are required", path)
	}
	for i, p := range m.Plugins {
		if p.Module == "" || (p.Path == "") == (p.Version == "") {
			return m, "", fmt.Errorf("%s: plugin %d needs \"module\" and exactly one of \"path\" or \"version\"", path, i)
		}
	}
	base, err := filepath.Abs(filepath.Dir(path))
	return m, base, err
}

var goLine = regexp.MustCompile(`(?m)^go\s+(\S+)\s*$`)

// goDirective returns the version on the go line of a go.mod file.
func goDirective(goModPath string) (string, error) {
	data, err := os.ReadFile(goModPath)
	if err != nil {
		return "", err
	}
	match := goLine.FindSubmatch(data)
	if match == nil {
		return "", errors.New(goModPath + ": no go directive")
	}
	return string(match[1]), nil
}

// goCmd runs the go command in dir with output passed through.
func goCmd(dir string, args ...string) error {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

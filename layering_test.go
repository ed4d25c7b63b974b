package broker_test

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLayering holds the code to README's Architecture table: every
// package of the module has a row, every row names a package that exists,
// and every import of a package's non-test code from this module is one
// its "may import" cell allows. The table is the one map; this test is what
// keeps it true.
func TestLayering(t *testing.T) {
	rules, err := readImportRules("README.md")
	require.NoError(t, err)
	require.NoError(t, checkLayering(rules, moduleImports(t)))
}

// TestLayeringRefuses checks checkLayering itself, so that TestLayering
// passing means something: each way the code can leave the map is caught.
func TestLayeringRefuses(t *testing.T) {
	rules := importRules{
		".":              {"amqp", "internal/queue"},
		"amqp":           nil,
		"internal/queue": {"amqp"},
		"examples/...":   {".", "amqp"},
	}
	cases := []struct {
		name    string
		graph   map[string][]string
		wantErr string
	}{
		{"allowed", map[string][]string{".": {"amqp"}, "amqp": nil, "internal/queue": {"amqp"}, "examples/a": {"."}}, ""},
		{"forbidden import", map[string][]string{".": {"amqp"}, "amqp": {"internal/queue"}, "internal/queue": nil, "examples/a": nil}, `amqp imports internal/queue`},
		{"upward import", map[string][]string{".": nil, "amqp": nil, "internal/queue": {"."}, "examples/a": nil}, `internal/queue imports the root package`},
		{"package without a row", map[string][]string{".": nil, "amqp": nil, "internal/queue": nil, "examples/a": nil, "internal/new": nil}, `internal/new has no row`},
		{"row without a package", map[string][]string{".": nil, "amqp": nil, "examples/a": nil}, `row internal/queue names no package`},
		{"wildcard row matching nothing", map[string][]string{".": nil, "amqp": nil, "internal/queue": nil}, `row examples/... names no package`},
		{"wildcard row limits its packages", map[string][]string{".": nil, "amqp": nil, "internal/queue": nil, "examples/a/b": {"internal/queue"}}, `examples/a/b imports internal/queue`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := checkLayering(rules, tc.graph)
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.wantErr)
		})
	}
}

func TestReadImportRules(t *testing.T) {
	readme := "# X\n\n## Architecture\n\n| path | what lives there | may import |\n|---|---|---|\n" +
		"| `/` (package `broker`) | the face, `foo.go` | `amqp`, `internal/queue` |\n" +
		"| `amqp` | the wire | nothing |\n" +
		"| `examples/...` | examples | `/` |\n\nafter\n\n| path | other | may import |\n|---|---|---|\n| `x` | y | `z` |\n"
	path := filepath.Join(t.TempDir(), "README.md")
	require.NoError(t, os.WriteFile(path, []byte(readme), 0o600))
	rules, err := readImportRules(path)
	require.NoError(t, err)
	require.Equal(t, importRules{
		".":            {"amqp", "internal/queue"},
		"amqp":         {},
		"examples/...": {"."},
	}, rules)
}

// importRules maps a package path relative to the module ("." for the
// root, "x/..." for x and everything under it) to the packages it may
// import, in the same form.
type importRules map[string][]string

// readImportRules reads the first table under README's "## Architecture"
// heading whose header has a "may import" column. A cell's packages are
// its backquoted paths (`/` is the root package); the path cell's first
// backquoted path names the row's package.
func readImportRules(readme string) (importRules, error) {
	f, err := os.Open(readme)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rules := importRules{}
	var inArch, inTable bool
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			if inArch && len(rules) > 0 {
				return rules, nil
			}
			inArch = strings.TrimSpace(line) == "## Architecture"
		case inArch && !inTable && strings.HasPrefix(line, "| path |") && strings.Contains(line, "| may import |"):
			inTable = true
		case inTable && strings.HasPrefix(line, "|---"):
		case inTable && strings.HasPrefix(line, "|"):
			cells := strings.Split(strings.Trim(line, "|"), "|")
			if len(cells) != 3 {
				return nil, fmt.Errorf("%s: row %q has %d cells, want 3", readme, line, len(cells))
			}
			paths := quoted(cells[0])
			if len(paths) == 0 {
				return nil, fmt.Errorf("%s: row %q names no package", readme, line)
			}
			pkg := relPath(paths[0])
			if _, dup := rules[pkg]; dup {
				return nil, fmt.Errorf("%s: two rows for %s", readme, pkg)
			}
			allowed := []string{}
			for _, p := range quoted(cells[2]) {
				allowed = append(allowed, relPath(p))
			}
			if len(allowed) == 0 && strings.TrimSpace(cells[2]) != "nothing" {
				return nil, fmt.Errorf("%s: row %s: may import %q is neither packages nor \"nothing\"", readme, pkg, strings.TrimSpace(cells[2]))
			}
			rules[pkg] = allowed
		case inTable:
			return rules, nil
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(rules) == 0 {
		return nil, fmt.Errorf("%s: no table with a \"may import\" column under ## Architecture", readme)
	}
	return rules, nil
}

// quoted returns the backquoted spans of a table cell.
func quoted(cell string) []string {
	parts := strings.Split(cell, "`")
	var out []string
	for i := 1; i < len(parts); i += 2 {
		out = append(out, parts[i])
	}
	return out
}

// relPath turns a path as README writes it ("/", "storage/", "meta/raft")
// into the form checkLayering compares ("." for the root).
func relPath(p string) string {
	p = strings.TrimSuffix(strings.TrimPrefix(p, "/"), "/")
	if p == "" {
		return "."
	}
	return p
}

// ruleFor returns the rule key that governs pkg: its own row, or else the
// longest wildcard row above it.
func (r importRules) ruleFor(pkg string) (string, bool) {
	if _, ok := r[pkg]; ok {
		return pkg, true
	}
	best := ""
	for key := range r {
		base, ok := strings.CutSuffix(key, "/...")
		if ok && (pkg == base || strings.HasPrefix(pkg, base+"/")) && len(key) > len(best) {
			best = key
		}
	}
	return best, best != ""
}

// allows reports whether the rule key may import imp.
func (r importRules) allows(key, imp string) bool {
	for _, a := range r[key] {
		if a == imp {
			return true
		}
		if base, ok := strings.CutSuffix(a, "/..."); ok && (imp == base || strings.HasPrefix(imp, base+"/")) {
			return true
		}
	}
	return false
}

// checkLayering compares an import graph (package → module packages its
// non-test code imports, both relative to the module) with the rules and
// returns every disagreement at once.
func checkLayering(rules importRules, graph map[string][]string) error {
	var errs []error
	used := map[string]bool{}
	pkgs := make([]string, 0, len(graph))
	for pkg := range graph {
		pkgs = append(pkgs, pkg)
	}
	sort.Strings(pkgs)
	for _, pkg := range pkgs {
		key, ok := rules.ruleFor(pkg)
		if !ok {
			errs = append(errs, fmt.Errorf("package %s has no row in README's Architecture table", pkg))
			continue
		}
		used[key] = true
		for _, imp := range graph[pkg] {
			if rules.allows(key, imp) {
				continue
			}
			what := imp
			if imp == "." {
				what = "the root package"
			}
			errs = append(errs, fmt.Errorf("%s imports %s, which its row (%s) does not allow", pkg, what, key))
		}
	}
	keys := make([]string, 0, len(rules))
	for key := range rules {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		if !used[key] {
			errs = append(errs, fmt.Errorf("row %s names no package of the module", key))
		}
	}
	return errors.Join(errs...)
}

// moduleImports lists the module's packages and, for each, the module
// packages its non-test code imports, with `go list`.
func moduleImports(t *testing.T) map[string][]string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	mod, err := exec.Command(goTool, "list", "-m").Output()
	require.NoError(t, err, "go list -m")
	module := strings.TrimSpace(string(mod))
	out, err := exec.Command(goTool, "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...").Output()
	require.NoError(t, err, "go list ./...")
	rel := func(p string) (string, bool) {
		if p == module {
			return ".", true
		}
		r, ok := strings.CutPrefix(p, module+"/")
		return r, ok
	}
	graph := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, ok := rel(fields[0])
		require.True(t, ok, "package %s outside module %s", fields[0], module)
		imports := []string{}
		for _, imp := range fields[1:] {
			if r, ok := rel(imp); ok {
				imports = append(imports, r)
			}
		}
		graph[pkg] = imports
	}
	return graph
}

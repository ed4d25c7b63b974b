package broker_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNotice requires the Apache-2.0 LICENSE and a NOTICE that lists every
// third-party module the module's packages link (go list -deps, tests left
// out) with the version go.mod's graph picks, so that a new or upgraded
// dependency cannot ship without its license being named.
func TestNotice(t *testing.T) {
	license, err := os.ReadFile("LICENSE")
	require.NoError(t, err, "the repository has no LICENSE")
	require.Contains(t, string(license), "Apache License\n                           Version 2.0, January 2004")
	require.Contains(t, string(license), "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION")
	notice, err := os.ReadFile("NOTICE")
	require.NoError(t, err, "the repository has no NOTICE")
	if testing.Short() {
		t.Skip("-short: not listing the module graph")
	}
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}}{{end}}{{end}}", "./...").Output()
	require.NoError(t, err, "go list: %s", out)
	listed := map[string]bool{}
	for _, line := range strings.Split(string(notice), "\n") {
		if f := strings.Fields(line); len(f) >= 3 {
			listed[f[0]+" "+f[1]] = true
		}
	}
	seen := map[string]bool{}
	for _, mod := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if mod == "" || seen[mod] {
			continue
		}
		seen[mod] = true
		require.True(t, listed[mod], "NOTICE does not list %s (module, version, license)", mod)
	}
	require.NotEmpty(t, seen)
}

package packaging

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// repoRoot is the repository root, the Dockerfile's build context.
const repoRoot = ".."

// built is the server binary the Dockerfile's build stage makes, built
// once by the test that first needs it (binary).
var built struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// dockerfile parses ../Dockerfile into its stages.
func dockerfile(t *testing.T) []stage {
	t.Helper()
	text, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	require.NoError(t, err)
	ins, err := parseDockerfile(string(text))
	require.NoError(t, err)
	st, err := stages(ins)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(st), 2, "a build stage and the image")
	return st
}

// goBuild is the go build command of a RUN instruction: its environment
// assignments, and the arguments after "go" with -o's value.
func goBuild(run string) (env, args []string, out string, ok bool) {
	f := strings.Fields(run)
	i := 0
	for i < len(f) && strings.Contains(f[i], "=") {
		env = append(env, f[i])
		i++
	}
	if i+1 >= len(f) || f[i] != "go" || f[i+1] != "build" {
		return nil, nil, "", false
	}
	args = f[i+1:]
	for j, a := range args {
		if a == "-o" && j+1 < len(args) {
			out = args[j+1]
		}
	}
	return env, args, out, out != ""
}

// binary builds the server as the Dockerfile's build stage does (its go
// build line, run from the build context, -o pointed at a temporary
// file) and returns the binary's path and the image path it is copied to.
func binary(t *testing.T) (path, imagePath string) {
	t.Helper()
	st := dockerfile(t)
	final := st[len(st)-1]
	var from, src, dst string
	for _, in := range final.Body {
		if in.Cmd != "COPY" {
			continue
		}
		f := strings.Fields(in.Args)
		if len(f) == 3 && strings.HasPrefix(f[0], "--from=") {
			from, src, dst = strings.TrimPrefix(f[0], "--from="), f[1], f[2]
			break
		}
	}
	require.NotEmpty(t, src, "the image copies the binary from a build stage")
	var build *stage
	for i := range st {
		if st[i].Name == from {
			build = &st[i]
		}
	}
	require.NotNil(t, build, "stage %q", from)
	var env, args []string
	for _, in := range build.Body {
		if in.Cmd != "RUN" {
			continue
		}
		if e, a, out, ok := goBuild(in.Args); ok && out == src {
			env, args = e, a
		}
	}
	require.NotNil(t, args, "a RUN in stage %s builds %s with go build -o", from, src)
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "warren-packaging-")
		if err != nil {
			built.err = err
			return
		}
		built.path = filepath.Join(dir, "warren")
		a := slices.Clone(args)
		a[slices.Index(a, "-o")+1] = built.path
		cmd := exec.Command("go", a...)
		cmd.Dir = repoRoot
		cmd.Env = append(os.Environ(), env...)
		built.out, built.err = cmd.CombinedOutput()
	})
	require.NoError(t, built.err, "%s", built.out)
	return built.path, dst
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.path != "" {
		os.RemoveAll(filepath.Dir(built.path))
	}
	os.Exit(code)
}

// TestDockerfile: the Dockerfile parses; its builder is the Go release
// go.mod names; the go build it runs builds the binary it copies, which
// is the ENTRYPOINT and runs; the image's environment is settings the
// binary accepts (each shown by -print-config as from that variable); it
// exposes the ports they listen on, and the data directory it owns is
// the VOLUME.
func TestDockerfile(t *testing.T) {
	st := dockerfile(t)
	mod, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	require.NoError(t, err)
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	require.NotNil(t, goVersion)
	require.Equal(t, "golang:"+string(goVersion[1]), st[0].Image, "the builder is go.mod's Go release")

	bin, imagePath := binary(t)
	final := st[len(st)-1]
	var entry []string
	envs := map[string]string{}
	var exposed, volumes []string
	chowned := ""
	for _, in := range final.Body {
		switch in.Cmd {
		case "ENTRYPOINT":
			require.NoError(t, json.Unmarshal([]byte(in.Args), &entry), "ENTRYPOINT in exec form: %s", in.Args)
		case "ENV":
			for _, kv := range strings.Fields(in.Args) {
				k, v, ok := strings.Cut(kv, "=")
				require.True(t, ok, "ENV %s is not KEY=value", kv)
				envs[k] = v
			}
		case "EXPOSE":
			exposed = append(exposed, strings.Fields(in.Args)...)
		case "VOLUME":
			volumes = append(volumes, strings.Fields(in.Args)...)
		case "COPY":
			if f := strings.Fields(in.Args); slices.ContainsFunc(f, func(s string) bool { return strings.HasPrefix(s, "--chown=") }) {
				chowned = f[len(f)-1]
			}
		}
	}
	require.Equal(t, []string{imagePath}, entry, "the ENTRYPOINT is the binary copied")

	out, err := exec.Command(bin, "-version").CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Regexp(t, `^warren \S+\n`, string(out))

	cmd := exec.Command(bin, "-print-config")
	cmd.Env = []string{"HOME=" + t.TempDir()}
	for k, v := range envs {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	for k := range envs {
		require.Contains(t, string(out), "env "+k, "-print-config shows %s as the source of a setting", k)
	}
	for _, k := range []string{"WARREN_ADDR", "WARREN_HTTP"} {
		_, port, err := net.SplitHostPort(envs[k])
		require.NoError(t, err, k)
		require.Contains(t, exposed, port, "%s's port is exposed", k)
	}
	require.Equal(t, envs["WARREN_DATA"], chowned, "the data directory belongs to the image's user")
	require.Equal(t, []string{envs["WARREN_DATA"]}, volumes)
}

// unit parses warren.service: its settings by section and key (a key
// given twice keeps every value, in order).
func unit(t *testing.T) map[string]map[string][]string {
	t.Helper()
	text, err := os.ReadFile("warren.service")
	require.NoError(t, err)
	out := map[string]map[string][]string{}
	section := ""
	for i, line := range strings.Split(string(text), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			out[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			require.True(t, ok && section != "", "line %d: %q is not key=value in a section", i+1, line)
			out[section][k] = append(out[section][k], v)
		}
	}
	return out
}

// TestSystemdUnit: the unit starts the binary where the Dockerfile puts
// it, with a command line the binary accepts; reload is SIGHUP, stop is
// SIGTERM (the graceful shutdown), and the data directory is the unit's
// state directory.
func TestSystemdUnit(t *testing.T) {
	u := unit(t)
	for _, s := range []string{"Unit", "Service", "Install"} {
		require.Contains(t, u, s)
	}
	svc := u["Service"]
	require.Len(t, svc["ExecStart"], 1)
	argv := strings.Fields(svc["ExecStart"][0])
	bin, imagePath := binary(t)
	require.Equal(t, imagePath, argv[0], "the binary's path as in the image")
	cmd := exec.Command(bin, append(argv[1:], "-print-config")...)
	cmd.Env = []string{"HOME=" + t.TempDir()}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Regexp(t, `(?m)^-data\s+/var/lib/warren\s+flag$`, string(out))
	require.Equal(t, []string{"warren"}, svc["StateDirectory"], "/var/lib/warren is the state directory")
	require.Equal(t, []string{"/bin/kill -HUP $MAINPID"}, svc["ExecReload"])
	require.Equal(t, []string{"SIGTERM"}, svc["KillSignal"])
	require.Equal(t, []string{"multi-user.target"}, u["Install"]["WantedBy"])
}

// TestParseDockerfileErrors: what the parser refuses, by line.
func TestParseDockerfileErrors(t *testing.T) {
	for _, tc := range []struct{ text, err string }{
		{"FROM a\nRUNN x\n", "line 2: unknown instruction"},
		{"FROM a\nRUN\n", "line 2: RUN without arguments"},
		{"FROM a\nRUN x \\\n", "continues past the end"},
		{"RUN x\n", "line 1: the first instruction is RUN"},
	} {
		_, err := parseDockerfile(tc.text)
		require.ErrorContains(t, err, tc.err, tc.text)
	}
	ins, err := parseDockerfile("# c\nfrom golang AS b\nRUN a \\\n  # note\n  b\nENV X=1 \\\n Y=2\n")
	require.NoError(t, err)
	require.Equal(t, []instruction{{"FROM", "golang AS b", 2}, {"RUN", "a b", 3}, {"ENV", "X=1 Y=2", 6}}, ins)
	st, err := stages(ins)
	require.NoError(t, err)
	require.Equal(t, "b", st[0].Name)
}

// FuzzParseDockerfile: any text parses or fails with a line; what parses
// has instructions in line order, each known and with arguments.
func FuzzParseDockerfile(f *testing.F) {
	if text, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile")); err == nil {
		f.Add(string(text))
	}
	f.Fuzz(func(t *testing.T, text string) {
		ins, err := parseDockerfile(text)
		if err != nil {
			require.Contains(t, err.Error(), "line ")
			return
		}
		last := 0
		for _, in := range ins {
			require.True(t, keywords[in.Cmd])
			require.NotEmpty(t, in.Args)
			require.Greater(t, in.Line, last)
			last = in.Line
		}
		_, _ = stages(ins)
	})
}

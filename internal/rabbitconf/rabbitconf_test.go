package rabbitconf

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []Entry
		err      string
	}{
		{"docs example", "# a comment\nlisteners.tcp.default = 5672\n\n  default_user = admin # trailing\nvm_memory_high_watermark.absolute = 2GB\n",
			[]Entry{{"listeners.tcp.default", "5672", 2}, {"default_user", "admin", 4}, {"vm_memory_high_watermark.absolute", "2GB", 5}}, ""},
		{"quoted", `default_pass = "a b"`, []Entry{{"default_pass", "a b", 1}}, ""},
		{"no equals", "\nheartbeat 60\n", nil, `line 2: "heartbeat 60" is not key = value`},
		{"no value", "heartbeat =", nil, "line 1: heartbeat has no value"},
		{"bad key", "a b = 1", nil, "line 1: key \"a b\" has a character"},
		{"empty part", "a..b = 1", nil, "line 1: key \"a..b\" has an empty part"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(tc.in))
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestTableApply(t *testing.T) {
	var got []string
	var tab Table
	tab.Key("heartbeat", func(e Entry) error { got = append(got, "hb="+e.Value); return nil })
	tab.Prefix("listeners.tcp.", func(e Entry) error { got = append(got, e.Key); return nil })
	entries, err := Parse(strings.NewReader("heartbeat = 30\nlisteners.tcp.1 = 5672\n"))
	require.NoError(t, err)
	require.NoError(t, tab.Apply(entries, nil))
	require.Equal(t, []string{"hb=30", "listeners.tcp.1"}, got)

	entries, err = Parse(strings.NewReader("heartbeat = 30\n\nauth_backends.1 = ldap\n"))
	require.NoError(t, err)
	require.EqualError(t, tab.Apply(entries, nil), "line 3: unknown key auth_backends.1")
	var warned []int
	require.NoError(t, tab.Apply(entries, func(e Entry) error { warned = append(warned, e.Line); return nil }))
	require.Equal(t, []int{3}, warned)
	require.Panics(t, func() { tab.Key("heartbeat", nil) })
}

func TestBytes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		err  bool
	}{
		{"1073741824", 1 << 30, false}, {"2GB", 2e9, false}, {"512MiB", 512 << 20, false},
		{"1G", 1 << 30, false}, {"50MB", 50e6, false}, {"100kB", 100e3, false},
		{"0.4", 0, true}, {"-1", 0, true}, {"GB", 0, true}, {"99999999999TB", 0, true},
	} {
		got, err := Bytes(tc.in)
		if tc.err {
			require.Error(t, err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
	}
}

// FuzzParse: Parse never panics, and every entry it returns has a valid
// key, a non-empty value and a line number within the input.
func FuzzParse(f *testing.F) {
	f.Add("listeners.tcp.default = 5672\n# c\ndefault_user = a # b\n")
	f.Add("x = \"\"\n")
	f.Fuzz(func(t *testing.T, in string) {
		entries, err := Parse(strings.NewReader(in))
		if err != nil {
			return
		}
		lines := strings.Count(in, "\n") + 1
		for _, e := range entries {
			require.NoError(t, checkKey(e.Key))
			require.NotEmpty(t, e.Value)
			require.True(t, e.Line >= 1 && e.Line <= lines)
		}
	})
}

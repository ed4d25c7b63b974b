package compat

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	const supported = "(supported: 3.13, 4.0, 4.1, 4.2, 4.3, 4.4, or a release of one such as 4.3.2)"
	for _, tc := range []struct{ in, name, version, err string }{
		{"", "3.13", "3.13.7", ""},
		{" 4.0 ", "4.0", "4.0.0", ""},
		{"4.1.4", "4.1", "4.1.4", ""},
		{"4.2", "4.2", "4.2.9", ""},
		{"4.3", "4.3", "4.3.5", ""},
		{"4.3.0", "4.3", "4.3.0", ""},
		{"4.3.4", "4.3", "4.3.4", ""},
		{"4.4", "4.4", "4.4.1", ""},
		{"4.4.0", "4.4", "4.4.0", ""},
		{"4.4.7", "4.4", "4.4.7", ""},
		{"3.13.2", "3.13", "3.13.2", ""},
		{"4", "", "", `compat: unknown RabbitMQ version "4" ` + supported},
		{"3.12", "", "", `compat: unknown RabbitMQ version "3.12" ` + supported},
		{"4.5.0", "", "", `compat: unknown RabbitMQ version "4.5.0" ` + supported},
		{"4.3.0-rc.1", "", "", `compat: unknown RabbitMQ version "4.3.0-rc.1" ` + supported},
		{"4.3.", "", "", `compat: unknown RabbitMQ version "4.3." ` + supported},
		{"4.3.x", "", "", `compat: unknown RabbitMQ version "4.3.x" ` + supported},
	} {
		t.Run(tc.in, func(t *testing.T) {
			p, err := Parse(tc.in)
			if tc.err != "" {
				require.EqualError(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.name, p.Name)
			require.Equal(t, tc.version, p.Version)
		})
	}
	require.Equal(t, Default(), Profile{}.OrDefault())
}

// TestPatchReleases: a release gets the answers of the newest table entry
// of its series at or before it.
func TestPatchReleases(t *testing.T) {
	passive := func(v string) PassivePermission {
		p, err := Parse(v)
		require.NoError(t, err)
		return p.PassiveDeclare
	}
	for v, want := range map[string]PassivePermission{
		"3.13": PassiveNone, "4.2.0": PassiveNone, "4.2.5": PassiveNone, "4.2.6": PassiveConfigure,
		"4.2.7": PassiveAny, "4.2": PassiveAny, "4.3.0": PassiveConfigure, "4.3.1": PassiveAny, "4.3": PassiveAny, "4.4.0": PassiveAny,
	} {
		require.Equal(t, want, passive(v), v)
	}
	export := func(v string) bool {
		p, err := Parse(v)
		require.NoError(t, err)
		return p.ExportExclusiveBindings
	}
	for v, want := range map[string]bool{
		"4.2.8": false, "4.2.9": true, "4.3.2": false, "4.3.3": true, "4.4.0": true, "4.4.1": false, "4.4": false,
	} {
		require.Equal(t, want, export(v), v)
	}
	require.Equal(t, []string{"3.13.7", "4.0.0", "4.1.0", "4.2.0", "4.2.6", "4.2.7", "4.2.9",
		"4.3.0", "4.3.1", "4.3.2", "4.3.3", "4.3.5", "4.4.0", "4.4.1"}, Releases())
	// Every release is one profile, distinct from the one before it in
	// its series (a patch that changed nothing would not be listed).
	for i := 1; i < len(releases); i++ {
		a, b := releases[i-1], releases[i]
		if a.Name == b.Name {
			a.Version = b.Version
			require.NotEqual(t, a, b, b.Version)
		}
	}
}

// TestDeniedFeatureText: the text fills the 255-byte reply text exactly,
// ending in "...", as RabbitMQ 4.3 sends it.
func TestDeniedFeatureText(t *testing.T) {
	text := "INTERNAL_ERROR - " + DeniedFeatureText("transient_nonexcl_queues")
	require.Len(t, text, 255)
	require.Equal(t, "INTERNAL_ERROR - Feature `transient_nonexcl_queues` is deprecated.\n"+
		"By default, this feature is not permitted anymore.\n"+
		"The feature will be removed from a future major RabbitMQ version, regardless of the configuration; actual version to be determined.\nTo...", text)
}

// TestParseAllocates nothing: the broker parses its option per unacked
// delivery in each scan pass.
func TestParseAllocates(t *testing.T) {
	for _, in := range []string{"", "4.1", "4.1.4", "4.3.2", "4.4"} {
		require.Zero(t, testing.AllocsPerRun(100, func() { _, _ = Parse(in) }), in)
	}
}

// FuzzParse: any option string is a profile of a supported series or an
// error naming it, never a panic; a release reports itself.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{"", "4.4", "4.3.2", " 4.3.10 ", "3.13.0", "4.3.", "4..3", ".", "4.3.2.1", "4.3.99999", "٤.٣"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := Parse(s)
		if err != nil {
			require.Contains(t, err.Error(), "compat: unknown RabbitMQ version")
			return
		}
		require.Contains(t, Names(), p.Name)
		require.True(t, strings.HasPrefix(p.Version, p.Name+"."), "%q reports %q", s, p.Version)
		if strings.Count(strings.TrimSpace(s), ".") == 2 {
			require.Equal(t, strings.TrimSpace(s), p.Version)
		}
	})
}

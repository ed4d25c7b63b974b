package compat

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct{ in, name, err string }{
		{"", "3.13", ""},
		{" 4.0 ", "4.0", ""},
		{"4.1.4", "4.1", ""},
		{"4.3", "4.3", ""},
		{"4", "", `compat: unknown RabbitMQ version "4" (supported: 3.13, 4.0, 4.1, 4.2, 4.3)`},
		{"3.12", "", `compat: unknown RabbitMQ version "3.12" (supported: 3.13, 4.0, 4.1, 4.2, 4.3)`},
		{"4.4.0", "", `compat: unknown RabbitMQ version "4.4.0" (supported: 3.13, 4.0, 4.1, 4.2, 4.3)`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			p, err := Parse(tc.in)
			if tc.err != "" {
				require.EqualError(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.name, p.Name)
		})
	}
	require.Equal(t, Default(), Profile{}.OrDefault())
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
	for _, in := range []string{"", "4.1", "4.1.4"} {
		require.Zero(t, testing.AllocsPerRun(100, func() { _, _ = Parse(in) }), in)
	}
}

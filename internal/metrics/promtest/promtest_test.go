package promtest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestParseRejects shows the parser is strict: each input breaks one
// rule.
func TestParseRejects(t *testing.T) {
	for name, body := range map[string]string{
		"no newline at end":  "# TYPE a gauge\na 1",
		"blank line":         "# TYPE a gauge\n\na 1\n",
		"sample before type": "a 1\n# TYPE a gauge\n",
		"two types":          "# TYPE a gauge\n# TYPE a gauge\na 1\n",
		"bad type":           "# TYPE a meter\na 1\n",
		"bad escape":         "# TYPE a gauge\na{l=\"\\t\"} 1\n",
		"duplicate series":   "# TYPE a gauge\na{l=\"x\"} 1\na{l=\"x\"} 2\n",
		"split family":       "# TYPE a gauge\n# TYPE b gauge\na 1\nb 1\na{l=\"y\"} 2\n",
		"bad value":          "# TYPE a gauge\na one\n",
		"negative counter":   "# TYPE a_total counter\na_total -1\n",
		"counter name":       "# TYPE a counter\na 1\n",
		"bad label name":     "# TYPE a gauge\na{1l=\"x\"} 1\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(body)
			require.Error(t, err, "accepted: %q", body)
		})
	}
	_, err := Parse("# HELP a help \\\\ text\n# TYPE a gauge\na{l=\"q\\\"\\n\\\\\"} +Inf\n# TYPE b_total counter\nb_total 0 1700000000000\n")
	require.NoError(t, err)
}

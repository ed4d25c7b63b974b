package metrics_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/metrics"
	"github.com/warrenmq/broker/internal/metrics/promtest"
)

// TestWriteFederation: the federation families count links by state and
// give each link's state and forwarded count; a broker without links
// writes none of them.
func TestWriteFederation(t *testing.T) {
	s := metrics.Snapshot{Federation: []metrics.FederationLink{
		{VHost: "/", Link: "exchange:x:up", State: "running", Forwarded: 7},
		{VHost: "/", Link: "queue:q:up", State: "error"},
	}}
	var buf bytes.Buffer
	metrics.Write(&buf, &s, false)
	fams, err := promtest.Parse(buf.String())
	require.NoError(t, err, "%s", buf.String())
	for _, c := range []struct {
		name, labels string
		want         float64
	}{
		{"warren_federation_links", `state="running"`, 1},
		{"warren_federation_links", `state="error"`, 1},
		{"warren_federation_links", `state="starting"`, 0},
		{"warren_federation_link_running", `link="exchange:x:up",vhost="/"`, 1},
		{"warren_federation_link_running", `link="queue:q:up",vhost="/"`, 0},
		{"warren_federation_messages_forwarded_total", `link="exchange:x:up",vhost="/"`, 7},
	} {
		f, ok := fams[c.name]
		require.True(t, ok, c.name)
		v, ok := f.Samples[c.labels]
		require.True(t, ok, "%s{%s} in %v", c.name, c.labels, f.Samples)
		require.Equal(t, c.want, v, "%s{%s}", c.name, c.labels)
	}

	buf.Reset()
	metrics.Write(&buf, &metrics.Snapshot{}, false)
	require.NotContains(t, buf.String(), "warren_federation")
}

package amqptest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/definitions"
)

// Topology lists the exchanges, queues and bindings of a definitions
// export as comparable strings ("x", "q" or "b" and the object in the
// file's JSON), so that two brokers' topologies compare with require.Equal.
// It takes the export function (a broker's Admin().Export) rather than
// the broker, as amqptest cannot import the root package.
func Topology(tb testing.TB, export func(context.Context) (*definitions.File, error)) []string {
	tb.Helper()
	d, err := export(context.Background())
	require.NoError(tb, err)
	var out []string
	for _, x := range d.Exchanges {
		enc, err := json.Marshal(x)
		require.NoError(tb, err)
		out = append(out, "x "+string(enc))
	}
	for _, q := range d.Queues {
		enc, err := json.Marshal(q)
		require.NoError(tb, err)
		out = append(out, "q "+string(enc))
	}
	for _, bd := range d.Bindings {
		enc, err := json.Marshal(bd)
		require.NoError(tb, err)
		out = append(out, "b "+string(enc))
	}
	return out
}

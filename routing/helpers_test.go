package routing

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// routeSorted routes and returns the queues sorted, failing the test if a
// queue appears twice.
func routeSorted(t testing.TB, tb *Table, exchange, key string, headers map[string]any) []string {
	t.Helper()
	got := tb.Route(exchange, key, headers, nil)
	slices.Sort(got)
	require.Equal(t, slices.Compact(slices.Clone(got)), got, "a queue was routed twice")
	if got == nil {
		got = []string{}
	}
	return got
}

func mustDeclare(t testing.TB, tb *Table, e Exchange) {
	t.Helper()
	require.NoError(t, tb.DeclareExchange(e))
}

func mustBind(t testing.TB, tb *Table, b Binding) {
	t.Helper()
	added, err := tb.Bind(b)
	require.NoError(t, err)
	require.True(t, added, "binding %+v already existed", b)
}

func toQueue(src, queue, key string) Binding {
	return Binding{Source: src, Destination: Destination{Name: queue}, Key: key}
}

func toExchange(src, dst, key string) Binding {
	return Binding{Source: src, Destination: Destination{Name: dst, Exchange: true}, Key: key}
}

package routing

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLocalRandomBindingRules: RabbitMQ binds an x-local-random exchange
// only with the empty key and only to a queue (validate_binding).
func TestLocalRandomBindingRules(t *testing.T) {
	tb := NewTable()
	mustDeclare(t, tb, Exchange{Name: "lr", Kind: LocalRandom})
	mustDeclare(t, tb, Exchange{Name: "other", Kind: Fanout})
	tb.AddQueue("q")
	for _, tc := range []struct {
		name string
		b    Binding
		err  string
	}{
		{"empty key", toQueue("lr", "q", ""), ""},
		{"same queue, other arguments", Binding{Source: "lr", Destination: Destination{Name: "q"}, Args: map[string]any{"a": int32(1)}}, ""},
		{"a key", toQueue("lr", "q", "k"), "routing: invalid binding: Non empty binding 'k' key not permitted"},
		{"an exchange", toExchange("lr", "other", ""), "routing: invalid binding: Destination not found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tb.Bind(tc.b)
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidBinding)
			require.EqualError(t, err, tc.err)
		})
	}
	// The local-random exchange as a destination is any exchange's.
	mustBind(t, tb, toExchange("other", "lr", "ignored"))
	require.Equal(t, []string{"q"}, routeSorted(t, tb, "other", "any", nil))
}

// TestLocalRandomRoutesToOne: each message reaches one bound queue,
// whatever its routing key, and every bound queue is picked.
func TestLocalRandomRoutesToOne(t *testing.T) {
	tb := NewTable()
	mustDeclare(t, tb, Exchange{Name: "lr", Kind: LocalRandom, AlternateExchange: "ae"})
	mustDeclare(t, tb, Exchange{Name: "ae", Kind: Fanout})
	tb.AddQueue("lost")
	mustBind(t, tb, toQueue("ae", "lost", ""))
	require.Equal(t, []string{"lost"}, routeSorted(t, tb, "lr", "k", nil), "no binding: the alternate exchange")

	queues := []string{"a", "b", "c"}
	for _, q := range queues {
		tb.AddQueue(q)
		mustBind(t, tb, toQueue("lr", q, ""))
	}
	// A second binding to a queue does not make it likelier.
	mustBind(t, tb, Binding{Source: "lr", Destination: Destination{Name: "a"}, Args: map[string]any{"x": "y"}})
	picked := map[string]int{}
	for i := range 600 {
		got := tb.RouteKeys("lr", fmt.Sprint(i), []string{"cc1", "cc2"}, nil, nil)
		require.Len(t, got, 1)
		picked[got[0]]++
	}
	for _, q := range queues {
		// 600 picks of 3: each expects 200; fewer than 100 has a
		// probability far below 1e-12.
		require.Greater(t, picked[q], 100, "queue %s picked %d times of 600", q, picked[q])
	}

	// Unbinding one of a's two bindings keeps it; unbinding both, or
	// removing the queue, drops it.
	_, err := tb.Unbind(toQueue("lr", "a", ""))
	require.NoError(t, err)
	require.Contains(t, routesOf(tb, "lr", 300), "a")
	_, err = tb.Unbind(Binding{Source: "lr", Destination: Destination{Name: "a"}, Args: map[string]any{"x": "y"}})
	require.NoError(t, err)
	tb.RemoveQueue("b")
	require.Equal(t, map[string]bool{"c": true}, routesOf(tb, "lr", 50))
}

// routesOf routes n messages through exchange and returns the set of
// queues reached.
func routesOf(tb *Table, exchange string, n int) map[string]bool {
	seen := map[string]bool{}
	for range n {
		for _, q := range tb.Route(exchange, "", nil, nil) {
			seen[q] = true
		}
	}
	return seen
}

// TestLocalRandomKindChange: bindings indexed again under the kind (a
// store written by another version declared the name as another type)
// route only when they fit it: empty key, a queue.
func TestLocalRandomKindChange(t *testing.T) {
	tb := NewTable()
	mustDeclare(t, tb, Exchange{Name: "x", Kind: Direct})
	mustDeclare(t, tb, Exchange{Name: "e", Kind: Fanout})
	for _, q := range []string{"keyed", "plain", "eq"} {
		tb.AddQueue(q)
	}
	mustBind(t, tb, toQueue("x", "keyed", "k"))
	mustBind(t, tb, toQueue("x", "plain", ""))
	mustBind(t, tb, toExchange("x", "e", ""))
	mustBind(t, tb, toQueue("e", "eq", ""))
	mustDeclare(t, tb, Exchange{Name: "x", Kind: LocalRandom})
	require.Equal(t, map[string]bool{"plain": true}, routesOf(tb, "x", 50))
	_, err := tb.Unbind(toQueue("x", "keyed", "k"))
	require.NoError(t, err)
	mustDeclare(t, tb, Exchange{Name: "x", Kind: Direct})
	require.Equal(t, []string{"eq", "plain"}, routeSorted(t, tb, "x", "", nil))
}

// TestLocalRandomRouteAllocates nothing when dst has room.
func TestLocalRandomRouteAllocates(t *testing.T) {
	tb := NewTable()
	mustDeclare(t, tb, Exchange{Name: "lr", Kind: LocalRandom})
	for i := range 20 {
		q := fmt.Sprint("q", i)
		tb.AddQueue(q)
		mustBind(t, tb, toQueue("lr", q, ""))
	}
	dst := make([]string, 0, 4)
	require.Zero(t, testing.AllocsPerRun(100, func() { dst = tb.Route("lr", "k", nil, dst[:0]) }))
}

package federation

import (
	"encoding/json"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

func TestUpstreamQueueName(t *testing.T) {
	for _, tc := range []struct{ ux, uvhost, dvhost, dx, want string }{
		{"x", "/", "/", "x", "federation: x -> c"},
		{"x", "/", "/", "y", "federation: x -> c:y"},
		{"x", "up", "/", "x", "federation: x -> c:/:x"},
	} {
		require.Equal(t, tc.want, upstreamQueueName(tc.ux, tc.uvhost, "c", tc.dvhost, tc.dx))
	}
}

func TestShouldForward(t *testing.T) {
	hop := func(cluster, vhost string) any { return amqp091.Table{"cluster-name": cluster, "vhost": vhost} }
	for _, tc := range []struct {
		name    string
		h       amqp091.Table
		maxHops int
		want    bool
	}{
		{"no headers", nil, 1, true},
		{"client's header", amqp091.Table{ReceivedFromHeader: "x"}, 1, true},
		{"one hop of one", amqp091.Table{ReceivedFromHeader: []any{hop("a", "/")}}, 1, false},
		{"one hop of two", amqp091.Table{ReceivedFromHeader: []any{hop("a", "/")}}, 2, true},
		{"been here", amqp091.Table{ReceivedFromHeader: []any{hop("me", "/")}}, 5, false},
		{"same cluster, other vhost", amqp091.Table{ReceivedFromHeader: []any{hop("me", "v")}}, 5, true},
	} {
		require.Equal(t, tc.want, ShouldForward(tc.h, tc.maxHops, "me", "/"), tc.name)
	}
}

func TestPrependTable(t *testing.T) {
	info := amqp091.Table{"a": "b"}
	h := amqp091.Table{"k": "v"}
	got := prependTable(ReceivedFromHeader, info, h)
	require.Equal(t, []any{info}, got[ReceivedFromHeader])
	require.Equal(t, amqp091.Table{"k": "v"}, h, "the input is not modified")

	got = prependTable(ReceivedFromHeader, info, amqp091.Table{ReceivedFromHeader: []any{"old"}})
	require.Equal(t, []any{info, "old"}, got[ReceivedFromHeader])

	// A header that is not an array moves under x-invalid-headers.
	got = prependTable(ReceivedFromHeader, info, amqp091.Table{ReceivedFromHeader: "junk"})
	require.Equal(t, []any{info}, got[ReceivedFromHeader])
	require.Equal(t, amqp091.Table{ReceivedFromHeader: []any{"junk"}}, got[invalidHeaders])
}

func TestBindingArgs(t *testing.T) {
	info := amqp091.Table{"cluster-name": "down", "vhost": "/", "exchange": "/:x B"}
	// A local binding travels max-hops.
	args, ok := bindingArgs(amqp091.Table{"k": "v"}, 2, "up", "/", info)
	require.True(t, ok)
	bf := args[BoundFromHeader].([]any)
	require.Len(t, bf, 1)
	require.Equal(t, int16(2), bf[0].(amqp091.Table)["hops"])
	require.Equal(t, "v", args["k"])

	// A downstream's binding travels one hop less...
	args2, ok := bindingArgs(args, 5, "further", "/", amqp091.Table{"cluster-name": "mid", "vhost": "/"})
	require.True(t, ok)
	require.Equal(t, int16(1), args2[BoundFromHeader].([]any)[0].(amqp091.Table)["hops"])
	require.Len(t, args2[BoundFromHeader], 2)
	// ...and not at all once none are left, or back to where it came from.
	_, ok = bindingArgs(args2, 5, "x", "/", info)
	require.False(t, ok)
	_, ok = bindingArgs(args, 5, "down", "/", info)
	require.False(t, ok)
}

func TestQueueHeaders(t *testing.T) {
	table := amqp091.Table{"uri": "amqp://up", "queue": "q"}
	h := queueHeaders(table, false, "x", "k", amqp091.Table{"CC": []any{"a"}})
	require.Equal(t, "x", h["x-original-exchange"])
	require.Equal(t, "k", h["x-original-routing-key"])
	require.Equal(t, []any{"a"}, h["x-original-cc"])
	require.NotContains(t, h, "CC")
	rf := h[ReceivedFromHeader].([]any)
	require.Len(t, rf, 1)
	require.EqualValues(t, 1, rf[0].(amqp091.Table)["visit-count"])

	// Back again over the same link: one entry, counted twice; the
	// original exchange and key stay the first ones.
	h2 := queueHeaders(table, true, "", "q", h)
	rf = h2[ReceivedFromHeader].([]any)
	require.Len(t, rf, 1)
	require.EqualValues(t, 2, rf[0].(amqp091.Table)["visit-count"])
	require.Equal(t, true, rf[0].(amqp091.Table)["redelivered"])
	require.Equal(t, "x", h2["x-original-exchange"])
}

// FuzzHeaders feeds the header code a message's headers as any client
// could send them (decoded from JSON into AMQP's types, arrays and
// tables nested): nothing panics, and the headers a link writes are
// always an array with its entry first.
func FuzzHeaders(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"x-received-from":"junk"}`, `{"x-received-from":[{"cluster-name":"me","vhost":"/"}]}`,
		`{"x-received-from":[1,[2],{"uri":"u","queue":"q","visit-count":"x"}]}`,
		`{"x-bound-from":[{"hops":"x"}]}`, `{"x-bound-from":[]}`, `{"x-bound-from":[{"hops":3,"cluster-name":1}]}`,
		`{"x-invalid-headers":5,"x-received-from":{"a":1},"CC":"x"}`,
	} {
		f.Add([]byte(s), 2)
	}
	f.Fuzz(func(t *testing.T, raw []byte, maxHops int) {
		var v map[string]any
		if json.Unmarshal(raw, &v) != nil {
			return
		}
		h := toTable(v)
		ShouldForward(h, maxHops, "me", "/")
		info := amqp091.Table{"uri": "u", "queue": "q"}
		out := queueHeaders(info, false, "x", "k", h)
		rf, ok := out[ReceivedFromHeader].([]any)
		require.True(t, ok)
		require.Equal(t, "u", rf[0].(amqp091.Table)["uri"])
		if args, ok := bindingArgs(h, maxHops, "up", "/", amqp091.Table{"cluster-name": "me"}); ok {
			bf := args[BoundFromHeader].([]any)
			require.Equal(t, "me", bf[0].(amqp091.Table)["cluster-name"])
		}
		p := prependTable(ReceivedFromHeader, info, h)
		require.Equal(t, info, p[ReceivedFromHeader].([]any)[0])
	})
}

// toTable turns JSON into AMQP's decoded types: objects as tables,
// numbers as integers where whole (hops and counts are integers).
func toTable(v map[string]any) amqp091.Table {
	t := amqp091.Table{}
	for k, x := range v {
		t[k] = toValue(x)
	}
	return t
}

func toValue(x any) any {
	switch y := x.(type) {
	case map[string]any:
		return toTable(y)
	case []any:
		out := make([]any, len(y))
		for i, e := range y {
			out[i] = toValue(e)
		}
		return out
	case float64:
		if y == float64(int32(y)) {
			return int32(y)
		}
	}
	return x
}

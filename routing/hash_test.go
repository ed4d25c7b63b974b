package routing

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// hashTable declares exchange x of kind with HashOn on, and binds queues
// q0..q(n-1) to it with the given keys.
func hashTable(t *testing.T, kind Kind, on HashOn, keys ...string) *Table {
	t.Helper()
	tb := NewTable()
	tb.DeclareDefaults()
	mustDeclare(t, tb, Exchange{Name: "x", Kind: kind, HashOn: on})
	for i, k := range keys {
		q := fmt.Sprintf("q%d", i)
		tb.AddQueue(q)
		mustBind(t, tb, toQueue("x", q, k))
	}
	return tb
}

// spread routes n random keys through x and counts where they land; every
// message must reach exactly one queue.
func spread(t *testing.T, tb *Table, n int, seed uint64) (map[string]int, map[string]string) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, seed))
	counts := map[string]int{}
	where := map[string]string{}
	for range n {
		key := strconv.FormatUint(r.Uint64(), 36)
		got := tb.Route("x", key, nil, nil)
		require.Len(t, got, 1, "key %q", key)
		counts[got[0]]++
		where[key] = got[0]
	}
	return counts, where
}

func TestHashDistribution(t *testing.T) {
	const n = 100_000
	tests := []struct {
		kind    Kind
		weights []string
		// want is each queue's expected share of the keys.
		want []float64
	}{
		{ConsistentHash, []string{"1", "1", "1", "1"}, []float64{.25, .25, .25, .25}},
		{ConsistentHash, []string{"10", "10", "20", "20"}, []float64{1. / 6, 1. / 6, 2. / 6, 2. / 6}},
		{ConsistentHash, []string{"1", "3"}, []float64{.25, .75}},
		{ModulusHash, []string{"", "", "", ""}, []float64{.25, .25, .25, .25}},
		{ModulusHash, []string{"ignored", "1", "100", "x"}, []float64{.25, .25, .25, .25}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v/%v", tt.kind, tt.weights), func(t *testing.T) {
			tb := hashTable(t, tt.kind, HashOn{}, tt.weights...)
			counts, _ := spread(t, tb, n, 1)
			for i, share := range tt.want {
				q := fmt.Sprintf("q%d", i)
				got := float64(counts[q]) / n
				// Within 3% of the expected share (relative): a
				// binomial's standard deviation here is under 0.6%.
				require.InDelta(t, share, got, share*0.03, "queue %s got %d of %d", q, counts[q], n)
			}
		})
	}
}

func TestConsistentHashStable(t *testing.T) {
	const n = 20_000
	tb := hashTable(t, ConsistentHash, HashOn{}, "1", "1", "1", "1")
	_, before := spread(t, tb, n, 2)

	// A binding elsewhere changes nothing.
	mustDeclare(t, tb, Exchange{Name: "other", Kind: ConsistentHash})
	tb.AddQueue("q9")
	mustBind(t, tb, toQueue("other", "q9", "5"))
	mustBind(t, tb, toQueue("amq.direct", "q0", "k"))
	_, after := spread(t, tb, n, 2)
	require.Equal(t, before, after)

	// A fifth queue takes keys only from the others, about a fifth.
	tb.AddQueue("q4")
	mustBind(t, tb, toQueue("x", "q4", "1"))
	_, after = spread(t, tb, n, 2)
	moved := 0
	for k, q := range after {
		if q != before[k] {
			require.Equal(t, "q4", q, "key %q moved between old queues", k)
			moved++
		}
	}
	require.InDelta(t, 0.2, float64(moved)/n, 0.02)

	// Removing it puts every key back.
	removed, err := tb.Unbind(toQueue("x", "q4", "1"))
	require.NoError(t, err)
	require.True(t, removed)
	_, after = spread(t, tb, n, 2)
	require.Equal(t, before, after)

	// Removing a queue in the middle shifts the later buckets down, as
	// RabbitMQ's remove_binding does: q1's keys go elsewhere, and every
	// key still lands somewhere bound.
	tb.RemoveQueue("q1")
	counts, _ := spread(t, tb, n, 2)
	require.Zero(t, counts["q1"])
	require.Equal(t, n, counts["q0"]+counts["q2"]+counts["q3"])
}

func TestModulusHashStable(t *testing.T) {
	// Order of binding does not matter: the slots are sorted.
	a := hashTable(t, ModulusHash, HashOn{}, "", "", "")
	b := NewTable()
	b.DeclareDefaults()
	mustDeclare(t, b, Exchange{Name: "x", Kind: ModulusHash})
	for _, q := range []string{"q2", "q0", "q1"} {
		b.AddQueue(q)
		mustBind(t, b, toQueue("x", q, ""))
	}
	_, wa := spread(t, a, 5000, 3)
	_, wb := spread(t, b, 5000, 3)
	require.Equal(t, wa, wb)
	// An unrelated binding changes nothing.
	mustBind(t, a, toQueue("amq.fanout", "q1", ""))
	_, wa2 := spread(t, a, 5000, 3)
	require.Equal(t, wa, wa2)
}

func TestConsistentHashOn(t *testing.T) {
	msg := func(h map[string]any, id, corr string, ts int64, hasTS bool) *Message {
		return &Message{Headers: h, MessageID: id, CorrelationID: corr, Timestamp: ts, HasTimestamp: hasTS}
	}
	tests := []struct {
		name string
		on   HashOn
		// same lists messages that must land together whatever their
		// routing keys; the test also checks that varying the hashed
		// value spreads messages over more than one queue.
		same []*Message
		vary func(i int) *Message
	}{
		{"header", HashOn{Header: "h"},
			[]*Message{msg(map[string]any{"h": "a"}, "", "", 0, false), msg(map[string]any{"h": []byte("a")}, "x", "", 0, false)},
			func(i int) *Message { return msg(map[string]any{"h": int32(i)}, "", "", 0, false) }},
		{"missing header", HashOn{Header: "h"},
			[]*Message{msg(nil, "", "", 0, false), msg(map[string]any{"other": 1}, "", "", 0, false)},
			func(i int) *Message { return msg(map[string]any{"h": strconv.Itoa(i)}, "", "", 0, false) }},
		{"message_id", HashOn{Property: PropertyMessageID},
			[]*Message{msg(nil, "m", "", 0, false), msg(map[string]any{"h": 1}, "m", "c", 5, true)},
			func(i int) *Message { return msg(nil, strconv.Itoa(i), "", 0, false) }},
		{"correlation_id", HashOn{Property: PropertyCorrelationID},
			[]*Message{msg(nil, "", "c", 0, false), msg(nil, "m", "c", 0, false)},
			func(i int) *Message { return msg(nil, "", strconv.Itoa(i), 0, false) }},
		{"timestamp", HashOn{Property: PropertyTimestamp},
			[]*Message{msg(nil, "", "", 17, true), msg(nil, "m", "", 17, true)},
			func(i int) *Message { return msg(nil, "", "", int64(i), true) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := hashTable(t, ConsistentHash, tt.on, "1", "1", "1", "1")
			first := tb.RouteMessage("x", "k0", nil, tt.same[0], nil)
			require.Len(t, first, 1)
			for i, m := range tt.same {
				got := tb.RouteMessage("x", fmt.Sprintf("key-%d", i), nil, m, nil)
				require.Equal(t, first, got, "message %d", i)
			}
			seen := map[string]bool{}
			for i := range 200 {
				got := tb.RouteMessage("x", "same-key", nil, tt.vary(i), nil)
				require.Len(t, got, 1)
				seen[got[0]] = true
			}
			require.Len(t, seen, 4)
		})
	}
}

func TestHashExchangeDestinations(t *testing.T) {
	tb := NewTable()
	tb.DeclareDefaults()
	mustDeclare(t, tb, Exchange{Name: "x", Kind: ConsistentHash, AlternateExchange: "ae"})
	mustDeclare(t, tb, Exchange{Name: "ae", Kind: Fanout})
	mustDeclare(t, tb, Exchange{Name: "e", Kind: Fanout})
	tb.AddQueue("unrouted")
	tb.AddQueue("via-e")
	mustBind(t, tb, toQueue("ae", "unrouted", ""))
	// No binding yet: the alternate exchange gets it.
	require.Equal(t, []string{"unrouted"}, routeSorted(t, tb, "x", "k", nil))
	// An exchange destination takes its share like a queue.
	mustBind(t, tb, toExchange("x", "e", "3"))
	mustBind(t, tb, toQueue("e", "via-e", ""))
	require.Equal(t, []string{"via-e"}, routeSorted(t, tb, "x", "k", nil))
	// CC keys: consistent hashing looks at the first key only.
	tb.AddQueue("q")
	mustBind(t, tb, toQueue("x", "q", "3"))
	for i := range 50 {
		k := strconv.Itoa(i)
		require.Equal(t, tb.Route("x", k, nil, nil), tb.RouteKeys("x", k, []string{"a", "b"}, nil, nil))
	}
}

func TestConsistentHashBindingKey(t *testing.T) {
	tests := []struct {
		key string
		ok  bool
	}{
		{"1", true}, {"+7", true}, {"007", true}, {"4294967296", true},
		{"0", false}, {"-1", false}, {"", false}, {"one", false}, {" 1", false},
		{"1.5", false}, {"4294967297", false}, {"99999999999999999999", false},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			tb := hashTable(t, ConsistentHash, HashOn{})
			tb.AddQueue("q")
			_, err := tb.Bind(toQueue("x", "q", tt.key))
			if tt.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidBinding)
			require.Empty(t, tb.Bindings()[0:0])
			require.Zero(t, tb.SourceBindings("x"))
		})
	}
}

func TestParseHashArgs(t *testing.T) {
	tests := []struct {
		name string
		args map[string]any
		want HashOn
		err  string
	}{
		{"none", nil, HashOn{}, ""},
		{"header", map[string]any{"hash-header": "h"}, HashOn{Header: "h"}, ""},
		{"property", map[string]any{"hash-property": "message_id"}, HashOn{Property: "message_id"}, ""},
		{"both", map[string]any{"hash-header": "h", "hash-property": "message_id"}, HashOn{}, "mutually exclusive"},
		{"unknown property", map[string]any{"hash-property": "app_id"}, HashOn{}, "Unsupported property: app_id"},
		{"header not a string", map[string]any{"hash-header": int32(1)}, HashOn{}, "must be a string"},
		{"others ignored", map[string]any{"alternate-exchange": "ae"}, HashOn{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseHashArgs(tt.args)
			if tt.err != "" {
				require.ErrorIs(t, err, ErrInvalidArgument)
				require.ErrorContains(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestJumpHashRange(t *testing.T) {
	for _, n := range []int64{1, 2, 3, 1000, 1 << 40} {
		for k := range uint64(1000) {
			b := jumpHash(hashBytes([]byte(strconv.FormatUint(k, 10))), n)
			require.True(t, b >= 0 && b < n, "bucket %d of %d", b, n)
		}
	}
}

// FuzzConsistentHashBind binds fuzzed keys to a consistent-hash exchange
// and routes fuzzed messages: a key is accepted exactly when it is a
// weight parseWeight takes, and routing always reaches one bound queue.
func FuzzConsistentHashBind(f *testing.F) {
	for _, s := range []string{"1", "0", "-3", "+9", "4294967297", "x", ""} {
		f.Add(s, "rk", "hdr")
	}
	f.Fuzz(func(t *testing.T, weight, key, header string) {
		tb := hashTable(t, ConsistentHash, HashOn{Header: "h"}, "2")
		tb.AddQueue("fz")
		_, err := tb.Bind(toQueue("x", "fz", weight))
		_, werr := parseWeight(weight)
		require.Equal(t, werr == nil, err == nil, "weight %q: %v", weight, err)
		got := tb.RouteMessage("x", key, nil, &Message{Headers: map[string]any{"h": header}}, nil)
		require.Len(t, got, 1)
	})
}

// TestResolveFederationUpstream: x-federation-upstream routes as fanout
// and needs x-max-hops of type long, as RabbitMQ's federation plugin
// validates it.
func TestResolveFederationUpstream(t *testing.T) {
	for _, tc := range []struct {
		args map[string]any
		err  string
	}{
		{map[string]any{"x-max-hops": int64(1)}, ""},
		{map[string]any{}, "Argument x-max-hops missing"},
		{map[string]any{"x-max-hops": int32(1)}, "Argument x-max-hops must be of type long"},
	} {
		k, err := ResolveType(TypeFederationUpstream, tc.args)
		if tc.err == "" {
			require.NoError(t, err)
			require.Equal(t, Fanout, k)
			continue
		}
		require.ErrorIs(t, err, ErrInvalidArgument)
		require.ErrorContains(t, err, tc.err)
	}
}

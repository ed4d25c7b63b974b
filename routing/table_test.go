package routing

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseKind(t *testing.T) {
	tests := []struct {
		in   string
		want Kind
		err  bool
	}{
		{"direct", Direct, false},
		{"fanout", Fanout, false},
		{"topic", Topic, false},
		{"headers", Headers, false},
		{"", 0, true},
		{"Topic", 0, true},
		{"x-consistent-hash", ConsistentHash, false},
		{"x-modulus-hash", ModulusHash, false},
		{"x-delayed-message", 0, true},
		{"x-random", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			k, err := ParseKind(tt.in)
			if tt.err {
				require.ErrorIs(t, err, ErrUnknownKind)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, k)
			require.Equal(t, tt.in, k.String())
		})
	}
	require.Equal(t, "Kind(9)", Kind(9).String())
}

func TestIsReserved(t *testing.T) {
	require.True(t, IsReserved("amq.direct"))
	require.True(t, IsReserved("amq.anything"))
	require.False(t, IsReserved("amq"))
	require.False(t, IsReserved("amqx.direct"))
	require.False(t, IsReserved(""))
}

func TestStripCRLF(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"orders", "orders"},
		{"a\r\nb", "ab"},
		{"\ra\rb\n", "ab"},
		{"\r\n", ""},
		{"a\x00\t\x01\x7fb", "a\x00\t\x01\x7fb"},
		{"", ""},
	} {
		require.Equal(t, tc.want, StripCRLF(tc.in), "%q", tc.in)
	}
}

func TestDeclareDefaults(t *testing.T) {
	tb := NewTable()
	_, ok := tb.Exchange("")
	require.False(t, ok)
	tb.DeclareDefaults()
	tb.DeclareDefaults() // idempotent
	got := tb.Exchanges()
	require.Equal(t, []Exchange{
		{Name: "", Kind: Direct},
		{Name: "amq.direct", Kind: Direct},
		{Name: "amq.fanout", Kind: Fanout},
		{Name: "amq.headers", Kind: Headers},
		{Name: "amq.match", Kind: Headers},
		{Name: "amq.topic", Kind: Topic},
	}, got)

	tb.AddQueue("jobs")
	require.Equal(t, []string{"jobs"}, routeSorted(t, tb, "", "jobs", nil))
	require.Equal(t, []string{}, routeSorted(t, tb, "", "nope", nil))
	tb.RemoveQueue("jobs")
	require.Equal(t, []string{}, routeSorted(t, tb, "", "jobs", nil))
}

func TestDefaultExchangeIsUntouchable(t *testing.T) {
	tb := NewTable()
	tb.DeclareDefaults()
	tb.AddQueue("q")
	mustDeclare(t, tb, Exchange{Name: "x", Kind: Direct})

	require.ErrorIs(t, tb.DeclareExchange(Exchange{Name: "", Kind: Fanout}), ErrDefaultExchange)
	_, err := tb.DeleteExchange("")
	require.ErrorIs(t, err, ErrDefaultExchange)
	for _, b := range []Binding{toQueue("", "q", "q"), toExchange("", "x", ""), toExchange("x", "", "")} {
		_, err := tb.Bind(b)
		require.ErrorIs(t, err, ErrDefaultExchange, "%+v", b)
		_, err = tb.Unbind(b)
		require.ErrorIs(t, err, ErrDefaultExchange, "%+v", b)
	}
	_, ok := tb.Exchange("")
	require.True(t, ok)
}

func TestDeclareExchangeValidation(t *testing.T) {
	tb := NewTable()
	require.ErrorIs(t, tb.DeclareExchange(Exchange{Name: "x"}), ErrUnknownKind)
	require.ErrorIs(t, tb.DeclareExchange(Exchange{Name: "x", Kind: 17}), ErrUnknownKind)
	_, ok := tb.Exchange("x")
	require.False(t, ok)
}

func TestBindErrors(t *testing.T) {
	tb := NewTable()
	mustDeclare(t, tb, Exchange{Name: "x", Kind: Direct})
	tb.AddQueue("q")
	tests := []struct {
		name string
		b    Binding
		err  error
	}{
		{"missing source", toQueue("nope", "q", ""), ErrExchangeNotFound},
		{"missing queue", toQueue("x", "nope", ""), ErrQueueNotFound},
		{"missing destination exchange", toExchange("x", "nope", ""), ErrExchangeNotFound},
		{"queue name is not an exchange", toExchange("x", "q", ""), ErrExchangeNotFound},
		{"exchange name is not a queue", toQueue("x", "x", ""), ErrQueueNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			added, err := tb.Bind(tt.b)
			require.ErrorIs(t, err, tt.err)
			require.False(t, added)
			removed, err := tb.Unbind(tt.b)
			require.ErrorIs(t, err, tt.err)
			require.False(t, removed)
		})
	}
	require.Empty(t, tb.Bindings())
}

func TestBindingIdentity(t *testing.T) {
	tb := NewTable()
	mustDeclare(t, tb, Exchange{Name: "x", Kind: Direct})
	tb.AddQueue("q")

	bind := func(b Binding) bool {
		added, err := tb.Bind(b)
		require.NoError(t, err)
		return added
	}
	args := func(kv ...any) map[string]any {
		m := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	b := toQueue("x", "q", "k")
	require.True(t, bind(b))
	require.False(t, bind(b), "identical binding is a no-op")
	b.Args = map[string]any{}
	require.False(t, bind(b), "empty args equal nil args")

	withArgs := func(m map[string]any) Binding { b := toQueue("x", "q", "k"); b.Args = m; return b }
	require.True(t, bind(withArgs(args("a", int32(1)))))
	require.False(t, bind(withArgs(args("a", int32(1)))))
	require.False(t, bind(withArgs(args("a", 1))), "a Go int is the int32 the codec sends")
	require.True(t, bind(withArgs(args("a", int64(1)))), "types are part of identity")
	require.True(t, bind(withArgs(args("a", "1"))))
	require.True(t, bind(withArgs(args("a", []byte("1")))))
	require.True(t, bind(withArgs(args("t", map[string]any{"n": int16(2)}))))
	require.False(t, bind(withArgs(args("t", namedTable{"n": int16(2)}))), "named tables are tables")
	require.True(t, bind(withArgs(args("d", decimal{1, 2}))))
	require.False(t, bind(withArgs(args("d", decimal{1, 2}))))
	require.True(t, bind(toQueue("x", "q", "other")))

	// The direct index holds the queue once under "k" however many
	// bindings share the key.
	require.Equal(t, []string{"q"}, routeSorted(t, tb, "x", "k", nil))
	require.Len(t, tb.Bindings(), 8)
	require.Equal(t, 8, tb.SourceBindings("x"))

	// Removing all but one binding under "k" keeps the route.
	for _, bb := range tb.Bindings() {
		if bb.Key == "k" && len(bb.Args) > 0 {
			removed, err := tb.Unbind(bb)
			require.NoError(t, err)
			require.True(t, removed)
		}
	}
	require.Equal(t, []string{"q"}, routeSorted(t, tb, "x", "k", nil))
	removed, err := tb.Unbind(toQueue("x", "q", "k"))
	require.NoError(t, err)
	require.True(t, removed)
	removed, err = tb.Unbind(toQueue("x", "q", "k"))
	require.NoError(t, err)
	require.False(t, removed, "second unbind finds nothing")
	require.Equal(t, []string{}, routeSorted(t, tb, "x", "k", nil))
	require.Equal(t, []string{"q"}, routeSorted(t, tb, "x", "other", nil))
}

func TestBindCopiesArgs(t *testing.T) {
	tb := NewTable()
	mustDeclare(t, tb, Exchange{Name: "h", Kind: Headers})
	tb.AddQueue("q")
	args := map[string]any{"a": "1"}
	mustBind(t, tb, Binding{Source: "h", Destination: Destination{Name: "q"}, Args: args})
	args["a"] = "2"
	args["b"] = "3"
	require.Equal(t, []Binding{{Source: "h", Destination: Destination{Name: "q"}, Args: map[string]any{"a": "1"}}}, tb.Bindings())
}

func TestBindingsSorted(t *testing.T) {
	tb := NewTable()
	mustDeclare(t, tb, Exchange{Name: "b", Kind: Fanout})
	mustDeclare(t, tb, Exchange{Name: "a", Kind: Direct})
	tb.AddQueue("q2")
	tb.AddQueue("q1")
	mustBind(t, tb, toExchange("b", "a", ""))
	mustBind(t, tb, toQueue("b", "q1", ""))
	mustBind(t, tb, toQueue("a", "q2", "k2"))
	mustBind(t, tb, toQueue("a", "q2", "k1"))
	mustBind(t, tb, toQueue("a", "q1", "k9"))
	require.Equal(t, []Binding{
		toQueue("a", "q1", "k9"),
		toQueue("a", "q2", "k1"),
		toQueue("a", "q2", "k2"),
		toQueue("b", "q1", ""),
		toExchange("b", "a", ""),
	}, tb.Bindings())
}

func TestRemoveQueue(t *testing.T) {
	tb := NewTable()
	mustDeclare(t, tb, Exchange{Name: "d", Kind: Direct})
	mustDeclare(t, tb, Exchange{Name: "f", Kind: Fanout})
	mustDeclare(t, tb, Exchange{Name: "t", Kind: Topic})
	mustDeclare(t, tb, Exchange{Name: "h", Kind: Headers})
	tb.AddQueue("q")
	tb.AddQueue("keep")
	for _, x := range []string{"d", "f", "t", "h"} {
		mustBind(t, tb, toQueue(x, "q", "k"))
	}
	mustBind(t, tb, toQueue("f", "keep", ""))

	removed := tb.RemoveQueue("q")
	require.Equal(t, []Binding{toQueue("d", "q", "k"), toQueue("f", "q", "k"), toQueue("h", "q", "k"), toQueue("t", "q", "k")}, removed)
	require.Equal(t, []string{"d", "h", "t"}, tb.EmptiedSources(removed))
	require.False(t, tb.HasQueue("q"))
	for _, x := range []string{"d", "t", "h"} {
		require.Equal(t, 0, tb.SourceBindings(x))
		require.Equal(t, []string{}, routeSorted(t, tb, x, "k", nil))
	}
	require.Equal(t, []string{"keep"}, routeSorted(t, tb, "f", "", nil))
	require.Nil(t, tb.RemoveQueue("q"), "second removal")
	_, err := tb.Bind(toQueue("d", "q", "k"))
	require.ErrorIs(t, err, ErrQueueNotFound)
}

func TestDeleteExchange(t *testing.T) {
	tb := NewTable()
	for _, n := range []string{"up", "x", "down", "other"} {
		mustDeclare(t, tb, Exchange{Name: n, Kind: Fanout})
	}
	tb.AddQueue("q")
	mustBind(t, tb, toExchange("up", "x", ""))
	mustBind(t, tb, toExchange("x", "down", ""))
	mustBind(t, tb, toExchange("x", "x", "")) // self-binding: source and destination
	mustBind(t, tb, toQueue("x", "q", ""))
	mustBind(t, tb, toQueue("down", "q", ""))
	mustBind(t, tb, toQueue("other", "q", ""))

	removed, err := tb.DeleteExchange("x")
	require.NoError(t, err)
	require.Equal(t, []Binding{toExchange("up", "x", ""), toQueue("x", "q", ""), toExchange("x", "down", ""), toExchange("x", "x", "")}, removed)
	require.Equal(t, []string{"up"}, tb.EmptiedSources(removed), "x is gone, down and other keep theirs")
	_, ok := tb.Exchange("x")
	require.False(t, ok)
	require.Equal(t, []string{}, routeSorted(t, tb, "up", "", nil))
	require.Equal(t, []string{"q"}, routeSorted(t, tb, "down", "", nil))

	_, err = tb.DeleteExchange("x")
	require.ErrorIs(t, err, ErrExchangeNotFound)

	// A re-declared exchange of the same name starts with no bindings.
	mustDeclare(t, tb, Exchange{Name: "x", Kind: Fanout})
	require.Equal(t, 0, tb.SourceBindings("x"))
	require.Equal(t, []string{}, routeSorted(t, tb, "x", "", nil))
}

func TestUnbindEmptiesSource(t *testing.T) {
	tb := NewTable()
	mustDeclare(t, tb, Exchange{Name: "x", Kind: Direct})
	tb.AddQueue("q")
	mustBind(t, tb, toQueue("x", "q", "a"))
	mustBind(t, tb, toQueue("x", "q", "b"))
	_, err := tb.Unbind(toQueue("x", "q", "a"))
	require.NoError(t, err)
	require.Equal(t, 1, tb.SourceBindings("x"))
	require.Empty(t, tb.EmptiedSources([]Binding{toQueue("x", "q", "a")}))
	_, err = tb.Unbind(toQueue("x", "q", "b"))
	require.NoError(t, err)
	require.Equal(t, 0, tb.SourceBindings("x"))
	require.Equal(t, []string{"x"}, tb.EmptiedSources([]Binding{toQueue("x", "q", "a"), toQueue("x", "q", "b")}))
	require.Equal(t, 0, tb.SourceBindings("missing"))
}

func TestRedeclareKeepsBindings(t *testing.T) {
	tb := NewTable()
	mustDeclare(t, tb, Exchange{Name: "x", Kind: Direct})
	tb.AddQueue("q")
	mustBind(t, tb, toQueue("x", "q", "a.b"))
	mustBind(t, tb, Binding{Source: "x", Destination: Destination{Name: "q"}, Key: "z", Args: map[string]any{"x-match": "bogus", "h": "1"}})

	mustDeclare(t, tb, Exchange{Name: "x", Kind: Direct, Internal: true, AlternateExchange: "ae"})
	e, ok := tb.Exchange("x")
	require.True(t, ok)
	require.Equal(t, Exchange{Name: "x", Kind: Direct, Internal: true, AlternateExchange: "ae"}, e)
	require.Equal(t, []string{"q"}, routeSorted(t, tb, "x", "a.b", nil))

	// A change of kind re-indexes the bindings for the new kind.
	mustDeclare(t, tb, Exchange{Name: "x", Kind: Topic})
	require.Equal(t, []string{"q"}, routeSorted(t, tb, "x", "a.b", nil))
	require.Equal(t, []string{}, routeSorted(t, tb, "x", "a.c", nil))
	mustDeclare(t, tb, Exchange{Name: "x", Kind: Fanout})
	require.Equal(t, []string{"q"}, routeSorted(t, tb, "x", "anything", nil))
	// Headers: the unvalidated x-match reads as all, as RabbitMQ's
	// parse_x_match does; the plain binding has no args and matches all.
	mustDeclare(t, tb, Exchange{Name: "x", Kind: Headers})
	require.Equal(t, []string{"q"}, routeSorted(t, tb, "x", "", nil))
	_, err := tb.Unbind(toQueue("x", "q", "a.b"))
	require.NoError(t, err)
	require.Equal(t, []string{}, routeSorted(t, tb, "x", "", map[string]any{"h": "2"}))
	require.Equal(t, []string{"q"}, routeSorted(t, tb, "x", "", map[string]any{"h": "1"}))
	require.Len(t, tb.Bindings(), 1)
}

func TestFanoutManyQueuesAddRemove(t *testing.T) {
	// Crosses the destList index threshold both ways.
	tb := NewTable()
	mustDeclare(t, tb, Exchange{Name: "f", Kind: Fanout})
	var want []string
	for i := range 3 * posThreshold {
		q := string(rune('A' + i))
		tb.AddQueue(q)
		mustBind(t, tb, toQueue("f", q, ""))
		mustBind(t, tb, toQueue("f", q, "second"))
		want = append(want, q)
	}
	require.Equal(t, want, routeSorted(t, tb, "f", "", nil))
	for i, q := range want {
		if i%3 == 0 {
			continue
		}
		_, err := tb.Unbind(toQueue("f", q, ""))
		require.NoError(t, err)
		require.Contains(t, routeSorted(t, tb, "f", "", nil), q, "one binding left")
		_, err = tb.Unbind(toQueue("f", q, "second"))
		require.NoError(t, err)
		require.NotContains(t, routeSorted(t, tb, "f", "", nil), q)
	}
	var left []string
	for i, q := range want {
		if i%3 == 0 {
			left = append(left, q)
		}
	}
	require.Equal(t, left, routeSorted(t, tb, "f", "", nil))
}

func TestZeroTable(t *testing.T) {
	var tb Table
	require.Empty(t, tb.Route("x", "k", nil, nil))
	require.Empty(t, tb.Bindings())
	require.Empty(t, tb.Exchanges())
	require.Nil(t, tb.RemoveQueue("q"))
	_, err := tb.DeleteExchange("x")
	require.ErrorIs(t, err, ErrExchangeNotFound)
	_, err = tb.Bind(toQueue("x", "q", ""))
	require.ErrorIs(t, err, ErrExchangeNotFound)
	mustDeclare(t, &tb, Exchange{Name: "x", Kind: Fanout})
	tb.AddQueue("q")
	mustBind(t, &tb, toQueue("x", "q", ""))
	require.Equal(t, []string{"q"}, routeSorted(t, &tb, "x", "", nil))
}

func TestBindRefusesArgsNoTableCanHold(t *testing.T) {
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	deep := map[string]any{}
	for range maxDepth + 1 {
		deep = map[string]any{"d": deep}
	}
	deepArray := []any{}
	for range maxDepth + 1 {
		deepArray = []any{deepArray}
	}
	cyclicNamed := namedTable{}
	cyclicNamed["self"] = cyclicNamed
	tests := []struct {
		name string
		args map[string]any
	}{
		{"cyclic table", cyclic},
		{"cyclic named table", map[string]any{"t": cyclicNamed}},
		{"too deep", deep},
		{"array too deep", map[string]any{"a": deepArray}},
		{"string slice", map[string]any{"a": []string{"x"}}},
		{"func", map[string]any{"f": func() {}}},
		{"int-keyed map", map[string]any{"m": map[int]any{1: "x"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := NewTable()
			mustDeclare(t, tb, Exchange{Name: "h", Kind: Headers})
			tb.AddQueue("q")
			b := Binding{Source: "h", Destination: Destination{Name: "q"}, Args: tt.args}
			_, err := tb.Bind(b)
			require.ErrorIs(t, err, ErrInvalidBinding)
			_, err = tb.Unbind(b)
			require.ErrorIs(t, err, ErrInvalidBinding)
			require.Empty(t, tb.Bindings())
		})
	}
	// As deep as the codec allows is fine.
	ok := map[string]any{}
	for range maxDepth - 1 {
		ok = map[string]any{"d": ok}
	}
	tb := NewTable()
	mustDeclare(t, tb, Exchange{Name: "h", Kind: Headers})
	tb.AddQueue("q")
	mustBind(t, tb, Binding{Source: "h", Destination: Destination{Name: "q"}, Args: ok})
	require.Equal(t, []string{"q"}, routeSorted(t, tb, "h", "", ok))
	// A cyclic header value against a finite argument ends.
	require.Equal(t, []string{}, routeSorted(t, tb, "h", "", map[string]any{"d": cyclic}))
}

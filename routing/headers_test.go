package routing

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// namedTable stands in for amqp.Table, which routing cannot import.
type namedTable map[string]any

// decimal stands in for amqp.Decimal.
type decimal struct {
	Scale uint8
	Value int32
}

func TestHeadersMatching(t *testing.T) {
	ts := time.Unix(1700000000, 0)
	tests := []struct {
		name    string
		args    map[string]any
		headers map[string]any
		want    bool
	}{
		{"all default, all present", map[string]any{"a": "1", "b": "2"}, map[string]any{"a": "1", "b": "2", "c": "3"}, true},
		{"all default, one differs", map[string]any{"a": "1", "b": "2"}, map[string]any{"a": "1", "b": "3"}, false},
		{"all default, one missing", map[string]any{"a": "1", "b": "2"}, map[string]any{"a": "1"}, false},
		{"all explicit", map[string]any{"x-match": "all", "a": "1"}, map[string]any{"a": "1"}, true},
		{"any, one matches", map[string]any{"x-match": "any", "a": "1", "b": "2"}, map[string]any{"b": "2"}, true},
		{"any, none matches", map[string]any{"x-match": "any", "a": "1", "b": "2"}, map[string]any{"a": "2", "c": "1"}, false},
		{"any, no headers", map[string]any{"x-match": "any", "a": "1"}, nil, false},
		{"all, nothing to compare matches everything", map[string]any{"x-match": "all"}, nil, true},
		{"no args at all matches everything", nil, map[string]any{"a": 1}, true},
		{"any, nothing to compare matches nothing", map[string]any{"x-match": "any"}, map[string]any{"a": 1}, false},
		{"any, only x- args", map[string]any{"x-match": "any", "x-a": "1"}, map[string]any{"x-a": "1"}, false},

		// x- arguments
		{"all ignores x- args", map[string]any{"a": "1", "x-b": "2"}, map[string]any{"a": "1"}, true},
		{"any ignores x- args", map[string]any{"x-match": "any", "x-b": "2"}, map[string]any{"x-b": "2"}, false},
		{"all-with-x compares x- args", map[string]any{"x-match": "all-with-x", "a": "1", "x-b": "2"}, map[string]any{"a": "1"}, false},
		{"all-with-x, x- present", map[string]any{"x-match": "all-with-x", "a": "1", "x-b": "2"}, map[string]any{"a": "1", "x-b": "2"}, true},
		{"any-with-x, x- matches", map[string]any{"x-match": "any-with-x", "a": "1", "x-b": "2"}, map[string]any{"x-b": "2"}, true},
		{"with-x never compares x-match itself", map[string]any{"x-match": "all-with-x", "a": "1"}, map[string]any{"a": "1"}, true},

		// void arguments match presence
		{"void matches any value", map[string]any{"a": nil}, map[string]any{"a": "whatever"}, true},
		{"void matches void", map[string]any{"a": nil}, map[string]any{"a": nil}, true},
		{"void needs presence", map[string]any{"a": nil}, map[string]any{"b": 1}, false},
		{"any with void", map[string]any{"x-match": "any", "a": nil, "b": 1}, map[string]any{"a": 7}, true},
		{"value does not match void header", map[string]any{"a": "1"}, map[string]any{"a": nil}, false},

		// values compare like Erlang ==
		{"int32 vs int64", map[string]any{"a": int32(1)}, map[string]any{"a": int64(1)}, true},
		{"uint8 vs int16", map[string]any{"a": uint8(200)}, map[string]any{"a": int16(200)}, true},
		{"int8 negative vs int64", map[string]any{"a": int8(-5)}, map[string]any{"a": int64(-5)}, true},
		{"int vs float64 equal", map[string]any{"a": int32(2)}, map[string]any{"a": float64(2)}, true},
		{"int vs float64 fraction", map[string]any{"a": int32(2)}, map[string]any{"a": 2.5}, false},
		{"float32 vs float64", map[string]any{"a": float32(0.5)}, map[string]any{"a": 0.5}, true},
		{"uint32 vs int32", map[string]any{"a": uint32(7)}, map[string]any{"a": int32(7)}, true},
		{"different ints", map[string]any{"a": int32(1)}, map[string]any{"a": int32(2)}, false},
		{"int64 max vs float", map[string]any{"a": int64(1<<63 - 1)}, map[string]any{"a": float64(1 << 63)}, false},
		{"timestamp vs its seconds", map[string]any{"a": ts}, map[string]any{"a": int64(1700000000)}, true},
		{"timestamp vs timestamp", map[string]any{"a": ts}, map[string]any{"a": ts.Add(300 * time.Millisecond)}, true},
		{"number vs string", map[string]any{"a": int32(1)}, map[string]any{"a": "1"}, false},
		{"string vs bytes", map[string]any{"a": "xy"}, map[string]any{"a": []byte("xy")}, true},
		{"bytes vs bytes", map[string]any{"a": []byte("xy")}, map[string]any{"a": []byte("xy")}, true},
		{"bytes differ", map[string]any{"a": []byte("xy")}, map[string]any{"a": []byte("xz")}, false},
		{"bool", map[string]any{"a": true}, map[string]any{"a": true}, true},
		{"bool differs", map[string]any{"a": true}, map[string]any{"a": false}, false},
		{"bool vs int", map[string]any{"a": true}, map[string]any{"a": int32(1)}, false},
		{"decimal", map[string]any{"a": decimal{2, 12345}}, map[string]any{"a": decimal{2, 12345}}, true},
		{"decimal other scale", map[string]any{"a": decimal{1, 10}}, map[string]any{"a": decimal{0, 1}}, false},

		// arrays and tables compare strictly, types included
		{"array equal", map[string]any{"a": []any{int32(1), "x"}}, map[string]any{"a": []any{int32(1), "x"}}, true},
		{"array element type differs", map[string]any{"a": []any{int32(1)}}, map[string]any{"a": []any{int64(1)}}, false},
		{"array order matters", map[string]any{"a": []any{"x", "y"}}, map[string]any{"a": []any{"y", "x"}}, false},
		{"array string vs bytes", map[string]any{"a": []any{"x"}}, map[string]any{"a": []any{[]byte("x")}}, false},
		{"table equal", map[string]any{"a": map[string]any{"k": int32(1)}}, map[string]any{"a": map[string]any{"k": int32(1)}}, true},
		{"table vs named table", map[string]any{"a": map[string]any{"k": "v"}}, map[string]any{"a": namedTable{"k": "v"}}, true},
		{"named tables nested", map[string]any{"a": namedTable{"k": namedTable{"z": []any{int16(3)}}}}, map[string]any{"a": namedTable{"k": namedTable{"z": []any{int16(3)}}}}, true},
		{"table value type differs", map[string]any{"a": map[string]any{"k": int32(1)}}, map[string]any{"a": map[string]any{"k": int64(1)}}, false},
		{"table extra key", map[string]any{"a": map[string]any{"k": "v"}}, map[string]any{"a": map[string]any{"k": "v", "l": "w"}}, false},
		{"go int counts as int32 in arrays", map[string]any{"a": []any{1}}, map[string]any{"a": []any{int32(1)}}, true},
		{"table vs array", map[string]any{"a": map[string]any{}}, map[string]any{"a": []any{}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := NewTable()
			mustDeclare(t, tb, Exchange{Name: "h", Kind: Headers})
			tb.AddQueue("q")
			mustBind(t, tb, Binding{Source: "h", Destination: Destination{Name: "q"}, Args: tt.args})
			got := tb.Route("h", "ignored", tt.headers, nil)
			require.Equal(t, tt.want, len(got) == 1, "routed to %v", got)
		})
	}
}

func TestHeadersInvalidXMatch(t *testing.T) {
	tests := []struct {
		name string
		args map[string]any
	}{
		{"unknown mode", map[string]any{"x-match": "some"}},
		{"wrong case", map[string]any{"x-match": "ALL"}},
		{"bytes", map[string]any{"x-match": []byte("all")}},
		{"number", map[string]any{"x-match": int32(1)}},
		{"void", map[string]any{"x-match": nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := NewTable()
			mustDeclare(t, tb, Exchange{Name: "h", Kind: Headers})
			tb.AddQueue("q")
			added, err := tb.Bind(Binding{Source: "h", Destination: Destination{Name: "q"}, Args: tt.args})
			require.ErrorIs(t, err, ErrInvalidBinding)
			require.False(t, added)
			require.Empty(t, tb.Bindings())
			// Other kinds do not look at x-match.
			mustDeclare(t, tb, Exchange{Name: "d", Kind: Direct})
			mustBind(t, tb, Binding{Source: "d", Destination: Destination{Name: "q"}, Args: tt.args})
		})
	}
}

func TestHeadersSameQueueTwoBindings(t *testing.T) {
	// RabbitMQ keys bindings by their arguments too, so one queue can hold
	// two headers bindings; a message matching both still arrives once.
	tb := NewTable()
	mustDeclare(t, tb, Exchange{Name: "h", Kind: Headers})
	tb.AddQueue("q")
	tb.AddQueue("r")
	mustBind(t, tb, Binding{Source: "h", Destination: Destination{Name: "q"}, Args: map[string]any{"a": "1"}})
	mustBind(t, tb, Binding{Source: "h", Destination: Destination{Name: "q"}, Args: map[string]any{"b": "2"}})
	mustBind(t, tb, Binding{Source: "h", Destination: Destination{Name: "r"}, Args: map[string]any{"b": "2"}})
	require.Equal(t, []string{"q", "r"}, routeSorted(t, tb, "h", "", map[string]any{"a": "1", "b": "2"}))
	require.Equal(t, []string{"q"}, routeSorted(t, tb, "h", "", map[string]any{"a": "1"}))

	removed, err := tb.Unbind(Binding{Source: "h", Destination: Destination{Name: "q"}, Args: map[string]any{"a": "1"}})
	require.NoError(t, err)
	require.True(t, removed)
	require.Equal(t, []string{}, routeSorted(t, tb, "h", "", map[string]any{"a": "1"}))
	require.Equal(t, []string{"q", "r"}, routeSorted(t, tb, "h", "", map[string]any{"b": "2"}))
}

// namedArray stands in for a named []any type.
type namedArray []any

func TestStrictEqual(t *testing.T) {
	ts := time.Unix(5, 0)
	tests := []struct {
		a, b any
		want bool
	}{
		{nil, nil, true},
		{nil, int32(0), false},
		{true, true, true},
		{true, false, false},
		{int8(1), int8(1), true},
		{int8(1), uint8(1), false},
		{uint8(1), uint8(1), true},
		{int16(1), int16(1), true},
		{int16(1), uint16(1), false},
		{uint16(1), uint16(1), true},
		{int32(1), int32(1), true},
		{uint32(1), uint32(1), true},
		{uint32(1), int32(1), false},
		{int64(1), int64(1), true},
		{1, int32(1), true}, // a Go int is what the codec sends
		{int32(1), 1, true},
		{1 << 40, int64(1 << 40), true},
		{1 << 40, int32(0), false},
		{uint(3), uint(3), true},
		{uint64(3), uint64(3), true},
		{uint64(3), uint(3), false},
		{float32(1.5), float32(1.5), true},
		{float32(1.5), 1.5, false},
		{1.5, 1.5, true},
		{"s", "s", true},
		{"s", []byte("s"), false},
		{[]byte("s"), []byte("s"), true},
		{ts, ts.Add(time.Millisecond), true},
		{ts, ts.Add(time.Second), false},
		{ts, int64(5), false},
		{[]any{int32(1)}, []any{int32(1)}, true},
		{[]any{int32(1)}, namedArray{int32(1)}, true},
		{namedArray{"x"}, namedArray{"x"}, true},
		{namedArray{"x"}, namedArray{"x", "y"}, false},
		{namedArray{"x"}, []any{"y"}, false},
		{[]any{}, map[string]any{}, false},
		{map[string]any{"a": nil}, map[string]any{"b": nil}, false},
		{map[string]any{"a": nil}, map[string]any{"a": nil, "b": nil}, false},
		{namedTable{"a": int16(1)}, namedTable{"a": int16(1)}, true},
		{namedTable{"a": int16(1)}, namedTable{"a": int16(2)}, false},
		{namedTable{"a": int16(1)}, namedTable{"b": int16(1)}, false},
		{namedTable{"a": int16(1)}, namedTable{"a": int16(1), "b": nil}, false},
		{decimal{1, 2}, decimal{1, 2}, true},
		{decimal{1, 2}, struct{ Scale uint8 }{1}, false},
		{[]string{"x"}, []string{"x"}, true}, // not a field type; DeepEqual decides
		{[]string{"x"}, []string{"y"}, false},
		{[]int{1}, nil, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%T(%v)=%T(%v)", tt.a, tt.a, tt.b, tt.b), func(t *testing.T) {
			require.Equal(t, tt.want, strictEqual(tt.a, tt.b))
			require.Equal(t, tt.want, strictEqual(tt.b, tt.a), "symmetric")
		})
	}
}

func TestHeaderValueEqualNumbers(t *testing.T) {
	tests := []struct {
		a, b any
		want bool
	}{
		{int32(-1), uint64(1<<64 - 1), false},
		{int64(7), uint(7), true},
		{uint(7), uint64(7), true},
		{uint64(1 << 63), float64(1 << 63), true},
		{uint64(1<<64 - 1), float64(1 << 64), false},
		{uint(1), -1.0, false},
		{uint(2), 2.5, false},
		{int64(-3), -3.0, true},
		{float32(2), int8(2), true},
		{2.0, 2.0, true},
		{1, int32(1), true},
		{int8(1), true, false},
		{"1", int32(1), false},
		{[]byte("a"), "a", true},
		{[]byte("a"), []byte("b"), false},
		{[]byte("a"), int32(1), false},
		{"a", true, false},
		{true, "true", false},
		{nil, nil, true},
		{decimal{0, 1}, int32(1), false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%T(%v)=%T(%v)", tt.a, tt.a, tt.b, tt.b), func(t *testing.T) {
			require.Equal(t, tt.want, headerValueEqual(tt.a, tt.b))
			require.Equal(t, tt.want, headerValueEqual(tt.b, tt.a), "symmetric")
		})
	}
}

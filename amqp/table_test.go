package amqp

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// everyType holds one value of every field type DecodeTable produces.
func everyType() Table {
	return Table{
		"bool":    true,
		"false":   false,
		"int8":    int8(-8),
		"uint8":   uint8(200),
		"int16":   int16(-1600),
		"uint16":  uint16(60000),
		"int32":   int32(-320000),
		"uint32":  uint32(4000000000),
		"int64":   int64(-1) << 40,
		"float32": float32(3.5),
		"float64": 2.25,
		"decimal": Decimal{Scale: 2, Value: -12345},
		"string":  "héllo",
		"empty":   "",
		"bytes":   []byte{0, 1, 2, 0xff},
		"nobytes": []byte{},
		"time":    time.Unix(1700000000, 0).UTC(),
		"void":    nil,
		"array":   []any{int32(1), "two", []any{true}, Table{"in": "array"}},
		"table":   Table{"nested": Table{"deeper": int64(7)}},
	}
}

func TestTableRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   Table
	}{
		{"nil", nil},
		{"every type", everyType()},
		{"each type nested in an array", Table{"a": func() []any {
			var a []any
			for _, k := range []string{"bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "float32", "float64", "decimal", "string", "bytes", "time", "void", "table"} {
				a = append(a, everyType()[k])
			}
			return a
		}()}},
		{"long key", Table{strings.Repeat("k", 255): "v"}},
		{"deep but allowed", deepTable(maxDepth - 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enc, err := AppendTable([]byte("prefix"), tc.in)
			require.NoError(t, err)
			require.Equal(t, "prefix", string(enc[:6]))
			got, n, err := DecodeTable(append(enc[6:], "trailer"...))
			require.NoError(t, err)
			require.Equal(t, len(enc)-6, n)
			require.Equal(t, tc.in, got)
			// Keys are sorted, so the encoding of what we decoded is identical.
			again, err := AppendTable(nil, got)
			require.NoError(t, err)
			require.Equal(t, enc[6:], again)
		})
	}
}

func deepTable(levels int) Table {
	t := Table{"leaf": true}
	for range levels {
		t = Table{"t": t}
	}
	return t
}

func TestTableEncodeConversions(t *testing.T) {
	type namedTable map[string]interface{} // stands in for amqp091.Table
	type namedArray []interface{}
	for _, tc := range []struct {
		name string
		in   any
		want any
	}{
		{"small int", 7, int32(7)},
		{"negative int", -7, int32(-7)},
		{"big int", 1 << 40, int64(1) << 40},
		{"plain map", map[string]any{"a": 1}, Table{"a": int32(1)}},
		{"named map", namedTable{"a": "b"}, Table{"a": "b"}},
		{"named slice", namedArray{int8(1)}, []any{int8(1)}},
		{"time drops sub-seconds and zone", time.Date(2024, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600)), time.Date(2024, 1, 2, 2, 4, 5, 0, time.UTC)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enc, err := AppendTable(nil, Table{"v": tc.in})
			require.NoError(t, err)
			got, _, err := DecodeTable(enc)
			require.NoError(t, err)
			require.Equal(t, tc.want, got["v"])
		})
	}
}

func TestTableEncodeErrors(t *testing.T) {
	cyclic := Table{}
	cyclic["self"] = cyclic
	for _, tc := range []struct {
		name string
		in   Table
		msg  string
	}{
		{"unsupported type", Table{"ch": make(chan int)}, "unsupported field table value type chan int"},
		{"unsupported in array", Table{"a": []any{struct{}{}}}, "unsupported"},
		{"unsupported uint64", Table{"u": uint64(1)}, "unsupported"},
		{"key too long", Table{strings.Repeat("k", 256): 1}, "longer than 255"},
		{"too deep", deepTable(maxDepth), "nested deeper"},
		{"cyclic", cyclic, "nested deeper"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := []byte("keep")
			out, err := AppendTable(dst, tc.in)
			require.ErrorContains(t, err, tc.msg)
			require.True(t, strings.HasPrefix(err.Error(), "amqp: "), err.Error())
			require.Equal(t, "keep", string(out))
			require.Error(t, tc.in.Validate())

			// Encoders without an error result still write a decodable table.
			lenient := appendTableLenient(nil, tc.in)
			_, n, err := DecodeTable(lenient)
			require.NoError(t, err)
			require.Equal(t, len(lenient), n)
		})
	}
	require.NoError(t, everyType().Validate())
}

func TestTableLenientWritesVoid(t *testing.T) {
	enc := appendTableLenient(nil, Table{"ok": "yes", "bad": make(chan int), "arr": []any{int32(1), func() {}}})
	got, _, err := DecodeTable(enc)
	require.NoError(t, err)
	require.Equal(t, Table{"ok": "yes", "bad": nil, "arr": []any{int32(1), nil}}, got)
}

func TestDecodeTableDoesNotAlias(t *testing.T) {
	enc, err := AppendTable(nil, Table{"b": []byte("abc"), "s": "xyz"})
	require.NoError(t, err)
	got, _, err := DecodeTable(enc)
	require.NoError(t, err)
	for i := range enc {
		enc[i] = 0
	}
	require.Equal(t, Table{"b": []byte("abc"), "s": "xyz"}, got)
}

// tbl builds a table from raw pair bytes, with a correct length prefix.
func tbl(pairs ...byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(pairs))), pairs...)
}

func TestDecodeTableMalformed(t *testing.T) {
	nest := func(levels int) []byte {
		b := tbl()
		for range levels {
			b = tbl(append([]byte{1, 'k', 'F'}, b...)...)
		}
		return b
	}
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"empty input", nil},
		{"short length", []byte{0, 0, 0}},
		{"length beyond input", []byte{0, 0, 0, 5, 1, 'k'}},
		{"huge length", []byte{0xff, 0xff, 0xff, 0xff}},
		{"key beyond table", tbl(9, 'k')},
		{"missing type", tbl(1, 'k')},
		{"unknown type", tbl(1, 'k', 'Z')},
		{"truncated int32", tbl(1, 'k', 'I', 0, 0, 0)},
		{"truncated decimal", tbl(1, 'k', 'D', 2, 0, 0, 0)},
		{"truncated string length", tbl(1, 'k', 'S', 0, 0)},
		{"string beyond table", tbl(1, 'k', 'S', 0, 0, 0, 9, 'a')},
		{"huge string", tbl(1, 'k', 'S', 0xff, 0xff, 0xff, 0xff)},
		{"huge bytes", tbl(1, 'k', 'x', 0xff, 0xff, 0xff, 0xff)},
		{"huge array", tbl(1, 'k', 'A', 0xff, 0xff, 0xff, 0xff)},
		{"array with unknown type", tbl(1, 'k', 'A', 0, 0, 0, 1, '?')},
		{"nested table truncated", tbl(1, 'k', 'F', 0, 0, 0, 3, 1, 'j', 'I')},
		{"too deep", nest(maxDepth)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := DecodeTable(tc.in)
			var e *Error
			require.True(t, errors.As(err, &e), "%v", err)
			require.Equal(t, SyntaxError, e.Code)
			_, _, err = parseTable(tc.in, 0, false)
			require.Error(t, err, "validation must agree with decoding")
		})
	}
	_, _, err := DecodeTable(nest(maxDepth - 1))
	require.NoError(t, err)
}

// TestTableFixtures pins the encoding of every field type to hand-written bytes.
func TestTableFixtures(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
		want []byte
	}{
		{"bool", true, []byte{'t', 1}},
		{"int8", int8(-1), []byte{'b', 0xff}},
		{"uint8", uint8(1), []byte{'B', 1}},
		{"int16", int16(-2), []byte{'s', 0xff, 0xfe}},
		{"uint16", uint16(0x102), []byte{'u', 1, 2}},
		{"int32", int32(-3), []byte{'I', 0xff, 0xff, 0xff, 0xfd}},
		{"uint32", uint32(0x1020304), []byte{'i', 1, 2, 3, 4}},
		{"int64", int64(0x102030405060708), []byte{'l', 1, 2, 3, 4, 5, 6, 7, 8}},
		{"float32", float32(1), []byte{'f', 0x3f, 0x80, 0, 0}},
		{"float64", float64(1), []byte{'d', 0x3f, 0xf0, 0, 0, 0, 0, 0, 0}},
		{"decimal", Decimal{Scale: 3, Value: 5}, []byte{'D', 3, 0, 0, 0, 5}},
		{"string", "ab", []byte{'S', 0, 0, 0, 2, 'a', 'b'}},
		{"bytes", []byte{9}, []byte{'x', 0, 0, 0, 1, 9}},
		{"time", time.Unix(0x10, 0).UTC(), []byte{'T', 0, 0, 0, 0, 0, 0, 0, 0x10}},
		{"void", nil, []byte{'V'}},
		{"array", []any{uint8(1), nil}, []byte{'A', 0, 0, 0, 3, 'B', 1, 'V'}},
		{"table", Table{"a": uint8(2)}, []byte{'F', 0, 0, 0, 4, 1, 'a', 'B', 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := tbl(append([]byte{1, 'k'}, tc.want...)...)
			got, err := AppendTable(nil, Table{"k": tc.v})
			require.NoError(t, err)
			require.Equal(t, want, got)
			dec, _, err := DecodeTable(want)
			require.NoError(t, err)
			require.Equal(t, Table{"k": tc.v}, dec)
		})
	}
	// A bool octet other than 0 or 1 is true.
	dec, _, err := DecodeTable(tbl(1, 'k', 't', 7))
	require.NoError(t, err)
	require.Equal(t, Table{"k": true}, dec)
	// NaN survives bit for bit.
	nan := math.Float64frombits(0x7ff8000000000123)
	enc, err := AppendTable(nil, Table{"n": nan})
	require.NoError(t, err)
	dec, _, err = DecodeTable(enc)
	require.NoError(t, err)
	require.Equal(t, uint64(0x7ff8000000000123), math.Float64bits(dec["n"].(float64)))
}

func TestArrayDepthLimits(t *testing.T) {
	deep := any("leaf")
	for range maxDepth {
		deep = []any{deep}
	}
	_, err := AppendTable(nil, Table{"a": deep})
	require.ErrorContains(t, err, "nested deeper")
	// Lenient encoding stops at the limit with a void the decoder accepts.
	_, _, err = DecodeTable(appendTableLenient(nil, Table{"a": deep}))
	require.NoError(t, err)

	b := []byte{'V'}
	for range maxDepth {
		b = append(append([]byte{'A'}, binary.BigEndian.AppendUint32(nil, uint32(len(b)))...), b...)
	}
	_, _, err = DecodeTable(tbl(append([]byte{1, 'k'}, b...)...))
	requireCode(t, SyntaxError, err)
}

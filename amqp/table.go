package amqp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"time"
)

// Table is an AMQP field table (spec §4.2.5.5, with RabbitMQ's field types). Its values
// have exactly the Go types amqp091-go uses, so converting to amqp091.Table is a type
// conversion (plus recursion into nested tables):
//
//	't' bool      'b' int8     'B' uint8    's' int16    'u' uint16
//	'I' int32     'i' uint32   'l' int64    'f' float32  'd' float64
//	'D' Decimal   'S' string   'x' []byte   'A' []any    'T' time.Time (seconds, UTC)
//	'F' Table     'V' nil
//
// Encoding also accepts int ('I' when it fits in int32, else 'l'), map[string]any and
// other map types with string keys and interface values ('F', so amqp091.Table works),
// and slices of interface values ('A').
type Table map[string]any

// Decimal is the 'D' field type: Value / 10^Scale.
type Decimal struct {
	Scale uint8
	Value int32
}

// maxDepth bounds the nesting of tables and arrays in both directions, so that hostile
// input cannot exhaust the stack and a cyclic Go value cannot loop forever.
const maxDepth = 64

var errEncodeDepth = errors.New("amqp: table nested deeper than 64 levels (or cyclic)")

// AppendTable appends t as a length-prefixed field table. Keys are written in sorted
// order so the encoding is deterministic. A value of an unsupported type, a key longer
// than 255 bytes, or nesting deeper than 64 levels is an error, and dst is then
// returned unchanged.
func AppendTable(dst []byte, t Table) ([]byte, error) {
	out, err := appendTable(dst, t, 0)
	if err != nil {
		return dst, err
	}
	return out, nil
}

// Validate reports whether t can be encoded. Method and property encoders, which have
// no error result, write values they cannot encode as void ('V'); callers that build
// tables from arbitrary Go values check them here first.
func (t Table) Validate() error {
	_, err := appendTable(nil, t, 0)
	return err
}

// appendTableLenient is AppendTable for encoders without an error result: values that
// cannot be encoded become void, keys longer than 255 bytes are cut.
func appendTableLenient(dst []byte, t Table) []byte {
	if out, err := appendTable(dst, t, 0); err == nil {
		return out
	}
	return appendTableVoidBad(dst, t, 0)
}

func appendTable(dst []byte, t map[string]any, depth int) ([]byte, error) {
	if depth >= maxDepth {
		return dst, errEncodeDepth
	}
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	var keyBuf [16]string
	keys := keyBuf[:0]
	for k := range t {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var err error
	for _, k := range keys {
		if len(k) > math.MaxUint8 {
			return dst, fmt.Errorf("amqp: table key %.20q... longer than 255 bytes", k)
		}
		dst = append(dst, uint8(len(k)))
		dst = append(dst, k...)
		if dst, err = appendValue(dst, t[k], depth); err != nil {
			return dst, fmt.Errorf("%w (key %q)", err, k)
		}
	}
	return patchLength(dst, start)
}

// patchLength writes the length of dst[start+4:] into dst[start:start+4].
func patchLength(dst []byte, start int) ([]byte, error) {
	n := len(dst) - start - 4
	if uint64(n) > math.MaxUint32 {
		return dst, errors.New("amqp: table or array longer than 4 GiB")
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(n))
	return dst, nil
}

func appendValue(dst []byte, v any, depth int) ([]byte, error) {
	switch v := v.(type) {
	case bool:
		b := uint8(0)
		if v {
			b = 1
		}
		return append(dst, 't', b), nil
	case int8:
		return append(dst, 'b', uint8(v)), nil
	case uint8:
		return append(dst, 'B', v), nil
	case int16:
		return appendUint16(append(dst, 's'), uint16(v)), nil
	case uint16:
		return appendUint16(append(dst, 'u'), v), nil
	case int32:
		return appendUint32(append(dst, 'I'), uint32(v)), nil
	case uint32:
		return appendUint32(append(dst, 'i'), v), nil
	case int64:
		return appendUint64(append(dst, 'l'), uint64(v)), nil
	case int:
		if v >= math.MinInt32 && v <= math.MaxInt32 {
			return appendUint32(append(dst, 'I'), uint32(int32(v))), nil
		}
		return appendUint64(append(dst, 'l'), uint64(v)), nil
	case float32:
		return appendUint32(append(dst, 'f'), math.Float32bits(v)), nil
	case float64:
		return appendUint64(append(dst, 'd'), math.Float64bits(v)), nil
	case Decimal:
		return appendUint32(append(dst, 'D', v.Scale), uint32(v.Value)), nil
	case string:
		if uint64(len(v)) > math.MaxUint32 {
			return dst, errors.New("amqp: string value longer than 4 GiB")
		}
		return appendLongstr(append(dst, 'S'), v), nil
	case []byte:
		if uint64(len(v)) > math.MaxUint32 {
			return dst, errors.New("amqp: byte array longer than 4 GiB")
		}
		dst = appendUint32(append(dst, 'x'), uint32(len(v)))
		return append(dst, v...), nil
	case time.Time:
		return appendUint64(append(dst, 'T'), uint64(v.Unix())), nil
	case nil:
		return append(dst, 'V'), nil
	case Table:
		return appendTable(append(dst, 'F'), v, depth+1)
	case map[string]any:
		return appendTable(append(dst, 'F'), v, depth+1)
	case []any:
		return appendArray(dst, v, depth+1)
	}
	// Named map and slice types from other packages (amqp091.Table), by reflection.
	rv := reflect.ValueOf(v)
	switch {
	case rv.Kind() == reflect.Map && rv.Type().Key().Kind() == reflect.String && rv.Type().Elem().Kind() == reflect.Interface:
		m := make(map[string]any, rv.Len())
		for it := rv.MapRange(); it.Next(); {
			m[it.Key().String()] = it.Value().Interface()
		}
		return appendTable(append(dst, 'F'), m, depth+1)
	case rv.Kind() == reflect.Slice && rv.Type().Elem().Kind() == reflect.Interface:
		a := make([]any, rv.Len())
		for i := range a {
			a[i] = rv.Index(i).Interface()
		}
		return appendArray(dst, a, depth+1)
	}
	return dst, fmt.Errorf("amqp: unsupported field table value type %T", v)
}

func appendArray(dst []byte, a []any, depth int) ([]byte, error) {
	if depth >= maxDepth {
		return dst, errEncodeDepth
	}
	dst = append(dst, 'A')
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	var err error
	for _, v := range a {
		if dst, err = appendValue(dst, v, depth); err != nil {
			return dst, err
		}
	}
	return patchLength(dst, start)
}

// appendTableVoidBad encodes t writing every value that cannot be encoded as void.
func appendTableVoidBad(dst []byte, t map[string]any, depth int) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	if depth < maxDepth {
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			dst = appendShortstr(dst, k)
			dst = appendValueVoidBad(dst, t[k], depth)
		}
	}
	out, err := patchLength(dst, start)
	if err != nil {
		return append(dst[:start], 0, 0, 0, 0) // cannot happen below 4 GiB: send an empty table
	}
	return out
}

func appendValueVoidBad(dst []byte, v any, depth int) []byte {
	if out, err := appendValue(dst, v, depth); err == nil {
		return out
	}
	if depth+1 >= maxDepth {
		return append(dst, 'V') // too deep (or cyclic) for the decoder to accept
	}
	switch v := v.(type) {
	case Table:
		return appendTableVoidBad(append(dst, 'F'), v, depth+1)
	case map[string]any:
		return appendTableVoidBad(append(dst, 'F'), v, depth+1)
	case []any:
		dst = append(dst, 'A')
		start := len(dst)
		dst = append(dst, 0, 0, 0, 0)
		for _, e := range v {
			dst = appendValueVoidBad(dst, e, depth+1)
		}
		if out, err := patchLength(dst, start); err == nil {
			return out
		}
		return append(dst[:start], 0, 0, 0, 0)
	}
	return append(dst, 'V')
}

// DecodeTable reads the length-prefixed field table at the start of src and returns it
// with the number of bytes consumed. An empty table decodes as nil. Every length is
// checked against the remaining input before anything is allocated, nesting is limited
// to 64 levels, and 'x' values are copied (the result never aliases src).
// Malformed input returns a *Error with code SyntaxError.
func DecodeTable(src []byte) (t Table, n int, err error) {
	return parseTable(src, 0, true)
}

func syntaxErrorf(format string, args ...any) *Error {
	return NewError(SyntaxError, 0, 0, format, args...)
}

// Errors are built fresh on every failure: callers may set ClassID and MethodID on them.
func errTruncatedTable() error { return syntaxErrorf("truncated field table") }
func errTableDepth() error     { return syntaxErrorf("field table nested deeper than 64 levels") }

// parseTable walks the table at src. With build false it only validates, without
// allocating: the publish path checks headers it does not need to look at.
func parseTable(src []byte, depth int, build bool) (Table, int, error) {
	if depth >= maxDepth {
		return nil, 0, errTableDepth()
	}
	if len(src) < 4 {
		return nil, 0, errTruncatedTable()
	}
	size := uint64(binary.BigEndian.Uint32(src))
	if uint64(len(src)-4) < size {
		return nil, 0, errTruncatedTable()
	}
	body := src[4 : 4+int(size)]
	var t Table
	for off := 0; off < len(body); {
		klen := int(body[off])
		if len(body)-off-1 < klen {
			return nil, 0, errTruncatedTable()
		}
		key := body[off+1 : off+1+klen]
		off += 1 + klen
		v, n, err := parseValue(body[off:], depth, build)
		if err != nil {
			return nil, 0, err
		}
		off += n
		if build {
			if t == nil {
				t = make(Table)
			}
			t[string(key)] = v
		}
	}
	return t, 4 + int(size), nil
}

func parseArray(src []byte, depth int, build bool) ([]any, int, error) {
	if depth >= maxDepth {
		return nil, 0, errTableDepth()
	}
	if len(src) < 4 {
		return nil, 0, errTruncatedTable()
	}
	size := uint64(binary.BigEndian.Uint32(src))
	if uint64(len(src)-4) < size {
		return nil, 0, errTruncatedTable()
	}
	body := src[4 : 4+int(size)]
	var a []any
	for off := 0; off < len(body); {
		v, n, err := parseValue(body[off:], depth, build)
		if err != nil {
			return nil, 0, err
		}
		off += n
		if build {
			a = append(a, v)
		}
	}
	return a, 4 + int(size), nil
}

// fixedSize is the payload size of the fixed-width field types.
var fixedSize = [256]int8{
	't': 1, 'b': 1, 'B': 1, 's': 2, 'u': 2, 'I': 4, 'i': 4, 'l': 8,
	'f': 4, 'd': 8, 'D': 5, 'T': 8, 'V': 0,
}

// parseValue reads a type octet and a value; n counts both.
func parseValue(src []byte, depth int, build bool) (v any, n int, err error) {
	if len(src) < 1 {
		return nil, 0, errTruncatedTable()
	}
	typ, src := src[0], src[1:]
	switch typ {
	case 'S', 'x':
		if len(src) < 4 {
			return nil, 0, errTruncatedTable()
		}
		size := uint64(binary.BigEndian.Uint32(src))
		if uint64(len(src)-4) < size {
			return nil, 0, errTruncatedTable()
		}
		if build {
			b := src[4 : 4+int(size)]
			if typ == 'S' {
				v = string(b)
			} else {
				v = slices.Clone(b)
				if v.([]byte) == nil {
					v = []byte{}
				}
			}
		}
		return v, 1 + 4 + int(size), nil
	case 'F':
		t, n, err := parseTable(src, depth+1, build)
		if err != nil {
			return nil, 0, err
		}
		if build {
			v = t
		}
		return v, 1 + n, nil
	case 'A':
		a, n, err := parseArray(src, depth+1, build)
		if err != nil {
			return nil, 0, err
		}
		if build {
			v = a
		}
		return v, 1 + n, nil
	}
	size := int(fixedSize[typ])
	if size == 0 && typ != 'V' {
		return nil, 0, syntaxErrorf("unknown field type %q", typ)
	}
	if len(src) < size {
		return nil, 0, errTruncatedTable()
	}
	if !build {
		return nil, 1 + size, nil
	}
	switch typ {
	case 't':
		v = src[0] != 0
	case 'b':
		v = int8(src[0])
	case 'B':
		v = src[0]
	case 's':
		v = int16(binary.BigEndian.Uint16(src))
	case 'u':
		v = binary.BigEndian.Uint16(src)
	case 'I':
		v = int32(binary.BigEndian.Uint32(src))
	case 'i':
		v = binary.BigEndian.Uint32(src)
	case 'l':
		v = int64(binary.BigEndian.Uint64(src))
	case 'f':
		v = math.Float32frombits(binary.BigEndian.Uint32(src))
	case 'd':
		v = math.Float64frombits(binary.BigEndian.Uint64(src))
	case 'D':
		v = Decimal{Scale: src[0], Value: int32(binary.BigEndian.Uint32(src[1:]))}
	case 'T':
		v = time.Unix(int64(binary.BigEndian.Uint64(src)), 0).UTC()
	case 'V':
		v = nil
	}
	return v, 1 + size, nil
}

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
// to 64 levels, and 'x' values are copied (the result never aliases src). Keys and
// string values share one copy of the table's bytes (one allocation for all of them).
// Malformed input returns a *Error with code SyntaxError.
func DecodeTable(src []byte) (t Table, n int, err error) {
	return parseTable(src, 0, true)
}

func syntaxErrorf(format string, args ...any) *Error {
	return NewError(SyntaxError, 0, 0, format, args...)
}

// errTruncatedTable and errTableDepth build a fresh error on every failure:
// callers may set ClassID and MethodID on it.
func errTruncatedTable() error { return syntaxErrorf("truncated field table") }
func errTableDepth() error     { return syntaxErrorf("field table nested deeper than 64 levels") }

// parseTable walks the length-prefixed table at the start of src and returns it with
// the number of bytes it spans. With build false it only validates, without
// allocating: the publish path checks headers it does not need to look at.
//
// When building, the table's bytes are copied into one string and every key and
// string value is a substring of it: one allocation instead of one per string. A
// retained key or value keeps that whole string alive, which is fine for the tables
// AMQP carries (arguments, headers, peer properties).
func parseTable(src []byte, depth int, build bool) (Table, int, error) {
	return parseTableShared(src, "", depth, build)
}

// parseTableShared is parseTable with the string copy of src supplied by a caller
// that already made one (str == string(src) or a longer copy); "" makes a new one.
func parseTableShared(src []byte, str string, depth int, build bool) (Table, int, error) {
	if len(src) < 4 {
		return nil, 0, errTruncatedTable()
	}
	size := uint64(binary.BigEndian.Uint32(src))
	if uint64(len(src)-4) < size {
		return nil, 0, errTruncatedTable()
	}
	p := tableParser{src: src[:4+int(size)], build: build}
	if build && size > 0 {
		if len(str) >= len(p.src) {
			p.str = str[:len(p.src)]
		} else {
			p.str = string(p.src)
		}
	}
	t, _, err := p.table(0, depth)
	if err != nil {
		return nil, 0, err
	}
	return t, len(p.src), nil
}

// tableParser walks src by position; every length is checked against the end of the
// enclosing table or array before it is used.
type tableParser struct {
	src   []byte
	str   string // string(src) when building
	build bool
}

// region checks the 4-octet length at pos and returns where its contents start and end.
func (p *tableParser) region(pos, limit int) (start, end int, err error) {
	if limit-pos < 4 {
		return 0, 0, errTruncatedTable()
	}
	size := uint64(binary.BigEndian.Uint32(p.src[pos:]))
	if uint64(limit-pos-4) < size {
		return 0, 0, errTruncatedTable()
	}
	return pos + 4, pos + 4 + int(size), nil
}

// table parses the table whose length prefix is at pos and returns the position after it.
func (p *tableParser) table(pos, depth int) (Table, int, error) {
	return p.tableWithin(pos, len(p.src), depth)
}

func (p *tableParser) tableWithin(pos, limit, depth int) (Table, int, error) {
	if depth >= maxDepth {
		return nil, 0, errTableDepth()
	}
	off, end, err := p.region(pos, limit)
	if err != nil {
		return nil, 0, err
	}
	var t Table
	for off < end {
		klen := int(p.src[off])
		if end-off-1 < klen {
			return nil, 0, errTruncatedTable()
		}
		keyStart := off + 1
		off = keyStart + klen
		v, next, err := p.value(off, end, depth)
		if err != nil {
			return nil, 0, err
		}
		off = next
		if p.build {
			if t == nil {
				t = make(Table)
			}
			t[p.str[keyStart:keyStart+klen]] = v
		}
	}
	return t, end, nil
}

func (p *tableParser) array(pos, limit, depth int) ([]any, int, error) {
	if depth >= maxDepth {
		return nil, 0, errTableDepth()
	}
	off, end, err := p.region(pos, limit)
	if err != nil {
		return nil, 0, err
	}
	var a []any
	for off < end {
		v, next, err := p.value(off, end, depth)
		if err != nil {
			return nil, 0, err
		}
		off = next
		if p.build {
			a = append(a, v)
		}
	}
	return a, end, nil
}

// fixedSize is the payload size of the fixed-width field types.
var fixedSize = [256]int8{
	't': 1, 'b': 1, 'B': 1, 's': 2, 'u': 2, 'I': 4, 'i': 4, 'l': 8,
	'f': 4, 'd': 8, 'D': 5, 'T': 8, 'V': 0,
}

// value reads a type octet and a value at pos, within limit, and returns the position
// after it.
func (p *tableParser) value(pos, limit, depth int) (v any, next int, err error) {
	if pos >= limit {
		return nil, 0, errTruncatedTable()
	}
	typ := p.src[pos]
	pos++
	switch typ {
	case 'S', 'x':
		start, end, err := p.region(pos, limit)
		if err != nil {
			return nil, 0, err
		}
		if p.build {
			if typ == 'S' {
				v = p.str[start:end]
			} else {
				v = append([]byte{}, p.src[start:end]...) // a mutable copy; never nil
			}
		}
		return v, end, nil
	case 'F':
		t, end, err := p.tableWithin(pos, limit, depth+1)
		if err != nil {
			return nil, 0, err
		}
		if p.build {
			v = t
		}
		return v, end, nil
	case 'A':
		a, end, err := p.array(pos, limit, depth+1)
		if err != nil {
			return nil, 0, err
		}
		if p.build {
			v = a
		}
		return v, end, nil
	}
	size := int(fixedSize[typ])
	if size == 0 && typ != 'V' {
		return nil, 0, syntaxErrorf("unknown field type %q", typ)
	}
	if limit-pos < size {
		return nil, 0, errTruncatedTable()
	}
	if !p.build {
		return nil, pos + size, nil
	}
	src := p.src[pos : pos+size]
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
	return v, pos + size, nil
}

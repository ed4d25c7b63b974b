package routing

import (
	"bytes"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"
)

// headersMatcher is a headers-exchange binding compiled at bind time.
type headersMatcher struct {
	any  bool // x-match any / any-with-x; otherwise all / all-with-x
	args []headerArg
}

// headerArg is one binding argument the match compares.
type headerArg struct {
	key   string
	value any
	void  bool // a void (nil) value matches on presence alone
}

// compileHeaders turns binding arguments into a matcher, following
// rabbit_exchange_type_headers: x-match is all (the default), any,
// all-with-x or any-with-x; the x-match argument itself never takes part,
// and other arguments starting "x-" take part only in the -with-x modes.
//
// strict is set on Bind and refuses an x-match that is not one of the four
// strings (RabbitMQ's validate_binding). Rebuilding the index when an
// exchange changes kind is lenient and reads anything else as all, as
// RabbitMQ's parse_x_match does for bindings it did not validate.
func compileHeaders(args map[string]any, strict bool) (*headersMatcher, error) {
	m := &headersMatcher{}
	withX := false
	if v, ok := args["x-match"]; ok {
		s, isString := v.(string)
		switch {
		case isString && s == "all":
		case isString && s == "any":
			m.any = true
		case isString && s == "all-with-x":
			withX = true
		case isString && s == "any-with-x":
			m.any, withX = true, true
		case !strict:
		case isString:
			return nil, fmt.Errorf("%w: x-match %q, expected all, any, all-with-x or any-with-x", ErrInvalidBinding, s)
		default:
			return nil, fmt.Errorf("%w: x-match of type %T, expected a string", ErrInvalidBinding, v)
		}
	}
	for k, v := range args {
		if k == "x-match" || (!withX && strings.HasPrefix(k, "x-")) {
			continue
		}
		m.args = append(m.args, headerArg{key: k, value: v, void: v == nil})
	}
	slices.SortFunc(m.args, func(a, b headerArg) int { return strings.Compare(a.key, b.key) })
	return m, nil
}

// match reports whether a message with headers satisfies the binding.
//
//   - all: every argument is present in headers and equal (or void). With no
//     arguments left after dropping x-match, all matches every message.
//   - any: at least one argument is present and equal (or void). With no
//     arguments, any matches nothing.
func (m *headersMatcher) match(headers map[string]any) bool {
	if m.any {
		for i := range m.args {
			a := &m.args[i]
			if v, ok := headers[a.key]; ok && (a.void || headerValueEqual(a.value, v)) {
				return true
			}
		}
		return false
	}
	for i := range m.args {
		a := &m.args[i]
		v, ok := headers[a.key]
		if !ok || !(a.void || headerValueEqual(a.value, v)) {
			return false
		}
	}
	return true
}

// headerValueEqual compares a binding argument with a message header the way
// RabbitMQ's headers exchange does: with Erlang's ==, which ignores the AMQP
// field type and compares the decoded values. So
//
//   - every integer type, float32/float64 and time.Time (an AMQP timestamp
//     decodes to integer seconds) compare by numeric value: int32(1),
//     int64(1), uint8(1) and float64(1.0) are all equal;
//   - string and []byte (longstr and byte array both decode to binaries)
//     compare by bytes;
//   - bool compares with bool only;
//   - a void (nil) header equals nothing but a void argument;
//   - arrays and tables compare strictly (strictEqual), because Erlang
//     compares their elements as {Type, Value} tuples.
func headerValueEqual(arg, hdr any) bool {
	if a, ok := numberOf(arg); ok {
		h, ok := numberOf(hdr)
		return ok && a.equal(h)
	}
	switch a := arg.(type) {
	case string:
		switch h := hdr.(type) {
		case string:
			return a == h
		case []byte:
			return string(h) == a
		}
		return false
	case []byte:
		switch h := hdr.(type) {
		case string:
			return string(a) == h
		case []byte:
			return bytes.Equal(a, h)
		}
		return false
	case bool:
		h, ok := hdr.(bool)
		return ok && a == h
	}
	return strictEqual(arg, hdr)
}

// number is a numeric field value: an integer (signed or not) or a float.
type number struct {
	kind uint8 // numInt, numUint or numFloat
	i    int64
	u    uint64
	f    float64
}

const (
	numInt = iota
	numUint
	numFloat
)

func numberOf(v any) (number, bool) {
	switch v := v.(type) {
	case int8:
		return number{kind: numInt, i: int64(v)}, true
	case uint8:
		return number{kind: numInt, i: int64(v)}, true
	case int16:
		return number{kind: numInt, i: int64(v)}, true
	case uint16:
		return number{kind: numInt, i: int64(v)}, true
	case int32:
		return number{kind: numInt, i: int64(v)}, true
	case uint32:
		return number{kind: numInt, i: int64(v)}, true
	case int64:
		return number{kind: numInt, i: v}, true
	case int:
		return number{kind: numInt, i: int64(v)}, true
	case uint:
		return number{kind: numUint, u: uint64(v)}, true
	case uint64:
		return number{kind: numUint, u: v}, true
	case float32:
		return number{kind: numFloat, f: float64(v)}, true
	case float64:
		return number{kind: numFloat, f: v}, true
	case time.Time:
		return number{kind: numInt, i: v.Unix()}, true
	}
	return number{}, false
}

// equal compares exactly: a float equals an integer only if it is that
// integer, with no rounding of large integers to float64.
func (a number) equal(b number) bool {
	if a.kind > b.kind {
		a, b = b, a
	}
	switch {
	case a.kind == numInt && b.kind == numInt:
		return a.i == b.i
	case a.kind == numInt && b.kind == numUint:
		return a.i >= 0 && uint64(a.i) == b.u
	case a.kind == numUint && b.kind == numUint:
		return a.u == b.u
	case a.kind == numFloat: // both floats
		return a.f == b.f
	case a.kind == numInt: // b is a float
		return b.f == math.Trunc(b.f) && b.f >= -(1<<63) && b.f < 1<<63 && int64(b.f) == a.i
	default: // a is unsigned, b is a float
		return b.f == math.Trunc(b.f) && b.f >= 0 && b.f < 1<<64 && uint64(b.f) == a.u
	}
}

// strictEqual compares two field values by AMQP type and value, as Erlang
// compares the elements of arrays and tables: int32(1) and int64(1) differ.
// Tables compare as sets of keys (Go maps have no order, where RabbitMQ
// compares them in wire order), and any string-keyed map type counts as a
// table, so a nested amqp.Table equals a map[string]any with the same
// content. A Go int counts as the int32 or int64 the codec would send. Time
// stamps compare at the wire's one-second precision. Other
// types (the codec's decimal struct) compare with == when comparable.
func strictEqual(a, b any) bool {
	if i, ok := a.(int); ok {
		a = normalizeInt(i)
	}
	if i, ok := b.(int); ok {
		b = normalizeInt(i)
	}
	switch a := a.(type) {
	case nil:
		return b == nil
	case bool:
		v, ok := b.(bool)
		return ok && v == a
	case int8:
		v, ok := b.(int8)
		return ok && v == a
	case uint8:
		v, ok := b.(uint8)
		return ok && v == a
	case int16:
		v, ok := b.(int16)
		return ok && v == a
	case uint16:
		v, ok := b.(uint16)
		return ok && v == a
	case int32:
		v, ok := b.(int32)
		return ok && v == a
	case uint32:
		v, ok := b.(uint32)
		return ok && v == a
	case int64:
		v, ok := b.(int64)
		return ok && v == a
	case float32:
		v, ok := b.(float32)
		return ok && v == a
	case float64:
		v, ok := b.(float64)
		return ok && v == a
	case string:
		v, ok := b.(string)
		return ok && v == a
	case []byte:
		v, ok := b.([]byte)
		return ok && bytes.Equal(a, v)
	case time.Time:
		v, ok := b.(time.Time)
		return ok && v.Unix() == a.Unix()
	case []any:
		if v, ok := b.([]any); ok {
			return slices.EqualFunc(a, v, strictEqual)
		}
	case map[string]any:
		if v, ok := b.(map[string]any); ok {
			if len(a) != len(v) {
				return false
			}
			for k, x := range a {
				y, ok := v[k]
				if !ok || !strictEqual(x, y) {
					return false
				}
			}
			return true
		}
	}
	return reflectEqual(a, b)
}

// normalizeInt gives a Go int the type the amqp codec encodes it as: 'I'
// (int32) when it fits, else 'l' (int64).
func normalizeInt(i int) any {
	if i >= math.MinInt32 && i <= math.MaxInt32 {
		return int32(i)
	}
	return int64(i)
}

// reflectEqual handles what the type switch does not: named map and slice
// types (amqp.Table inside a table) and unknown value types.
func reflectEqual(a, b any) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	if isTable(va) && isTable(vb) {
		if va.Len() != vb.Len() {
			return false
		}
		it := va.MapRange()
		for it.Next() {
			y := vb.MapIndex(it.Key().Convert(vb.Type().Key()))
			if !y.IsValid() || !strictEqual(it.Value().Interface(), y.Interface()) {
				return false
			}
		}
		return true
	}
	if isArray(va) && isArray(vb) {
		if va.Len() != vb.Len() {
			return false
		}
		for i := range va.Len() {
			if !strictEqual(va.Index(i).Interface(), vb.Index(i).Interface()) {
				return false
			}
		}
		return true
	}
	if va.Type() != vb.Type() {
		return false
	}
	if va.Type().Comparable() {
		return a == b // cannot panic: the dynamic type is comparable
	}
	return reflect.DeepEqual(a, b)
}

// isTable reports whether v is a string-keyed map with interface values.
func isTable(v reflect.Value) bool {
	t := v.Type()
	return t.Kind() == reflect.Map && t.Key().Kind() == reflect.String && t.Elem().Kind() == reflect.Interface
}

// isArray reports whether v is a slice with interface elements.
func isArray(v reflect.Value) bool {
	t := v.Type()
	return t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Interface
}

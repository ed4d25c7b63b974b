package routing

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"
)

// argsIdentity encodes binding arguments canonically so that two argument
// tables give the same string exactly when they are the same binding:
// RabbitMQ keys a binding by (source, destination, key, args) with args
// compared as exact terms, types included, so x-match "all" given
// explicitly, or int32(1) against int64(1), make different bindings. Keys
// are sorted, every value carries a type tag and every variable-length part
// a length prefix, so no two tables share an encoding. nil and an empty
// table are both "". Tables and arrays nested deeper than maxDepth (a
// cyclic value, or one no AMQP peer could send) are ErrInvalidBinding.
func argsIdentity(args map[string]any) (string, error) {
	if len(args) == 0 {
		return "", nil
	}
	var b strings.Builder
	if !encodeTable(&b, args, 0) {
		return "", fmt.Errorf("%w: arguments nested deeper than %d levels or of a type a field table cannot hold", ErrInvalidBinding, maxDepth)
	}
	return b.String(), nil
}

// maxDepth bounds the nesting of tables and arrays in binding arguments and
// in header comparisons, as the amqp codec bounds it on the wire, so a
// cyclic Go value given through the direct API cannot recurse forever.
const maxDepth = 64

func encodeLen(b *strings.Builder, n int) {
	var buf [binary.MaxVarintLen64]byte
	b.Write(buf[:binary.PutUvarint(buf[:], uint64(n))])
}

func encodeString(b *strings.Builder, s string) {
	encodeLen(b, len(s))
	b.WriteString(s)
}

func encodeUint(b *strings.Builder, tag byte, u uint64) {
	var buf [1 + 8]byte
	buf[0] = tag
	binary.BigEndian.PutUint64(buf[1:], u)
	b.Write(buf[:])
}

func encodeTable(b *strings.Builder, t map[string]any, depth int) bool {
	if depth > maxDepth {
		return false
	}
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b.WriteByte('F')
	encodeLen(b, len(keys))
	for _, k := range keys {
		encodeString(b, k)
		if !encodeValue(b, t[k], depth) {
			return false
		}
	}
	return true
}

// encodeValue writes one value with the AMQP field-type letter as its tag
// where there is one (RabbitMQ's letters: 's' is a signed 16-bit int). It
// reports false when v nests deeper than maxDepth below depth.
func encodeValue(b *strings.Builder, v any, depth int) bool {
	switch v := v.(type) {
	case nil:
		b.WriteByte('V')
	case bool:
		if v {
			encodeUint(b, 't', 1)
		} else {
			encodeUint(b, 't', 0)
		}
	case int8:
		encodeUint(b, 'b', uint64(v))
	case uint8:
		encodeUint(b, 'B', uint64(v))
	case int16:
		encodeUint(b, 's', uint64(v))
	case uint16:
		encodeUint(b, 'u', uint64(v))
	case int32:
		encodeUint(b, 'I', uint64(v))
	case uint32:
		encodeUint(b, 'i', uint64(v))
	case int64:
		encodeUint(b, 'l', uint64(v))
	case int:
		// The amqp codec writes an int as 'I' when it fits, else 'l', so a
		// binding made with int(1) is the one that comes back from the
		// store as int32(1).
		return encodeValue(b, normalizeInt(v), depth)
	case uint:
		encodeUint(b, 'N', uint64(v))
	case uint64:
		encodeUint(b, 'L', v)
	case float32:
		encodeUint(b, 'f', uint64(math.Float32bits(v)))
	case float64:
		encodeUint(b, 'd', math.Float64bits(v))
	case string:
		b.WriteByte('S')
		encodeString(b, v)
	case []byte:
		b.WriteByte('x')
		encodeString(b, string(v))
	case time.Time:
		// The wire carries whole seconds (§4.2.5.4), so equal on the wire
		// means equal here.
		encodeUint(b, 'T', uint64(v.Unix()))
	case []any:
		if depth >= maxDepth {
			return false
		}
		b.WriteByte('A')
		encodeLen(b, len(v))
		for _, e := range v {
			if !encodeValue(b, e, depth+1) {
				return false
			}
		}
	case map[string]any:
		return encodeTable(b, v, depth+1)
	default:
		return encodeOther(b, v, depth)
	}
	return true
}

// encodeOther covers named table and array types (amqp.Table nested in a
// table) through reflection, and other comparable types (the codec's
// decimal struct) by their Go type and %#v form. It refuses the rest.
func encodeOther(b *strings.Builder, v any, depth int) bool {
	rv := reflect.ValueOf(v)
	switch {
	case isTable(rv):
		t := make(map[string]any, rv.Len())
		it := rv.MapRange()
		for it.Next() {
			t[it.Key().String()] = it.Value().Interface()
		}
		return encodeTable(b, t, depth+1)
	case isArray(rv):
		if depth >= maxDepth {
			return false
		}
		b.WriteByte('A')
		encodeLen(b, rv.Len())
		for i := range rv.Len() {
			if !encodeValue(b, rv.Index(i).Interface(), depth+1) {
				return false
			}
		}
	case rv.Type().Comparable():
		b.WriteByte('?')
		encodeString(b, fmt.Sprintf("%T:%#v", v, v))
	default:
		// Slices of concrete types, maps with other keys or values, funcs:
		// nothing the amqp codec can send either.
		return false
	}
	return true
}

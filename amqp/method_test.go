package amqp

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fill sets every field of the method struct m to a non-zero value derived from seed,
// so that each field's encoding is exercised. Bits alternate with seed.
func fill(t *testing.T, m Method, seed int) {
	t.Helper()
	v := reflect.ValueOf(m).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		n := seed + i + 1
		switch f.Kind() {
		case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			f.SetUint(uint64(n) * 0x0101010101010101 >> (64 - f.Type().Bits()))
		case reflect.Bool:
			f.SetBool((seed+i)%2 == 0)
		case reflect.String:
			f.SetString(strings.Repeat(string(rune('a'+i)), n))
		case reflect.Map:
			f.Set(reflect.ValueOf(Table{"k": int32(n), "nested": Table{"s": "v"}}))
		default:
			t.Fatalf("%s: field %s has unexpected kind %s", m.Name(), v.Type().Field(i).Name, f.Kind())
		}
	}
}

func TestMethodRoundTrip(t *testing.T) {
	for _, proto := range allMethods() {
		for seed := range 2 {
			t.Run(proto.Name(), func(t *testing.T) {
				m, err := NewMethod(proto.ClassID(), proto.MethodID())
				require.NoError(t, err)
				fill(t, m, seed)

				payload := AppendMethod(nil, m)
				got, err := DecodeMethod(payload)
				require.NoError(t, err)
				require.Equal(t, m, got)

				// The frame form carries the same payload.
				fr := NewFrameReader(strings.NewReader(string(AppendMethodFrame(nil, 7, m))))
				f, err := fr.ReadFrame()
				require.NoError(t, err)
				require.Equal(t, Frame{Type: FrameMethod, Channel: 7, Payload: payload}, f)
				// The static AppendFrame writes the same bytes.
				framer := m.(interface {
					AppendFrame(dst []byte, channel uint16) []byte
				})
				require.Equal(t, AppendMethodFrame([]byte("x"), 7, m), framer.AppendFrame([]byte("x"), 7))

				// Every proper prefix of the arguments is rejected as a syntax error,
				// and so is a trailing byte.
				_, _, args, err := MethodIDs(payload)
				require.NoError(t, err)
				for n := 0; n < len(args); n++ {
					err := m.DecodeArgs(args[:n])
					var e *Error
					require.True(t, errors.As(err, &e), "prefix %d: %v", n, err)
					require.Equal(t, SyntaxError, e.Code)
					require.Equal(t, proto.ClassID(), e.ClassID)
					require.Equal(t, proto.MethodID(), e.MethodID)
				}
				err = m.DecodeArgs(append(args[:len(args):len(args)], 0))
				var e *Error
				require.ErrorAs(t, err, &e)
				require.Equal(t, SyntaxError, e.Code)
			})
		}
	}
}

func TestMethodMetadata(t *testing.T) {
	content := map[string]bool{"basic.publish": true, "basic.return": true, "basic.deliver": true, "basic.get-ok": true}
	async := map[string]bool{ // the methods the spec does not mark synchronous
		"connection.blocked": true, "connection.unblocked": true, "channel.flow-ok": true,
		"basic.publish": true, "basic.return": true, "basic.deliver": true, "basic.ack": true,
		"basic.reject": true, "basic.recover-async": true, "basic.nack": true,
	}
	names := map[string]bool{}
	for _, m := range allMethods() {
		name := m.Name()
		require.False(t, names[name], "duplicate %s", name)
		names[name] = true
		require.Equal(t, content[name], m.HasContent(), name)
		require.Equal(t, !async[name], m.(interface{ Synchronous() bool }).Synchronous(), name)
		require.Equal(t, name, methodName(m.ClassID(), m.MethodID()))
		// The Go name is the spec name in CamelCase.
		goName := reflect.TypeOf(m).Elem().Name()
		var want strings.Builder
		for _, part := range strings.FieldsFunc(name, func(r rune) bool { return r == '.' || r == '-' }) {
			want.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
		require.Equal(t, want.String(), goName)
	}
	require.Len(t, names, 64, "every method of the extended 0-9-1 spec")
	for _, ids := range [][2]uint16{{0, 0}, {ClassBasic, 0}, {ClassBasic, 999}, {11, 10}} {
		require.Equal(t, "", methodName(ids[0], ids[1]))
		_, err := NewMethod(ids[0], ids[1])
		var e *Error
		require.ErrorAs(t, err, &e)
		require.Equal(t, Error{Code: CommandInvalid, Text: e.Text, ClassID: ids[0], MethodID: ids[1]}, *e)
	}
	_, _, _, err := MethodIDs([]byte{0, 60, 0})
	requireCode(t, FrameError, err)
	_, err = DecodeMethod([]byte{0, 60})
	requireCode(t, FrameError, err)
}

func TestTruncate(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"abc", "abc"},
		{strings.Repeat("a", 300), strings.Repeat("a", 255)},
		{strings.Repeat("a", 254) + "é", strings.Repeat("a", 254)},
		{strings.Repeat("a", 253) + "€", strings.Repeat("a", 253)},
		{strings.Repeat("\x80", 300), strings.Repeat("\x80", 255)}, // not UTF-8: cut at 255
	} {
		got := truncate(tc.in, 255)
		require.Equal(t, tc.want, got)
		enc := appendShortstr(nil, tc.in)
		require.Equal(t, len(tc.want), int(enc[0]))
	}
}

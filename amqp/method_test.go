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

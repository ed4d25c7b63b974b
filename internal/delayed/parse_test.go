package delayed

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
)

func TestParseDelay(t *testing.T) {
	tests := []struct {
		name string
		v    any
		ms   int64
		ok   bool
	}{
		{"int32", int32(5000), 5000, true},
		{"int8", int8(3), 3, true},
		{"int16", int16(300), 300, true},
		{"int64", int64(70000), 70000, true},
		{"uint8", uint8(7), 7, true},
		{"uint16", uint16(7), 7, true},
		{"uint32", uint32(math.MaxUint32), math.MaxUint32, true},
		{"string", "1500", 1500, true},
		{"string with sign", "+15", 15, true},
		{"bytes", []byte("20"), 20, true},
		{"double truncated", 99.9, 99, true},
		{"float", float32(2.5), 2, true},
		{"decimal", amqp.Decimal{Scale: 1, Value: 155}, 15, true},
		{"zero routes now", int32(0), 0, false},
		{"negative routes now", int32(-100), 0, false},
		{"beyond Erlang's timer routes now", int64(math.MaxUint32 + 1), 0, false},
		{"fraction of a millisecond", 0.5, 0, false},
		{"NaN", math.NaN(), 0, false},
		{"not a number", "soon", 0, false},
		{"space", " 5", 0, false},
		{"uint64 is not an accepted type", uint64(5), 0, false},
		{"bool", true, 0, false},
		{"table", amqp.Table{"a": 1}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, ok := ParseDelay(map[string]any{"x-delay": tt.v})
			require.Equal(t, tt.ok, ok)
			if ok {
				require.Equal(t, tt.ms, ms)
			}
		})
	}
	_, ok := ParseDelay(nil)
	require.False(t, ok)
}

func TestSwapDelayHeader(t *testing.T) {
	p := amqp.Properties{Headers: amqp.Table{"x-delay": int32(5000), "k": "v"}, MessageID: "m"}
	out, err := amqp.DecodeProperties(SwapDelayHeader(p.Append(nil), 5000))
	require.NoError(t, err)
	require.Equal(t, int32(-5000), out.Headers["x-delay"])
	require.Equal(t, "v", out.Headers["k"])
	require.Equal(t, "m", out.MessageID)
	out, err = amqp.DecodeProperties(SwapDelayHeader(p.Append(nil), math.MaxUint32))
	require.NoError(t, err)
	require.Equal(t, -int64(math.MaxUint32), out.Headers["x-delay"])
}

// FuzzParseDelay feeds x-delay header strings and checks ParseDelay's
// promise: ok only for a delay in (0, MaxDelay].
func FuzzParseDelay(f *testing.F) {
	for _, s := range []string{"1", "0", "-1", "+7", "4294967295", "4294967296", "1e3", "", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ms, ok := ParseDelay(map[string]any{"x-delay": s})
		if ok {
			require.True(t, ms > 0 && ms <= MaxDelay, "%q -> %d", s, ms)
		}
	})
}

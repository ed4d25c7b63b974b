package unacked

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCodecRoundTrip(t *testing.T) {
	tests := []Entry{
		{Key: Key{VHost: "/", Queue: "q", Offset: 7}, Connection: "c", Channel: 1, DeliveryTag: 9,
			Broker: "b", Incarnation: 2, DeliveredAt: 1e18, DeliveryCount: 3, State: Delivered},
		{Key: Key{Offset: math.MaxUint64}, Channel: math.MaxUint16, DeliveryTag: math.MaxUint64,
			Incarnation: math.MaxUint64, DeliveredAt: math.MinInt64, DeliveryCount: math.MaxUint32, State: Returned},
		{Key: Key{VHost: string(make([]byte, 200)), Queue: "\xff"}, DeliveredAt: math.MaxInt64, State: Returned},
	}
	for _, want := range tests {
		k, err := decodeKey(appendKey(nil, want.Key))
		require.NoError(t, err)
		require.Equal(t, want.Key, k)
		got := Entry{Key: k}
		require.NoError(t, decodeValue(appendValue(nil, &want), &got))
		require.Equal(t, want, got)
	}
}

func TestAppendValueAllocs(t *testing.T) {
	e := Entry{Key: Key{VHost: "/", Queue: "q"}, Connection: "conn", Broker: "node", State: Delivered}
	buf := make([]byte, 0, 128)
	allocs := testing.AllocsPerRun(100, func() {
		buf = appendValue(appendKey(buf[:0], e.Key), &e)
	})
	require.Zero(t, allocs)
}

// FuzzDecode feeds arbitrary bytes to the decoders, which must reject or
// accept without panicking, and must re-encode what they accept exactly.
func FuzzDecode(f *testing.F) {
	e := Entry{Key: Key{VHost: "/", Queue: "q", Offset: 1}, Connection: "c", Broker: "b", State: Delivered}
	f.Add(appendKey(nil, e.Key), appendValue(nil, &e))
	f.Add([]byte("u\x7f"), []byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte{}, []byte{})
	// Overlong varints: binary.Uvarint accepts them, the decoders must not.
	f.Add([]byte("u\x81\x00/\x01q\x00\x00\x00\x00\x00\x00\x00\x01"), []byte{1, 0x80, 0x00, 0, 0, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		if k, err := decodeKey(key); err == nil {
			require.Equal(t, key, appendKey(nil, k))
		}
		var got Entry
		if err := decodeValue(value, &got); err == nil {
			require.Equal(t, value, appendValue(nil, &got))
		}
	})
}

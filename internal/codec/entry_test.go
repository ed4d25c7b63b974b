package codec

import (
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/unacked"
)

func TestEntryRoundTrip(t *testing.T) {
	tests := []unacked.Entry{
		{Key: unacked.Key{VHost: "/", Queue: "q", Offset: 7}, Connection: "c", Channel: 1, DeliveryTag: 9,
			Broker: "b", Incarnation: 2, DeliveredAt: 1e18, DeliveryCount: 3, State: unacked.Delivered},
		{Key: unacked.Key{Offset: math.MaxUint64}, Channel: math.MaxUint16, DeliveryTag: math.MaxUint64,
			Incarnation: math.MaxUint64, DeliveredAt: math.MinInt64, DeliveryCount: math.MaxUint32, State: unacked.Returned},
		{Key: unacked.Key{VHost: string(make([]byte, 200)), Queue: "\xff"}, DeliveredAt: math.MaxInt64, State: unacked.Returned},
		{Key: unacked.Key{Queue: "qq"}, DeliveryCount: 4, Failed: 3, State: unacked.Delivered},
		{Key: unacked.Key{Queue: "qq"}, DeliveryCount: 4, Failed: math.MaxUint32, HeldUntil: -1, State: unacked.Returned},
		{Key: unacked.Key{Queue: "qq"}, HeldUntil: math.MaxInt64, State: unacked.Returned},
	}
	for _, want := range tests {
		k, err := DecodeEntryKey(AppendEntryKey(nil, want.Key))
		require.NoError(t, err)
		require.Equal(t, want.Key, k)
		got := unacked.Entry{Key: k}
		require.NoError(t, DecodeEntry(AppendEntry(nil, &want), &got))
		require.Equal(t, want, got)
	}
}

func TestAppendEntryAllocs(t *testing.T) {
	e := unacked.Entry{Key: unacked.Key{VHost: "/", Queue: "q"}, Connection: "conn", Broker: "node", State: unacked.Delivered}
	buf := make([]byte, 0, 128)
	allocs := testing.AllocsPerRun(100, func() {
		buf = AppendEntry(AppendEntryKey(buf[:0], e.Key), &e)
	})
	require.Zero(t, allocs)
}

// FuzzDecodeEntry feeds arbitrary bytes to the decoders, which must reject or
// accept without panicking, and must re-encode what they accept exactly.
func FuzzDecodeEntry(f *testing.F) {
	e := unacked.Entry{Key: unacked.Key{VHost: "/", Queue: "q", Offset: 1}, Connection: "c", Broker: "b", State: unacked.Delivered}
	f.Add(AppendEntryKey(nil, e.Key), AppendEntry(nil, &e))
	held := e
	held.Failed, held.HeldUntil, held.State = 2, 1_700_000_000_000_000_000, unacked.Returned
	f.Add(AppendEntryKey(nil, held.Key), AppendEntry(nil, &held))
	f.Add([]byte("u\x7f"), []byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Add([]byte{}, []byte{})
	// Overlong varints: binary.Uvarint accepts them, the decoders must not.
	f.Add([]byte("u\x81\x00/\x01q\x00\x00\x00\x00\x00\x00\x00\x01"), []byte{1, 0x80, 0x00, 0, 0, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, key, value []byte) {
		if k, err := DecodeEntryKey(key); err == nil {
			require.Equal(t, key, AppendEntryKey(nil, k))
		}
		var got unacked.Entry
		if err := DecodeEntry(value, &got); err == nil {
			require.Equal(t, value, AppendEntry(nil, &got))
		}
	})
}

// TestEntryLayout pins the entry key and value byte for byte: single-node
// data directories hold them, so a change here needs a new version byte.
func TestEntryLayout(t *testing.T) {
	e := unacked.Entry{Key: unacked.Key{VHost: "/", Queue: "q", Offset: 0x0102}, Connection: "c", Channel: 300,
		DeliveryTag: 5, Broker: "b", Incarnation: 1, DeliveredAt: -1, DeliveryCount: 2, State: unacked.Returned}
	require.Equal(t, []byte{'u', 1, '/', 1, 'q', 0, 0, 0, 0, 0, 0, 1, 2}, AppendEntryKey(nil, e.Key))
	want := []byte{
		1,      // version
		1, 'c', // connection
		0xac, 2, // channel 300
		5,      // delivery tag
		1, 'b', // broker
		1, // incarnation
		1, // delivered at -1, zig-zag
		2, // delivery count
		byte(unacked.Returned),
	}
	require.Equal(t, want, AppendEntry(nil, &e))
	require.Equal(t, unacked.Returned, EntryState(want))

	// With a failed count or a hold, version 2 adds them before the state.
	e.Failed, e.HeldUntil = 1, 2
	want2 := append([]byte{2}, want[1:len(want)-1]...)
	want2 = append(want2, 1, 4, byte(unacked.Returned)) // failed 1, held until 2 zig-zag
	require.Equal(t, want2, AppendEntry(nil, &e))
	require.Equal(t, unacked.Returned, EntryState(want2))
	var got unacked.Entry
	require.NoError(t, DecodeEntry(want2, &got))
	require.Equal(t, uint32(1), got.Failed)
	require.Equal(t, int64(2), got.HeldUntil)
	// A version 1 value reads with neither (written before version 2).
	require.NoError(t, DecodeEntry(want, &got))
	require.Zero(t, got.Failed)
	require.Zero(t, got.HeldUntil)
	// Version 2 with neither is not an encoding AppendEntry writes.
	zero := append([]byte{2}, want[1:len(want)-1]...)
	zero = append(zero, 0, 0, byte(unacked.Returned))
	require.ErrorIs(t, DecodeEntry(zero, &got), ErrCorrupt)
}

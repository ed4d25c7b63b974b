package codec

import (
	"bytes"
	"encoding/binary"
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/storage"
)

var codecRecords = []struct {
	name string
	rec  storage.Record
}{
	{"Zero", storage.Record{}},
	{"EmptySlices", storage.Record{Properties: []byte{}, Body: []byte{}}},
	{"NilPropertiesEmptyBody", storage.Record{Body: []byte{}}},
	{"AllFields", storage.Record{
		Exchange: "amq.topic", RoutingKey: "a.b.c", Properties: []byte{0x90, 0, 2},
		Body: []byte("hello"), Persistent: true, Priority: 7,
		EnqueuedAt: 1_722_000_000_000_000_001, ExpiresAt: 1_722_000_060_000_000_001,
	}},
	{"Extremes", storage.Record{Priority: 255, EnqueuedAt: math.MinInt64, ExpiresAt: math.MaxInt64}},
	{"NegativeExpiry", storage.Record{ExpiresAt: -1}},
	{"ClientHeaders", storage.Record{Properties: []byte{0x20, 0, 0, 0, 0, 0}, ClientHeaders: true}},
	{"LongFields", storage.Record{Exchange: string(bytes.Repeat([]byte{'x'}, 300)), Properties: bytes.Repeat([]byte{1}, 200), Body: bytes.Repeat([]byte{0}, 70000)}},
}

func TestRecordRoundTrip(t *testing.T) {
	for _, tt := range codecRecords {
		t.Run(tt.name, func(t *testing.T) {
			enc := AppendRecord(nil, &tt.rec)
			require.Len(t, enc, RecordLen(&tt.rec), "RecordLen")
			got, err := DecodeRecord(enc)
			require.NoError(t, err)
			require.Equal(t, tt.rec, got)
			// nil stays nil and empty stays empty: Equal does not tell.
			require.Equal(t, tt.rec.Properties == nil, got.Properties == nil, "Properties nil-ness")
			require.Equal(t, tt.rec.Body == nil, got.Body == nil, "Body nil-ness")
			// The record owns its memory.
			clear(enc)
			require.Equal(t, tt.rec, got, "decoded record changed with its source")
		})
	}
}

// TestRecordLayout pins the encoding byte for byte: stored data must stay
// readable, so a change here needs a new version byte.
func TestRecordLayout(t *testing.T) {
	r := storage.Record{
		Exchange: "ex", RoutingKey: "rk", Properties: []byte{0xaa}, Body: []byte("B"),
		Persistent: true, Priority: 3, EnqueuedAt: 0x0102030405060708, ExpiresAt: 1,
	}
	want := []byte{
		1,                      // version
		0b111,                  // persistent, properties, body
		3,                      // priority
		1, 2, 3, 4, 5, 6, 7, 8, // enqueued at
		2,           // expires at, zig-zag
		2, 'e', 'x', // exchange
		2, 'r', 'k', // routing key
		1, 0xaa, // properties
		'B', // body
	}
	require.Equal(t, want, AppendRecord(nil, &r))
	// ClientHeaders is flag bit 3, added within version 1: a value
	// written before it (bit clear) reads as false.
	r.ClientHeaders = true
	want[1] = 0b1111
	require.Equal(t, want, AppendRecord(nil, &r))
	want[1] = 0b111
	got, err := DecodeRecord(want)
	require.NoError(t, err)
	require.False(t, got.ClientHeaders)
}

func TestDecodeRecordCorrupt(t *testing.T) {
	good := AppendRecord(nil, &codecRecords[3].rec)
	tests := []struct {
		name string
		val  []byte
	}{
		{"Empty", nil},
		{"ShortHeader", good[:recordHeaderLen-1]},
		{"UnknownVersion", append([]byte{2}, good[1:]...)},
		{"UnknownFlags", append([]byte{1, 0x80}, good[2:]...)},
		{"UnknownFlagBit4", append([]byte{1, 0x10 | good[1]}, good[2:]...)},
		{"NoExpiry", good[:recordHeaderLen]},
		{"BadExpiryVarint", append(slices.Clone(good[:recordHeaderLen]), bytes.Repeat([]byte{0xff}, 11)...)},
		{"ExchangeLengthPastEnd", append(slices.Clone(good[:recordHeaderLen+1]), 100, 'a')},
		{"OverlongExpiry", append(slices.Clone(good[:recordHeaderLen]), 0x80, 0x00, 0, 0, 0)},
		{"OverlongLength", append(slices.Clone(good[:recordHeaderLen]), 0, 0xff, 0x00, 0, 0, 0)},
		{"HugeLength", binary.AppendUvarint(slices.Clone(good[:recordHeaderLen+1]), math.MaxUint64)},
		{"TruncatedProperties", good[:len(good)-len("hello")-1]},
		{"PropertiesBytesButNilFlag", func() []byte {
			v := slices.Clone(good)
			v[1] &^= flagProperties
			return v
		}()},
		{"BodyBytesButNilFlag", func() []byte {
			v := slices.Clone(good)
			v[1] &^= flagBody
			return v
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeRecord(tt.val)
			require.ErrorIs(t, err, ErrCorrupt)
		})
	}
}

// FuzzDecodeRecord checks that no input panics the decoder, and that what
// decodes encodes back to the same bytes: there is one encoding per record.
func FuzzDecodeRecord(f *testing.F) {
	for _, tt := range codecRecords[:6] {
		f.Add(AppendRecord(nil, &tt.rec))
	}
	f.Fuzz(func(t *testing.T, val []byte) {
		r, err := DecodeRecord(val)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		require.Equal(t, val, AppendRecord(nil, &r))
	})
}

func TestEncodeDoesNotAllocate(t *testing.T) {
	r := codecRecords[3].rec
	buf := make([]byte, 0, RecordLen(&r))
	allocs := testing.AllocsPerRun(100, func() {
		buf = AppendRecord(buf[:0], &r)
		_ = RecordLen(&r)
	})
	require.Zero(t, allocs)
}

func BenchmarkRecord(b *testing.B) {
	r := storage.Record{Exchange: "amq.direct", RoutingKey: "bench", Properties: make([]byte, 20), Body: make([]byte, 128), EnqueuedAt: 1_722_000_000_000_000_000}
	enc := AppendRecord(nil, &r)
	b.Run("Encode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(enc)))
		buf := make([]byte, 0, len(enc))
		for b.Loop() {
			buf = AppendRecord(buf[:0], &r)
		}
	})
	b.Run("Decode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(enc)))
		for b.Loop() {
			if _, err := DecodeRecord(enc); err != nil {
				b.Fatal(err)
			}
		}
	})
}

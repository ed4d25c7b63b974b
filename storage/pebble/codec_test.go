package pebble

import (
	"bytes"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStateCodec(t *testing.T) {
	for _, next := range []uint64{0, 5, 1000, math.MaxUint64} {
		got, paged, err := decodeState(appendState(nil, next))
		require.NoError(t, err)
		require.Equal(t, next, got)
		require.True(t, paged)
	}
	valid := []struct {
		name  string
		val   []byte
		next  uint64
		paged bool
	}{
		{"V1", []byte{1, 5, 3}, 5, false},
		{"V1Full", []byte{1, 5, 5}, 5, false},
		{"V2", []byte{2, 0x80, 0x01}, 128, false},
		{"V3", []byte{3, 0x80, 0x01}, 128, true},
	}
	for _, tt := range valid {
		t.Run(tt.name, func(t *testing.T) {
			next, paged, err := decodeState(tt.val)
			require.NoError(t, err)
			require.Equal(t, tt.next, next)
			require.Equal(t, tt.paged, paged)
		})
	}
	corrupt := []struct {
		name string
		val  []byte
	}{
		{"Empty", nil},
		{"UnknownVersion", []byte{4, 0}},
		{"VersionZero", []byte{0, 0}},
		{"V3Trailing", []byte{3, 5, 0}},
		{"V1NoCount", []byte{1, 5}},
		{"V1Trailing", []byte{1, 5, 1, 0}},
		{"V1CountAboveNext", []byte{1, 1, 2}},
		{"V2Trailing", []byte{2, 5, 0}},
		{"BadVarint", append([]byte{2}, bytes.Repeat([]byte{0xff}, 11)...)},
		{"OverlongNext", []byte{2, 0x85, 0x00}},
	}
	for _, tt := range corrupt {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := decodeState(tt.val)
			require.ErrorIs(t, err, ErrCorrupt)
		})
	}
}

func FuzzDecodeState(f *testing.F) {
	f.Add(appendState(nil, 10))
	f.Add([]byte{1, 10, 2})
	f.Fuzz(func(t *testing.T, val []byte) {
		next, _, err := decodeState(val)
		if err != nil {
			require.ErrorIs(t, err, ErrCorrupt)
			return
		}
		require.Equal(t, appendState(nil, next), append([]byte{stateVersion}, val[1:1+uvarintLen(next)]...))
	})
}

// TestKeyLayout checks the properties the layout comment claims: key order
// is offset order within a shard, and no shard's keys fall inside another
// shard's range, however their names compare.
func TestKeyLayout(t *testing.T) {
	names := []string{"", "a", "ab", "a\x00", "a\xff", "b", string(bytes.Repeat([]byte{'q'}, 200)), string(bytes.Repeat([]byte{'q'}, 128))}
	offsets := []uint64{0, 1, 255, 256, 1 << 32, math.MaxUint64}
	for _, n := range names {
		sh := newShard(n)
		require.Equal(t, byte('s'), sh.prefix[0])
		for i := 1; i < len(offsets); i++ {
			a := appendRecordKey(nil, sh.prefix, offsets[i-1])
			b := appendRecordKey(nil, sh.prefix, offsets[i])
			require.Negative(t, bytes.Compare(a, b), "shard %q: key order must follow offsets", n)
			require.Negative(t, bytes.Compare(b, sh.recEnd))
			require.Negative(t, bytes.Compare(sh.state, sh.end))
			require.Len(t, b, recordKeyLen(sh.prefix))
		}
		for _, m := range names {
			if m == n {
				continue
			}
			other := newShard(m)
			for _, k := range [][]byte{other.state, appendRecordKey(nil, other.prefix, 0), appendRecordKey(nil, other.prefix, math.MaxUint64)} {
				inside := bytes.Compare(k, sh.prefix) >= 0 && bytes.Compare(k, sh.end) < 0
				require.False(t, inside, "a key of shard %q lies in the range of shard %q", m, n)
			}
		}
	}
}

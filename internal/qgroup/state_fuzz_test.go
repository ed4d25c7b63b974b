package qgroup

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"

	"github.com/warrenmq/broker/internal/codec"
)

// FuzzDecodeSnapshot decodes arbitrary bytes as a queue's snapshot (one
// from a faulty or forged leader, or a damaged format 1 checkpoint): it
// refuses or accepts, never panics, and what it accepts has ascending
// record offsets below the next offset, each a record that decodes.
func FuzzDecodeSnapshot(f *testing.F) {
	e := encoder{b: []byte{snapshotVersion}}
	e.u(9)
	e.u(3)
	e.u(2)
	for _, o := range []uint64{4, 7} {
		e.u(o)
		e.bs(codec.AppendRecord(nil, &storage.Record{Body: []byte("x"), Persistent: true}))
	}
	e.entries([]unacked.Entry{entry(4, unacked.Returned)})
	f.Add(e.b)
	f.Add([]byte{snapshotVersion, 0, 0, 0, 0})
	f.Add([]byte{2})
	f.Fuzz(func(t *testing.T, b []byte) {
		var offs []uint64
		next, _, entries, err := decodeSnapshot(b, unacked.Key{VHost: "/", Queue: "q"}, func(o uint64, v []byte) error {
			_, err := codec.DecodeRecord(v)
			require.NoError(t, err, "only records that decode are handed on")
			offs = append(offs, o)
			return nil
		})
		if err != nil {
			return
		}
		for i, o := range offs {
			require.Less(t, o, next)
			if i > 0 {
				require.Greater(t, o, offs[i-1])
			}
		}
		for _, en := range entries {
			require.Equal(t, "q", en.Queue)
		}
	})
}

// FuzzDecodeCounters decodes arbitrary bytes as a queue's counters: it
// refuses or accepts consistent ones, and what it accepts encodes back to
// the same bytes.
func FuzzDecodeCounters(f *testing.F) {
	f.Add(encodeCounters(counters{next: 10, cursor: 4, count: 3, first: 7}))
	f.Add(encodeCounters(counters{}))
	f.Add([]byte{metaVersion, 1, 2})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeCounters(b)
		if err != nil {
			return
		}
		require.LessOrEqual(t, c.count, c.next)
		require.LessOrEqual(t, c.first, c.next)
		require.Equal(t, c, mustDecodeCounters(t, encodeCounters(c)))
	})
}

func mustDecodeCounters(t *testing.T, b []byte) counters {
	c, err := decodeCounters(b)
	require.NoError(t, err)
	return c
}

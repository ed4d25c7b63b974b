package pebble_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/storage/pebble"
	"github.com/warrenmq/broker/unacked"
)

// settleFixture appends n persistent records to shard "q", puts a
// Delivered entry for each and syncs.
func settleFixture(t *testing.T, s *pebble.Store, x unacked.Index, n int) []unacked.Key {
	t.Helper()
	ctx := context.Background()
	recs := make([]storage.Record, n)
	entries := make([]unacked.Entry, n)
	keys := make([]unacked.Key, n)
	for i := range recs {
		recs[i] = storage.Record{Body: fmt.Appendf(nil, "m%d", i), Persistent: true}
		keys[i] = unacked.Key{VHost: "/", Queue: "q", Offset: uint64(i)}
		entries[i] = unacked.Entry{Key: keys[i], State: unacked.Delivered, Connection: "c", Channel: 1, DeliveryTag: uint64(i + 1)}
	}
	_, err := s.Append(ctx, "q", recs)
	require.NoError(t, err)
	require.NoError(t, x.Put(ctx, entries))
	require.NoError(t, s.Sync(ctx)) // the entries survive a crash too
	return keys
}

// entryOffsets lists the offsets of the entries x holds for queue q.
func entryOffsets(t *testing.T, x unacked.Index) []uint64 {
	t.Helper()
	var got []uint64
	require.NoError(t, x.Queue(context.Background(), "/", "q", func(e unacked.Entry) bool {
		got = append(got, e.Offset)
		return true
	}))
	return got
}

// recordOffsets lists the offsets of shard q's records.
func recordOffsets(t *testing.T, s *pebble.Store) []uint64 {
	t.Helper()
	recs, err := s.Read(context.Background(), "q", 0, math.MaxInt)
	require.NoError(t, err)
	var got []uint64
	for _, r := range recs {
		got = append(got, r.Offset)
	}
	return got
}

// TestDeleteSettled checks that DeleteSettled deletes records and index
// entries together, skips what is gone already (a repeated ack), and
// refuses, touching nothing, an index it cannot write with its records.
func TestDeleteSettled(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	h := openDB(t, dir)
	s, x := pebble.New(h.DB), pebble.NewIndex(h.DB)
	keys := settleFixture(t, s, x, 6)

	done, err := s.DeleteSettled(ctx, "q", []uint64{0, 1, 3}, x, []unacked.Key{keys[0], keys[1], keys[3]}, 3)
	require.NoError(t, err)
	require.True(t, done)
	require.Equal(t, []uint64{2, 4, 5}, recordOffsets(t, s))
	require.Equal(t, []uint64{2, 4, 5}, entryOffsets(t, x))
	n, err := s.Count(ctx, "q")
	require.NoError(t, err)
	require.Equal(t, uint64(3), n)

	// Again, and with entries whose records are gone: harmless.
	done, err = s.DeleteSettled(ctx, "q", []uint64{0, 1}, x, []unacked.Key{keys[0], keys[1]}, 0)
	require.NoError(t, err)
	require.True(t, done)
	require.Equal(t, []uint64{2, 4, 5}, recordOffsets(t, s))

	// Another DB's index, or another kind of index: nothing happens.
	other := pebble.NewIndex(openDB(t, t.TempDir()).DB)
	for _, idx := range []unacked.Index{other, unacked.NewMemoryIndex()} {
		done, err = s.DeleteSettled(ctx, "q", []uint64{2}, idx, []unacked.Key{keys[2]}, 1)
		require.NoError(t, err)
		require.False(t, done)
		require.Equal(t, []uint64{2, 4, 5}, recordOffsets(t, s))
		require.Equal(t, []uint64{2, 4, 5}, entryOffsets(t, x))
	}

	// The shard reopens with what was left.
	h.close(t)
	h2 := openDB(t, dir)
	s2, x2 := pebble.New(h2.DB), pebble.NewIndex(h2.DB)
	require.Equal(t, []uint64{2, 4, 5}, recordOffsets(t, s2))
	require.Equal(t, []uint64{2, 4, 5}, entryOffsets(t, x2))
}

// TestDeleteSettledCrash simulates power loss after acks: whatever part
// of the unsynced tail survives, the records left are a suffix (acks are
// lost newest first), each with its entry, and Count agrees. (Whether the
// two are in one batch it cannot tell: the crashable file system keeps
// or drops the log's writes whole, and back-to-back commits share one.)
func TestDeleteSettledCrash(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			ctx := context.Background()
			rng := rand.New(rand.NewPCG(seed, 3))
			fs := vfs.NewCrashableMem()
			h := openDB(t, "db", pebble.WithFS(fs))
			s, x := pebble.New(h.DB), pebble.NewIndex(h.DB)
			const n = 64
			keys := settleFixture(t, s, x, n)
			for o := 0; o < n; {
				k := 1 + rng.IntN(5)
				var offs []uint64
				for i := o; i < min(o+k, n); i++ {
					offs = append(offs, uint64(i))
				}
				done, err := s.DeleteSettled(ctx, "q", offs, x, keys[o:min(o+k, n)], len(offs))
				require.NoError(t, err)
				require.True(t, done)
				o += k
			}
			crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: int(seed * 12), RNG: rand.New(rand.NewPCG(seed, 5))})
			h2 := openDB(t, "db", pebble.WithFS(crashed))
			s2, x2 := pebble.New(h2.DB), pebble.NewIndex(h2.DB)
			recs, ents := recordOffsets(t, s2), entryOffsets(t, x2)
			require.Equal(t, recs, ents, "records and entries deleted apart")
			// The acks are a prefix: what survives is a suffix of the
			// offsets, all of them after losing every unsynced write.
			for i, o := range recs {
				require.Equal(t, uint64(n-len(recs)+i), o)
			}
			c, err := s2.Count(ctx, "q")
			require.NoError(t, err)
			require.Equal(t, uint64(len(recs)), c)
		})
	}
}

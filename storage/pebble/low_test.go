package pebble

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/codec"
	"github.com/warrenmq/broker/storage"
)

func openMem(t *testing.T) *Store {
	t.Helper()
	db, err := Open("db", WithFS(vfs.NewMem()), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	return New(db)
}

// TestLowWatermark checks that deletes keep low at the first live offset,
// so reads seek past the tombstones of acked messages, and that the bound
// never passes a live record.
func TestLowWatermark(t *testing.T) {
	ctx := context.Background()
	s := openMem(t)
	_, err := s.Append(ctx, "q", make([]storage.Record, 100))
	require.NoError(t, err)
	sh := s.shard("q")

	del := func(offs ...uint64) {
		require.NoError(t, s.DeleteByOffsets(ctx, "q", offs))
	}
	delRange := func(from, to uint64) {
		offs := make([]uint64, 0, to-from)
		for o := from; o < to; o++ {
			offs = append(offs, o)
		}
		del(offs...)
	}
	steps := []struct {
		name    string
		do      func()
		wantLow uint64
	}{
		{"Fresh", func() {}, 0},
		{"DeletesMoveIt", func() { delRange(0, 40) }, 40},
		{"ReadFromZeroStartsThere", func() {
			got, err := s.Read(ctx, "q", 0, 1)
			require.NoError(t, err)
			require.Equal(t, uint64(40), got[0].Offset)
		}, 40},
		{"DeleteAboveLowLeavesIt", func() { del(45, 41) }, 40},
		{"DeleteOfLowSkipsDeadOnes", func() { del(40) }, 42},
		{"OutOfOrderDeletes", func() { del(49, 44, 48, 43, 47, 46, 42) }, 50},
		{"FirstOffsetAgrees", func() {
			fo, err := s.FirstOffset(ctx, "q")
			require.NoError(t, err)
			require.Equal(t, uint64(50), fo)
		}, 50},
		{"EmptyShardReadLearnsNext", func() {
			delRange(50, 100)
			got, err := s.Read(ctx, "q", 0, 10)
			require.NoError(t, err)
			require.Empty(t, got)
		}, 100},
		{"AppendAfterwardsIsSeen", func() {
			_, err := s.Append(ctx, "q", make([]storage.Record, 1))
			require.NoError(t, err)
			got, err := s.Read(ctx, "q", 0, 10)
			require.NoError(t, err)
			require.Len(t, got, 1)
			require.Equal(t, uint64(100), got[0].Offset)
		}, 100},
		{"DeleteShardStartsOver", func() {
			require.NoError(t, s.DeleteShard(ctx, "q"))
			sh = s.shard("q")
			_, err := s.Append(ctx, "q", make([]storage.Record, 2))
			require.NoError(t, err)
			got, err := s.Read(ctx, "q", 0, 10)
			require.NoError(t, err)
			require.Len(t, got, 2)
		}, 0},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			st.do()
			require.Equal(t, st.wantLow, sh.low.Load())
		})
	}
}

// TestStatePersisted checks the shard state key holds the next offset, and
// that a new Store (as after a restart) rebuilds the live set and its count
// from the records, also from a version 1 state whose count went stale.
func TestStatePersisted(t *testing.T) {
	ctx := context.Background()
	s := openMem(t)
	_, err := s.Append(ctx, "q", make([]storage.Record, 5))
	require.NoError(t, err)
	require.NoError(t, s.DeleteByOffsets(ctx, "q", []uint64{1, 3, 3, 99}))

	val, closer, err := s.db.Get(newShard("q").state)
	require.NoError(t, err)
	next, _, err := decodeState(val)
	require.NoError(t, closer.Close())
	require.NoError(t, err)
	require.Equal(t, uint64(5), next)

	for _, state := range [][]byte{nil, {stateVersionV1, 5, 5}} {
		if state != nil {
			require.NoError(t, s.db.Set(newShard("q").state, state, nil))
		}
		fresh := New(s.db)
		n, err := fresh.Count(ctx, "q")
		require.NoError(t, err)
		require.Equal(t, uint64(3), n)
		first, err := fresh.FirstOffset(ctx, "q")
		require.NoError(t, err)
		require.Equal(t, uint64(0), first)
		// The rebuilt live set knows 1 and 3 are gone: deleting them
		// again leaves the count alone.
		require.NoError(t, fresh.DeleteByOffsets(ctx, "q", []uint64{3, 1, 0}))
		n, err = fresh.Count(ctx, "q")
		require.NoError(t, err)
		require.Equal(t, uint64(2), n)
		first, err = fresh.FirstOffset(ctx, "q")
		require.NoError(t, err)
		require.Equal(t, uint64(2), first)
		// Put offset 0 back for the next round, as a raw write.
		rec := codec.AppendRecord(nil, &storage.Record{})
		require.NoError(t, s.db.Set(appendRecordKey(nil, newShard("q").prefix, 0), rec, nil))
	}
}

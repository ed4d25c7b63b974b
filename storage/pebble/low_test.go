package pebble

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/storage"
)

func openMem(t *testing.T) *Store {
	t.Helper()
	db, err := Open("db", WithFS(vfs.NewMem()), WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, db.Close()) })
	return New(db)
}

// TestLowWatermark checks that reads learn where the live records start, so
// later reads seek past the tombstones of acked messages, and that the
// bound never passes a live record.
func TestLowWatermark(t *testing.T) {
	ctx := context.Background()
	s := openMem(t)
	_, err := s.Append(ctx, "q", make([]storage.Record, 100))
	require.NoError(t, err)
	sh := s.shard("q")

	del := func(from, to uint64) {
		offs := make([]uint64, 0, to-from)
		for o := from; o < to; o++ {
			offs = append(offs, o)
		}
		require.NoError(t, s.DeleteByOffsets(ctx, "q", offs))
	}
	steps := []struct {
		name    string
		do      func()
		wantLow uint64
	}{
		{"Fresh", func() {}, 0},
		{"DeletesAloneDoNotMoveIt", func() { del(0, 40) }, 0},
		{"ReadFromZeroLearns", func() {
			got, err := s.Read(ctx, "q", 0, 1)
			require.NoError(t, err)
			require.Equal(t, uint64(40), got[0].Offset)
		}, 40},
		{"ReadFromAboveLowLearnsNothing", func() {
			del(40, 50)
			_, err := s.Read(ctx, "q", 60, 1)
			require.NoError(t, err)
		}, 40},
		{"FirstOffsetLearns", func() {
			fo, err := s.FirstOffset(ctx, "q")
			require.NoError(t, err)
			require.Equal(t, uint64(50), fo)
		}, 50},
		{"EmptyShardReadLearnsNext", func() {
			del(50, 100)
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

// TestStatePersisted checks the shard state key is written with every
// change, so a new Store (as after a restart) counts without scanning.
func TestStatePersisted(t *testing.T) {
	ctx := context.Background()
	s := openMem(t)
	_, err := s.Append(ctx, "q", make([]storage.Record, 5))
	require.NoError(t, err)
	require.NoError(t, s.DeleteByOffsets(ctx, "q", []uint64{1, 3, 3, 99}))

	val, closer, err := s.db.Get(newShard("q").state)
	require.NoError(t, err)
	next, count, err := decodeState(val)
	require.NoError(t, closer.Close())
	require.NoError(t, err)
	require.Equal(t, uint64(5), next)
	require.Equal(t, uint64(3), count)

	fresh := New(s.db)
	n, err := fresh.Count(ctx, "q")
	require.NoError(t, err)
	require.Equal(t, uint64(3), n)
}

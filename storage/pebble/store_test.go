package pebble_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	cpebble "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/storage/pebble"
	"github.com/warrenmq/broker/storage/storagetest"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// handle is an open DB that the test closes at its end unless the test
// closed it first (Pebble panics on a second Close).
type handle struct {
	*cpebble.DB
	closed bool
}

func (h *handle) close(t testing.TB) {
	t.Helper()
	if !h.closed {
		h.closed = true
		require.NoError(t, h.DB.Close())
	}
}

func openDB(t testing.TB, dir string, opts ...pebble.Option) *handle {
	t.Helper()
	base := []pebble.Option{pebble.WithLogger(quiet), pebble.WithCacheSize(8 << 20), pebble.WithMemTableSize(4 << 20)}
	db, err := pebble.Open(dir, append(base, opts...)...)
	require.NoError(t, err)
	h := &handle{DB: db}
	t.Cleanup(func() { h.close(t) })
	return h
}

// opener returns the open function storagetest.Run needs; newFS nil means
// the real disk.
func opener(newFS func() vfs.FS) func(t *testing.T) (storage.ShardStore, func() storage.ShardStore) {
	return func(t *testing.T) (storage.ShardStore, func() storage.ShardStore) {
		fs, dir := vfs.Default, t.TempDir()
		if newFS != nil {
			fs, dir = newFS(), "db"
		}
		h := openDB(t, dir, pebble.WithFS(fs))
		reopen := func() storage.ShardStore {
			h.close(t)
			h = openDB(t, dir, pebble.WithFS(fs))
			return pebble.New(h.DB)
		}
		return pebble.New(h.DB), reopen
	}
}

func TestConformance(t *testing.T) {
	t.Run("Disk", func(t *testing.T) {
		storagetest.Run(t, opener(nil), storagetest.Without("storage.MemoryReporter"))
	})
	t.Run("MemFS", func(t *testing.T) {
		storagetest.Run(t, opener(func() vfs.FS { return vfs.NewMem() }), storagetest.Without("storage.MemoryReporter"))
	})
}

func BenchmarkStore(b *testing.B) {
	storagetest.Benchmark(b, func(b *testing.B) storage.ShardStore {
		// Production sizes, not the small ones the tests use.
		return pebble.New(openDB(b, b.TempDir(), pebble.WithCacheSize(pebble.DefaultCacheSize), pebble.WithMemTableSize(pebble.DefaultMemTableSize)).DB)
	})
}

// BenchmarkLoadShard measures what the first use of a shard costs after
// opening: one scan of its record keys to build the live set. The shard
// holds 100,000 records of 64 B, every other one acked.
func BenchmarkLoadShard(b *testing.B) {
	ctx := context.Background()
	h := openDB(b, b.TempDir())
	s := pebble.New(h.DB)
	const n = 100_000
	recs := make([]storage.Record, 1000)
	for i := range recs {
		recs[i] = storage.Record{Body: make([]byte, 64)}
	}
	for range n / len(recs) {
		_, err := s.Append(ctx, "q", recs)
		require.NoError(b, err)
	}
	acked := make([]uint64, 0, n/2)
	for o := uint64(0); o < n; o += 2 {
		acked = append(acked, o)
	}
	require.NoError(b, s.DeleteByOffsets(ctx, "q", acked))
	require.NoError(b, h.Flush())
	b.ReportAllocs()
	for b.Loop() {
		fresh := pebble.New(h.DB)
		count, err := fresh.Count(ctx, "q")
		require.NoError(b, err)
		require.Equal(b, uint64(n/2), count)
	}
}

package broker

import (
	"encoding/binary"
	"io"
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/stores"
)

// TestStoreMemoryBoundsMemtables: with Options.Storage.Memory the Pebble
// memtables stay at a quarter of it each (Pebble keeps up to two, plus
// one being flushed), while the default lets them grow to 64 MiB; 40 MiB
// written straight to the database shows the difference.
func TestStoreMemoryBoundsMemtables(t *testing.T) {
	for _, tc := range []struct {
		name    string
		memory  int64
		atMost  uint64 // the memtables' bytes after the writes, at most
		atLeast uint64
	}{
		{"8 MiB", 8 << 20, 3 * (2 << 20), 0},
		{"default", 0, 3 * (64 << 20), 8 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &Options{DataDir: t.TempDir(), Storage: StorageOptions{Memory: tc.memory}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
			s, err := stores.Open(o.storeConfig(), func(int64, bool) {})
			require.NoError(t, err)
			defer func() { require.NoError(t, s.Close()) }()
			val := make([]byte, 4096)
			key := make([]byte, 9)
			key[0] = 0xfe // outside every key space the stores use
			b := s.DB.NewBatch()
			for i := range 40 << 20 / len(val) {
				binary.BigEndian.PutUint64(key[1:], uint64(i))
				require.NoError(t, b.Set(key, val, nil))
				if b.Len() > 1<<20 {
					require.NoError(t, b.Commit(pebble.NoSync))
					b = s.DB.NewBatch()
				}
			}
			require.NoError(t, b.Commit(pebble.NoSync))
			m := s.DB.Metrics()
			require.LessOrEqual(t, m.MemTable.Size, tc.atMost, "memtables %d", m.MemTable.Size)
			require.GreaterOrEqual(t, m.MemTable.Size, tc.atLeast, "memtables %d", m.MemTable.Size)
		})
	}
}

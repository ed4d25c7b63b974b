package pebble_test

import (
	"context"
	"strings"
	"testing"

	cpebble "github.com/cockroachdb/pebble/v2"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/storage/pebble"
	"github.com/warrenmq/broker/unacked"
	"github.com/warrenmq/broker/unacked/indextest"
)

func TestIndex(t *testing.T) {
	indextest.Run(t, func(t *testing.T) unacked.Index { return pebble.NewIndex(openDB(t, t.TempDir()).DB) },
		indextest.Without("unacked.Claimer"))
}

// TestIndexSharedDB checks the index reads only its 'u' keys and
// leaves the other stores' keys alone, DeleteQueue included.
func TestIndexSharedDB(t *testing.T) {
	ctx := context.Background()
	db := openDB(t, t.TempDir())
	foreign := []string{"t", "s\x01/q", "m\x01/q", "v", "\xff"}
	for _, k := range foreign {
		require.NoError(t, db.Set([]byte(k), []byte("x"), cpebble.NoSync))
	}
	x := pebble.NewIndex(db.DB)
	n := 0
	require.NoError(t, x.Scan(ctx, func(unacked.Entry) bool { n++; return true }))
	require.Zero(t, n)
	e := unacked.Entry{Key: unacked.Key{VHost: "/", Queue: "q", Offset: 1}, State: unacked.Delivered}
	require.NoError(t, x.Put(ctx, []unacked.Entry{e}))
	require.NoError(t, x.DeleteQueue(ctx, "/", "q"))
	for _, k := range foreign {
		_, closer, err := db.Get([]byte(k))
		require.NoError(t, err, "key %q", k)
		require.NoError(t, closer.Close())
	}
}

// TestIndexCorrupt checks damaged records come back as errors, never
// panics, from every read path.
func TestIndexCorrupt(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name       string
		key, value string
	}{
		{"empty-value", "u\x01/\x01q\x00\x00\x00\x00\x00\x00\x00\x01", ""},
		{"unknown-version", "u\x01/\x01q\x00\x00\x00\x00\x00\x00\x00\x01", "\x09"},
		{"truncated", "u\x01/\x01q\x00\x00\x00\x00\x00\x00\x00\x01", "\x01\x05ab"},
		{"bad-state", "u\x01/\x01q\x00\x00\x00\x00\x00\x00\x00\x01", "\x01\x00\x01\x01\x00\x01\x00\x01\x07"},
		{"short-key", "u\x01/\x01q\x01", "\x01\x00\x01\x01\x00\x01\x00\x01\x01"},
		{"long-length", "u\x7f/", "\x01\x00\x01\x01\x00\x01\x00\x01\x01"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := openDB(t, t.TempDir())
			require.NoError(t, db.Set([]byte(tt.key), []byte(tt.value), cpebble.NoSync))
			x := pebble.NewIndex(db.DB)
			err := x.Scan(ctx, func(unacked.Entry) bool { return true })
			require.ErrorIs(t, err, pebble.ErrCorrupt)
			if strings.HasPrefix(tt.key, "u\x01/\x01q") {
				err = x.Queue(ctx, "/", "q", func(unacked.Entry) bool { return true })
				require.ErrorIs(t, err, pebble.ErrCorrupt)
			}
		})
	}
	t.Run("get", func(t *testing.T) {
		db := openDB(t, t.TempDir())
		require.NoError(t, db.Set([]byte("u\x01/\x01q\x00\x00\x00\x00\x00\x00\x00\x01"), []byte("\x01"), cpebble.NoSync))
		_, err := pebble.NewIndex(db.DB).Get(ctx, unacked.Key{VHost: "/", Queue: "q", Offset: 1})
		require.ErrorIs(t, err, pebble.ErrCorrupt)
	})
}

func TestIndexNilDB(t *testing.T) {
	x := pebble.NewIndex(nil)
	err := x.Put(context.Background(), []unacked.Entry{{State: unacked.Delivered}})
	require.ErrorContains(t, err, "storage/pebble: Index has no DB")
}

func BenchmarkIndex(b *testing.B) {
	indextest.Bench(b, func(b *testing.B) unacked.Index { return pebble.NewIndex(openDB(b, b.TempDir()).DB) })
}

// TestIndexDeletePutOnce checks that entries deleted as put once leave
// nothing in the flush that meets them with their Set, where a Delete
// leaves a tombstone per entry, and that an entry put twice is gone
// whatever once says of the others.
func TestIndexDeletePutOnce(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name       string
		once       int
		putTwice   bool // the last entry is put again before the delete
		tombstones bool // the flush writes the deletes to an sstable
	}{
		{name: "once", once: 100},
		{name: "delete", once: 0, tombstones: true},
		{name: "mixed", once: 99, putTwice: true, tombstones: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := openDB(t, t.TempDir())
			x := pebble.NewIndex(db.DB)
			// An sstable spanning queue q's keys, so a flush cannot
			// drop a tombstone for want of anything below it.
			require.NoError(t, x.Put(ctx, []unacked.Entry{
				{Key: unacked.Key{VHost: "/", Queue: "p"}, State: unacked.Delivered},
				{Key: unacked.Key{VHost: "/", Queue: "r"}, State: unacked.Delivered},
			}))
			require.NoError(t, db.Flush())
			entries := make([]unacked.Entry, 100)
			keys := make([]unacked.Key, len(entries))
			for i := range entries {
				keys[i] = unacked.Key{VHost: "/", Queue: "q", Offset: uint64(i)}
				entries[i] = unacked.Entry{Key: keys[i], State: unacked.Delivered, DeliveryCount: 1}
			}
			require.NoError(t, x.Put(ctx, entries))
			if tt.putTwice {
				last := entries[len(entries)-1]
				last.State = unacked.Returned
				require.NoError(t, x.Put(ctx, []unacked.Entry{last}))
			}
			require.NoError(t, x.DeletePutOnce(ctx, keys, tt.once))
			require.NoError(t, db.Flush())
			var tables int64
			for _, l := range db.Metrics().Levels {
				tables += l.TablesCount
			}
			require.Equal(t, tt.tombstones, tables > 1, "sstables after the flushes: %d", tables)
			n := 0
			require.NoError(t, x.Queue(ctx, "/", "q", func(unacked.Entry) bool { n++; return true }))
			require.Zero(t, n, "entries left")
		})
	}
}

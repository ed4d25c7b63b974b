//go:build linux

package pebble_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/storage/pebble"
)

// allocated is the disk the files of dir take (du, not their sizes: a
// preallocated WAL is small and takes its whole preallocation).
func allocated(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	require.NoError(t, filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		n += fi.Sys().(*syscall.Stat_t).Blocks * 512
		return nil
	}))
	return n
}

// TestFreshDataDirectorySmall: a database opened as the broker opens it
// (production memtable and cache sizes, a default disk reserve) takes a
// few MiB fresh and after 1,700 small persistent messages, one append
// each. It took 199 MiB fresh and 269 MiB after them: a 128 MiB reserve
// (twice the 64 MiB memtable) and every WAL preallocated to 70 MiB.
func TestFreshDataDirectorySmall(t *testing.T) {
	dir := t.TempDir()
	r := &pebble.DiskReserve{}
	db, err := pebble.Open(dir, pebble.WithLogger(quiet), pebble.WithDiskReserve(r))
	require.NoError(t, err)
	h := &handle{DB: db}
	t.Cleanup(func() { h.close(t) })
	fresh := allocated(t, dir)
	require.Less(t, fresh, int64(4<<20), "fresh data directory: %d bytes", fresh)

	s := pebble.New(db, pebble.GuardedBy(r))
	defer s.Close()
	ctx := context.Background()
	for i := range 1700 {
		body := fmt.Appendf(nil, "message %d of a small test, about a hundred bytes long, padded to look like a real one", i)
		_, err := s.Append(ctx, "q", []storage.Record{{Body: body, Persistent: true}})
		require.NoError(t, err)
	}
	after := allocated(t, dir)
	require.Less(t, after, int64(8<<20), "after 1,700 messages: %d bytes", after)
	require.Zero(t, r.Missing())
	t.Logf("data directory: %d bytes fresh, %d after 1,700 messages; reserve %d", fresh, after, r.Target())
}

// TestDiskReserveFollowsMemtables: a default-size reserve starts at 2 MiB
// and grows as Pebble's memtables grow, to twice the memtable size, and a
// restart keeps what it grew to; one larger than that is replaced.
func TestDiskReserveFollowsMemtables(t *testing.T) {
	dir := t.TempDir()
	const memtable = 4 << 20 // openDB's
	r := &pebble.DiskReserve{}
	h := openDB(t, dir, pebble.WithDiskReserve(r))
	require.Equal(t, int64(2<<20), r.Target())
	require.Zero(t, r.Missing())

	s := pebble.New(h.DB, pebble.GuardedBy(r))
	ctx := context.Background()
	recs := make([]storage.Record, 64)
	for i := range recs {
		recs[i] = storage.Record{Body: make([]byte, 1024), Persistent: true}
	}
	for range 400 { // 25 MiB: memtables of 256 KiB doubling to 4 MiB
		_, err := s.Append(ctx, "q", recs)
		require.NoError(t, err)
	}
	require.NoError(t, s.Close())
	require.Equal(t, int64(2*memtable), r.Target(), "twice the memtable size at most")
	require.Zero(t, r.Missing(), "grown on disk at once: there is room")
	st, err := os.Stat(filepath.Join(dir, pebble.ReserveFile))
	require.NoError(t, err)
	require.Equal(t, int64(2*memtable), st.Size())
	h.close(t)

	r = &pebble.DiskReserve{}
	h = openDB(t, dir, pebble.WithDiskReserve(r))
	require.Equal(t, int64(2*memtable), r.Target(), "a restart keeps the grown reserve")
	require.Zero(t, r.Missing())
	h.close(t)

	// A reserve of a larger memtable size (Options.Storage.Memory lowered) goes.
	r = &pebble.DiskReserve{}
	h = openDB(t, dir, pebble.WithDiskReserve(r), pebble.WithMemTableSize(1<<20))
	require.Equal(t, int64(2<<20), r.Target())
	st, err = os.Stat(filepath.Join(dir, pebble.ReserveFile))
	require.NoError(t, err)
	require.Equal(t, int64(2<<20), st.Size())
}

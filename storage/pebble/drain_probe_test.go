package pebble

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/storage"
)

// TestDrainDiskProbe fills one shard with WARREN_DRAIN_MESSAGES persistent
// 1 KiB records (random bytes: they do not compress), drains it with acks
// of 1,000 offsets as a consumer would, and logs the data directory's
// files by kind after the fill, after the drain, and 2 and 10 seconds
// later. It opens the DB as the broker does (disk reserve included;
// WARREN_DRAIN_MEMTABLE_MIB sets the memtable size, as
// broker.Options.Storage.Memory does). It is a measuring tool, not a check:
// it runs only when WARREN_DRAIN_MESSAGES is set.
func TestDrainDiskProbe(t *testing.T) {
	spec := os.Getenv("WARREN_DRAIN_MESSAGES")
	if spec == "" {
		t.Skip("WARREN_DRAIN_MESSAGES not set")
	}
	total, err := strconv.Atoi(spec)
	require.NoError(t, err)
	ctx := context.Background()
	dir := t.TempDir()
	reserve := &DiskReserve{}
	opts := []Option{WithLogger(slog.New(slog.DiscardHandler)), WithDiskReserve(reserve)}
	if mt := os.Getenv("WARREN_DRAIN_MEMTABLE_MIB"); mt != "" {
		mib, err := strconv.Atoi(mt)
		require.NoError(t, err)
		opts = append(opts, WithMemTableSize(uint64(mib)<<20))
	}
	db, err := Open(dir, opts...)
	require.NoError(t, err)
	defer func() { require.NoError(t, db.Close()) }()
	s := New(db, GuardedBy(reserve))
	defer func() { require.NoError(t, s.Close()) }()
	recs := make([]storage.Record, 256)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range recs {
		body := make([]byte, 1024)
		for j := range body {
			body[j] = byte(rng.Uint32())
		}
		recs[i] = storage.Record{Body: body, Persistent: true}
	}
	start := time.Now()
	for n := 0; n < total; n += len(recs) {
		_, err := s.Append(ctx, "q", recs[:min(len(recs), total-n)])
		require.NoError(t, err)
	}
	t.Logf("fill %d in %v", total, time.Since(start))
	logDir(t, "after fill", dir)
	start = time.Now()
	offs := make([]uint64, 1000)
	for from := 0; from < total; from += len(offs) {
		offs = offs[:0]
		for o := from; o < min(from+1000, total); o++ {
			offs = append(offs, uint64(o))
		}
		require.NoError(t, s.DeleteByOffsets(ctx, "q", offs))
	}
	t.Logf("drain %d in %v", total, time.Since(start))
	logDir(t, "after drain", dir)
	time.Sleep(2 * time.Second)
	logDir(t, "2 s later", dir)
	time.Sleep(8 * time.Second)
	logDir(t, "10 s later", dir)
	t.Logf("metrics:\n%s", db.Metrics())
}

// logDir logs the size of dir's files grouped by kind (the name's
// extension, or the name for Pebble's fixed files): their length and the
// disk blocks allocated to them, which is what du reports and differs
// for the write-ahead logs (preallocated, and recycled at their old size).
func logDir(t *testing.T, when, dir string) {
	sizes, alloc := map[string]int64{}, map[string]int64{}
	counts := map[string]int{}
	require.NoError(t, filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted by a compaction meanwhile
		}
		if err != nil {
			return err
		}
		kind := filepath.Ext(d.Name())
		if kind == "" {
			kind, _, _ = strings.Cut(d.Name(), "-0")
		}
		sizes[kind] += info.Size()
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			alloc[kind] += st.Blocks * 512
		}
		counts[kind]++
		return nil
	}))
	kinds := make([]string, 0, len(sizes))
	var total, allocated int64
	for k, v := range sizes {
		kinds = append(kinds, k)
		total += v
		allocated += alloc[k]
	}
	sort.Strings(kinds)
	var b strings.Builder
	for _, k := range kinds {
		fmt.Fprintf(&b, "  %s: %d files, %d KiB (%d KiB allocated)\n", k, counts[k], sizes[k]>>10, alloc[k]>>10)
	}
	t.Logf("%s: %d MiB (%d MiB allocated)\n%s", when, total>>20, allocated>>20, b.String())
}

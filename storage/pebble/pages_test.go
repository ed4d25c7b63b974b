package pebble

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/storage"
)

// countFS counts the bytes read from sstables, to tell whether opening a
// shard read its records.
type countFS struct {
	vfs.FS
	read *atomic.Int64
}

func (c countFS) Open(name string, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := c.FS.Open(name, opts...)
	if err != nil || !strings.HasSuffix(name, ".sst") {
		return f, err
	}
	return countFile{f, c.read}, nil
}

type countFile struct {
	vfs.File
	read *atomic.Int64
}

func (f countFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.read.Add(int64(n))
	return n, err
}

// pagesDB is a DB on an in-memory file system whose sstable reads are
// counted; reopen closes it and opens it again, as a restart does.
type pagesDB struct {
	t        *testing.T
	mem      vfs.FS
	read     atomic.Int64
	db       *pebble.DB
	memTable uint64
	extra    []Option // options of one test's own (newPagesDBWith)
}

func newPagesDB(t *testing.T) *pagesDB { return newPagesDBMemTable(t, 1<<20) }

func newPagesDBMemTable(t *testing.T, memTable uint64) *pagesDB {
	return newPagesDBWith(t, memTable)
}

// newPagesDBWith is newPagesDBMemTable with options of the test's own,
// kept across reopen.
func newPagesDBWith(t *testing.T, memTable uint64, extra ...Option) *pagesDB {
	p := &pagesDB{t: t, mem: vfs.NewMem(), memTable: memTable, extra: extra}
	p.open()
	t.Cleanup(func() { require.NoError(t, p.db.Close()) })
	return p
}

func (p *pagesDB) open() {
	opts := append([]Option{WithFS(countFS{p.mem, &p.read}), WithCacheSize(1 << 20), WithMemTableSize(p.memTable),
		WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}, p.extra...)
	db, err := Open("db", opts...)
	require.NoError(p.t, err)
	p.db = db
}

// reopen flushes everything to sstables, closes the DB and opens it
// again with a cold cache.
func (p *pagesDB) reopen() *Store {
	require.NoError(p.t, p.db.Flush())
	require.NoError(p.t, p.db.Close())
	p.open()
	return New(p.db)
}

// fill appends n records of size random (incompressible) bytes in batches,
// every transientEvery-th one not Persistent (0: none).
func fill(t *testing.T, s *Store, shard string, n, size, transientEvery int) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < n; {
		recs := make([]storage.Record, 0, 100)
		for ; i < n && len(recs) < cap(recs); i++ {
			body := make([]byte, size)
			for j := range body {
				body[j] = byte(rng.Uint32())
			}
			recs = append(recs, storage.Record{Body: body, Persistent: transientEvery == 0 || i%transientEvery != 0})
		}
		_, err := s.Append(context.Background(), shard, recs)
		require.NoError(t, err)
	}
}

// TestOpenReadsPagesNotRecords checks that a shard opened after a restart
// learns its live offsets and count from its pages (a bit per message),
// and DropTransient its transient ones, without reading the records: the
// bytes read from sstables stay a small fraction of the data.
func TestOpenReadsPagesNotRecords(t *testing.T) {
	const n, size = 4000, 1024
	data := int64(n * size)
	tests := []struct {
		name      string
		transient int // every transient-th record is transient; 0 none
		call      func(*Store) (uint64, error)
		want      uint64
	}{
		{"Count", 0, func(s *Store) (uint64, error) { return s.Count(context.Background(), "q") }, n},
		{"FirstOffset", 0, func(s *Store) (uint64, error) { return s.FirstOffset(context.Background(), "q") }, 0},
		{"DropTransient", 4, func(s *Store) (uint64, error) {
			d, err := s.DropTransient(context.Background(), "q")
			return uint64(d), err
		}, n / 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPagesDB(t)
			fill(t, New(p.db), "q", n, size, tt.transient)
			s := p.reopen()
			before := p.read.Load()
			got, err := tt.call(s)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
			read := p.read.Load() - before
			require.Less(t, read, data/16, "opening the shard read %d bytes of %d stored", read, data)
		})
	}
}

// TestDropTransient checks that DropTransient deletes exactly the records
// stored with Persistent false, across restarts and deletes of some of
// them, and that the pages stay true (a second restart agrees).
func TestDropTransient(t *testing.T) {
	ctx := context.Background()
	p := newPagesDB(t)
	s := New(p.db)
	fill(t, s, "q", 3000, 16, 3) // 0, 3, 6, ... transient
	// Acks of some transient and some persistent records before the
	// restart: the pages must forget them.
	require.NoError(t, s.DeleteByOffsets(ctx, "q", []uint64{0, 1, 2, 2999, 1500}))
	s = p.reopen()
	dropped, err := s.DropTransient(ctx, "q")
	require.NoError(t, err)
	require.Equal(t, 1000-2, dropped) // 0 and 1500 were acked
	dropped, err = s.DropTransient(ctx, "q")
	require.NoError(t, err)
	require.Zero(t, dropped)
	for round := range 2 {
		st := s
		if round == 1 {
			st = p.reopen()
		}
		n, err := st.Count(ctx, "q")
		require.NoError(t, err)
		require.EqualValues(t, 2000-3, n) // 1, 2 and 2999 were acked
		recs, err := st.Read(ctx, "q", 0, 5000)
		require.NoError(t, err)
		require.Len(t, recs, 2000-3)
		for _, r := range recs {
			require.True(t, r.Persistent, "offset %d", r.Offset)
			require.NotContains(t, []uint64{1, 2, 2999}, r.Offset)
		}
	}
}

// TestMigrateUnpagedShard checks that a shard written before pages existed
// (a version 2 state, no pages) is read once, its pages written, and that
// it then opens from its pages with the same live and transient offsets.
func TestMigrateUnpagedShard(t *testing.T) {
	ctx := context.Background()
	p := newPagesDB(t)
	s := New(p.db)
	fill(t, s, "q", 2500, 16, 5)
	require.NoError(t, s.DeleteByOffsets(ctx, "q", []uint64{7, 1000}))
	// Make it look like an old shard: no pages, a version 2 state.
	sh := newShard("q")
	b := p.db.NewBatch()
	require.NoError(t, b.DeleteRange(append(sh.prefix, kindLive), append(sh.prefix, kindLive+1), nil))
	require.NoError(t, b.DeleteRange(append(sh.prefix, kindTrans), append(sh.prefix, kindTrans+1), nil))
	require.NoError(t, b.Set(sh.state, []byte{stateVersionV2, 0xc4, 0x13}, nil)) // next 2500
	require.NoError(t, b.Commit(pebble.Sync))

	for round := range 2 {
		s = p.reopen()
		n, err := s.Count(ctx, "q")
		require.NoError(t, err)
		require.EqualValues(t, 2498, n, "round %d", round)
		val, closer, err := p.db.Get(sh.state)
		require.NoError(t, err)
		_, paged, err := decodeState(val)
		require.NoError(t, closer.Close())
		require.NoError(t, err)
		require.True(t, paged, "the migration writes a version 3 state")
	}
	dropped, err := s.DropTransient(ctx, "q")
	require.NoError(t, err)
	require.Equal(t, 500-1, dropped) // 1000 was acked
	n, err := s.Count(ctx, "q")
	require.NoError(t, err)
	require.EqualValues(t, 2000-1, n) // 7 was acked
}

// TestDrainedHeadIsRangeDeleted checks that deletes that move the first
// live offset rangeEvery past the last range deletion add one over the
// dead head, so Pebble can drop what a drain leaves behind by range, and
// that nothing live is covered by it.
func TestDrainedHeadIsRangeDeleted(t *testing.T) {
	ctx := context.Background()
	// No background compactions: one could split the range deletion
	// across two output sstables, and the count below would read 2.
	p := newPagesDBWith(t, 1<<20, WithPebbleOptions(func(o *pebble.Options) { o.DisableAutomaticCompactions = true }))
	s := New(p.db)
	total := 2*rangeEvery + 100
	fill(t, s, "q", total, 8, 0)
	// Drain in order, in batches, the way acks arrive; keep 10 live just
	// above the first range-deleted stretch, then drain past them too.
	keep := uint64(rangeEvery + 50)
	var offs []uint64
	for o := uint64(0); o < uint64(2*rangeEvery+20); o++ {
		if o >= keep && o < keep+10 {
			continue
		}
		offs = append(offs, o)
		if len(offs) == 500 {
			require.NoError(t, s.DeleteByOffsets(ctx, "q", offs))
			offs = offs[:0]
		}
	}
	require.NoError(t, s.DeleteByOffsets(ctx, "q", offs))
	require.NoError(t, p.db.Flush())
	tables, err := p.db.SSTables(pebble.WithProperties())
	require.NoError(t, err)
	rangeDels := uint64(0)
	for _, level := range tables {
		for _, tbl := range level {
			rangeDels += tbl.Properties.NumRangeDeletions
		}
	}
	require.Equal(t, uint64(1), rangeDels, "one range deletion: the ten kept offsets hold the head back")

	require.NoError(t, s.DeleteByOffsets(ctx, "q", []uint64{keep, keep + 1, keep + 2, keep + 3, keep + 4, keep + 5, keep + 6, keep + 7, keep + 8, keep + 9}))
	for round := range 2 {
		st := s
		if round == 1 {
			st = p.reopen()
		}
		recs, err := st.Read(ctx, "q", 0, total)
		require.NoError(t, err)
		require.Len(t, recs, 80)
		require.Equal(t, uint64(2*rangeEvery+20), recs[0].Offset)
	}
}

// TestDrainFlushes checks that once the head range deletions cover
// flushAfterDrained bytes of sstables the store starts a flush, so a
// queue drained and left idle gets its disk space back without waiting
// for other writes to fill the memtable.
func TestDrainFlushes(t *testing.T) {
	old := flushAfterDrained
	flushAfterDrained = 1 << 20
	t.Cleanup(func() { flushAfterDrained = old })
	ctx := context.Background()
	// A memtable the deletes do not fill: only the store's flush empties it.
	p := newPagesDBMemTable(t, 32<<20)
	s := New(p.db)
	total := 3 * rangeEvery
	fill(t, s, "q", total, 256, 0)
	require.NoError(t, p.db.Flush()) // the records are in sstables
	flushes := p.db.Metrics().Flush.Count
	offs := make([]uint64, 0, 1000)
	for o := uint64(0); o < uint64(2*rangeEvery+10); o++ {
		offs = append(offs, o)
		if len(offs) == cap(offs) {
			require.NoError(t, s.DeleteByOffsets(ctx, "q", offs))
			offs = offs[:0]
		}
	}
	require.NoError(t, s.DeleteByOffsets(ctx, "q", offs))
	require.Eventually(t, func() bool { return p.db.Metrics().Flush.Count > flushes },
		10*time.Second, time.Millisecond, "no flush after draining %d bytes", 2*rangeEvery*256)
}

// TestDrainedShardCompacts checks that a shard drained to empty, whose
// range-deleted records sstables still hold, has that range compacted
// by the store: the sstables go without other writes to make Pebble
// compact the levels.
func TestDrainedShardCompacts(t *testing.T) {
	old := compactDrainedMin
	compactDrainedMin = 1 << 20
	t.Cleanup(func() { compactDrainedMin = old })
	ctx := context.Background()
	p := newPagesDBMemTable(t, 32<<20)
	s := New(p.db)
	t.Cleanup(func() { require.NoError(t, s.Close()) }) // before the DB's
	total := 3 * rangeEvery
	fill(t, s, "q", total, 256, 0)
	require.NoError(t, p.db.Flush()) // the records are in sstables
	prefix := shardPrefix("q")
	start, end := appendRecordKey(nil, prefix, 0), appendRecordKey(nil, prefix, uint64(total))
	full, err := p.db.EstimateDiskUsage(start, end)
	require.NoError(t, err)
	require.Greater(t, full, uint64(total*256/2))
	offs := make([]uint64, 0, 1000)
	for o := range uint64(total) {
		offs = append(offs, o)
		if len(offs) == cap(offs) {
			require.NoError(t, s.DeleteByOffsets(ctx, "q", offs))
			offs = offs[:0]
		}
	}
	require.NoError(t, s.DeleteByOffsets(ctx, "q", offs))
	require.Eventually(t, func() bool {
		est, err := p.db.EstimateDiskUsage(start, end)
		return err == nil && est < full/10
	}, 10*time.Second, 5*time.Millisecond, "the drained shard's %d bytes of sstables were not compacted", full)
}

package pebble

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"

	"github.com/warrenmq/broker/internal/codec"
	"github.com/warrenmq/broker/storage"
)

// Store is the Pebble storage.ShardStore. It does not own its DB: whoever
// opened the DB closes it, after every store using it is done.
type Store struct {
	db      *pebble.DB
	shards  sync.Map     // shard name -> *shard
	reserve *DiskReserve // nil: Append checks no free space
	pacer   *SyncPacer   // nil: no one paces the DB's syncs
	// drained sums the sstable bytes the head range deletions covered
	// since the last flush they asked for (see flushAfterDrained).
	drained atomic.Uint64
	compact compactor
}

var (
	_ storage.ShardStore       = (*Store)(nil)
	_ storage.Syncer           = (*Store)(nil)
	_ storage.TransientDropper = (*Store)(nil)
	_ storage.Purger           = (*Store)(nil)
)

// New returns a Store keeping its shards in db, under keys starting with
// 's'. It reads nothing until a shard is first used.
func New(db *pebble.DB, opts ...StoreOption) *Store {
	s := &Store{db: db}
	s.compact.db = db
	s.compact.ctx, s.compact.cancel = context.WithCancel(context.Background())
	for _, o := range opts {
		o(s)
	}
	return s
}

// StoreOption configures New.
type StoreOption func(*Store)

// GuardedBy makes Append refuse, with an error wrapping ErrDiskFull, a
// batch the file system has no room for: one that would leave less free
// space (not counting the missing part of r) than r's headroom after it
// was written twice (once in the WAL, once flushed). The refused batch
// never reaches Pebble, whose failed WAL writes are fatal; its publishes
// are nacked instead. r is the reserve the DB was opened with.
func GuardedBy(r *DiskReserve) StoreOption { return func(s *Store) { s.reserve = r } }

// Close stops the compactions of drained shards (see compactDrainedMin):
// one Pebble already runs goes on to its end in Pebble's background, and
// Close returns without waiting for it. Close it before its DB, which is
// closed by whoever opened it. The Store must not be used afterwards.
func (s *Store) Close() error {
	s.compact.close()
	return nil
}

// shard caches one shard's state. The immutable fields are set at creation;
// next and count are written only with mu held, after the batch that
// changes them has committed, and read without it.
type shard struct {
	name   string
	prefix []byte // shardPrefix(name)
	state  []byte // key of the shard state
	recEnd []byte // upper bound of the record keys
	end    []byte // upper bound of every key of the shard

	// loaded says next, count and mu.live hold the persisted state. It is
	// cleared when a commit fails, because Pebble may have applied a batch
	// whose sync failed: the next call reloads rather than guess.
	loaded atomic.Bool
	next   atomic.Uint64 // offset the next Append assigns
	count  atomic.Uint64 // live records
	// low is a lower bound of the live offsets: no record below it exists
	// or will. Reads start there instead of at from, so they never wade
	// through the tombstones that acked messages leave at a queue's head.
	low atomic.Uint64
	// dead is set by DeleteShard once the shard is gone from the map.
	dead atomic.Bool

	// mu serialises the writes of this shard and guards their scratch
	// space. It is held until a write's batch is in the write-ahead log,
	// because the state key must be written in offset order: two Appends
	// committing in the opposite order to the one that assigned their
	// offsets would leave a next offset that is too low. A synced Append
	// lets it go before its fsync (Append), so the shard's deletes do not
	// wait for the disk; concurrent syncs, of this shard or others, share
	// an fsync in Pebble's commit pipeline.
	mu struct {
		sync.Mutex
		scratch []byte // keys and state values being built
		// live holds the offsets of the records in the DB, so deletes
		// need no read: a delete writes a tombstone only for a live
		// offset. Its chunks are mirrored in the 'l' pages, written in
		// the batch that changes them, so opening the shard reads a bit
		// per message rather than every record.
		live liveSet
		// transient holds the live offsets whose record is not
		// Persistent, mirrored in the 't' pages: DropTransient deletes
		// them without reading a record. Empty for a queue of
		// persistent messages.
		transient liveSet
		// ranged is the offset below which a range deletion covers every
		// record key (see rangeEvery).
		ranged uint64
		// compacted is the offset below which a compaction of the
		// drained records was requested; checked is what ranged was
		// when their sstables were last estimated (see
		// compactDrainedMin).
		compacted, checked uint64
	}
}

// rangeEvery is how far the first live offset must move past the last
// range deletion before deletes add another one over the dead head. The
// records below are tombstoned one by one already; the range deletion is
// what lets Pebble drop the sstables a drained head fills whole, without
// reading them (a delete-only compaction), instead of waiting for each
// tombstone to meet its record in a compaction. At 1 KiB a message this is
// one range deletion per 16 MiB of drained messages.
const rangeEvery = 16 * chunkBits

// flushAfterDrained is how many bytes of sstables the head range deletions
// must cover before the store asks Pebble to flush its memtable. Until the
// deletions leave the memtable, no compaction can drop what they cover:
// a queue drained and then left idle would keep its disk space until
// other writes filled the memtable. One flush per 64 MiB drained is
// cheap beside the writes that filled them.
var flushAfterDrained uint64 = 64 << 20

func newShard(name string) *shard {
	p := shardPrefix(name)
	return &shard{
		name:   name,
		prefix: p,
		state:  append(slices.Clip(p), kindState),
		recEnd: append(slices.Clip(p), kindRecord+1),
		// Every key of the shard is p followed by 'm' or 'r', so p+0xff is
		// above them all and, p being prefix-free, below every other
		// shard's keys that sort after p.
		end: append(slices.Clip(p), 0xff),
	}
}

func (s *Store) shard(name string) *shard {
	if v, ok := s.shards.Load(name); ok {
		return v.(*shard)
	}
	v, _ := s.shards.LoadOrStore(name, newShard(name))
	return v.(*shard)
}

// lockShard returns the live shard named name, locked.
func (s *Store) lockShard(name string) *shard {
	for {
		sh := s.shard(name)
		sh.mu.Lock()
		if !sh.dead.Load() {
			return sh
		}
		// DeleteShard removed it between lookup and Lock: the map now
		// holds its successor, or nothing.
		sh.mu.Unlock()
	}
}

// loadLocked reads the shard state if it is not cached: the next offset
// from the state key, and the live and transient offsets from their pages
// (none for a shard without a state key: it was never written). A shard
// written before pages existed (state version 1 or 2) is scanned instead,
// once: its pages are written then.
func (s *Store) loadLocked(sh *shard) error {
	if sh.loaded.Load() {
		return nil
	}
	var next uint64
	paged := true
	val, closer, err := s.db.Get(sh.state)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		// A shard never written, or deleted: offsets start at 0.
	case err != nil:
		return fmt.Errorf("storage/pebble: load state of shard %q: %w", sh.name, err)
	default:
		next, paged, err = decodeState(val)
		closer.Close()
		if err != nil {
			return fmt.Errorf("storage/pebble: shard %q: %w", sh.name, err)
		}
	}
	sh.mu.live.reset()
	sh.mu.transient.reset()
	if next > 0 {
		load := s.loadPagesLocked
		if !paged {
			load = s.migrateLocked
		}
		if err := load(sh, next); err != nil {
			sh.mu.live.reset()
			sh.mu.transient.reset()
			return err
		}
	}
	sh.mu.live.takeDirty()
	sh.mu.transient.takeDirty()
	sh.count.Store(sh.mu.live.count)
	sh.next.Store(next)
	if first, ok := sh.mu.live.first(0); ok {
		raise(&sh.low, first)
	} else {
		raise(&sh.low, next)
	}
	sh.loaded.Store(true)
	return nil
}

// loadPagesLocked fills the live and transient sets from their pages.
func (s *Store) loadPagesLocked(sh *shard, next uint64) error {
	for _, p := range []struct {
		kind byte
		set  *liveSet
	}{{kindLive, &sh.mu.live}, {kindTrans, &sh.mu.transient}} {
		if err := s.readPages(sh, p.kind, p.set, next); err != nil {
			return fmt.Errorf("storage/pebble: load shard %q: %w", sh.name, err)
		}
	}
	return nil
}

func (s *Store) readPages(sh *shard, kind byte, set *liveSet, next uint64) (err error) {
	lower := append(slices.Clip(sh.prefix), kind)
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: lower,
		UpperBound: append(slices.Clip(sh.prefix), kind+1),
	})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, it.Close()) }()
	keyLen := len(lower) + offsetLen
	for valid := it.First(); valid; valid = it.Next() {
		key := it.Key()
		if len(key) != keyLen {
			return fmt.Errorf("%w: page key of %d bytes", ErrCorrupt, len(key))
		}
		k := binary.BigEndian.Uint64(key[len(lower):])
		val, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		c := new(chunk)
		if err := decodePage(c, val); err != nil {
			return err
		}
		if k >= next/chunkBits+1 || k*chunkBits+uint64(lastBit(c)) >= next {
			return fmt.Errorf("%w: page %c%d names an offset at or above next offset %d", ErrCorrupt, kind, k, next)
		}
		set.load(k, c)
	}
	return it.Error()
}

// lastBit is the index of the highest bit set in c.
func lastBit(c *chunk) int {
	for w := chunkWords - 1; w >= 0; w-- {
		if c.bits[w] != 0 {
			return w*64 + 63 - bits.LeadingZeros64(c.bits[w])
		}
	}
	return 0
}

// migrateLocked builds the live and transient sets of a shard written
// before pages existed, by reading every record, and writes its pages and
// a version 3 state in one batch: a one-time cost, after which opening the
// shard reads pages only.
func (s *Store) migrateLocked(sh *shard, next uint64) (err error) {
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: appendRecordKey(nil, sh.prefix, sh.low.Load()),
		UpperBound: sh.recEnd,
	})
	if err != nil {
		return fmt.Errorf("storage/pebble: load shard %q: %w", sh.name, err)
	}
	defer func() {
		if cerr := it.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("storage/pebble: load shard %q: %w", sh.name, cerr)
		}
	}()
	keyLen := recordKeyLen(sh.prefix)
	for valid := it.First(); valid; valid = it.Next() {
		key := it.Key()
		if len(key) != keyLen {
			return fmt.Errorf("storage/pebble: shard %q: %w: record key of %d bytes", sh.name, ErrCorrupt, len(key))
		}
		off := binary.BigEndian.Uint64(key[len(key)-offsetLen:])
		if off >= next {
			return fmt.Errorf("storage/pebble: shard %q: %w: record at offset %d, state says next is %d", sh.name, ErrCorrupt, off, next)
		}
		val, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("storage/pebble: load shard %q offset %d: %w", sh.name, off, err)
		}
		r, err := codec.DecodeRecord(val)
		if err != nil {
			return fmt.Errorf("storage/pebble: shard %q offset %d: %w", sh.name, off, err)
		}
		sh.mu.live.add(off)
		if !r.Persistent {
			sh.mu.transient.add(off)
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("storage/pebble: load shard %q: %w", sh.name, err)
	}
	b := batch{Batch: s.db.NewBatch()}
	defer b.release()
	if err := s.writePagesLocked(b.Batch, sh, next); err != nil {
		return fmt.Errorf("storage/pebble: load shard %q: %w", sh.name, err)
	}
	if err := b.commit(pebble.NoSync); err != nil {
		return fmt.Errorf("storage/pebble: load shard %q: %w", sh.name, err)
	}
	return nil
}

// writePagesLocked adds to b the pages of the chunks changed since the
// last call (a Set, or a Delete for a chunk left empty) and the state
// with next, which marks the pages as kept.
func (s *Store) writePagesLocked(b *pebble.Batch, sh *shard, next uint64) error {
	if err := s.writeChangedPagesLocked(b, sh); err != nil {
		return err
	}
	sh.mu.scratch = appendState(sh.mu.scratch[:0], next)
	return b.Set(sh.state, sh.mu.scratch, nil)
}

// writeChangedPagesLocked is writePagesLocked without the state, for a
// write that leaves next as it is.
func (s *Store) writeChangedPagesLocked(b *pebble.Batch, sh *shard) error {
	for _, p := range []struct {
		kind byte
		set  *liveSet
	}{{kindLive, &sh.mu.live}, {kindTrans, &sh.mu.transient}} {
		for _, k := range p.set.takeDirty() {
			sh.mu.scratch = appendPageKey(sh.mu.scratch[:0], sh.prefix, p.kind, k)
			var err error
			if c := p.set.chunkAt(k); c != nil {
				n := len(sh.mu.scratch)
				sh.mu.scratch = appendPage(sh.mu.scratch, c)
				err = b.Set(sh.mu.scratch[:n], sh.mu.scratch[n:], nil)
			} else {
				err = b.Delete(sh.mu.scratch, nil)
			}
			if err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Store) ensureLoaded(sh *shard) error {
	if sh.loaded.Load() {
		return nil
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return s.loadLocked(sh)
}

// raise sets a to v if v is greater.
func raise(a *atomic.Uint64, v uint64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// Append implements storage.ShardStore. The batch, records and shard state
// together, is one Pebble batch: committed with pebble.Sync when any record
// is Persistent, else with pebble.NoSync (in the WAL, not yet fsynced).
//
// A synced Append holds the shard's mutex only while its batch enters the
// write-ahead log (which fixes its place in the log and so the order of
// the state writes), not through the fsync: the shard's deletes (acks)
// and the next Append go on meanwhile, and land after it in the log, so a
// crash that loses the batch loses them too. Append still returns only
// once the fsync covering its batch is done.
func (s *Store) Append(ctx context.Context, name string, recs []storage.Record) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("storage/pebble: append to shard %q: %w", name, err)
	}
	sh := s.lockShard(name)
	b := batch{Batch: s.db.NewBatch()}
	defer b.release()
	first, err := s.appendLocked(sh, &b, recs)
	sh.mu.Unlock()
	if err != nil {
		return 0, err
	}
	if err := b.syncWait(); err != nil {
		// The batch is applied but its fsync failed: what the shard
		// holds is unknown, so its cache is read again on next use.
		sh.mu.Lock()
		sh.loaded.Store(false)
		sh.mu.Unlock()
		return 0, fmt.Errorf("storage/pebble: append to shard %q: %w", name, err)
	}
	for i := range recs {
		recs[i].Offset = first + uint64(i)
	}
	return first, nil
}

// appendLocked builds and commits Append's batch b with sh locked; a
// synced batch is committed without waiting for its fsync
// (commitNoSyncWait), which the caller waits for once it has unlocked.
func (s *Store) appendLocked(sh *shard, b *batch, recs []storage.Record) (uint64, error) {
	name := sh.name
	if err := s.loadLocked(sh); err != nil {
		return 0, err
	}
	first := sh.next.Load()
	if len(recs) == 0 {
		return first, nil
	}
	n := uint64(len(recs))
	sync := false
	keyLen := recordKeyLen(sh.prefix)
	for i := range recs {
		r := &recs[i]
		op := b.SetDeferred(keyLen, codec.RecordLen(r))
		// Encoding straight into the batch saves a copy of every body.
		appendRecordKey(op.Key[:0], sh.prefix, first+uint64(i))
		codec.AppendRecord(op.Value[:0], r)
		if err := op.Finish(); err != nil {
			return 0, fmt.Errorf("storage/pebble: append to shard %q: %w", name, err)
		}
		sync = sync || r.Persistent
	}
	// The sets change before the commit, since their pages go in the
	// batch; a failed commit drops them (loaded) and they are read again.
	sh.mu.live.addRange(first, n)
	for i := range recs {
		if !recs[i].Persistent {
			sh.mu.transient.add(first + uint64(i))
		}
	}
	if err := s.writePagesLocked(b.Batch, sh, first+n); err != nil {
		sh.loaded.Store(false)
		return 0, fmt.Errorf("storage/pebble: append to shard %q: %w", name, err)
	}
	if err := s.reserve.admit(int64(b.Len())); err != nil {
		sh.loaded.Store(false)
		return 0, fmt.Errorf("storage/pebble: append to shard %q: %w", name, err)
	}
	var err error
	if sync {
		s.pacer.committed(len(recs))
		err = b.commitNoSyncWait(s.db)
	} else {
		err = b.commit(pebble.NoSync)
	}
	if err != nil {
		sh.loaded.Store(false)
		return 0, fmt.Errorf("storage/pebble: append to shard %q: %w", name, err)
	}
	// count before next: FirstOffset's fast path relies on it.
	sh.count.Store(sh.mu.live.count)
	sh.next.Store(first + n)
	return first, nil
}

// Read implements storage.ShardStore. Records are decoded into fresh memory:
// nothing returned aliases Pebble's buffers.
func (s *Store) Read(ctx context.Context, name string, from uint64, max int) ([]storage.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("storage/pebble: read shard %q: %w", name, err)
	}
	if max < 1 {
		return nil, nil
	}
	for {
		sh := s.shard(name)
		// Read the cached state before the iterator's snapshot: every
		// offset below next was committed before next was published, so
		// the snapshot holds all of them.
		low := sh.low.Load()
		loaded := sh.loaded.Load()
		next := sh.next.Load()
		count := sh.count.Load()
		start := max64(from, low)
		it, err := s.db.NewIter(&pebble.IterOptions{
			LowerBound: appendRecordKey(nil, sh.prefix, start),
			UpperBound: sh.recEnd,
		})
		if err != nil {
			return nil, fmt.Errorf("storage/pebble: read shard %q: %w", name, err)
		}
		if sh.dead.Load() {
			// The snapshot may hold the next incarnation of the shard,
			// which low and next say nothing about.
			it.Close()
			continue
		}
		size := min(max, 64)
		if loaded {
			size = int(min(uint64(max), count))
		}
		out, err := s.readIter(ctx, sh, it, max, size)
		if err != nil {
			return nil, err
		}
		if start == low {
			// Nothing lives in [low, first found): raise low past the
			// tombstones, to next when the shard is empty.
			switch {
			case len(out) > 0:
				raise(&sh.low, out[0].Offset)
			case loaded:
				raise(&sh.low, next)
			}
		}
		return out, nil
	}
}

// readCheckEvery is how many records Read decodes between context checks.
const readCheckEvery = 256

func (s *Store) readIter(ctx context.Context, sh *shard, it *pebble.Iterator, max, size int) (out []storage.Record, err error) {
	defer func() {
		if cerr := it.Close(); cerr != nil && err == nil {
			out, err = nil, fmt.Errorf("storage/pebble: read shard %q: %w", sh.name, cerr)
		}
	}()
	out = make([]storage.Record, 0, size)
	keyLen := recordKeyLen(sh.prefix)
	for valid := it.First(); valid && len(out) < max; valid = it.Next() {
		if len(out)%readCheckEvery == readCheckEvery-1 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("storage/pebble: read shard %q: %w", sh.name, err)
			}
		}
		key := it.Key()
		if len(key) != keyLen {
			return nil, fmt.Errorf("storage/pebble: shard %q: %w: record key of %d bytes", sh.name, ErrCorrupt, len(key))
		}
		off := binary.BigEndian.Uint64(key[len(key)-offsetLen:])
		val, err := it.ValueAndErr()
		if err != nil {
			return nil, fmt.Errorf("storage/pebble: read shard %q offset %d: %w", sh.name, off, err)
		}
		r, err := codec.DecodeRecord(val)
		if err != nil {
			return nil, fmt.Errorf("storage/pebble: shard %q offset %d: %w", sh.name, off, err)
		}
		r.Offset = off
		out = append(out, r)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("storage/pebble: read shard %q: %w", sh.name, err)
	}
	return out, nil
}

func max64(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// DeleteByOffsets implements storage.ShardStore. The shard's live set says
// which offsets hold a record, so it writes a tombstone for each of those
// without reading anything, and ignores the others (deleted already, or
// never written). The batch is committed with pebble.NoSync: an ack lost in
// a crash redelivers the message, which at-least-once allows.
func (s *Store) DeleteByOffsets(ctx context.Context, name string, offsets []uint64) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("storage/pebble: delete from shard %q: %w", name, err)
	}
	if len(offsets) == 0 {
		return nil
	}
	sh := s.lockShard(name)
	defer sh.mu.Unlock()
	if err := s.loadLocked(sh); err != nil {
		return err
	}
	if err := s.deleteLocked(sh, offsets); err != nil {
		return fmt.Errorf("storage/pebble: delete from shard %q: %w", name, err)
	}
	return nil
}

// deleteLocked tombstones the live ones among offsets and commits them.
func (s *Store) deleteLocked(sh *shard, offsets []uint64) error {
	var b batch
	defer b.release()
	n, err := s.tombstoneLocked(sh, &b, offsets)
	if err != nil || n == 0 {
		return err
	}
	return s.commitDeleteLocked(sh, &b)
}

// tombstoneLocked adds to b, which it makes when it is still empty, a
// tombstone for each live one among offsets, and returns how many. Each
// record key is set exactly once (offsets are never reused while the key
// exists; after DeleteShard's range deletion a new incarnation sets it
// once again) and the live set lets only one tombstone follow, so a
// SingleDelete is enough: Pebble drops it together with the record when
// they meet in a flush or compaction, where a Delete would live on down to
// the bottom level.
func (s *Store) tombstoneLocked(sh *shard, b *batch, offsets []uint64) (int, error) {
	n := 0
	keyLen := recordKeyLen(sh.prefix)
	for _, o := range offsets {
		// remove also makes a repeated offset a no-op the second time.
		if !sh.mu.live.remove(o) {
			continue
		}
		sh.mu.transient.remove(o)
		if b.Batch == nil {
			b.Batch = s.db.NewBatch()
		}
		op := b.SingleDeleteDeferred(keyLen)
		appendRecordKey(op.Key[:0], sh.prefix, o)
		if err := op.Finish(); err != nil {
			sh.loaded.Store(false)
			return n, err
		}
		n++
	}
	return n, nil
}

// commitDeleteLocked completes b, holding the tombstones of records
// already removed from the live sets: it adds the range deletion of the
// dead head when it is due (rangeEvery), the changed pages and the state,
// commits b and updates the cached count and low bound.
func (s *Store) commitDeleteLocked(sh *shard, b *batch) error {
	next := sh.next.Load()
	first, ok := sh.mu.live.first(sh.low.Load())
	if !ok {
		first = next
	}
	ranged := sh.mu.ranged
	if first >= ranged+rangeEvery {
		// Every record below first is dead: cover them with one range
		// deletion, after their tombstones (a higher sequence number),
		// so the sstables they fill can be dropped whole.
		if err := b.DeleteRange(appendRecordKey(nil, sh.prefix, ranged), appendRecordKey(nil, sh.prefix, first), nil); err != nil {
			sh.loaded.Store(false)
			return err
		}
		ranged = first
	}
	// Deletes leave next as it is, so the state key (written with the
	// shard's last Append, or by loadLocked's migration) already holds
	// what writePagesLocked would write again: only the pages change.
	if err := s.writeChangedPagesLocked(b.Batch, sh); err != nil {
		sh.loaded.Store(false)
		return err
	}
	if err := b.commit(pebble.NoSync); err != nil {
		// The live set already forgot offsets the failed batch may not
		// have deleted: reload it.
		sh.loaded.Store(false)
		return err
	}
	if ranged != sh.mu.ranged {
		s.noteDrained(appendRecordKey(nil, sh.prefix, sh.mu.ranged), appendRecordKey(nil, sh.prefix, ranged))
	}
	sh.mu.ranged = ranged
	if sh.mu.live.count == 0 && ranged > sh.mu.checked {
		s.compactDrainedLocked(sh)
	}
	sh.count.Store(sh.mu.live.count)
	// Keep low at the first live offset, so reads skip the head's
	// tombstones without iterating over them.
	raise(&sh.low, first)
	return nil
}

// noteDrained adds the sstable bytes in [start, end), just range-deleted,
// to s.drained and starts a flush once they reach flushAfterDrained. The
// estimate comes from the sstables' metadata: no I/O.
func (s *Store) noteDrained(start, end []byte) {
	est, err := s.db.EstimateDiskUsage(start, end)
	if err != nil || est == 0 {
		return
	}
	if s.drained.Add(est) < flushAfterDrained {
		return
	}
	s.drained.Store(0)
	// Best effort: a flush that cannot start now (the DB closing, one
	// already running) changes nothing the next writes would not.
	_, _ = s.db.AsyncFlush()
}

// compactDrainedMin is how many bytes of sstables the range-deleted
// records of an emptied shard must still occupy for the store to compact
// them. Pebble schedules compactions by level size, not by what a range
// deletion covers, so once a deep queue is drained and nothing else is
// written the tables under its deletions stay: about 100 MiB of them
// after 500,000 messages of 1 KiB. A queue that drains in step with its
// publishes never gets its records out of the memtable, estimates 0 and
// costs no compaction.
var compactDrainedMin uint64 = 16 << 20

// compactDrainedLocked asks for a compaction of the shard's records below
// its range deletions, emptied just now, when sstables still hold at
// least compactDrainedMin of them. The estimate comes from metadata, and
// is made once for each new range deletion, not for every delete that
// finds the shard empty.
func (s *Store) compactDrainedLocked(sh *shard) {
	sh.mu.checked = sh.mu.ranged
	start, end := appendRecordKey(nil, sh.prefix, sh.mu.compacted), appendRecordKey(nil, sh.prefix, sh.mu.ranged)
	est, err := s.db.EstimateDiskUsage(start, end)
	if err != nil || est < compactDrainedMin {
		return
	}
	if s.compact.request(start, end) {
		sh.mu.compacted = sh.mu.ranged
	}
}

// compactor runs the compactions of drained shards' key ranges, one at a
// time, on a goroutine it starts when there is one to run and that ends
// when none is left, so an idle store has none. Pebble's Compact waits
// for the compaction (a flush first, when the memtable overlaps the
// range), which the queue actor that drained the shard must not do.
type compactor struct {
	db     *pebble.DB
	ctx    context.Context // cancelled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     struct {
		sync.Mutex
		pending [][2][]byte // start and end of each range to compact
		running bool
		closed  bool
	}
}

// request queues [start, end) for compaction and reports whether it did
// (false once closed).
func (c *compactor) request(start, end []byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return false
	}
	c.mu.pending = append(c.mu.pending, [2][]byte{start, end})
	if !c.mu.running {
		c.mu.running = true
		c.wg.Add(1)
		go c.run()
	}
	return true
}

// run compacts the pending ranges until none is left or close is called.
// A compaction that fails changes nothing: the space waits for Pebble's
// own compactions, as it would without this.
func (c *compactor) run() {
	defer c.wg.Done()
	for {
		c.mu.Lock()
		if len(c.mu.pending) == 0 || c.mu.closed {
			c.mu.running = false
			c.mu.Unlock()
			return
		}
		r := c.mu.pending[0]
		c.mu.pending = c.mu.pending[1:]
		c.mu.Unlock()
		c.compactOne(r[0], r[1])
	}
}

// compactOne compacts [start, end). Pebble panics with ErrClosed when its
// DB is closed first, which an owner that closes the DB without closing
// the Store does: that ends the compaction, not the process.
func (c *compactor) compactOne(start, end []byte) {
	defer func() {
		if r := recover(); r != nil {
			if err, ok := r.(error); ok && errors.Is(err, pebble.ErrClosed) {
				return
			}
			panic(r)
		}
	}()
	_ = c.db.Compact(c.ctx, start, end, false)
}

// close drops the pending ranges, cancels the compaction waiting in
// Pebble, if any, and returns once run has.
func (c *compactor) close() {
	c.mu.Lock()
	c.mu.closed = true
	c.mu.pending = nil
	c.mu.Unlock()
	if c.cancel != nil {
		c.cancel()
	}
	c.wg.Wait()
}

// DropTransient implements storage.TransientDropper: it deletes every
// record stored with Persistent false, which the shard's transient pages
// name, and returns how many it deleted. No record is read.
func (s *Store) DropTransient(ctx context.Context, name string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("storage/pebble: drop transient from shard %q: %w", name, err)
	}
	sh := s.lockShard(name)
	defer sh.mu.Unlock()
	if err := s.loadLocked(sh); err != nil {
		return 0, err
	}
	offs := sh.mu.transient.offsets()
	if len(offs) == 0 {
		return 0, nil
	}
	if err := s.deleteLocked(sh, offs); err != nil {
		return 0, fmt.Errorf("storage/pebble: drop transient from shard %q: %w", name, err)
	}
	return len(offs), nil
}

// PurgeFrom implements storage.Purger: it deletes every live record at
// offset from or above, which the live set names, and reads none. Up to
// pointDeleteMax of them go with a SingleDelete each, as acks do; more
// with one range deletion over [from, next offset), so purging a deep
// queue costs a bit per message in memory and a few keys in the batch,
// and Pebble can drop the sstables the range covers whole. The batch is
// committed with pebble.NoSync: a purge lost in a crash leaves the
// messages to deliver again.
func (s *Store) PurgeFrom(ctx context.Context, name string, from uint64) (n, end uint64, err error) {
	if err := ctx.Err(); err != nil {
		return 0, from, fmt.Errorf("storage/pebble: purge shard %q: %w", name, err)
	}
	sh := s.lockShard(name)
	defer sh.mu.Unlock()
	if err := s.loadLocked(sh); err != nil {
		return 0, from, err
	}
	offs := make([]uint64, 0, 8)
	for off, ok := sh.mu.live.first(from); ok && len(offs) <= pointDeleteMax; off, ok = sh.mu.live.first(off + 1) {
		offs = append(offs, off)
	}
	switch {
	case len(offs) == 0:
		return 0, from, nil
	case len(offs) <= pointDeleteMax:
		err = s.deleteLocked(sh, offs)
		n, end = uint64(len(offs)), offs[len(offs)-1]+1
	default:
		n, end, err = s.purgeRangeLocked(sh, from)
	}
	if err != nil {
		return 0, from, fmt.Errorf("storage/pebble: purge shard %q: %w", name, err)
	}
	return n, end, nil
}

// purgeRangeLocked removes every offset >= from from the live sets and
// deletes their records with one range deletion up to the next offset
// (no record exists at or above it: Append holds mu too). It returns how
// many offsets it removed and one past the highest.
func (s *Store) purgeRangeLocked(sh *shard, from uint64) (n, end uint64, err error) {
	next := sh.next.Load()
	n, end = sh.mu.live.removeFrom(from)
	sh.mu.transient.removeFrom(from)
	b := batch{Batch: s.db.NewBatch()}
	defer b.release()
	start, limit := appendRecordKey(nil, sh.prefix, from), appendRecordKey(nil, sh.prefix, next)
	if err := b.DeleteRange(start, limit, nil); err != nil {
		sh.loaded.Store(false)
		return 0, from, err
	}
	if err := s.commitDeleteLocked(sh, &b); err != nil {
		return 0, from, err
	}
	s.noteDrained(start, limit)
	return n, end, nil
}

// FirstOffset implements storage.ShardStore.
func (s *Store) FirstOffset(ctx context.Context, name string) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("storage/pebble: first offset of shard %q: %w", name, err)
	}
	for {
		sh := s.shard(name)
		if err := s.ensureLoaded(sh); err != nil {
			return 0, err
		}
		// An empty shard needs no iterator. Append publishes count before
		// next, so an unchanged next around a zero count means the shard
		// really was empty with that next offset.
		next := sh.next.Load()
		if sh.count.Load() == 0 && sh.next.Load() == next {
			return next, nil
		}
		low := sh.low.Load()
		it, err := s.db.NewIter(&pebble.IterOptions{
			LowerBound: appendRecordKey(nil, sh.prefix, low),
			UpperBound: sh.recEnd,
		})
		if err != nil {
			return 0, fmt.Errorf("storage/pebble: first offset of shard %q: %w", name, err)
		}
		if sh.dead.Load() {
			it.Close()
			continue
		}
		first := next
		found := it.First()
		if found {
			key := it.Key()
			if len(key) != recordKeyLen(sh.prefix) {
				it.Close()
				return 0, fmt.Errorf("storage/pebble: shard %q: %w: record key of %d bytes", name, ErrCorrupt, len(key))
			}
			first = binary.BigEndian.Uint64(key[len(key)-offsetLen:])
		}
		if err := errors.Join(it.Error(), it.Close()); err != nil {
			return 0, fmt.Errorf("storage/pebble: first offset of shard %q: %w", name, err)
		}
		raise(&sh.low, first)
		return first, nil
	}
}

// Count implements storage.ShardStore. It reads the cached size of the
// live set, which costs one scan of the shard's record keys the first time
// the shard is used after opening.
func (s *Store) Count(ctx context.Context, name string) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("storage/pebble: count shard %q: %w", name, err)
	}
	sh := s.shard(name)
	if err := s.ensureLoaded(sh); err != nil {
		return 0, err
	}
	return sh.count.Load(), nil
}

// pointDeleteMax is the most live records DeleteShard deletes one by one
// (and the most index entries Index.DeleteQueue does) instead of with a
// range deletion. Pebble re-fragments every range deletion in the memtable
// the first time a read follows a new one, so one range deletion per
// deleted queue made each later read, and so each later delete, cost time
// in proportion to the queues deleted since the last flush: deleting 5,000
// queues ran at under 300 a second. A few point tombstones cost nothing
// later; a long queue still goes with one range deletion.
const pointDeleteMax = 256

// DeleteShard implements storage.ShardStore, committed with pebble.NoSync:
// it reaches disk with the next synced write, which for a durable queue is
// the delete of its declaration in the metadata store. A shard whose live
// set is loaded and small goes with a tombstone per record and one for its
// state; any other with one range deletion over its records and state
// (pointDeleteMax says why).
func (s *Store) DeleteShard(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("storage/pebble: delete shard %q: %w", name, err)
	}
	sh := s.lockShard(name)
	defer sh.mu.Unlock()
	b := batch{Batch: s.db.NewBatch()}
	defer b.release()
	var err error
	if sh.loaded.Load() && sh.mu.live.count <= pointDeleteMax {
		err = s.deletePointsLocked(sh, b)
	} else {
		err = b.DeleteRange(sh.prefix, sh.end, nil)
	}
	if err == nil {
		err = b.commit(pebble.NoSync)
	}
	if err != nil {
		sh.loaded.Store(false)
		return fmt.Errorf("storage/pebble: delete shard %q: %w", name, err)
	}
	// Retire this shard object: low and next describe the old
	// incarnation. Removing it while holding mu means lockShard never
	// finds it again once it has seen it dead.
	sh.dead.Store(true)
	s.shards.CompareAndDelete(name, sh)
	return nil
}

// deletePointsLocked adds to b a SingleDelete for each live record (each
// was set once, as deleteLocked relies on too) and a Delete for each live
// and transient page and for the state key, which are overwritten as the
// shard changes.
func (s *Store) deletePointsLocked(sh *shard, b batch) error {
	keyLen := recordKeyLen(sh.prefix)
	for off, ok := sh.mu.live.first(0); ok; off, ok = sh.mu.live.first(off + 1) {
		op := b.SingleDeleteDeferred(keyLen)
		appendRecordKey(op.Key[:0], sh.prefix, off)
		if err := op.Finish(); err != nil {
			return err
		}
	}
	for _, p := range []struct {
		kind byte
		set  *liveSet
	}{{kindLive, &sh.mu.live}, {kindTrans, &sh.mu.transient}} {
		for _, k := range p.set.pageKeys() {
			sh.mu.scratch = appendPageKey(sh.mu.scratch[:0], sh.prefix, p.kind, k)
			if err := b.Delete(sh.mu.scratch, nil); err != nil {
				return err
			}
		}
	}
	return b.Delete(sh.state, nil)
}

// Sync implements storage.Syncer: it returns once everything written before
// it, by this store or any other user of the DB, is fsynced.
func (s *Store) Sync(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("storage/pebble: sync: %w", err)
	}
	// An empty synced WAL record: Pebble syncs the WAL up to and including
	// it, and concurrent syncs share one fsync.
	b := batch{Batch: s.db.NewBatch()}
	defer b.release()
	err := b.LogData(nil, nil)
	if err == nil {
		err = b.commit(pebble.Sync)
	}
	if err != nil {
		return fmt.Errorf("storage/pebble: sync: %w", err)
	}
	return nil
}

package multiraft

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/sstable"
	"github.com/cockroachdb/pebble/v2/vfs"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// The layout of the one Pebble database every group of a member shares:
//
//	"F"                          format marker: formatMarker
//	"g" group (8)                the group exists here (value empty)
//	"h" group (8)                its hard state (raftpb.HardState)
//	"s" group (8)                its last snapshot (raftpb.Snapshot): its
//	                             data is checkpointData once the state is
//	                             on disk, the state machine's snapshot
//	                             until then (one received from the leader
//	                             and not restored yet, or format 1's)
//	"e" group (8) index (8)      its log entries (raftpb.Entry)
//	"a" group (8)                its applied record: index (8), term (8),
//	                             raftpb.ConfState as of that index
//	"d" group (8) key            its state machine's keys (Data)
//	"q" group (8)                its proposers' next sequences (dedup.go),
//	                             written with the applied record
//	"i"                          the member's last incarnation (dedup.go)
//
// Group ids and indexes are big endian, so a group's keys are one range
// per prefix and its entries sort by index. The loop writes the raft keys
// (F g h s e i); each group's applier writes its "a", "q" and "d" keys,
// in one batch per hand-off. Format 1 (no "a" and "d" keys, the whole
// state in each snapshot) is converted when New opens it: each group's
// state is restored from its snapshot into "d", then the marker says 3.
// Format 2 (no "q" and "i" keys, entries without identities) opens as it
// is, its marker rewritten to 3.
const (
	formatMarker   = "warren-multiraft 3"
	formatMarkerV2 = "warren-multiraft 2"
	formatMarkerV1 = "warren-multiraft 1"
)

var (
	keyFormat = []byte("F")

	// ErrFormat is a directory whose data is not this engine's (another
	// store's, or a later format): nothing is read or changed.
	ErrFormat = errors.New("multiraft: the directory holds data of another format")
)

func groupKey(prefix byte, group uint64) []byte {
	k := make([]byte, 9, 17)
	k[0] = prefix
	binary.BigEndian.PutUint64(k[1:], group)
	return k
}

func entryKey(group, index uint64) []byte {
	return binary.BigEndian.AppendUint64(groupKey('e', group), index)
}

// store is the member's Pebble database. The engine's loop writes the
// raft keys, the appliers each group's data and applied record.
type store struct {
	db *pebble.DB
	// v1 is set when the directory is of format 1, until New converted it.
	v1 bool
}

// openStore opens (or creates) the database in dir and checks its format
// marker. A directory that is not empty and has no marker is refused, so
// the engine never writes into another store's files (meta/raft's "log"
// and "state" directories among them).
func openStore(dir string, fs vfs.FS) (*store, error) {
	if fs == nil {
		fs = vfs.Default
	}
	if err := fs.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("multiraft: %w", err)
	}
	ents, err := fs.List(dir)
	if err != nil {
		return nil, fmt.Errorf("multiraft: %w", err)
	}
	fresh := len(ents) == 0
	if fresh {
		// The directory's own entry must survive a crash with what
		// Pebble syncs inside it.
		if err := syncDir(fs, fs.PathDir(dir)); err != nil {
			return nil, fmt.Errorf("multiraft: %w", err)
		}
	}
	refuse := fmt.Errorf("%w: %s is not empty and holds no Pebble database of this engine (is it a single-group meta/raft directory? "+
		"those are not converted: export definitions and messages, start on an empty directory, import)", ErrFormat, dir)
	for _, old := range []string{"log", "state"} { // meta/raft's databases
		if _, err := fs.Stat(fs.PathJoin(dir, old)); err == nil {
			return nil, refuse
		}
	}
	// Pebble creates a database only in an empty directory: anything else
	// must already be one.
	db, err := pebble.Open(dir, dbOptions(fs, !fresh))
	if err != nil {
		if !fresh {
			return nil, fmt.Errorf("%w (%v)", refuse, err)
		}
		return nil, fmt.Errorf("multiraft: open %s: %w", dir, err)
	}
	v1 := false
	v, closer, err := db.Get(keyFormat)
	switch {
	case errors.Is(err, pebble.ErrNotFound) && fresh:
		if err := db.Set(keyFormat, []byte(formatMarker), pebble.Sync); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("multiraft: write the format marker: %w", err)
		}
	case errors.Is(err, pebble.ErrNotFound):
		_ = db.Close()
		return nil, fmt.Errorf("%w: %s holds a Pebble database without this engine's format marker", ErrFormat, dir)
	case err != nil:
		_ = db.Close()
		return nil, fmt.Errorf("multiraft: read the format marker: %w", err)
	default:
		got := string(v)
		_ = closer.Close()
		v1 = got == formatMarkerV1
		if got != formatMarker && got != formatMarkerV2 && got != formatMarkerV1 {
			_ = db.Close()
			return nil, fmt.Errorf("%w: %s is marked %q, this engine reads %q and converts %q and %q", ErrFormat, dir, got, formatMarker, formatMarkerV2, formatMarkerV1)
		}
		if got == formatMarkerV2 {
			// Format 3 adds the proposal table ("q") and the incarnation
			// ("i"), both read as empty when absent, and log entries with
			// an identity, which an engine of format 2 would misread: the
			// marker keeps one from opening the directory again.
			if err := db.Set(keyFormat, []byte(formatMarker), pebble.Sync); err != nil {
				_ = db.Close()
				return nil, fmt.Errorf("multiraft: write the format marker: %w", err)
			}
		}
	}
	st := &store{db: db, v1: v1}
	if err := st.sweep(); err != nil {
		_ = db.Close()
		return nil, err
	}
	return st, nil
}

// The groups database's tuning (see dbOptions).
const (
	// memTableSize lets a group's log live and die in the memtable: the
	// log is truncated at every checkpoint, one per SnapshotBytes (1 MiB)
	// of a group's entries, so with a few dozen busy groups most entries
	// are covered by their range deletion before the memtable flushes, and
	// the flush drops them; the same holds for queue records deleted on
	// ack. Pebble grows a memtable from 256 KiB up to this as it fills, so
	// an idle member does not pay for it.
	memTableSize = 64 << 20
	// l0CompactionThreshold lets L0 hold more flushed tables before they
	// are compacted: the deletions of later flushes then meet the data of
	// earlier ones in the same compaction, and less is rewritten.
	l0CompactionThreshold = 8
	l0StopWritesThreshold = 32
)

// dbOptions is how the groups database is opened. Every option here is
// per table or per process, not per directory: a directory written with
// other options (Pebble's defaults: Snappy, 4 MiB memtables, no filters)
// opens and reads as before, its tables keep their compression until a
// compaction rewrites them, and an older build reads the new tables.
//
//   - No compression: most of what the database holds dies young (raft
//     entries truncated at the next checkpoint, queue records deleted on
//     ack), so compressing it on flush and decompressing it on the next
//     read or compaction is CPU spent on data that never stays; message
//     bodies, the bulk, are often incompressible anyway.
//   - A bloom filter in every table: the hot point reads (a record's
//     existence on ack, hard states, applied records) skip the tables
//     that cannot hold the key without reading a block of them.
//   - memTableSize and l0CompactionThreshold (above).
//
// Durability is unchanged: the write-ahead log, and which commits sync it,
// are the same.
func dbOptions(fs vfs.FS, mustExist bool) *pebble.Options {
	o := &pebble.Options{
		FS:                    fs,
		Logger:                quietLogger{},
		ErrorIfNotExists:      mustExist,
		MemTableSize:          memTableSize,
		L0CompactionThreshold: l0CompactionThreshold,
		L0StopWritesThreshold: l0StopWritesThreshold,
	}
	for i := range o.Levels {
		o.Levels[i].Compression = func() *sstable.CompressionProfile { return sstable.NoCompression }
		o.Levels[i].FilterPolicy = bloom.FilterPolicy(10)
	}
	return o
}

func syncDir(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		_ = d.Close()
		return err
	}
	return d.Close()
}

// converted marks the directory format 2, once every group of a format 1
// one was converted.
func (s *store) converted() error {
	if !s.v1 {
		return nil
	}
	if err := s.db.Set(keyFormat, []byte(formatMarker), pebble.Sync); err != nil {
		return fmt.Errorf("multiraft: write the format marker: %w", err)
	}
	s.v1 = false
	return nil
}

// sweep deletes the data and applied records of groups that no longer
// exist: a removal's loop commit deletes them, but an applier may have
// written a hand-off of the group after it, which a crash can keep.
func (s *store) sweep() error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte("a"), UpperBound: []byte("b")})
	if err != nil {
		return err
	}
	var orphans []uint64
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) != 9 {
			continue
		}
		id := binary.BigEndian.Uint64(k[1:])
		if _, closer, err := s.db.Get(groupKey('g', id)); err == nil {
			_ = closer.Close()
		} else if errors.Is(err, pebble.ErrNotFound) {
			orphans = append(orphans, id)
		}
	}
	if err := it.Error(); err != nil {
		_ = it.Close()
		return err
	}
	if err := it.Close(); err != nil {
		return err
	}
	if len(orphans) == 0 {
		return nil
	}
	b := s.db.NewBatch()
	defer b.Close()
	for _, id := range orphans {
		if err := deleteData(b, id); err != nil {
			return err
		}
	}
	return b.Commit(pebble.NoSync)
}

// deleteData deletes group's state machine keys and applied record.
func deleteData(b *pebble.Batch, group uint64) error {
	lo, hi := dataRange(group)
	if err := b.DeleteRange(lo, hi, nil); err != nil {
		return err
	}
	if err := b.Delete(dedupKey(group), nil); err != nil {
		return err
	}
	return b.Delete(groupKey('a', group), nil)
}

// data is group's state machine keys.
func (s *store) data(group uint64) *Data { return &Data{db: s.db, prefix: dataPrefix(group)} }

// applied reads group's applied record; false when it has none (a group
// of format 1, or one whose first state is not on disk yet).
func (s *store) applied(group uint64) (appliedRecord, bool, error) {
	v, ok, err := getCopy(s.db, groupKey('a', group))
	if err != nil || !ok {
		return appliedRecord{}, false, err
	}
	r, err := decodeApplied(v)
	if err != nil {
		return appliedRecord{}, false, fmt.Errorf("multiraft: group %d: %w", group, err)
	}
	return r, true, nil
}

// newDataBatch is an indexed batch over group's data, for its applier.
func (s *store) newDataBatch(group uint64) *Batch {
	return &Batch{b: s.db.NewIndexedBatch(), prefix: dataPrefix(group)}
}

// commitData commits b with group's applied record, without an fsync:
// the raft log holds what the batch was made from, and the next synced
// commit of the database makes it durable (see checkpointData).
func (s *store) commitData(b *Batch, group uint64, rec appliedRecord) error {
	defer b.b.Close()
	v, err := encodeApplied(rec)
	if err != nil {
		return err
	}
	if err := b.b.Set(groupKey('a', group), v, nil); err != nil {
		return err
	}
	return b.b.Commit(pebble.NoSync)
}

// dropData deletes group's data, after its removal, on its applier.
func (s *store) dropData(group uint64) error {
	b := s.db.NewBatch()
	defer b.Close()
	if err := deleteData(b, group); err != nil {
		return err
	}
	return b.Commit(pebble.NoSync)
}

func (s *store) close() error { return s.db.Close() }

// groups lists the groups the database holds.
func (s *store) groups() ([]uint64, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte("g"), UpperBound: []byte("h")})
	if err != nil {
		return nil, err
	}
	var out []uint64
	for it.First(); it.Valid(); it.Next() {
		if k := it.Key(); len(k) == 9 {
			out = append(out, binary.BigEndian.Uint64(k[1:]))
		}
	}
	if err := it.Error(); err != nil {
		_ = it.Close()
		return nil, err
	}
	return out, it.Close()
}

// loaded is what a group's restart reads back.
type loaded struct {
	hs   *raftpb.HardState
	snap *raftpb.Snapshot
	ents []*raftpb.Entry
}

// load reads group's hard state, snapshot and the entries after it.
func (s *store) load(group uint64) (loaded, error) {
	l := loaded{hs: &raftpb.HardState{}, snap: &raftpb.Snapshot{}}
	if err := s.getProto(groupKey('h', group), l.hs); err != nil {
		return l, err
	}
	if err := s.getProto(groupKey('s', group), l.snap); err != nil {
		return l, err
	}
	first := l.snap.GetMetadata().GetIndex() + 1
	it, err := s.db.NewIter(&pebble.IterOptions{
		LowerBound: entryKey(group, first),
		UpperBound: groupKey('e', group+1),
	})
	if err != nil {
		return l, err
	}
	next := first
	for it.First(); it.Valid(); it.Next() {
		e := &raftpb.Entry{}
		if err := proto.Unmarshal(it.Value(), e); err != nil {
			_ = it.Close()
			return l, fmt.Errorf("multiraft: group %d: entry: %w", group, err)
		}
		if e.GetIndex() != next {
			_ = it.Close()
			return l, fmt.Errorf("multiraft: group %d: entry %d where %d was expected (a hole in the log)", group, e.GetIndex(), next)
		}
		next++
		l.ents = append(l.ents, e)
	}
	if err := it.Error(); err != nil {
		_ = it.Close()
		return l, err
	}
	return l, it.Close()
}

func (s *store) getProto(key []byte, m proto.Message) error {
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	defer closer.Close()
	if err := proto.Unmarshal(v, m); err != nil {
		return fmt.Errorf("multiraft: %q: %w", key[:1], err)
	}
	return nil
}

// batch collects one ready cycle's writes of every group; commit syncs
// them with one fsync.
type batch struct {
	b *pebble.Batch
	n int
}

func (s *store) newBatch() *batch { return &batch{b: s.db.NewBatch()} }

func (b *batch) createGroup(group uint64) {
	_ = b.b.Set(groupKey('g', group), nil, nil)
	b.n++
}

func (b *batch) setHardState(group uint64, hs *raftpb.HardState) error {
	v, err := proto.Marshal(hs)
	if err != nil {
		return err
	}
	b.n++
	return b.b.Set(groupKey('h', group), v, nil)
}

// append writes ents, deleting any stored entries after the last one
// (raft truncates a follower's conflicting tail by appending over it)
// when there are any: stored is the last index stored before. A range
// deletion only when one is needed, because every one in Pebble's
// memtable costs each new iterator (the state machines' reads) until the
// memtable is flushed.
func (b *batch) append(group uint64, ents []*raftpb.Entry, stored uint64) error {
	if len(ents) == 0 {
		return nil
	}
	for _, e := range ents {
		v, err := proto.Marshal(e)
		if err != nil {
			return err
		}
		if err := b.b.Set(entryKey(group, e.GetIndex()), v, nil); err != nil {
			return err
		}
	}
	b.n++
	if last := ents[len(ents)-1].GetIndex(); last < stored {
		return b.b.DeleteRange(entryKey(group, last+1), groupKey('e', group+1), nil)
	}
	return nil
}

// setFirstSnapshot writes a new group's first snapshot: it has no
// entries to drop.
func (b *batch) setFirstSnapshot(group uint64, snap *raftpb.Snapshot) error {
	v, err := proto.Marshal(snap)
	if err != nil {
		return err
	}
	b.n++
	return b.b.Set(groupKey('s', group), v, nil)
}

// setSnapshot writes snap and drops the entries it covers.
func (b *batch) setSnapshot(group uint64, snap *raftpb.Snapshot) error {
	v, err := proto.Marshal(snap)
	if err != nil {
		return err
	}
	if err := b.b.Set(groupKey('s', group), v, nil); err != nil {
		return err
	}
	b.n++
	return b.b.DeleteRange(entryKey(group, 0), entryKey(group, snap.GetMetadata().GetIndex()+1), nil)
}

// compact drops group's entries up to and including index.
func (b *batch) compact(group, index uint64) error {
	b.n++
	return b.b.DeleteRange(entryKey(group, 0), entryKey(group, index+1), nil)
}

// removeGroup deletes everything of group: its raft keys, its log, its
// applied record and its state machine's keys (range deletions).
func (b *batch) removeGroup(group uint64) error {
	b.n++
	for _, p := range []byte{'g', 'h', 's'} {
		if err := b.b.Delete(groupKey(p, group), nil); err != nil {
			return err
		}
	}
	if err := deleteData(b.b, group); err != nil {
		return err
	}
	return b.b.DeleteRange(groupKey('e', group), groupKey('e', group+1), nil)
}

// commit writes the batch with one fsync, if it holds anything.
func (b *batch) commit() error {
	defer b.b.Close()
	if b.n == 0 {
		return nil
	}
	return b.b.Commit(pebble.Sync)
}

// commitNoSync writes the batch without waiting for the disk: it becomes
// durable with the next synced commit (Pebble's log is in order).
func (b *batch) commitNoSync() error {
	defer b.b.Close()
	return b.b.Commit(pebble.NoSync)
}

// quietLogger keeps Pebble's informational lines out of the broker's log;
// its fatal errors still stop the process.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}

package raft

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"github.com/warrenmq/broker/internal/codec"
)

// logStore keeps what raft must find after a restart — HardState, the log
// entries and the latest snapshot — in a Pebble DB of its own, every write
// synced. A MemoryStorage in front of it serves raft's reads; logStore is
// only written by the Ready loop and read once at start.
//
//	f             data format (one byte, dataFormat)
//	h             HardState (protobuf)
//	s             latest snapshot (protobuf, data included)
//	e index(8)    entry (protobuf)
type logStore struct {
	db *pebble.DB
	// last is the index of the last stored entry (0 for none), so that
	// save deletes a replaced suffix only when there is one: a range
	// tombstone per Ready would pile up and slow Pebble's flushes.
	last uint64
}

// dataFormat is the on-disk format of a member's data directory, written
// under 'f' in the log store when the directory is new. Format 1 had no
// marker and kept records and unacked entries in encodings of this
// package's own; format 2 keeps them in internal/codec's versioned
// encodings, the single-node layout, in the state and in the commands of
// the log and snapshots alike. A log store with data and no marker is
// format 1.
const dataFormat = 2

var (
	logKeyFormat    = []byte("f")
	logKeyHardState = []byte("h")
	logKeySnapshot  = []byte("s")
	logPrefixEntry  = []byte("e")
)

func entryKey(i uint64) []byte { return binary.BigEndian.AppendUint64([]byte{'e'}, i) }

func openLogStore(dir string, opts *pebble.Options) (*logStore, error) {
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, fmt.Errorf("raft: open log store: %w", err)
	}
	if err := checkFormat(db); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return &logStore{db: db}, nil
}

// checkFormat refuses, with ErrDataFormat, a log store written in another
// data format, and marks a new (empty) one with dataFormat. It writes
// nothing to a store it refuses.
func checkFormat(db *pebble.DB) error {
	v, closer, err := db.Get(logKeyFormat)
	if err == nil {
		defer closer.Close()
		if len(v) == 1 && v[0] == dataFormat {
			return nil
		}
		return fmt.Errorf("%w: found format %x, this version reads format %d", ErrDataFormat, v, dataFormat)
	}
	if !errors.Is(err, pebble.ErrNotFound) {
		return fmt.Errorf("raft: read data format: %w", err)
	}
	it, err := db.NewIter(nil)
	if err != nil {
		return fmt.Errorf("raft: read data format: %w", err)
	}
	used := it.First()
	if err := errors.Join(it.Error(), it.Close()); err != nil {
		return fmt.Errorf("raft: read data format: %w", err)
	}
	if used {
		return fmt.Errorf("%w: found format 1 (unversioned records, written before this version), this version reads format %d", ErrDataFormat, dataFormat)
	}
	if err := db.Set(logKeyFormat, []byte{dataFormat}, pebble.Sync); err != nil {
		return fmt.Errorf("raft: write data format: %w", err)
	}
	return nil
}

func (l *logStore) close() error { return l.db.Close() }

// load returns the stored snapshot (nil if none), HardState (nil if none)
// and the entries after the snapshot, in index order.
func (l *logStore) load() (*raftpb.Snapshot, *raftpb.HardState, []*raftpb.Entry, error) {
	var snap *raftpb.Snapshot
	if v, closer, err := l.db.Get(logKeySnapshot); err == nil {
		snap = &raftpb.Snapshot{}
		err = proto.Unmarshal(v, snap)
		closer.Close()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("raft: corrupt snapshot: %w", err)
		}
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return nil, nil, nil, fmt.Errorf("raft: read snapshot: %w", err)
	}
	var hs *raftpb.HardState
	if v, closer, err := l.db.Get(logKeyHardState); err == nil {
		hs = &raftpb.HardState{}
		err = proto.Unmarshal(v, hs)
		closer.Close()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("raft: corrupt hard state: %w", err)
		}
	} else if !errors.Is(err, pebble.ErrNotFound) {
		return nil, nil, nil, fmt.Errorf("raft: read hard state: %w", err)
	}
	after := uint64(0)
	if snap != nil {
		after = snap.GetMetadata().GetIndex()
	}
	it, err := l.db.NewIter(&pebble.IterOptions{LowerBound: entryKey(after + 1), UpperBound: codec.Successor(logPrefixEntry)})
	if err != nil {
		return nil, nil, nil, fmt.Errorf("raft: read log: %w", err)
	}
	defer it.Close()
	var ents []*raftpb.Entry
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("raft: read log: %w", err)
		}
		e := &raftpb.Entry{}
		if err := proto.Unmarshal(v, e); err != nil {
			return nil, nil, nil, fmt.Errorf("raft: corrupt log entry %x: %w", it.Key(), err)
		}
		if n := len(ents); n > 0 && ents[n-1].GetIndex()+1 != e.GetIndex() {
			return nil, nil, nil, fmt.Errorf("raft: log has a hole after index %d", ents[n-1].GetIndex())
		}
		ents = append(ents, e)
	}
	if err := it.Error(); err != nil {
		return nil, nil, nil, fmt.Errorf("raft: read log: %w", err)
	}
	l.last = after
	if n := len(ents); n > 0 {
		l.last = ents[n-1].GetIndex()
	}
	return snap, hs, ents, nil
}

// save writes what one Ready asks to persist, synced, in one batch: a
// received snapshot (dropping the entries it covers), the new entries
// (dropping any older suffix they replace) and the HardState.
//
// The batch is synced when raft needs it (etcdraft.MustSync: new entries,
// a new term or vote) or a snapshot came; a HardState that only moved its
// commit index is written without sync, since the commit index can be
// recovered from the quorum.
func (l *logStore) save(hs *raftpb.HardState, ents []*raftpb.Entry, snap *raftpb.Snapshot, sync bool) error {
	b := l.db.NewBatch()
	defer b.Close()
	if snap != nil {
		if err := l.stageSnapshot(b, snap); err != nil {
			return err
		}
	}
	for _, e := range ents {
		v, err := proto.Marshal(e)
		if err != nil {
			return fmt.Errorf("raft: encode entry: %w", err)
		}
		if err := b.Set(entryKey(e.GetIndex()), v, nil); err != nil {
			return fmt.Errorf("raft: stage entry: %w", err)
		}
	}
	last := l.last
	if snap != nil {
		last = snap.GetMetadata().GetIndex()
	}
	if n := len(ents); n > 0 {
		newLast := ents[n-1].GetIndex()
		if newLast < last {
			// Raft overwrote the log from ents[0] on: entries after the
			// last new one belong to a deposed leader and must not come
			// back at restart.
			if err := b.DeleteRange(entryKey(newLast+1), codec.Successor(logPrefixEntry), nil); err != nil {
				return fmt.Errorf("raft: stage log truncation: %w", err)
			}
		}
		last = newLast
	}
	if hs != nil {
		v, err := proto.Marshal(hs)
		if err != nil {
			return fmt.Errorf("raft: encode hard state: %w", err)
		}
		if err := b.Set(logKeyHardState, v, nil); err != nil {
			return fmt.Errorf("raft: stage hard state: %w", err)
		}
	}
	if b.Empty() {
		return nil
	}
	opts := pebble.NoSync
	if sync || snap != nil {
		opts = pebble.Sync
	}
	if err := b.Commit(opts); err != nil {
		return fmt.Errorf("raft: write log: %w", err)
	}
	l.last = last
	return nil
}

// saveSnapshot stores a snapshot taken of the local state machine and drops
// the entries up to compactTo.
func (l *logStore) saveSnapshot(snap *raftpb.Snapshot, compactTo uint64) error {
	b := l.db.NewBatch()
	defer b.Close()
	v, err := proto.Marshal(snap)
	if err != nil {
		return fmt.Errorf("raft: encode snapshot: %w", err)
	}
	if err := b.Set(logKeySnapshot, v, nil); err != nil {
		return fmt.Errorf("raft: stage snapshot: %w", err)
	}
	if err := b.DeleteRange(entryKey(0), entryKey(compactTo+1), nil); err != nil {
		return fmt.Errorf("raft: stage compaction: %w", err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("raft: write snapshot: %w", err)
	}
	return nil
}

// stageSnapshot stages a snapshot received from the leader. It replaces the
// whole log: raft sends one when this node's log does not match the
// leader's, so entries past its index may be a deposed leader's.
func (l *logStore) stageSnapshot(b *pebble.Batch, snap *raftpb.Snapshot) error {
	v, err := proto.Marshal(snap)
	if err != nil {
		return fmt.Errorf("raft: encode snapshot: %w", err)
	}
	if err := b.Set(logKeySnapshot, v, nil); err != nil {
		return fmt.Errorf("raft: stage snapshot: %w", err)
	}
	if err := b.DeleteRange(entryKey(0), codec.Successor(logPrefixEntry), nil); err != nil {
		return fmt.Errorf("raft: stage compaction: %w", err)
	}
	return nil
}

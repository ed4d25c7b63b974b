package multiraft

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// Data is one group's state machine keys in the member's database: the
// range "d" group (8) key. A state machine keeps its state there, written
// through the Batch its applier hands to Apply and Restore, and reads it
// through Data from any goroutine; a read sees what the applier
// committed. The engine deletes the range with the group.
type Data struct {
	db     *pebble.DB
	prefix []byte
}

func dataPrefix(group uint64) []byte { return groupKey('d', group) }

// dataRange is group's state machine keys: [lower, upper).
func dataRange(group uint64) (lower, upper []byte) {
	return dataPrefix(group), dataPrefix(group + 1)
}

func (d *Data) key(k []byte) []byte {
	return append(append(make([]byte, 0, len(d.prefix)+len(k)), d.prefix...), k...)
}

// Get returns a copy of key's value; false when it has none.
func (d *Data) Get(key []byte) ([]byte, bool, error) {
	return getCopy(d.db, d.key(key))
}

// Scan calls fn with each key in [lower, upper) of the group's data (upper
// nil: to the end of it), in key order, the key without the group's
// prefix, until fn returns false. k and v are valid only during the call.
func (d *Data) Scan(lower, upper []byte, fn func(k, v []byte) bool) error {
	return scan(d.db, d.prefix, lower, upper, fn)
}

func getCopy(r pebble.Reader, key []byte) ([]byte, bool, error) {
	v, closer, err := r.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	out := bytes.Clone(v)
	if out == nil {
		out = []byte{}
	}
	return out, true, closer.Close()
}

func scan(r pebble.Reader, prefix, lower, upper []byte, fn func(k, v []byte) bool) error {
	lo := append(bytes.Clone(prefix), lower...)
	var hi []byte
	if upper == nil {
		hi = dataPrefix(binary.BigEndian.Uint64(prefix[1:]) + 1)
	} else {
		hi = append(bytes.Clone(prefix), upper...)
	}
	it, err := r.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		if !fn(it.Key()[len(prefix):], it.Value()) {
			break
		}
	}
	if err := it.Error(); err != nil {
		_ = it.Close()
		return err
	}
	return it.Close()
}

// Batch is the writes of one hand-off of a group's applier: what its
// state machine changes in Apply (or writes in Restore), committed by the
// engine in one Pebble batch with the group's applied index and without
// an fsync of its own (the raft log is the durable copy; see
// checkpointData). Reads through it see the database with the batch's
// writes over it.
type Batch struct {
	b      *pebble.Batch
	prefix []byte
}

func (b *Batch) key(k []byte) []byte {
	return append(append(make([]byte, 0, len(b.prefix)+len(k)), b.prefix...), k...)
}

// Set writes key's value.
func (b *Batch) Set(key, value []byte) error { return b.b.Set(b.key(key), value, nil) }

// Delete deletes key.
func (b *Batch) Delete(key []byte) error { return b.b.Delete(b.key(key), nil) }

// DeleteRange deletes the keys in [lower, upper).
func (b *Batch) DeleteRange(lower, upper []byte) error {
	return b.b.DeleteRange(b.key(lower), b.key(upper), nil)
}

// Get returns a copy of key's value as the batch leaves it.
func (b *Batch) Get(key []byte) ([]byte, bool, error) { return getCopy(b.b, b.key(key)) }

// Scan is Data.Scan as the batch leaves the data.
func (b *Batch) Scan(lower, upper []byte, fn func(k, v []byte) bool) error {
	return scan(b.b, b.prefix, lower, upper, fn)
}

// The group's applied record, "a" group (8): the index its state machine's
// data on disk is complete up to, that entry's term and the configuration
// as of it, written in the same batch as the data it describes.
type appliedRecord struct {
	index, term uint64
	conf        *raftpb.ConfState
}

func encodeApplied(r appliedRecord) ([]byte, error) {
	v := binary.BigEndian.AppendUint64(nil, r.index)
	v = binary.BigEndian.AppendUint64(v, r.term)
	c, err := proto.Marshal(raftpb.EnsureConfState(r.conf))
	if err != nil {
		return nil, err
	}
	return append(v, c...), nil
}

func decodeApplied(v []byte) (appliedRecord, error) {
	if len(v) < 16 {
		return appliedRecord{}, fmt.Errorf("multiraft: applied record of %d bytes", len(v))
	}
	r := appliedRecord{index: binary.BigEndian.Uint64(v), term: binary.BigEndian.Uint64(v[8:]), conf: &raftpb.ConfState{}}
	if err := proto.Unmarshal(v[16:], r.conf); err != nil {
		return appliedRecord{}, fmt.Errorf("multiraft: applied record: %w", err)
	}
	return r, nil
}

// checkpointData is the data of a checkpoint the engine takes itself: not
// the state, which is on disk, but a mark that the group's data is
// complete up to the checkpoint's index. The applier commits its writes
// before it hands the checkpoint to the loop, and the loop writes the
// checkpoint (and drops the log before it) in a later commit of the same
// Pebble database, whose write-ahead log a crash cuts only at its tail: a
// checkpoint that survives a crash implies the state writes before it
// survived too. No fsync is added for it.
var checkpointData = []byte("\x00warren-multiraft state on disk\x00")

func isCheckpointMark(b []byte) bool { return bytes.Equal(b, checkpointData) }

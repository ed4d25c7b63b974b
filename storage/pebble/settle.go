package pebble

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/warrenmq/broker/internal/codec"
	"github.com/warrenmq/broker/unacked"
)

// DeleteSettled is DeleteByOffsets(ctx, name, offsets) and
// idx.DeletePutOnce(ctx, keys, once) in one batch, committed once: the
// acks of a queue whose index lives in the same DB cost one trip through
// Pebble's commit pipeline instead of two. The records and the entries go
// together or not at all, which keeps the order the queue needs (a crash
// never leaves a record without its entry below the cursor) without an
// order inside the batch. It does nothing and returns false when idx is
// not an *Index on this Store's DB; the caller then deletes the two
// separately.
//
// Like both calls it commits with pebble.NoSync: an ack lost in a crash
// redelivers its message. On an error nothing is known to be deleted and
// the call may be repeated: offsets already gone are skipped, and the
// index, which counts the failure, deletes every key with a Delete from
// then on.
func (s *Store) DeleteSettled(ctx context.Context, name string, offsets []uint64, idx unacked.Index, keys []unacked.Key, once int) (bool, error) {
	x, ok := idx.(*Index)
	if !ok || x == nil || x.db != s.db {
		return false, nil
	}
	if err := x.check(ctx); err != nil {
		return true, err
	}
	if len(offsets) == 0 && len(keys) == 0 {
		return true, nil
	}
	sh := s.lockShard(name)
	defer sh.mu.Unlock()
	if err := s.loadLocked(sh); err != nil {
		return true, err
	}
	var b batch
	defer b.release()
	n, err := s.tombstoneLocked(sh, &b, offsets)
	if err != nil {
		return true, fmt.Errorf("storage/pebble: delete from shard %q: %w", name, err)
	}
	if len(keys) > 0 {
		if b.Batch == nil {
			b.Batch = s.db.NewBatch()
		}
		if err := x.addDeletes(b.Batch, keys, once); err != nil {
			sh.loaded.Store(false) // the live set forgot the tombstoned offsets
			return true, err
		}
	}
	switch {
	case n > 0:
		err = s.commitDeleteLocked(sh, &b)
	case b.Batch != nil:
		err = b.commit(pebble.NoSync)
	}
	if err != nil {
		if len(keys) > 0 {
			x.failed.Store(true)
		}
		return true, fmt.Errorf("storage/pebble: delete %d records of shard %q and %d index entries: %w", n, name, len(keys), err)
	}
	return true, nil
}

// addDeletes adds to b the deletes of keys, the first once of them with a
// SingleDelete unless a write of the index has failed (DeletePutOnce).
func (x *Index) addDeletes(b *pebble.Batch, keys []unacked.Key, once int) error {
	if x.failed.Load() {
		once = 0
	}
	var buf []byte
	for i, k := range keys {
		buf = codec.AppendEntryKey(buf[:0], k)
		del := b.Delete
		if i < once {
			del = b.SingleDelete
		}
		if err := del(buf, nil); err != nil {
			return fmt.Errorf("storage/pebble: index delete: %w", err)
		}
	}
	return nil
}

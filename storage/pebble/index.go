package pebble

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"

	"github.com/warrenmq/broker/internal/codec"
	"github.com/warrenmq/broker/unacked"
)

// Index is an unacked.Index in the node's shared Pebble DB, under keys
// that start with 'u', in internal/codec's versioned entry encoding (the
// one a cluster member's state machine stores too). It is safe for
// concurrent use and does not own the DB.
//
// Every write is pebble.NoSync: what matters is that index entries reach
// the WAL before the cursor write that follows them, and one WAL keeps that
// order (see the package comment). A caller that needs the entries on disk
// now syncs the DB.
type Index struct {
	db *pebble.DB
	// failed is set by the first write of the index that fails: a failed
	// commit may still have been applied, so from then on no key is known
	// to hold a single Set and DeletePutOnce deletes as Delete does.
	failed atomic.Bool
}

// NewIndex returns an index on db, which stays the caller's to close.
func NewIndex(db *pebble.DB) *Index { return &Index{db: db} }

var errNoDB = errors.New("storage/pebble: Index has no DB")

// Put inserts or replaces entries in one batch: all or none.
func (x *Index) Put(ctx context.Context, entries []unacked.Entry) error {
	if err := x.check(ctx); err != nil {
		return err
	}
	if err := unacked.CheckEntries(entries); err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	b := x.db.NewBatch()
	// One scratch buffer for every key and value: Set copies into the batch.
	var buf []byte
	for i := range entries {
		buf = codec.AppendEntryKey(buf[:0], entries[i].Key)
		k := len(buf)
		buf = codec.AppendEntry(buf, &entries[i])
		if err := b.Set(buf[:k], buf[k:], nil); err != nil {
			b.Close()
			return fmt.Errorf("storage/pebble: index put: %w", err)
		}
	}
	if err := commitClose(b, pebble.NoSync); err != nil {
		x.failed.Store(true)
		return fmt.Errorf("storage/pebble: index put %d entries: %w", len(entries), err)
	}
	return nil
}

// Get returns the entry under k or an error matching ErrNotFound.
func (x *Index) Get(ctx context.Context, k unacked.Key) (unacked.Entry, error) {
	if err := x.check(ctx); err != nil {
		return unacked.Entry{}, err
	}
	v, closer, err := x.db.Get(codec.AppendEntryKey(nil, k))
	if errors.Is(err, pebble.ErrNotFound) {
		return unacked.Entry{}, fmt.Errorf("%w: queue %q in vhost %q, offset %d", unacked.ErrNotFound, k.Queue, k.VHost, k.Offset)
	}
	if err != nil {
		return unacked.Entry{}, fmt.Errorf("storage/pebble: index get: %w", err)
	}
	defer closer.Close()
	e := unacked.Entry{Key: k}
	if err := codec.DecodeEntry(v, &e); err != nil {
		return unacked.Entry{}, fmt.Errorf("%w (queue %q in vhost %q, offset %d)", err, k.Queue, k.VHost, k.Offset)
	}
	return e, nil
}

// Delete removes entries in one batch; missing keys are ignored.
func (x *Index) Delete(ctx context.Context, keys []unacked.Key) error {
	return x.DeletePutOnce(ctx, keys, 0)
}

// DeletePutOnce is Delete for keys whose first once entries were each
// put exactly once since they were last deleted (or ever): a delivery
// taken from a queue's cursor and settled without being requeued, whose
// entry recovery never rewrote. Those go with a SingleDelete, which
// vanishes together with the entry's Set when the two meet in a flush;
// a Delete's tombstone is written to an sstable and lives on until a
// compaction carries it to the bottom level, so acking every delivery
// with a Delete costs a tombstone per message in every flush and the
// compactions that drop them. A SingleDelete over a key set twice would
// uncover the older Set, so once any write of this index has failed
// (its batch may have been applied all the same) every key goes with a
// Delete.
func (x *Index) DeletePutOnce(ctx context.Context, keys []unacked.Key, once int) error {
	if err := x.check(ctx); err != nil {
		return err
	}
	if len(keys) == 0 {
		return nil
	}
	b := x.db.NewBatch()
	if err := x.addDeletes(b, keys, once); err != nil {
		b.Close()
		return err
	}
	if err := commitClose(b, pebble.NoSync); err != nil {
		x.failed.Store(true)
		return fmt.Errorf("storage/pebble: index delete %d entries: %w", len(keys), err)
	}
	return nil
}

// Queue calls fn for each entry of one queue in offset order until fn
// returns false. It reads a consistent snapshot: fn may write to the index
// and does not see those writes.
func (x *Index) Queue(ctx context.Context, vhost, queue string, fn func(unacked.Entry) bool) error {
	if err := x.check(ctx); err != nil {
		return err
	}
	prefix := codec.AppendQueuePrefix(nil, vhost, queue)
	return x.iterate(ctx, prefix, func(key []byte) (unacked.Key, error) {
		if len(key) != len(prefix)+8 {
			return unacked.Key{}, fmt.Errorf("%w: key %q", ErrCorrupt, key)
		}
		// The vhost and queue are the caller's strings: no allocation per entry.
		return unacked.Key{VHost: vhost, Queue: queue, Offset: binary.BigEndian.Uint64(key[len(prefix):])}, nil
	}, fn)
}

// Scan calls fn for every entry until fn returns false, queue by queue, each
// in offset order. Like Queue it reads a snapshot.
func (x *Index) Scan(ctx context.Context, fn func(unacked.Entry) bool) error {
	if err := x.check(ctx); err != nil {
		return err
	}
	// Keys come queue by queue: decode the vhost and queue once per queue
	// and reuse the strings while the prefix stays the same.
	var last unacked.Key
	var lastPrefix []byte
	return x.iterate(ctx, []byte{codec.EntryKeyPrefix}, func(key []byte) (unacked.Key, error) {
		if lastPrefix != nil && len(key) == len(lastPrefix)+8 && bytes.HasPrefix(key, lastPrefix) {
			last.Offset = binary.BigEndian.Uint64(key[len(lastPrefix):])
			return last, nil
		}
		k, err := codec.DecodeEntryKey(key)
		if err != nil {
			return unacked.Key{}, err
		}
		last, lastPrefix = k, codec.AppendQueuePrefix(lastPrefix[:0], k.VHost, k.Queue)
		return k, nil
	}, fn)
}

// DeleteQueue removes every entry of one queue: each with its own
// tombstone when the queue has at most pointDeleteMax of them (the usual
// case: a queue's unacked deliveries), else with a single range deletion,
// whose cost Pebble's later reads pay until the memtable is flushed (see
// pointDeleteMax). Entries put while it runs may survive it, as they would
// survive a range deletion committed before them.
func (x *Index) DeleteQueue(ctx context.Context, vhost, queue string) error {
	if err := x.check(ctx); err != nil {
		return err
	}
	prefix := codec.AppendQueuePrefix(nil, vhost, queue)
	end := codec.Successor(prefix)
	b := x.db.NewBatch()
	few, err := x.deletePoints(b, prefix, end)
	if err == nil && !few {
		b.Reset()
		err = b.DeleteRange(prefix, end, nil)
	}
	if err == nil && b.Empty() {
		return b.Close()
	}
	if err == nil {
		err = commitClose(b, pebble.NoSync)
	} else {
		b.Close()
	}
	if err != nil {
		x.failed.Store(true)
		return fmt.Errorf("storage/pebble: index delete queue %q in vhost %q: %w", queue, vhost, err)
	}
	return nil
}

// deletePoints adds a Delete to b for each key in [lower, upper), unless
// there are more than pointDeleteMax: then it reports few false.
func (x *Index) deletePoints(b *pebble.Batch, lower, upper []byte) (few bool, err error) {
	it, err := x.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return false, err
	}
	defer func() {
		if cerr := it.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if n++; n > pointDeleteMax {
			return false, nil
		}
		if err := b.Delete(it.Key(), nil); err != nil {
			return false, err
		}
	}
	return true, it.Error()
}

func (x *Index) check(ctx context.Context) error {
	if x == nil || x.db == nil {
		return errNoDB
	}
	return ctx.Err()
}

// iterate visits every key starting with prefix, decoding keys with key.
func (x *Index) iterate(ctx context.Context, prefix []byte, key func([]byte) (unacked.Key, error), fn func(unacked.Entry) bool) (err error) {
	it, err := x.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: codec.Successor(prefix)})
	if err != nil {
		return fmt.Errorf("storage/pebble: index iterate: %w", err)
	}
	defer func() {
		if cerr := it.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("storage/pebble: index iterate: %w", cerr)
		}
	}()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if n++; n%indexCtxCheckEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		k, err := key(it.Key())
		if err != nil {
			return err
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("storage/pebble: index iterate: %w", err)
		}
		e := unacked.Entry{Key: k}
		if err := codec.DecodeEntry(v, &e); err != nil {
			return fmt.Errorf("%w (queue %q in vhost %q, offset %d)", err, k.Queue, k.VHost, k.Offset)
		}
		if !fn(e) {
			return nil
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("storage/pebble: index iterate: %w", err)
	}
	return nil
}

// indexCtxCheckEvery is how many entries an Index iteration visits between
// looks at its context.
const indexCtxCheckEvery = 1024

// commitClose commits b through Commit, which turns Pebble's fatal commit
// error (a failed WAL write, a full disk) into an error instead of a panic,
// and closes b unless the commit failed: Pebble may still refer to a batch
// whose commit failed.
func commitClose(b *pebble.Batch, opts *pebble.WriteOptions) error {
	if err := Commit(b, opts); err != nil {
		return err
	}
	return b.Close()
}

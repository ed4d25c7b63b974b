package unacked

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	pebblestore "github.com/warrenmq/broker/storage/pebble"
)

// PebbleIndex is an Index in the node's shared Pebble DB, under keys that
// start with 'u' (see codec.go for the layout). It is safe for concurrent
// use and does not own the DB.
//
// Every write is pebble.NoSync: what matters is that index entries reach
// the WAL before the cursor write that follows them, and one WAL keeps that
// order (see the package comment). A caller that needs the entries on disk
// now syncs the DB.
type PebbleIndex struct {
	db *pebble.DB
}

// NewPebbleIndex returns an index on db, which stays the caller's to close.
func NewPebbleIndex(db *pebble.DB) *PebbleIndex { return &PebbleIndex{db: db} }

var errNoDB = errors.New("unacked: PebbleIndex has no DB")

// Put inserts or replaces entries in one batch: all or none.
func (x *PebbleIndex) Put(ctx context.Context, entries []Entry) error {
	if err := x.check(ctx); err != nil {
		return err
	}
	if err := checkEntries(entries); err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	b := x.db.NewBatch()
	// One scratch buffer for every key and value: Set copies into the batch.
	var buf []byte
	for i := range entries {
		buf = appendKey(buf[:0], entries[i].Key)
		k := len(buf)
		buf = appendValue(buf, &entries[i])
		if err := b.Set(buf[:k], buf[k:], nil); err != nil {
			b.Close()
			return fmt.Errorf("unacked: put: %w", err)
		}
	}
	if err := commit(b, pebble.NoSync); err != nil {
		return fmt.Errorf("unacked: put %d entries: %w", len(entries), err)
	}
	return nil
}

// Get returns the entry under k or an error matching ErrNotFound.
func (x *PebbleIndex) Get(ctx context.Context, k Key) (Entry, error) {
	if err := x.check(ctx); err != nil {
		return Entry{}, err
	}
	v, closer, err := x.db.Get(appendKey(nil, k))
	if errors.Is(err, pebble.ErrNotFound) {
		return Entry{}, fmt.Errorf("%w: queue %q in vhost %q, offset %d", ErrNotFound, k.Queue, k.VHost, k.Offset)
	}
	if err != nil {
		return Entry{}, fmt.Errorf("unacked: get: %w", err)
	}
	defer closer.Close()
	e := Entry{Key: k}
	if err := decodeValue(v, &e); err != nil {
		return Entry{}, fmt.Errorf("%w (queue %q in vhost %q, offset %d)", err, k.Queue, k.VHost, k.Offset)
	}
	return e, nil
}

// Delete removes entries in one batch; missing keys are ignored.
func (x *PebbleIndex) Delete(ctx context.Context, keys []Key) error {
	if err := x.check(ctx); err != nil {
		return err
	}
	if len(keys) == 0 {
		return nil
	}
	b := x.db.NewBatch()
	var buf []byte
	for _, k := range keys {
		buf = appendKey(buf[:0], k)
		if err := b.Delete(buf, nil); err != nil {
			b.Close()
			return fmt.Errorf("unacked: delete: %w", err)
		}
	}
	if err := commit(b, pebble.NoSync); err != nil {
		return fmt.Errorf("unacked: delete %d entries: %w", len(keys), err)
	}
	return nil
}

// Queue calls fn for each entry of one queue in offset order until fn
// returns false. It reads a consistent snapshot: fn may write to the index
// and does not see those writes.
func (x *PebbleIndex) Queue(ctx context.Context, vhost, queue string, fn func(Entry) bool) error {
	if err := x.check(ctx); err != nil {
		return err
	}
	prefix := appendQueuePrefix(nil, vhost, queue)
	return x.iterate(ctx, prefix, func(key []byte) (Key, error) {
		if len(key) != len(prefix)+8 {
			return Key{}, fmt.Errorf("%w: key %q", errCorrupt, key)
		}
		// The vhost and queue are the caller's strings: no allocation per entry.
		return Key{VHost: vhost, Queue: queue, Offset: binary.BigEndian.Uint64(key[len(prefix):])}, nil
	}, fn)
}

// Scan calls fn for every entry until fn returns false, queue by queue, each
// in offset order. Like Queue it reads a snapshot.
func (x *PebbleIndex) Scan(ctx context.Context, fn func(Entry) bool) error {
	if err := x.check(ctx); err != nil {
		return err
	}
	// Keys come queue by queue: decode the vhost and queue once per queue
	// and reuse the strings while the prefix stays the same.
	var last Key
	var lastPrefix []byte
	return x.iterate(ctx, []byte{keyPrefix}, func(key []byte) (Key, error) {
		if lastPrefix != nil && len(key) == len(lastPrefix)+8 && bytes.HasPrefix(key, lastPrefix) {
			last.Offset = binary.BigEndian.Uint64(key[len(lastPrefix):])
			return last, nil
		}
		k, err := decodeKey(key)
		if err != nil {
			return Key{}, err
		}
		last, lastPrefix = k, appendQueuePrefix(lastPrefix[:0], k.VHost, k.Queue)
		return k, nil
	}, fn)
}

// DeleteQueue removes every entry of one queue with a single range
// deletion.
func (x *PebbleIndex) DeleteQueue(ctx context.Context, vhost, queue string) error {
	if err := x.check(ctx); err != nil {
		return err
	}
	prefix := appendQueuePrefix(nil, vhost, queue)
	if err := x.db.DeleteRange(prefix, successor(prefix), pebble.NoSync); err != nil {
		return fmt.Errorf("unacked: delete queue %q in vhost %q: %w", queue, vhost, err)
	}
	return nil
}

func (x *PebbleIndex) check(ctx context.Context) error {
	if x == nil || x.db == nil {
		return errNoDB
	}
	return ctx.Err()
}

// iterate visits every key starting with prefix, decoding keys with key.
func (x *PebbleIndex) iterate(ctx context.Context, prefix []byte, key func([]byte) (Key, error), fn func(Entry) bool) (err error) {
	it, err := x.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: successor(prefix)})
	if err != nil {
		return fmt.Errorf("unacked: iterate: %w", err)
	}
	defer func() {
		if cerr := it.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("unacked: iterate: %w", cerr)
		}
	}()
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		if n++; n%ctxCheckEvery == 0 {
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
			return fmt.Errorf("unacked: iterate: %w", err)
		}
		e := Entry{Key: k}
		if err := decodeValue(v, &e); err != nil {
			return fmt.Errorf("%w (queue %q in vhost %q, offset %d)", err, k.Queue, k.VHost, k.Offset)
		}
		if !fn(e) {
			return nil
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("unacked: iterate: %w", err)
	}
	return nil
}

// successor returns the exclusive upper bound of a prefix scan. Prefixes
// here start with 'u', so one byte can always be incremented.
func successor(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// commit commits b through storage/pebble's Commit, which turns Pebble's
// fatal commit error (a failed WAL write, a full disk) into an error
// instead of a panic, and closes b unless the commit failed: Pebble may
// still refer to a batch whose commit failed.
func commit(b *pebble.Batch, opts *pebble.WriteOptions) error {
	if err := pebblestore.Commit(b, opts); err != nil {
		return err
	}
	return b.Close()
}

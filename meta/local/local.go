package local

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/warrenmq/broker/internal/codec"
	"github.com/warrenmq/broker/internal/shrink"
	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/meta/internal/metakey"
	pebblestore "github.com/warrenmq/broker/storage/pebble"
)

var (
	_ meta.Store  = (*Store)(nil)
	_ meta.Syncer = (*Store)(nil)
)

// formatVersion is stored under "m!" so a later layout change can tell old
// data from new instead of misreading it.
const formatVersion = 1

// Store is a meta.Store on a shared Pebble DB. Create it with New. Its
// entities are meta.Typed's, on the DB's 'm' keys; the cursors are its
// own.
type Store struct {
	*meta.Typed
	db      *pebble.DB
	cursors struct {
		sync.Mutex
		m map[meta.QueueKey]*cursor
		// peak rebuilds m once deletes left it a quarter of its largest
		// size (shrink.Map): deleted queues would otherwise leave its
		// table behind.
		peak shrink.Peak
	}
}

// cursor is the in-memory copy of one queue's cursor. mu serializes the
// compare and the write, so the copy and the DB never disagree.
type cursor struct {
	mu     sync.Mutex
	key    []byte
	loaded bool
	value  uint64
	// dropped is set by DeleteQueue after it removed the cursor from the map;
	// a caller that fetched it before must look it up again.
	dropped bool
}

// New returns a Store on db. It checks, and on a fresh DB records, the key
// layout version. db stays the caller's to close.
func New(db *pebble.DB) (*Store, error) {
	if db == nil {
		return nil, errors.New("local: nil pebble DB")
	}
	s := &Store{Typed: meta.NewTyped(kv{db}), db: db}
	s.cursors.m = make(map[meta.QueueKey]*cursor)
	key := metakey.KindPrefix(kindVersion)
	v, closer, err := db.Get(key)
	switch {
	case errors.Is(err, pebble.ErrNotFound):
		if err := set(db, key, binary.AppendUvarint(nil, formatVersion), pebble.Sync); err != nil {
			return nil, fmt.Errorf("local: record format version: %w", err)
		}
	case err != nil:
		return nil, fmt.Errorf("local: read format version: %w", err)
	default:
		got, n := binary.Uvarint(v)
		closer.Close()
		if n <= 0 || got != formatVersion {
			return nil, fmt.Errorf("local: metadata format version %d (%d bytes) is not %d", got, n, formatVersion)
		}
	}
	return s, nil
}

// Sync implements meta.Syncer: it returns once every write before it,
// those made under meta.DeferSync included, is on disk.
func (s *Store) Sync(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	b := s.db.NewBatch()
	if err := b.LogData(nil, nil); err != nil {
		b.Close()
		return fmt.Errorf("local: sync: %w", err)
	}
	if err := commit(b, pebble.Sync); err != nil {
		return fmt.Errorf("local: sync: %w", err)
	}
	return nil
}

// IsLeader is always true: a local store serves a single node.
func (s *Store) IsLeader() bool { return true }

// Offset returns the queue's cursor, 0 if it was never set.
func (s *Store) Offset(ctx context.Context, q meta.QueueKey) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	c := s.lockCursor(q)
	defer c.mu.Unlock()
	if err := s.loadCursorLocked(c); err != nil {
		return 0, err
	}
	return c.value, nil
}

// CompareAndSwapOffset sets the queue's cursor to new if it is old. The
// write is not synced; see the package comment for why that is safe.
func (s *Store) CompareAndSwapOffset(ctx context.Context, q meta.QueueKey, old, new uint64) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	c := s.lockCursor(q)
	defer c.mu.Unlock()
	if err := s.loadCursorLocked(c); err != nil {
		return false, err
	}
	if c.value != old {
		return false, nil
	}
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], new)
	if err := set(s.db, c.key, buf[:], pebble.NoSync); err != nil {
		return false, fmt.Errorf("local: write cursor of queue %q in vhost %q: %w", q.Name, q.VHost, err)
	}
	c.value = new
	return true, nil
}

// lockCursor returns q's cursor, created if needed, with its mutex held.
func (s *Store) lockCursor(q meta.QueueKey) *cursor {
	for {
		s.cursors.Lock()
		c := s.cursors.m[q]
		if c == nil {
			c = &cursor{key: metakey.Cursor(q.VHost, q.Name)}
			s.cursors.m[q] = c
		}
		s.cursors.Unlock()
		c.mu.Lock()
		if !c.dropped {
			return c
		}
		c.mu.Unlock()
	}
}

// loadCursorLocked reads the cursor from the DB the first time it is used.
func (s *Store) loadCursorLocked(c *cursor) error {
	if c.loaded {
		return nil
	}
	v, closer, err := s.db.Get(c.key)
	if errors.Is(err, pebble.ErrNotFound) {
		c.value, c.loaded = 0, true
		return nil
	}
	if err != nil {
		return fmt.Errorf("local: read cursor: %w", err)
	}
	defer closer.Close()
	if len(v) != 8 {
		return fmt.Errorf("local: corrupt cursor %q: %d bytes, want 8", c.key, len(v))
	}
	c.value, c.loaded = binary.BigEndian.Uint64(v), true
	return nil
}

// DeleteQueue removes the queue and its cursor in one batch; a missing
// queue is not an error (its cursor, if any, still goes).
func (s *Store) DeleteQueue(ctx context.Context, vhost, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	qk := meta.QueueKey{VHost: vhost, Name: name}
	// Holding the cursor's lock keeps a concurrent swap from writing the
	// cursor back between our delete and the map update.
	c := s.lockCursor(qk)
	defer c.mu.Unlock()
	if err := s.Typed.DeleteQueue(ctx, vhost, name); err != nil {
		return err
	}
	c.dropped = true
	s.cursors.Lock()
	if s.cursors.m[qk] == c {
		delete(s.cursors.m, qk)
		s.cursors.m = shrink.Map(s.cursors.m, &s.cursors.peak)
	}
	s.cursors.Unlock()
	return nil
}

// writeOptions syncs the write of a durable entity, unless ctx defers the
// sync to a later Sync (meta.DeferSync).
func writeOptions(ctx context.Context, durable bool) *pebble.WriteOptions {
	if durable && !meta.SyncDeferred(ctx) {
		return pebble.Sync
	}
	return pebble.NoSync
}

// kv is the meta.KV under a Store: the 'm' keys of the DB.
type kv struct{ db *pebble.DB }

// SyncsOnRequest implements meta.SyncsOnRequest: only a Durable batch
// is synced.
func (kv) SyncsOnRequest() {}

// Get returns a copy of the value under key.
func (k kv) Get(ctx context.Context, key []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	v, closer, err := k.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, meta.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("local: read %q: %w", key, err)
	}
	defer closer.Close()
	return bytes.Clone(v), nil
}

// Scan iterates the keys that start with prefix.
func (k kv) Scan(ctx context.Context, prefix []byte, fn func(key, value []byte) error) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	it, err := k.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: codec.Successor(prefix)})
	if err != nil {
		return fmt.Errorf("local: scan: %w", err)
	}
	defer func() {
		if cerr := it.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("local: scan: %w", cerr)
		}
	}()
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return fmt.Errorf("local: scan: %w", err)
		}
		if err := fn(it.Key(), v); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return fmt.Errorf("local: scan: %w", err)
	}
	return nil
}

// Write commits b as one Pebble batch, synced when b is Durable (unless
// ctx defers the sync).
func (k kv) Write(ctx context.Context, b meta.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	pb := k.db.NewBatch()
	for _, r := range b.Set {
		if err := pb.Set(r.Key, r.Value, nil); err != nil {
			pb.Close()
			return fmt.Errorf("local: write %q: %w", r.Key, err)
		}
	}
	for _, key := range b.Delete {
		if err := pb.Delete(key, nil); err != nil {
			pb.Close()
			return fmt.Errorf("local: delete %q: %w", key, err)
		}
	}
	if err := commit(pb, writeOptions(ctx, b.Durable)); err != nil {
		return fmt.Errorf("local: write: %w", err)
	}
	return nil
}

// set writes one key through commit.
func set(db *pebble.DB, key, val []byte, opts *pebble.WriteOptions) error {
	b := db.NewBatch()
	if err := b.Set(key, val, nil); err != nil {
		b.Close()
		return err
	}
	return commit(b, opts)
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

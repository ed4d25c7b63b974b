package local

import (
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

// Store is a meta.Store on a shared Pebble DB. Create it with New.
type Store struct {
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
	s := &Store{db: db}
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
			c = &cursor{key: metakey.Cursor(q)}
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

// PutExchange stores e, synced when e is durable.
func (s *Store) PutExchange(ctx context.Context, e meta.Exchange) error {
	return s.put(ctx, metakey.Name(metakey.KindExch, e.VHost, e.Name), e, e.Durable)
}

// GetExchange returns the exchange or an error matching meta.ErrNotFound.
func (s *Store) GetExchange(ctx context.Context, vhost, name string) (meta.Exchange, error) {
	var e meta.Exchange
	err := s.get(ctx, metakey.Name(metakey.KindExch, vhost, name), &e)
	if errors.Is(err, meta.ErrNotFound) {
		err = fmt.Errorf("%w: exchange %q in vhost %q", err, name, vhost)
	}
	return e, err
}

// DeleteExchange removes the exchange; a missing one is not an error.
func (s *Store) DeleteExchange(ctx context.Context, vhost, name string) error {
	key := metakey.Name(metakey.KindExch, vhost, name)
	var e meta.Exchange
	if err := s.get(ctx, key, &e); err != nil {
		return ignoreNotFound(err)
	}
	return s.delete(ctx, key, e.Durable)
}

// ListExchanges returns the vhost's exchanges sorted by name.
func (s *Store) ListExchanges(ctx context.Context, vhost string) ([]meta.Exchange, error) {
	return list[meta.Exchange](ctx, s, metakey.VHostPrefix(metakey.KindExch, vhost))
}

// PutQueue stores q, synced when q is durable. The cursor is left alone:
// redeclaring a queue does not rewind it.
func (s *Store) PutQueue(ctx context.Context, q meta.Queue) error {
	return s.put(ctx, metakey.Name(metakey.KindQueue, q.VHost, q.Name), q, q.Durable)
}

// GetQueue returns the queue or an error matching meta.ErrNotFound.
func (s *Store) GetQueue(ctx context.Context, vhost, name string) (meta.Queue, error) {
	var q meta.Queue
	err := s.get(ctx, metakey.Name(metakey.KindQueue, vhost, name), &q)
	if errors.Is(err, meta.ErrNotFound) {
		err = fmt.Errorf("%w: queue %q in vhost %q", err, name, vhost)
	}
	return q, err
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

	key := metakey.Name(metakey.KindQueue, vhost, name)
	var q meta.Queue
	if err := s.get(ctx, key, &q); err != nil && !errors.Is(err, meta.ErrNotFound) {
		return err
	}
	b := s.db.NewBatch()
	if err := b.Delete(key, nil); err != nil {
		b.Close()
		return fmt.Errorf("local: delete queue: %w", err)
	}
	if err := b.Delete(c.key, nil); err != nil {
		b.Close()
		return fmt.Errorf("local: delete cursor: %w", err)
	}
	if err := commit(b, writeOptions(ctx, q.Durable)); err != nil {
		return fmt.Errorf("local: delete queue %q in vhost %q: %w", name, vhost, err)
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

// ListQueues returns the vhost's queues sorted by name.
func (s *Store) ListQueues(ctx context.Context, vhost string) ([]meta.Queue, error) {
	return list[meta.Queue](ctx, s, metakey.VHostPrefix(metakey.KindQueue, vhost))
}

// PutBinding stores b, replacing the binding with the same key (all fields
// but Durable), synced when b is durable.
func (s *Store) PutBinding(ctx context.Context, b meta.Binding) error {
	if err := checkBinding(b); err != nil {
		return err
	}
	return s.put(ctx, metakey.Binding(b), b, b.Durable)
}

// DeleteBinding removes the binding with b's key; a missing one is not an
// error.
func (s *Store) DeleteBinding(ctx context.Context, b meta.Binding) error {
	if err := checkBinding(b); err != nil {
		return err
	}
	key := metakey.Binding(b)
	var old meta.Binding
	if err := s.get(ctx, key, &old); err != nil {
		return ignoreNotFound(err)
	}
	return s.delete(ctx, key, old.Durable)
}

// ListBindings returns the vhost's bindings.
func (s *Store) ListBindings(ctx context.Context, vhost string) ([]meta.Binding, error) {
	return list[meta.Binding](ctx, s, metakey.VHostPrefix(metakey.KindBinding, vhost))
}

// PutVHost stores v, synced.
func (s *Store) PutVHost(ctx context.Context, v meta.VHost) error {
	return s.put(ctx, metakey.VHost(v.Name), v, true)
}

// GetVHost returns the vhost or an error matching meta.ErrNotFound.
func (s *Store) GetVHost(ctx context.Context, name string) (meta.VHost, error) {
	var v meta.VHost
	err := s.get(ctx, metakey.VHost(name), &v)
	if errors.Is(err, meta.ErrNotFound) {
		err = fmt.Errorf("%w: vhost %q", err, name)
	}
	return v, err
}

// DeleteVHost removes the vhost record, synced. Its exchanges, queues and
// permissions are the broker's to delete first.
func (s *Store) DeleteVHost(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.delete(ctx, metakey.VHost(name), true)
}

// ListVHosts returns every vhost sorted by name.
func (s *Store) ListVHosts(ctx context.Context) ([]meta.VHost, error) {
	return list[meta.VHost](ctx, s, metakey.KindPrefix(metakey.KindVHost))
}

// PutUser stores u, synced. The name must not be empty.
func (s *Store) PutUser(ctx context.Context, u meta.User) error {
	if u.Name == "" {
		return errEmptyUser
	}
	return s.put(ctx, metakey.User(u.Name), u, true)
}

// GetUser returns the user or an error matching meta.ErrNotFound.
func (s *Store) GetUser(ctx context.Context, name string) (meta.User, error) {
	var u meta.User
	err := s.get(ctx, metakey.User(name), &u)
	if errors.Is(err, meta.ErrNotFound) {
		err = fmt.Errorf("%w: user %q", err, name)
	}
	return u, err
}

// DeleteUser removes the user, synced; its permissions are the broker's to
// delete.
func (s *Store) DeleteUser(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.delete(ctx, metakey.User(name), true)
}

// ListUsers returns every user sorted by name.
func (s *Store) ListUsers(ctx context.Context) ([]meta.User, error) {
	return list[meta.User](ctx, s, metakey.KindPrefix(metakey.KindUser))
}

// PutPermission stores p keyed by user and vhost, synced. The user must not
// be empty.
func (s *Store) PutPermission(ctx context.Context, p meta.Permission) error {
	if p.User == "" {
		return errEmptyUser
	}
	return s.put(ctx, metakey.Perm(p.User, p.VHost), p, true)
}

// GetPermission returns the user's permission on the vhost or an error
// matching meta.ErrNotFound.
func (s *Store) GetPermission(ctx context.Context, user, vhost string) (meta.Permission, error) {
	var p meta.Permission
	err := s.get(ctx, metakey.Perm(user, vhost), &p)
	if errors.Is(err, meta.ErrNotFound) {
		err = fmt.Errorf("%w: permission of user %q on vhost %q", err, user, vhost)
	}
	return p, err
}

// DeletePermission removes the permission, synced; a missing one is not an
// error.
func (s *Store) DeletePermission(ctx context.Context, user, vhost string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.delete(ctx, metakey.Perm(user, vhost), true)
}

// ListPermissions returns every permission, grouped by user.
func (s *Store) ListPermissions(ctx context.Context) ([]meta.Permission, error) {
	return list[meta.Permission](ctx, s, metakey.KindPrefix(metakey.KindPerm))
}

var errEmptyUser = errors.New("local: empty user name")

// checkBinding rejects a destination kind the router would not understand,
// so a bad binding fails at declare time rather than when routing.
func checkBinding(b meta.Binding) error {
	switch b.DestinationKind {
	case meta.DestinationQueue, meta.DestinationExchange:
		return nil
	}
	return fmt.Errorf("local: binding destination kind %q is neither %q nor %q",
		b.DestinationKind, meta.DestinationQueue, meta.DestinationExchange)
}

// writeOptions syncs the write of a durable entity, unless ctx defers the
// sync to a later Sync (meta.DeferSync).
func writeOptions(ctx context.Context, durable bool) *pebble.WriteOptions {
	if durable && !meta.SyncDeferred(ctx) {
		return pebble.Sync
	}
	return pebble.NoSync
}

// put writes v as JSON under key.
func (s *Store) put(ctx context.Context, key []byte, v any, durable bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	val, err := meta.EncodeRecord(v)
	if err != nil {
		return fmt.Errorf("local: encode %T: %w", v, err)
	}
	if err := set(s.db, key, val, writeOptions(ctx, durable)); err != nil {
		return fmt.Errorf("local: write %T: %w", v, err)
	}
	return nil
}

// putRecord writes an encoded record under key, synced.
func (s *Store) putRecord(ctx context.Context, key, val []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := set(s.db, key, val, writeOptions(ctx, true)); err != nil {
		return fmt.Errorf("local: write %q: %w", key, err)
	}
	return nil
}

// get reads the JSON value under key into v; a missing key is an error
// matching meta.ErrNotFound.
func (s *Store) get(ctx context.Context, key []byte, v any) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	val, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return meta.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("local: read %T: %w", v, err)
	}
	defer closer.Close()
	if err := meta.DecodeRecord(val, v); err != nil {
		return fmt.Errorf("local: corrupt %T under key %q: %w", v, key, err)
	}
	return nil
}

func (s *Store) delete(ctx context.Context, key []byte, durable bool) error {
	b := s.db.NewBatch()
	if err := b.Delete(key, nil); err != nil {
		b.Close()
		return fmt.Errorf("local: delete %q: %w", key, err)
	}
	if err := commit(b, writeOptions(ctx, durable)); err != nil {
		return fmt.Errorf("local: delete %q: %w", key, err)
	}
	return nil
}

func ignoreNotFound(err error) error {
	if errors.Is(err, meta.ErrNotFound) {
		return nil
	}
	return err
}

// list decodes every value whose key starts with prefix, in key order.
func list[T any](ctx context.Context, s *Store, prefix []byte) (_ []T, err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: codec.Successor(prefix)})
	if err != nil {
		return nil, fmt.Errorf("local: list: %w", err)
	}
	defer func() {
		if cerr := it.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("local: list: %w", cerr)
		}
	}()
	var out []T
	for ok := it.First(); ok; ok = it.Next() {
		val, err := it.ValueAndErr()
		if err != nil {
			return nil, fmt.Errorf("local: list: %w", err)
		}
		var v T
		if err := meta.DecodeRecord(val, &v); err != nil {
			return nil, fmt.Errorf("local: corrupt %T under key %q: %w", v, it.Key(), err)
		}
		out = append(out, v)
	}
	if err := it.Error(); err != nil {
		return nil, fmt.Errorf("local: list: %w", err)
	}
	if out == nil {
		out = []T{}
	}
	return out, nil
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

package dedup

import (
	"bytes"
	"container/list"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/warrenmq/broker/clock"
)

// Cache is one exchange's deduplication cache.
type Cache struct {
	mu     sync.Mutex
	b      backend
	shared *replicated // set instead of b: OpenReplicated
	clock  clock.Clock
	size   int64
	ttl    time.Duration // default; 0 never expires
	seq    uint64
}

// entry is what the cache keeps per key: its expiry (Unix nanoseconds, 0
// never) and its insertion number, the eviction order.
type entry struct {
	expires int64
	seq     uint64
}

// backend stores a cache's entries; the Cache's lock serialises calls.
type backend interface {
	get(key []byte) (entry, bool, error)
	put(key []byte, e entry) error
	del(key []byte, e entry) error
	oldest() ([]byte, entry, bool, error)
	count() int64
	maxSeq() uint64
	drop() error
}

// NewMemory returns a cache in memory: size entries at most (no bound when
// 0), each expiring ttl after it is recorded unless the publish gives its
// own (0: never).
func NewMemory(c clock.Clock, size int64, ttl time.Duration) *Cache {
	return &Cache{b: &memBackend{m: make(map[string]*list.Element)}, clock: c, size: size, ttl: ttl}
}

// OpenPebble returns the cache named scope (a vhost and exchange, say) in
// db, with what it held before.
func OpenPebble(db *pebble.DB, scope string, c clock.Clock, size int64, ttl time.Duration) (*Cache, error) {
	b := &pebbleBackend{db: db, scope: scope}
	if err := b.load(); err != nil {
		return nil, err
	}
	return &Cache{b: b, clock: c, size: size, ttl: ttl, seq: b.maxSeq()}, nil
}

// Seen reports whether key was recorded and has not expired; when not, it
// records key, expiring ttl from now (the cache's default when ttl is 0,
// never when both are 0).
func (c *Cache) Seen(key []byte, ttl time.Duration) (bool, error) {
	if c.shared != nil {
		return c.shared.seen(c, key, ttl)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now().UnixNano()
	e, ok, err := c.b.get(key)
	if err != nil {
		return false, err
	}
	if ok {
		if e.expires == 0 || e.expires > now {
			return true, nil
		}
		if err := c.b.del(key, e); err != nil {
			return false, err
		}
	}
	for c.size > 0 && c.b.count() >= c.size {
		k, old, ok, err := c.b.oldest()
		if err != nil {
			return false, err
		}
		if !ok {
			break
		}
		if err := c.b.del(k, old); err != nil {
			return false, err
		}
	}
	if ttl == 0 {
		ttl = c.ttl
	}
	c.seq++
	e = entry{seq: c.seq}
	if ttl > 0 {
		e.expires = now + int64(ttl)
	}
	return false, c.b.put(key, e)
}

// Len returns how many entries the cache holds, expired ones included.
func (c *Cache) Len() int64 {
	if c.shared != nil {
		return c.shared.count()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.count()
}

// Drop deletes the cache's entries (its exchange was deleted).
func (c *Cache) Drop() error {
	if c.shared != nil {
		return c.shared.drop()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.drop()
}

type memEntry struct {
	key string
	e   entry
}

type memBackend struct {
	m     map[string]*list.Element
	order list.List // of memEntry, oldest first
}

func (b *memBackend) get(key []byte) (entry, bool, error) {
	if el, ok := b.m[string(key)]; ok {
		return el.Value.(memEntry).e, true, nil
	}
	return entry{}, false, nil
}

func (b *memBackend) put(key []byte, e entry) error {
	b.m[string(key)] = b.order.PushBack(memEntry{key: string(key), e: e})
	return nil
}

func (b *memBackend) del(key []byte, _ entry) error {
	if el, ok := b.m[string(key)]; ok {
		b.order.Remove(el)
		delete(b.m, string(key))
	}
	return nil
}

func (b *memBackend) oldest() ([]byte, entry, bool, error) {
	el := b.order.Front()
	if el == nil {
		return nil, entry{}, false, nil
	}
	me := el.Value.(memEntry)
	return []byte(me.key), me.e, true, nil
}

func (b *memBackend) count() int64   { return int64(len(b.m)) }
func (b *memBackend) maxSeq() uint64 { return 0 }
func (b *memBackend) drop() error {
	clear(b.m)
	b.order.Init()
	return nil
}

// Key layout (first byte 'k', which no other store of the broker uses):
//
//	entry: 'k' 'e' uvarint(len(scope)) scope key -> expires(8) seq(8)
//	order: 'k' 'o' uvarint(len(scope)) scope seq(8) -> key
const (
	keyPrefix = 'k'
	kindEntry = 'e'
	kindOrder = 'o'
)

type pebbleBackend struct {
	db    *pebble.DB
	scope string
	n     int64
	seq   uint64
}

func (b *pebbleBackend) prefix(kind byte) []byte {
	p := []byte{keyPrefix, kind}
	p = binary.AppendUvarint(p, uint64(len(b.scope)))
	return append(p, b.scope...)
}

func (b *pebbleBackend) entryKey(key []byte) []byte { return append(b.prefix(kindEntry), key...) }

func (b *pebbleBackend) orderKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(b.prefix(kindOrder), seq)
}

func upper(p []byte) []byte {
	u := bytes.Clone(p)
	for i := len(u) - 1; i >= 0; i-- {
		if u[i] < 0xff {
			u[i]++
			return u[:i+1]
		}
	}
	return nil
}

// errCorrupt reports a stored entry that does not decode.
var errCorrupt = errors.New("dedup: corrupt entry")

func (b *pebbleBackend) load() error {
	p := b.prefix(kindOrder)
	it, err := b.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: upper(p)})
	if err != nil {
		return fmt.Errorf("dedup: open: %w", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()[len(p):]
		if len(k) != 8 {
			return fmt.Errorf("%w: key %q", errCorrupt, it.Key())
		}
		b.n++
		b.seq = max(b.seq, binary.BigEndian.Uint64(k))
	}
	return it.Error()
}

func (b *pebbleBackend) get(key []byte) (entry, bool, error) {
	v, closer, err := b.db.Get(b.entryKey(key))
	if err == pebble.ErrNotFound {
		return entry{}, false, nil
	}
	if err != nil {
		return entry{}, false, fmt.Errorf("dedup: get: %w", err)
	}
	defer closer.Close()
	if len(v) != 16 {
		return entry{}, false, errCorrupt
	}
	return entry{expires: int64(binary.BigEndian.Uint64(v)), seq: binary.BigEndian.Uint64(v[8:])}, true, nil
}

func (b *pebbleBackend) put(key []byte, e entry) error {
	batch := b.db.NewBatch()
	defer batch.Close()
	var v [16]byte
	binary.BigEndian.PutUint64(v[:], uint64(e.expires))
	binary.BigEndian.PutUint64(v[8:], e.seq)
	_ = batch.Set(b.entryKey(key), v[:], nil)
	_ = batch.Set(b.orderKey(e.seq), key, nil)
	if err := batch.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("dedup: put: %w", err)
	}
	b.n++
	return nil
}

func (b *pebbleBackend) del(key []byte, e entry) error {
	batch := b.db.NewBatch()
	defer batch.Close()
	_ = batch.Delete(b.entryKey(key), nil)
	_ = batch.Delete(b.orderKey(e.seq), nil)
	if err := batch.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("dedup: delete: %w", err)
	}
	b.n--
	return nil
}

func (b *pebbleBackend) oldest() ([]byte, entry, bool, error) {
	p := b.prefix(kindOrder)
	it, err := b.db.NewIter(&pebble.IterOptions{LowerBound: p, UpperBound: upper(p)})
	if err != nil {
		return nil, entry{}, false, fmt.Errorf("dedup: oldest: %w", err)
	}
	defer it.Close()
	if !it.First() {
		return nil, entry{}, false, it.Error()
	}
	key := bytes.Clone(it.Value())
	e, ok, err := b.get(key)
	if err != nil || !ok {
		// An order key without its entry (cannot happen: both are
		// written and deleted in one batch): drop it.
		if err == nil {
			seq := binary.BigEndian.Uint64(it.Key()[len(p):])
			err = b.db.Delete(b.orderKey(seq), pebble.NoSync)
			b.n--
		}
		return nil, entry{}, false, err
	}
	return key, e, true, nil
}

func (b *pebbleBackend) count() int64   { return b.n }
func (b *pebbleBackend) maxSeq() uint64 { return b.seq }

func (b *pebbleBackend) drop() error {
	for _, kind := range []byte{kindEntry, kindOrder} {
		p := b.prefix(kind)
		if err := b.db.DeleteRange(p, upper(p), pebble.NoSync); err != nil {
			return fmt.Errorf("dedup: drop: %w", err)
		}
	}
	b.n = 0
	return nil
}

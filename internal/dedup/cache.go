package dedup

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/internal/shrink"
)

// MaxSize is the largest x-cache-size a cache accepts. The plugin takes
// any positive integer; users size caches in millions (an hour of
// publishes at a few thousand a second), and a bound keeps a declare
// from asking for a cache no disk or memory holds.
const MaxSize = 100_000_000

// Cache is one exchange's deduplication cache.
type Cache struct {
	mu     sync.Mutex
	b      backend
	shared *replicated // set instead of b: OpenReplicated
	clock  clock.Clock
	size   int64
	ttl    time.Duration // default; 0 never expires
	seq    uint64

	// The memory of a cache in memory (mem is its backend, nil for the
	// others): the Budget it shares with the broker's other caches (nil:
	// none), its name in the logs, whether it said it evicts for memory.
	mem    *memBackend
	budget *Budget
	name   string
	warned bool
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

// NewMemory returns a cache in memory, on no Budget: size entries at most
// (no bound when 0), each expiring ttl after it is recorded unless the
// publish gives its own (0: never). Budget.NewCache makes one whose memory
// counts.
func NewMemory(c clock.Clock, size int64, ttl time.Duration) *Cache {
	mem := newMemBackend(nil)
	return &Cache{b: mem, mem: mem, clock: c, size: size, ttl: ttl}
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
// never when both are 0). A cache in memory whose Budget is spent then
// has the budget's largest cache evict its oldest entries.
func (c *Cache) Seen(key []byte, ttl time.Duration) (bool, error) {
	if c.shared != nil {
		return c.shared.seen(c, key, ttl)
	}
	c.mu.Lock()
	seen, err := c.seenLocked(key, ttl)
	c.mu.Unlock()
	if !seen && c.budget != nil && c.budget.over() {
		c.budget.shed()
	}
	return seen, err
}

func (c *Cache) seenLocked(key []byte, ttl time.Duration) (bool, error) {
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
	if c.mem != nil {
		// Expired entries go when looked up or evicted; the oldest one
		// goes now too, so a cache whose entries expire gives their
		// memory back as it records.
		c.mem.dropExpiredOldest(now)
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

// MemoryBytes returns what a cache in memory holds in the heap, by the
// estimate its Budget counts (len(key) plus memEntryOverhead an entry);
// 0 for a cache on disk or in the shared store.
func (c *Cache) MemoryBytes() int64 {
	if c.mem == nil {
		return 0
	}
	return c.mem.bytes.Load()
}

// Drop deletes the cache's entries (its exchange was deleted); a cache in
// memory also leaves its Budget.
func (c *Cache) Drop() error {
	if c.shared != nil {
		return c.shared.drop()
	}
	c.mu.Lock()
	err := c.b.drop()
	c.mu.Unlock()
	if c.budget != nil {
		c.budget.remove(c)
	}
	return err
}

// Release lets go of what a cache in memory holds, as Drop does, and does
// nothing to a cache on disk or in the shared store: its exchange is gone
// from this broker, not from the store (its vhost closed, another broker
// replaced it).
func (c *Cache) Release() {
	if c.mem != nil {
		_ = c.Drop()
	}
}

// memEntryOverhead is what an entry of a cache in memory costs in the
// heap besides its key: its node (key header, entry, two links: 48
// bytes) and its slot in the map (key header and pointer, at the map's
// load factor). TestMemoryEntryBytes checks it against the live heap.
const memEntryOverhead = 88

func memEntryBytes(key string) int64 { return int64(len(key)) + memEntryOverhead }

// memNode is one entry of a cache in memory, in a list oldest first.
type memNode struct {
	key        string
	e          entry
	prev, next *memNode
}

type memBackend struct {
	m          map[string]*memNode
	peak       shrink.Peak // rebuilds m once it shrank (shrink.Map)
	head, tail *memNode    // the oldest entry and the newest
	// bytes is what the entries hold (memEntryBytes each), read without
	// the cache's lock by its Budget; budget, when set, counts it too.
	bytes  atomic.Int64
	budget *Budget
}

func newMemBackend(budget *Budget) *memBackend {
	return &memBackend{m: make(map[string]*memNode), budget: budget}
}

func (b *memBackend) account(n int64) {
	b.bytes.Add(n)
	if b.budget != nil {
		b.budget.used.Add(n)
	}
}

func (b *memBackend) get(key []byte) (entry, bool, error) {
	if n, ok := b.m[string(key)]; ok {
		return n.e, true, nil
	}
	return entry{}, false, nil
}

func (b *memBackend) put(key []byte, e entry) error {
	k := string(key) // one copy, shared by the map and the node
	n := &memNode{key: k, e: e, prev: b.tail}
	if b.tail != nil {
		b.tail.next = n
	} else {
		b.head = n
	}
	b.tail = n
	b.m[k] = n
	b.account(memEntryBytes(k))
	return nil
}

func (b *memBackend) del(key []byte, _ entry) error {
	n, ok := b.m[string(key)]
	if !ok {
		return nil
	}
	b.unlink(n)
	return nil
}

func (b *memBackend) unlink(n *memNode) {
	if n.prev != nil {
		n.prev.next = n.next
	} else {
		b.head = n.next
	}
	if n.next != nil {
		n.next.prev = n.prev
	} else {
		b.tail = n.prev
	}
	delete(b.m, n.key)
	b.m = shrink.Map(b.m, &b.peak)
	b.account(-memEntryBytes(n.key))
}

func (b *memBackend) oldest() ([]byte, entry, bool, error) {
	if b.head == nil {
		return nil, entry{}, false, nil
	}
	return []byte(b.head.key), b.head.e, true, nil
}

// dropExpiredOldest drops the oldest entry if it has expired by now.
func (b *memBackend) dropExpiredOldest(now int64) {
	if n := b.head; n != nil && n.e.expires != 0 && n.e.expires <= now {
		b.unlink(n)
	}
}

// evictOldest drops the oldest entries, keeping the newest, until want
// bytes are freed; it returns what it freed.
func (b *memBackend) evictOldest(want int64) (freed int64) {
	for freed < want && b.head != nil && b.head != b.tail {
		freed += memEntryBytes(b.head.key)
		b.unlink(b.head)
	}
	return freed
}

func (b *memBackend) count() int64   { return int64(len(b.m)) }
func (b *memBackend) maxSeq() uint64 { return 0 }
func (b *memBackend) drop() error {
	b.m, b.peak = make(map[string]*memNode), shrink.Peak{}
	b.head, b.tail = nil, nil
	b.account(-b.bytes.Load())
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

package dedup

import (
	"cmp"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/broker/clock"
)

// Budget is the memory a broker's in-memory caches (non-durable
// exchanges, and every exchange of a broker without a data directory)
// may hold together. What they hold counts against the broker's memory
// alarm (MemoryBytes); once it passes Limit, the cache that recorded last
// has the largest caches evict their oldest entries until they are a
// sixteenth of Limit below it, each keeping at least its newest entry.
// So a cache declared with a large x-cache-size, fed distinct keys, stops
// at the budget instead of the machine's memory, evicting before its
// size as it would at its size: the oldest entries go first. Each cache
// that evicts for memory says so in the log once.
//
// A Budget is safe for concurrent use. Lock order: a cache's lock is
// never held while the budget's is taken (Seen records, releases the
// cache, then sheds); the budget's may be held while it takes a cache's.
type Budget struct {
	limit int64
	log   *slog.Logger
	used  atomic.Int64 // what the caches hold, by memEntryBytes

	mu     sync.Mutex
	caches map[*Cache]struct{}
}

// NewBudget returns a budget of limit bytes (at least one entry of a
// cache is kept whatever the limit). log, which may be nil, hears of the
// caches that evict for memory.
func NewBudget(limit int64, log *slog.Logger) *Budget {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Budget{limit: limit, log: log, caches: make(map[*Cache]struct{})}
}

// NewCache returns a cache in memory on the budget, as NewMemory does;
// name (its exchange and vhost) is what the log calls it. Drop or Release
// takes it off the budget.
func (b *Budget) NewCache(name string, c clock.Clock, size int64, ttl time.Duration) *Cache {
	mem := newMemBackend(b)
	cache := &Cache{b: mem, mem: mem, budget: b, name: name, clock: c, size: size, ttl: ttl}
	b.mu.Lock()
	b.caches[cache] = struct{}{}
	b.mu.Unlock()
	return cache
}

// MemoryBytes returns what the budget's caches hold (storage.MemoryReporter).
func (b *Budget) MemoryBytes() int64 { return b.used.Load() }

// Limit is the budget's limit in bytes.
func (b *Budget) Limit() int64 { return b.limit }

func (b *Budget) over() bool { return b.used.Load() > b.limit }

func (b *Budget) remove(c *Cache) {
	b.mu.Lock()
	delete(b.caches, c)
	b.mu.Unlock()
}

// shed has the largest caches evict their oldest entries until the
// budget is a sixteenth below its limit (so that the next records need no
// shedding), or every cache is down to its newest entry.
func (b *Budget) shed() {
	b.mu.Lock()
	defer b.mu.Unlock()
	target := b.limit - b.limit/16
	if b.used.Load() <= target {
		return // another recorder shed meanwhile
	}
	bySize := make([]*Cache, 0, len(b.caches))
	for c := range b.caches {
		bySize = append(bySize, c)
	}
	slices.SortFunc(bySize, func(x, y *Cache) int { return cmp.Compare(y.MemoryBytes(), x.MemoryBytes()) })
	for _, c := range bySize {
		over := b.used.Load() - target
		if over <= 0 {
			return
		}
		c.mu.Lock()
		freed := c.mem.evictOldest(over)
		first := freed > 0 && !c.warned
		c.warned = c.warned || freed > 0
		entries, held := c.mem.count(), c.mem.bytes.Load()
		c.mu.Unlock()
		if first {
			b.log.Warn("dedup: the in-memory deduplication caches hold their memory budget: the largest evict their oldest entries before x-cache-size",
				"cache", c.name, "entries", entries, "bytes", held, "budget", b.limit)
		}
	}
}

package memory

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/warrenmq/broker/storage"
)

// Store is an in-memory storage.ShardStore. The zero value is not usable:
// call New.
type Store struct {
	shards sync.Map // shard name -> *shard
	// bytes is the Properties+Body bytes of every live record: the message
	// data this store holds, read by the broker's memory alarm (Bytes).
	bytes atomic.Int64
}

var (
	_ storage.ShardStore     = (*Store)(nil)
	_ storage.MemoryReporter = (*Store)(nil)
)

// New returns an empty Store.
func New() *Store {
	return &Store{}
}

// chunkSize is the number of slots in a chunk: large enough that a chunk
// allocation is rare next to the appends that fill it, small enough (about
// 15 KiB) that a queue holding a few messages costs little. An empty shard
// holds no chunk at all.
const chunkSize = 128

// chunk is a fixed run of slots. Chunks leave a shard only once every slot in
// them is dead, and a dead slot is zeroed, so a released chunk is all zeroes
// and can be reused as it is.
type chunk [chunkSize]slot

// chunkPool recycles released chunks, so a queue that is consumed as fast as
// it is filled appends without allocating.
var chunkPool = sync.Pool{New: func() any { return new(chunk) }}

// shard is one queue's log: a deque of chunks indexed by offset. Every field
// is guarded by mu.
type shard struct {
	mu struct {
		sync.Mutex
		// dead is set by DeleteShard, after which this shard is no longer in
		// the map; a writer that raced with the delete looks the name up
		// again rather than writing into a log nobody can see.
		dead bool
		// base is the offset of chunks[0][0]. Slot i (counted from base)
		// lives at chunks[i/chunkSize][i%chunkSize].
		base   uint64
		chunks []*chunk
		// used counts the slots filled since base: the next offset is
		// base+used.
		used int
		// head is the first live slot: slots [0, head) are all dead, and
		// when live > 0, slot head is live.
		head int
		live uint64
		// bytes is this shard's share of Store.bytes, so DeleteShard
		// can take it back without visiting every slot.
		bytes int64
	}
}

type slot struct {
	rec  storage.Record
	live bool
}

func (sh *shard) slotLocked(i int) *slot {
	return &sh.mu.chunks[i/chunkSize][i%chunkSize]
}

// MemoryBytes returns the Properties and Body bytes of every live record in
// the store: the message data it keeps in memory (storage.MemoryReporter).
// It is exact and cheap (one atomic load), so the broker's memory alarm
// polls it. Safe from any goroutine.
func (s *Store) MemoryBytes() int64 { return s.bytes.Load() }

// recordBytes is what one record counts in MemoryBytes.
func recordBytes(rec *storage.Record) int64 {
	return int64(len(rec.Properties) + len(rec.Body))
}

// lookup returns the shard named name, or nil when it does not exist.
func (s *Store) lookup(name string) *shard {
	v, ok := s.shards.Load(name)
	if !ok {
		return nil
	}
	return v.(*shard)
}

// Append implements storage.ShardStore. It keeps references to each record's
// Properties and Body: see the package comment.
func (s *Store) Append(ctx context.Context, name string, recs []storage.Record) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("storage/memory: append to shard %q: %w", name, err)
	}
	for {
		sh := s.lookup(name)
		if sh == nil {
			v, _ := s.shards.LoadOrStore(name, &shard{})
			sh = v.(*shard)
		}
		sh.mu.Lock()
		if sh.mu.dead {
			// DeleteShard removed it between lookup and Lock: retry on
			// the shard that replaces it.
			sh.mu.Unlock()
			continue
		}
		first, n := sh.appendLocked(recs)
		sh.mu.Unlock()
		s.bytes.Add(n)
		return first, nil
	}
}

// appendLocked appends recs and returns the first offset and the bytes
// added.
func (sh *shard) appendLocked(recs []storage.Record) (first uint64, added int64) {
	first = sh.mu.base + uint64(sh.mu.used)
	for i := range recs {
		added += recordBytes(&recs[i])
		recs[i].Offset = first + uint64(i)
		if sh.mu.used == len(sh.mu.chunks)*chunkSize {
			sh.mu.chunks = append(sh.mu.chunks, chunkPool.Get().(*chunk))
		}
		*sh.slotLocked(sh.mu.used) = slot{rec: recs[i], live: true}
		sh.mu.used++
	}
	sh.mu.live += uint64(len(recs))
	sh.mu.bytes += added
	return first, added
}

// Read implements storage.ShardStore. The records returned share their
// Properties and Body with the store: callers must not modify those bytes.
func (s *Store) Read(ctx context.Context, name string, from uint64, max int) ([]storage.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("storage/memory: read shard %q: %w", name, err)
	}
	sh := s.lookup(name)
	if sh == nil || max < 1 {
		return nil, nil
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.readLocked(from, max), nil
}

func (sh *shard) readLocked(from uint64, max int) []storage.Record {
	if sh.mu.live == 0 {
		return nil
	}
	start := sh.mu.head
	if from > sh.mu.base+uint64(start) {
		if from-sh.mu.base >= uint64(sh.mu.used) {
			return nil
		}
		start = int(from - sh.mu.base)
	}
	// Never size the result by max alone: max may be math.MaxInt.
	n := min(max, int(min(sh.mu.live, uint64(sh.mu.used-start))))
	out := make([]storage.Record, 0, n)
	for i := start; i < sh.mu.used && len(out) < n; i++ {
		if sl := sh.slotLocked(i); sl.live {
			out = append(out, sl.rec)
		}
	}
	return out
}

// DeleteByOffsets implements storage.ShardStore.
func (s *Store) DeleteByOffsets(ctx context.Context, name string, offsets []uint64) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("storage/memory: delete from shard %q: %w", name, err)
	}
	sh := s.lookup(name)
	if sh == nil || len(offsets) == 0 {
		return nil
	}
	sh.mu.Lock()
	freed := sh.deleteLocked(offsets)
	sh.mu.Unlock()
	s.bytes.Add(-freed)
	return nil
}

// deleteLocked deletes offsets and returns the bytes freed.
func (sh *shard) deleteLocked(offsets []uint64) (freed int64) {
	lo := sh.mu.base + uint64(sh.mu.head)
	hi := sh.mu.base + uint64(sh.mu.used)
	for _, off := range offsets {
		if off < lo || off >= hi {
			continue // deleted long ago, or never appended
		}
		sl := sh.slotLocked(int(off - sh.mu.base))
		if !sl.live {
			continue
		}
		freed += recordBytes(&sl.rec)
		// Clear the whole slot, not just the flag, so the message's bytes
		// can be collected now rather than when its chunk is released.
		*sl = slot{}
		sh.mu.live--
	}
	for sh.mu.head < sh.mu.used && !sh.slotLocked(sh.mu.head).live {
		sh.mu.head++
	}
	sh.releaseDeadChunksLocked()
	sh.mu.bytes -= freed
	return freed
}

// releaseDeadChunksLocked returns the chunks wholly before head to the pool,
// and every chunk once the shard is empty, so an idle queue holds none.
func (sh *shard) releaseDeadChunksLocked() {
	dead := sh.mu.head / chunkSize
	if sh.mu.head == sh.mu.used {
		dead = len(sh.mu.chunks)
	}
	if dead == 0 {
		return
	}
	for i, c := range sh.mu.chunks[:dead] {
		chunkPool.Put(c)
		sh.mu.chunks[i] = nil
	}
	if sh.mu.head == sh.mu.used {
		// Empty: start over, slot 0 at the next offset.
		sh.mu.chunks = nil
		sh.mu.base += uint64(sh.mu.used)
		sh.mu.used, sh.mu.head = 0, 0
		return
	}
	// Slicing off the front lets append reuse the rest of the array and
	// reallocate it when it runs out; the pointers copied then are few.
	sh.mu.chunks = sh.mu.chunks[dead:]
	n := dead * chunkSize
	sh.mu.base += uint64(n)
	sh.mu.used -= n
	sh.mu.head -= n
}

// FirstOffset implements storage.ShardStore.
func (s *Store) FirstOffset(ctx context.Context, name string) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("storage/memory: first offset of shard %q: %w", name, err)
	}
	sh := s.lookup(name)
	if sh == nil {
		return 0, nil
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	// Either slot head is live, or head == used and this is the next
	// offset to assign.
	return sh.mu.base + uint64(sh.mu.head), nil
}

// Count implements storage.ShardStore.
func (s *Store) Count(ctx context.Context, name string) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("storage/memory: count shard %q: %w", name, err)
	}
	sh := s.lookup(name)
	if sh == nil {
		return 0, nil
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.mu.live, nil
}

// DeleteShard implements storage.ShardStore. The next Append to name starts
// again at offset 0.
func (s *Store) DeleteShard(ctx context.Context, name string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("storage/memory: delete shard %q: %w", name, err)
	}
	sh := s.lookup(name)
	if sh == nil {
		return nil
	}
	sh.mu.Lock()
	defer sh.mu.Unlock()
	s.bytes.Add(-sh.mu.bytes)
	sh.mu.bytes = 0
	// Removing it from the map while holding its lock means a writer that
	// finds it dead will not find it again.
	sh.mu.dead = true
	s.shards.CompareAndDelete(name, sh)
	// The chunks may hold live records, so they are not all zero: leave
	// them to the collector rather than the pool.
	sh.mu.chunks = nil
	sh.mu.base, sh.mu.used, sh.mu.head, sh.mu.live = 0, 0, 0, 0
	return nil
}

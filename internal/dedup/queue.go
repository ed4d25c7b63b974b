package dedup

import (
	"context"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/memuse"
	"github.com/warrenmq/broker/internal/shrink"
	"github.com/warrenmq/broker/storage"
)

// Key returns the cache key of a message's x-deduplication-header value,
// typed so that the string "1" and the integer 1 differ (the plugin keys
// by the Erlang term) while integers of different widths with one value
// are one key. ok is false when the header is absent, or an array or
// table (the plugin does not handle those): such a message is not
// checked.
func Key(headers map[string]any) (key []byte, ok bool) {
	v, present := headers["x-deduplication-header"]
	if !present {
		return nil, false
	}
	if i, isInt := Int(v); isInt {
		return strconv.AppendInt([]byte{'i'}, i, 10), true
	}
	switch v := v.(type) {
	case nil:
		return []byte{'v'}, true
	case string:
		return append([]byte{'s'}, v...), true
	case []byte:
		return append([]byte{'s'}, v...), true
	case uint64:
		if v <= math.MaxInt64 {
			return strconv.AppendInt([]byte{'i'}, int64(v), 10), true
		}
		return strconv.AppendUint([]byte{'i'}, v, 10), true
	case bool:
		return strconv.AppendBool([]byte{'b'}, v), true
	case float32:
		return strconv.AppendFloat([]byte{'f'}, float64(v), 'g', -1, 64), true
	case float64:
		return strconv.AppendFloat([]byte{'f'}, v, 'g', -1, 64), true
	case time.Time:
		return strconv.AppendInt([]byte{'t'}, v.Unix(), 10), true
	case amqp.Decimal:
		return strconv.AppendInt(append([]byte{'d'}, v.Scale, ':'), int64(v.Value), 10), true
	}
	return nil, false
}

// Int reads an AMQP integer of any width but unsigned 64-bit.
func Int(v any) (int64, bool) {
	switch n := v.(type) {
	case int8:
		return int64(n), true
	case int16:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case int:
		return int64(n), true
	case uint8:
		return int64(n), true
	case uint16:
		return int64(n), true
	case uint32:
		return int64(n), true
	}
	return 0, false
}

// recordKey is the deduplication key of a stored record.
func recordKey(rec *storage.Record) (string, bool) {
	p, err := amqp.DecodeProperties(rec.Properties)
	if err != nil {
		return "", false
	}
	k, ok := Key(p.Headers)
	return string(k), ok
}

// QueueStore is the shard store of one queue declared with
// x-message-deduplication: true (rabbitmq-message-deduplication's queue
// deduplication): it knows the deduplication key of every message in the
// queue, from the Append that stored it to the delete that removed it
// (ack, expiry, dead-lettering, a limit, purge: every way out deletes the
// record), and Admit refuses a message whose key is in the queue or on
// its way in. The keys are in memory, one map entry per message that has
// one, counted against the memory alarm (queueKeyBytes each); Load
// rebuilds them from the stored records at start.
type QueueStore struct {
	storage.ShardStore
	held *memuse.Counter

	mu       sync.Mutex
	byKey    map[string]int // messages in the queue (or being appended) per key
	byOffset map[uint64]string
	// bytes is what the two maps hold, by queueKeyBytes, as added to held.
	bytes int64
	// The maps' peaks: each is rebuilt once it shrank to a quarter
	// (shrink.Map), so a queue that held many messages gives their
	// tables back once drained.
	keyPeak, offsetPeak shrink.Peak
}

// The heap an entry of QueueStore's maps costs besides its key's bytes:
// the key's header and the count or offset, at the map's load factor.
// TestQueueKeyBytes checks them against the live heap.
const (
	keyCountOverhead  = 48 // byKey: string header, int
	offsetKeyOverhead = 48 // byOffset: uint64, string header
)

// NewQueueStore wraps inner for one deduplicating queue, counting the
// memory of its keys in held (nil: not counted). When inner syncs
// (storage.Syncer), so does the result.
func NewQueueStore(inner storage.ShardStore, held *memuse.Counter) (*QueueStore, storage.ShardStore) {
	s := &QueueStore{ShardStore: inner, held: held, byKey: make(map[string]int), byOffset: make(map[uint64]string)}
	if sy, ok := inner.(storage.Syncer); ok {
		return s, syncingQueueStore{s, sy}
	}
	return s, s
}

type syncingQueueStore struct {
	*QueueStore
	sy storage.Syncer
}

func (s syncingQueueStore) Sync(ctx context.Context) error { return s.sy.Sync(ctx) }

// Load reads the keys of the messages shard holds.
func (s *QueueStore) Load(ctx context.Context, shard string) error {
	from, err := s.ShardStore.FirstOffset(ctx, shard)
	if err != nil {
		return err
	}
	for {
		recs, err := s.ShardStore.Read(ctx, shard, from, 1024)
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			return nil
		}
		s.mu.Lock()
		for i := range recs {
			if k, ok := recordKey(&recs[i]); ok {
				s.addKeyLocked(k)
				s.setOffsetLocked(recs[i].Offset, k)
			}
		}
		s.mu.Unlock()
		from = recs[len(recs)-1].Offset + 1
	}
}

// Admit reports whether rec may enter the queue: it has no key, or no
// message with its key is in the queue. An admitted key counts as in the
// queue from here on (until its Append fails or its record is deleted),
// so of two publishes of one key only the first is admitted. The queue's
// actor calls it for each publish, in order.
func (s *QueueStore) Admit(rec *storage.Record) bool {
	k, ok := recordKey(rec)
	if !ok {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byKey[k] > 0 {
		return false
	}
	s.addKeyLocked(k)
	return true
}

// Len returns how many keys the queue holds.
func (s *QueueStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byKey)
}

// MemoryBytes returns what the queue's keys hold in the heap, by the
// estimate counted in held.
func (s *QueueStore) MemoryBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

func (s *QueueStore) Append(ctx context.Context, shard string, recs []storage.Record) (uint64, error) {
	first, err := s.ShardStore.Append(ctx, shard, recs)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range recs {
		k, ok := recordKey(&recs[i])
		if !ok {
			continue
		}
		if err != nil {
			s.releaseLocked(k) // not stored: no longer on its way in
			continue
		}
		s.setOffsetLocked(recs[i].Offset, k)
	}
	return first, err
}

func (s *QueueStore) account(n int64) {
	s.bytes += n
	s.held.Add(n)
}

func (s *QueueStore) addKeyLocked(k string) {
	if s.byKey[k]++; s.byKey[k] == 1 {
		s.account(int64(len(k)) + keyCountOverhead)
	}
}

func (s *QueueStore) releaseLocked(k string) {
	if s.byKey[k]--; s.byKey[k] <= 0 {
		delete(s.byKey, k)
		s.byKey = shrink.Map(s.byKey, &s.keyPeak)
		s.account(-int64(len(k)) - keyCountOverhead)
	}
}

func (s *QueueStore) setOffsetLocked(off uint64, k string) {
	if old, ok := s.byOffset[off]; ok {
		s.account(-int64(len(old)) - offsetKeyOverhead)
	}
	s.byOffset[off] = k
	s.account(int64(len(k)) + offsetKeyOverhead)
}

func (s *QueueStore) DeleteByOffsets(ctx context.Context, shard string, offsets []uint64) error {
	if err := s.ShardStore.DeleteByOffsets(ctx, shard, offsets); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, off := range offsets {
		if k, ok := s.byOffset[off]; ok {
			delete(s.byOffset, off)
			s.byOffset = shrink.Map(s.byOffset, &s.offsetPeak)
			s.account(-int64(len(k)) - offsetKeyOverhead)
			s.releaseLocked(k)
		}
	}
	return nil
}

func (s *QueueStore) DeleteShard(ctx context.Context, shard string) error {
	if err := s.ShardStore.DeleteShard(ctx, shard); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byKey, s.byOffset = make(map[string]int), make(map[uint64]string)
	s.keyPeak, s.offsetPeak = shrink.Peak{}, shrink.Peak{}
	s.account(-s.bytes)
	return nil
}

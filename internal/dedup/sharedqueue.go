package dedup

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"time"

	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/internal/memuse"
	"github.com/warrenmq/broker/internal/shrink"
	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/storage"
)

// SharedQueueStore is QueueStore for a queue that several brokers serve
// (shared mode: a cluster's durable queue), which any of them appends to
// and deletes from. The keys in the queue are records of the shared store
// (meta.Records), one per key:
//
//	'k' 'q' uvarint(len(shard)) shard key -> 'r' time(8)   reserved: being appended since time
//	                                      -> 'o' offset(8) the message at offset carries it
//
// Admit reserves a key with one conditional update, so of two publishes
// of one key on two brokers exactly one is admitted; Append turns the
// reservation into the message's offset; deleting the message deletes the
// record. A record is only trusted while it is true: one naming an offset
// whose message is gone, or a reservation older than reserveFor (its
// broker died between Admit and Append), is taken over, so a crash never
// leaves a key refused for ever.
type SharedQueueStore struct {
	storage.ShardStore
	rs    meta.Records
	shard string
	clock clock.Clock

	held *memuse.Counter

	mu       sync.Mutex
	reserved map[string][]byte // key -> the reservation this broker wrote
	byOffset map[uint64]string // keys of the messages this broker appended
	// bytes is what byOffset holds (len(key)+offsetKeyOverhead an entry),
	// as added to held; offsetPeak rebuilds it once it shrank
	// (shrink.Map). Reservations last an append and are not counted.
	bytes      int64
	offsetPeak shrink.Peak
}

// reserveFor is how long a reservation holds without its message: far
// longer than an append takes.
const reserveFor = time.Minute

const (
	kindQueueKey = 'q'
	stateReserve = 'r'
	stateOffset  = 'o'
)

// NewSharedQueueStore wraps inner, the shared shard store, for the
// deduplicating queue whose shard is shard, counting the memory of the
// keys it keeps in held (nil: not counted). When inner syncs
// (storage.Syncer), so does the result.
func NewSharedQueueStore(inner storage.ShardStore, rs meta.Records, shard string, c clock.Clock, held *memuse.Counter) (*SharedQueueStore, storage.ShardStore) {
	s := &SharedQueueStore{ShardStore: inner, rs: rs, shard: shard, clock: c, held: held,
		reserved: make(map[string][]byte), byOffset: make(map[uint64]string)}
	if sy, ok := inner.(storage.Syncer); ok {
		return s, syncingSharedQueueStore{s, sy}
	}
	return s, s
}

type syncingSharedQueueStore struct {
	*SharedQueueStore
	sy storage.Syncer
}

func (s syncingSharedQueueStore) Sync(ctx context.Context) error { return s.sy.Sync(ctx) }

func (s *SharedQueueStore) prefix() []byte {
	p := []byte{keyPrefix, kindQueueKey}
	p = binary.AppendUvarint(p, uint64(len(s.shard)))
	return append(p, s.shard...)
}

func (s *SharedQueueStore) recKey(k string) []byte { return append(s.prefix(), k...) }

func stateValue(state byte, n uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{state}, n)
}

func (s *SharedQueueStore) get(k []byte) ([]byte, error) {
	var out []byte
	err := s.rs.ScanRecords(k, nil, func(key, v []byte) bool {
		if bytes.Equal(key, k) {
			out = bytes.Clone(v)
		}
		return false
	})
	return out, err
}

// holds reports whether the record value cur still stands for a message
// in the queue (or one on its way in).
func (s *SharedQueueStore) holds(ctx context.Context, cur []byte, k string) (bool, error) {
	if len(cur) != 9 {
		return false, nil // corrupt: take it over
	}
	n := binary.BigEndian.Uint64(cur[1:])
	switch cur[0] {
	case stateReserve:
		return s.clock.Now().UnixNano()-int64(n) < int64(reserveFor), nil
	case stateOffset:
		recs, err := s.ShardStore.Read(ctx, s.shard, n, 1)
		if err != nil {
			return false, err
		}
		if len(recs) == 0 || recs[0].Offset != n {
			return false, nil
		}
		got, ok := recordKey(&recs[0])
		return ok && got == k, nil
	}
	return false, nil
}

// Admit reports whether rec may enter the queue (see QueueStore.Admit),
// deciding with the other brokers through the shared records. If the
// store cannot answer, rec is admitted: a duplicate is preferred to a
// loss.
func (s *SharedQueueStore) Admit(rec *storage.Record) bool {
	k, ok := recordKey(rec)
	if !ok {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	rk := s.recKey(k)
	for range sharedTries {
		cur, err := s.get(rk)
		if err != nil {
			return true
		}
		if cur != nil {
			held, err := s.holds(ctx, cur, k)
			if err != nil {
				return true
			}
			if held {
				return false
			}
		}
		res := stateValue(stateReserve, uint64(s.clock.Now().UnixNano()))
		ok, err := s.rs.UpdateRecords(ctx, meta.RecordUpdate{
			Match: []meta.Record{{Key: rk, Value: cur}},
			Set:   []meta.Record{{Key: rk, Value: res}},
		})
		if err != nil {
			return true
		}
		if ok {
			s.mu.Lock()
			s.reserved[k] = res
			s.mu.Unlock()
			return true
		}
	}
	return false // lost every race: another publish of the key got in
}

// Append appends recs and turns their keys' reservations into their
// offsets, or drops them when the append failed.
func (s *SharedQueueStore) Append(ctx context.Context, shard string, recs []storage.Record) (uint64, error) {
	first, err := s.ShardStore.Append(ctx, shard, recs)
	var u meta.RecordUpdate
	s.mu.Lock()
	for i := range recs {
		k, ok := recordKey(&recs[i])
		if !ok {
			continue
		}
		res, ok := s.reserved[k]
		if !ok {
			continue
		}
		delete(s.reserved, k)
		rk := s.recKey(k)
		u.Match = append(u.Match, meta.Record{Key: rk, Value: res})
		switch {
		case err == nil:
			u.Set = append(u.Set, meta.Record{Key: rk, Value: stateValue(stateOffset, recs[i].Offset)})
			s.setOffsetLocked(recs[i].Offset, k)
		case errors.Is(err, storage.ErrOutcomeUnknown):
			// Maybe stored: the reservation stands until it goes stale.
			u.Match = u.Match[:len(u.Match)-1]
		default:
			u.Delete = append(u.Delete, rk)
		}
	}
	s.mu.Unlock()
	s.update(ctx, u)
	return first, err
}

func (s *SharedQueueStore) account(n int64) {
	s.bytes += n
	s.held.Add(n)
}

func (s *SharedQueueStore) setOffsetLocked(off uint64, k string) {
	s.deleteOffsetLocked(off)
	s.byOffset[off] = k
	s.account(int64(len(k)) + offsetKeyOverhead)
}

func (s *SharedQueueStore) deleteOffsetLocked(off uint64) {
	if k, ok := s.byOffset[off]; ok {
		delete(s.byOffset, off)
		s.byOffset = shrink.Map(s.byOffset, &s.offsetPeak)
		s.account(-int64(len(k)) - offsetKeyOverhead)
	}
}

// update applies u, or, when one of its conditions fails (a record taken
// over meanwhile), each key's part alone, so the others still apply.
func (s *SharedQueueStore) update(ctx context.Context, u meta.RecordUpdate) {
	if len(u.Match) == 0 {
		return
	}
	ok, err := s.rs.UpdateRecords(ctx, u)
	if err != nil || ok || len(u.Match) == 1 {
		return
	}
	for _, m := range u.Match {
		one := meta.RecordUpdate{Match: []meta.Record{m}}
		for _, r := range u.Set {
			if bytes.Equal(r.Key, m.Key) {
				one.Set = append(one.Set, r)
			}
		}
		for _, k := range u.Delete {
			if bytes.Equal(k, m.Key) {
				one.Delete = append(one.Delete, k)
			}
		}
		_, _ = s.rs.UpdateRecords(ctx, one)
	}
}

// DeleteByOffsets deletes the records and the keys' records that name
// them. The key of a message another broker appended is read from the
// record before it goes.
func (s *SharedQueueStore) DeleteByOffsets(ctx context.Context, shard string, offsets []uint64) error {
	keys := make(map[uint64]string, len(offsets))
	s.mu.Lock()
	var unknown []uint64
	for _, off := range offsets {
		if k, ok := s.byOffset[off]; ok {
			keys[off] = k
		} else {
			unknown = append(unknown, off)
		}
	}
	s.mu.Unlock()
	for _, off := range unknown {
		recs, err := s.ShardStore.Read(ctx, shard, off, 1)
		if err != nil {
			return err
		}
		if len(recs) > 0 && recs[0].Offset == off {
			if k, ok := recordKey(&recs[0]); ok {
				keys[off] = k
			}
		}
	}
	if err := s.ShardStore.DeleteByOffsets(ctx, shard, offsets); err != nil {
		return err
	}
	var u meta.RecordUpdate
	s.mu.Lock()
	for off, k := range keys {
		s.deleteOffsetLocked(off)
		rk := s.recKey(k)
		u.Match = append(u.Match, meta.Record{Key: rk, Value: stateValue(stateOffset, off)})
		u.Delete = append(u.Delete, rk)
	}
	s.mu.Unlock()
	s.update(ctx, u)
	return nil
}

// DeleteShard deletes the queue's records and its keys' records.
func (s *SharedQueueStore) DeleteShard(ctx context.Context, shard string) error {
	if err := s.ShardStore.DeleteShard(ctx, shard); err != nil {
		return err
	}
	s.mu.Lock()
	s.byOffset, s.offsetPeak = make(map[uint64]string), shrink.Peak{}
	clear(s.reserved)
	s.account(-s.bytes)
	s.mu.Unlock()
	p := s.prefix()
	for {
		var keys [][]byte
		if err := s.rs.ScanRecords(p, nil, func(k, _ []byte) bool {
			keys = append(keys, bytes.Clone(k))
			return len(keys) < 256
		}); err != nil || len(keys) == 0 {
			return err
		}
		if _, err := s.rs.UpdateRecords(ctx, meta.RecordUpdate{Delete: keys}); err != nil {
			return err
		}
	}
}

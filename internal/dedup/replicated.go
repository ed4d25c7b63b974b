package dedup

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"

	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/meta"
)

// Record layout of a replicated cache in a shared store's records
// (meta.Records; first byte 'k', as on Pebble):
//
//	entry: 'k' 'e' uvarint(len(scope)) scope key          -> expires(8) seq(8)
//	order: 'k' 'o' uvarint(len(scope)) scope seq(8) key   -> empty
//	count: 'k' 'n' uvarint(len(scope)) scope              -> 8-byte counter
//
// The key follows seq in the order key so that two brokers recording
// different keys with one seq never collide. kindCount is the count's
// kind byte.
const kindCount = 'n'

// replicated is a cache whose entries are records of a store every broker
// of a cluster shares: each check-and-record is one conditional update
// (the key's entry must be what this broker read: absent, or the expired
// entry it replaces), so of two brokers recording one key at once exactly
// one succeeds, and the other, reading again, finds the key.
type replicated struct {
	rs    meta.Records
	scope string

	mu      sync.Mutex
	lastSeq uint64 // insertion numbers: the clock's nanoseconds, made increasing here
}

// sharedTimeout bounds one check-and-record: the store answers once a
// quorum has the write; without one the publish could not be confirmed
// either, and the message is routed (a duplicate rather than a loss).
const sharedTimeout = 10 * time.Second

// sharedTries bounds the re-reads after a lost race: each lost race means
// the key was written meanwhile, which the next read sees.
const sharedTries = 8

// OpenReplicated returns the cache named scope (a vhost and exchange, say)
// in rs, shared with every broker that opens it there.
func OpenReplicated(rs meta.Records, scope string, c clock.Clock, size int64, ttl time.Duration) *Cache {
	return &Cache{shared: &replicated{rs: rs, scope: scope}, clock: c, size: size, ttl: ttl}
}

func (r *replicated) prefix(kind byte) []byte {
	p := []byte{keyPrefix, kind}
	p = binary.AppendUvarint(p, uint64(len(r.scope)))
	return append(p, r.scope...)
}

func (r *replicated) entryKey(key []byte) []byte { return append(r.prefix(kindEntry), key...) }

func (r *replicated) orderKey(seq uint64, key []byte) []byte {
	return append(binary.BigEndian.AppendUint64(r.prefix(kindOrder), seq), key...)
}

// get reads one record of the local replica; nil when missing.
func (r *replicated) get(k []byte) ([]byte, error) {
	var out []byte
	err := r.rs.ScanRecords(k, nil, func(key, v []byte) bool {
		if bytes.Equal(key, k) {
			out = bytes.Clone(v)
		}
		return false
	})
	return out, err
}

func (r *replicated) nextSeq(now int64) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lastSeq = max(r.lastSeq+1, uint64(now))
	return r.lastSeq
}

// seen is Cache.Seen on the shared records.
func (r *replicated) seen(c *Cache, key []byte, ttl time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	ek := r.entryKey(key)
	for range sharedTries {
		now := c.clock.Now().UnixNano()
		old, err := r.get(ek)
		if err != nil {
			return false, fmt.Errorf("dedup: get: %w", err)
		}
		if len(old) != 16 && old != nil {
			return false, errCorrupt
		}
		if old != nil {
			if exp := int64(binary.BigEndian.Uint64(old)); exp == 0 || exp > now {
				return true, nil
			}
		}
		t := ttl
		if t == 0 {
			t = c.ttl
		}
		var expires int64
		if t > 0 {
			expires = now + int64(t)
		}
		seq := r.nextSeq(now)
		v := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, uint64(expires)), seq)
		u := meta.RecordUpdate{
			Match: []meta.Record{{Key: ek, Value: old}},
			Set:   []meta.Record{{Key: ek, Value: v}, {Key: r.orderKey(seq, key), Value: []byte{}}},
		}
		if old != nil {
			// Replaces the expired entry: its order key goes, the count
			// stays.
			u.Delete = [][]byte{r.orderKey(binary.BigEndian.Uint64(old[8:]), key)}
		} else {
			u.Add = []meta.Counter{{Key: r.prefix(kindCount), Delta: 1}}
		}
		ok, err := r.rs.UpdateRecords(ctx, u)
		if err != nil {
			return false, fmt.Errorf("dedup: record: %w", err)
		}
		if ok {
			return false, r.evict(ctx, c.size)
		}
	}
	return false, fmt.Errorf("dedup: key %q: lost %d races to record it", key, sharedTries)
}

// evict deletes the entries recorded first while more than size are held
// (no bound when size is 0). Brokers evicting at once each delete a
// different entry or none: each deletion requires the entry it read.
func (r *replicated) evict(ctx context.Context, size int64) error {
	if size <= 0 {
		return nil
	}
	for range sharedTries {
		if r.count() <= size {
			return nil
		}
		op := r.prefix(kindOrder)
		var ok bool
		var seq uint64
		var key []byte
		err := r.rs.ScanRecords(op, nil, func(k, _ []byte) bool {
			if len(k) >= len(op)+8 {
				seq, key, ok = binary.BigEndian.Uint64(k[len(op):]), bytes.Clone(k[len(op)+8:]), true
			}
			return false
		})
		if err != nil || !ok {
			return err
		}
		ek := r.entryKey(key)
		cur, err := r.get(ek)
		if err != nil {
			return err
		}
		u := meta.RecordUpdate{
			Present: [][]byte{r.orderKey(seq, key)},
			Delete:  [][]byte{r.orderKey(seq, key)},
		}
		if cur != nil && len(cur) == 16 && binary.BigEndian.Uint64(cur[8:]) == seq {
			u.Match = []meta.Record{{Key: ek, Value: cur}}
			u.Delete = append(u.Delete, ek)
			u.Add = []meta.Counter{{Key: r.prefix(kindCount), Delta: -1}}
		}
		if _, err := r.rs.UpdateRecords(ctx, u); err != nil {
			return fmt.Errorf("dedup: evict: %w", err)
		}
	}
	return nil
}

func (r *replicated) count() int64 {
	v, err := r.get(r.prefix(kindCount))
	if err != nil || len(v) != 8 {
		return 0
	}
	return int64(binary.BigEndian.Uint64(v))
}

// drop deletes the cache's records, a batch per update.
func (r *replicated) drop() error {
	ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
	defer cancel()
	for _, kind := range []byte{kindEntry, kindOrder} {
		p := r.prefix(kind)
		for {
			var keys [][]byte
			err := r.rs.ScanRecords(p, nil, func(k, _ []byte) bool {
				keys = append(keys, bytes.Clone(k))
				return len(keys) < 256
			})
			if err != nil {
				return fmt.Errorf("dedup: drop: %w", err)
			}
			if len(keys) == 0 {
				break
			}
			if _, err := r.rs.UpdateRecords(ctx, meta.RecordUpdate{Delete: keys}); err != nil {
				return fmt.Errorf("dedup: drop: %w", err)
			}
		}
	}
	_, err := r.rs.UpdateRecords(ctx, meta.RecordUpdate{Delete: [][]byte{r.prefix(kindCount)}})
	return err
}

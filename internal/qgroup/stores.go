package qgroup

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"
)

// The stores a broker in shared mode uses, each sending a queue's calls
// to its group and every other queue's to the fallback. Reads of a
// group's state read this member's replica as applied: a member's own
// writes are applied here when they return, and claims and cursor moves
// are conditional commands decided in log order, so a read that lags
// only makes a claim fail and be retried.

// Shards returns the member's storage.ShardStore.
func (m *Manager) Shards() *Shards { return &Shards{m: m} }

// Index returns the member's unacked.Index (and unacked.Claimer).
func (m *Manager) Index() *Index { return &Index{m: m} }

// Shards is a storage.ShardStore over the queue groups.
type Shards struct{ m *Manager }

var (
	_ storage.ShardStore     = (*Shards)(nil)
	_ storage.Syncer         = (*Shards)(nil)
	_ storage.MemoryReporter = (*Shards)(nil)
)

func (s *Shards) group(ctx context.Context, shard string) (*queueGroup, error) {
	k, ok := queueOfShard(shard)
	if !ok {
		return nil, nil
	}
	return s.m.lookup(ctx, k)
}

// Append returns once the records are committed by a quorum of the
// queue's group (each voter synced them) and applied on this member.
func (s *Shards) Append(ctx context.Context, shard string, recs []storage.Record) (uint64, error) {
	q, err := s.group(ctx, shard)
	if err != nil || q == nil {
		if err != nil {
			return 0, err
		}
		return s.m.cfg.Fallback.Shards.Append(ctx, shard, recs)
	}
	out, err := s.m.propose(ctx, q, appendCommand(recs))
	if err != nil {
		return 0, err
	}
	if len(out) != 8 {
		return 0, fmt.Errorf("%w: queue %q: the group answered an append with %d bytes", storage.ErrOutcomeUnknown, q.key.Name, len(out))
	}
	first := binary.BigEndian.Uint64(out)
	for i := range recs {
		recs[i].Offset = first + uint64(i)
	}
	return first, nil
}

func (s *Shards) Read(ctx context.Context, shard string, from uint64, max int) ([]storage.Record, error) {
	q, err := s.group(ctx, shard)
	if err != nil || q == nil {
		if err != nil {
			return nil, err
		}
		return s.m.cfg.Fallback.Shards.Read(ctx, shard, from, max)
	}
	if max < 1 {
		return []storage.Record{}, nil
	}
	return q.st.read(from, max)
}

func (s *Shards) DeleteByOffsets(ctx context.Context, shard string, offsets []uint64) error {
	q, err := s.group(ctx, shard)
	if err != nil || q == nil {
		if err != nil {
			return err
		}
		return s.m.cfg.Fallback.Shards.DeleteByOffsets(ctx, shard, offsets)
	}
	if len(offsets) == 0 {
		return ctx.Err()
	}
	_, err = s.m.propose(ctx, q, offsetsCommand(opDelOffsets, offsets))
	return err
}

func (s *Shards) FirstOffset(ctx context.Context, shard string) (uint64, error) {
	q, err := s.group(ctx, shard)
	if err != nil || q == nil {
		if err != nil {
			return 0, err
		}
		return s.m.cfg.Fallback.Shards.FirstOffset(ctx, shard)
	}
	return q.st.firstOffset(), nil
}

func (s *Shards) Count(ctx context.Context, shard string) (uint64, error) {
	q, err := s.group(ctx, shard)
	if err != nil || q == nil {
		if err != nil {
			return 0, err
		}
		return s.m.cfg.Fallback.Shards.Count(ctx, shard)
	}
	return q.st.count(), nil
}

func (s *Shards) DeleteShard(ctx context.Context, shard string) error {
	q, err := s.group(ctx, shard)
	if err != nil || q == nil {
		if err != nil {
			return err
		}
		return s.m.cfg.Fallback.Shards.DeleteShard(ctx, shard)
	}
	_, err = s.m.propose(ctx, q, []byte{opDelShard})
	return err
}

// Sync returns at once (after checking ctx): every write already is on a
// quorum's disks when it returns, in a group or in the fallback.
func (s *Shards) Sync(ctx context.Context) error { return ctx.Err() }

// MemoryBytes is what the groups' records on this member hold in the
// heap: nothing, they are on disk (Pebble's memtable and block cache are
// bounded by its options, whatever the backlog). It answers without
// walking the groups, so the memory alarm's poll costs the same with
// ten thousand idle queues as with none.
func (s *Shards) MemoryBytes() int64 { return 0 }

// Index is an unacked.Index and unacked.Claimer over the queue groups.
type Index struct{ m *Manager }

var (
	_ unacked.Index   = (*Index)(nil)
	_ unacked.Claimer = (*Index)(nil)
)

func checkStates(entries []unacked.Entry) error {
	for i, e := range entries {
		if e.State != unacked.Delivered && e.State != unacked.Returned {
			return fmt.Errorf("qgroup: unacked entry %d (queue %q offset %d) has invalid state %d", i, e.Queue, e.Offset, e.State)
		}
	}
	return nil
}

// byQueue splits entries by queue, keeping their order within each.
func byQueue[T any](items []T, key func(T) meta.QueueKey) (order []meta.QueueKey, groups map[meta.QueueKey][]T) {
	groups = map[meta.QueueKey][]T{}
	for _, it := range items {
		k := key(it)
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], it)
	}
	return order, groups
}

func entryQueue(e unacked.Entry) meta.QueueKey { return meta.QueueKey{VHost: e.VHost, Name: e.Queue} }
func keyQueue(k unacked.Key) meta.QueueKey     { return meta.QueueKey{VHost: k.VHost, Name: k.Queue} }

// Put writes entries: all or none within a queue (one command in its
// group); entries of several queues are one write per queue.
func (x *Index) Put(ctx context.Context, entries []unacked.Entry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkStates(entries); err != nil {
		return err
	}
	order, groups := byQueue(entries, entryQueue)
	return x.perQueue(ctx, order, func(q *queueGroup, k meta.QueueKey) error {
		if q == nil {
			return x.m.cfg.Fallback.Index.Put(ctx, groups[k])
		}
		_, err := x.m.propose(ctx, q, putCommand(groups[k]))
		return err
	})
}

// perQueue calls fn with each queue's group (nil: the fallback's) in
// order, and joins their errors: one write per queue.
func (x *Index) perQueue(ctx context.Context, order []meta.QueueKey, fn func(*queueGroup, meta.QueueKey) error) error {
	var errs []error
	for _, k := range order {
		q, err := x.m.lookup(ctx, k)
		if err == nil {
			err = fn(q, k)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func (x *Index) Get(ctx context.Context, k unacked.Key) (unacked.Entry, error) {
	q, err := x.m.lookup(ctx, keyQueue(k))
	if err != nil {
		return unacked.Entry{}, err
	}
	if q == nil {
		return x.m.cfg.Fallback.Index.Get(ctx, k)
	}
	e, ok := q.st.entry(k.Offset)
	if !ok {
		return e, fmt.Errorf("%w: offset %d of queue %q in vhost %q", unacked.ErrNotFound, k.Offset, k.Queue, k.VHost)
	}
	return e, nil
}

func (x *Index) Delete(ctx context.Context, keys []unacked.Key) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	order, groups := byQueue(keys, keyQueue)
	return x.perQueue(ctx, order, func(q *queueGroup, k meta.QueueKey) error {
		if q == nil {
			return x.m.cfg.Fallback.Index.Delete(ctx, groups[k])
		}
		offs := make([]uint64, len(groups[k]))
		for i, key := range groups[k] {
			offs[i] = key.Offset
		}
		_, err := x.m.propose(ctx, q, offsetsCommand(opDelete, offs))
		return err
	})
}

func (x *Index) Queue(ctx context.Context, vhost, queue string, fn func(unacked.Entry) bool) error {
	q, err := x.m.lookup(ctx, meta.QueueKey{VHost: vhost, Name: queue})
	if err != nil {
		return err
	}
	if q == nil {
		return x.m.cfg.Fallback.Index.Queue(ctx, vhost, queue, fn)
	}
	for _, e := range q.st.entriesSorted() {
		if !fn(e) {
			return nil
		}
	}
	return nil
}

// Scan calls fn for the fallback's entries, then each group's on this
// member.
func (x *Index) Scan(ctx context.Context, fn func(unacked.Entry) bool) error {
	more := true
	if err := x.m.cfg.Fallback.Index.Scan(ctx, func(e unacked.Entry) bool { more = fn(e); return more }); err != nil || !more {
		return err
	}
	x.m.mu.Lock()
	qs := make([]*queueGroup, 0, len(x.m.byGroup))
	for _, q := range x.m.byGroup {
		qs = append(qs, q)
	}
	x.m.mu.Unlock()
	for _, q := range qs {
		for _, e := range q.st.entriesSorted() {
			if !fn(e) {
				return nil
			}
		}
	}
	return ctx.Err()
}

func (x *Index) DeleteQueue(ctx context.Context, vhost, queue string) error {
	q, err := x.m.lookup(ctx, meta.QueueKey{VHost: vhost, Name: queue})
	if err != nil {
		return err
	}
	if q == nil {
		return x.m.cfg.Fallback.Index.DeleteQueue(ctx, vhost, queue)
	}
	_, err = x.m.propose(ctx, q, []byte{opDelQueue})
	return err
}

// Claim is decided in the queue's group, in its log order (so by its
// leader), as meta/raft decides it for the queues it holds.
func (x *Index) Claim(ctx context.Context, c unacked.Claim) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := checkStates(c.Entries); err != nil {
		return false, err
	}
	q, err := x.m.lookup(ctx, meta.QueueKey{VHost: c.VHost, Name: c.Queue})
	if err != nil {
		return false, err
	}
	if q == nil {
		return x.m.cfg.Fallback.Index.Claim(ctx, c)
	}
	if !c.Move && len(c.Taken) == 0 && len(c.Entries) == 0 {
		return true, nil
	}
	for _, e := range c.Entries {
		if e.VHost != c.VHost || e.Queue != c.Queue {
			return false, fmt.Errorf("qgroup: a claim of queue %q holds an entry of queue %q", c.Queue, e.Queue)
		}
	}
	for _, k := range c.Taken {
		if k.VHost != c.VHost || k.Queue != c.Queue {
			return false, fmt.Errorf("qgroup: a claim of queue %q takes an entry of queue %q", c.Queue, k.Queue)
		}
	}
	out, err := x.m.propose(ctx, q, claimCommand(&c))
	if err != nil {
		return false, err
	}
	return len(out) == 1 && out[0] == 1, nil
}

// Offset is queue k's cursor (meta.Cursors).
func (m *Manager) Offset(ctx context.Context, k meta.QueueKey) (uint64, error) {
	q, err := m.lookup(ctx, k)
	if err != nil {
		return 0, err
	}
	if q == nil {
		return m.cfg.Fallback.Cursors.Offset(ctx, k)
	}
	return q.st.offset(), nil
}

// CompareAndSwapOffset moves queue k's cursor from old to new, decided in
// the queue's group.
func (m *Manager) CompareAndSwapOffset(ctx context.Context, k meta.QueueKey, old, new uint64) (bool, error) {
	q, err := m.lookup(ctx, k)
	if err != nil {
		return false, err
	}
	if q == nil {
		return m.cfg.Fallback.Cursors.CompareAndSwapOffset(ctx, k, old, new)
	}
	out, err := m.propose(ctx, q, casCommand(old, new))
	if err != nil {
		return false, err
	}
	return len(out) == 1 && out[0] == 1, nil
}

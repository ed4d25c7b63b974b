package raft

import (
	"context"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"

	"github.com/warrenmq/broker/internal/codec"
)

// read runs fn against the state DB after a linearizable barrier, unless
// the node is closing (the DB must not be read once Stop closed it).
func (n *Node) read(ctx context.Context, fn func(db *pebble.DB) error) error {
	if err := n.linearize(ctx); err != nil {
		return err
	}
	n.gate.RLock()
	defer n.gate.RUnlock()
	if n.gate.closed {
		return n.stoppedErr()
	}
	return fn(n.state)
}

// Shards returns the replicated storage.ShardStore on this node's group.
func (n *Node) Shards() *Shards { return &Shards{n: n} }

// Unacked returns the replicated unacked.Index on this node's group.
func (n *Node) Unacked() *Index { return &Index{n: n} }

// Shards is the group's storage.ShardStore. Every node holds every shard.
type Shards struct{ n *Node }

var (
	_ storage.ShardStore = (*Shards)(nil)
	_ storage.Syncer     = (*Shards)(nil)
)

// Append assigns offsets when the command is applied, from a per-shard
// counter in the replicated state, and returns once the records are
// committed by a quorum (each voter synced its log) and applied here.
// Persistent or not, every record is synced on a quorum. An error after
// which the records may still be stored matches storage.ErrOutcomeUnknown.
func (s *Shards) Append(ctx context.Context, shard string, recs []storage.Record) (uint64, error) {
	var c cmd
	c.append(shard, recs)
	ctxErr := ctx.Err()
	r, err := s.n.submit(ctx, &c)
	if err != nil {
		return 0, markOutcome(err, ctxErr)
	}
	for i := range recs {
		recs[i].Offset = r.val + uint64(i)
	}
	return r.val, nil
}

// Read returns up to max live records from offset from, linearizably.
func (s *Shards) Read(ctx context.Context, shard string, from uint64, max int) ([]storage.Record, error) {
	out := []storage.Record{}
	err := s.n.read(ctx, func(db *pebble.DB) error {
		if max < 1 {
			return nil
		}
		prefix := shardRecPrefix(shard)
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: recordKey(prefix, from), UpperBound: codec.Successor(prefix)})
		if err != nil {
			return fmt.Errorf("raft: read shard %q: %w", shard, err)
		}
		defer it.Close()
		for ok := it.First(); ok && len(out) < max; ok = it.Next() {
			k := it.Key()
			d := decoder{b: k[len(prefix):]}
			off := d.u64("record key")
			if err := d.done("record key"); err != nil {
				return err
			}
			v, err := it.ValueAndErr()
			if err != nil {
				return fmt.Errorf("raft: read shard %q: %w", shard, err)
			}
			r, err := readRecord(off, v)
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		return it.Error()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteByOffsets removes the given offsets; missing ones are ignored.
func (s *Shards) DeleteByOffsets(ctx context.Context, shard string, offsets []uint64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(offsets) == 0 {
		return nil
	}
	var c cmd
	c.delOffsets(shard, offsets)
	_, err := s.n.submit(ctx, &c)
	return err
}

// FirstOffset returns the lowest live offset, or the next offset when the
// shard is empty.
func (s *Shards) FirstOffset(ctx context.Context, shard string) (uint64, error) {
	var first uint64
	err := s.n.read(ctx, func(db *pebble.DB) error {
		prefix := shardRecPrefix(shard)
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: codec.Successor(prefix)})
		if err != nil {
			return fmt.Errorf("raft: read shard %q: %w", shard, err)
		}
		defer it.Close()
		if it.First() {
			d := decoder{b: it.Key()[len(prefix):]}
			first = d.u64("record key")
			return d.done("record key")
		}
		if err := it.Error(); err != nil {
			return fmt.Errorf("raft: read shard %q: %w", shard, err)
		}
		first, err = getU64(db, shardNextKey(shard))
		return err
	})
	return first, err
}

// Count returns the number of live records.
func (s *Shards) Count(ctx context.Context, shard string) (uint64, error) {
	var n uint64
	err := s.n.read(ctx, func(db *pebble.DB) error {
		var err error
		n, err = getU64(db, shardCountKey(shard))
		return err
	})
	return n, err
}

// DeleteShard removes every record of shard and its counters.
func (s *Shards) DeleteShard(ctx context.Context, shard string) error {
	var c cmd
	c.delShard(shard)
	_, err := s.n.submit(ctx, &c)
	return err
}

// Sync returns at once (after checking ctx): every write already is on a
// quorum's disks when it returns.
func (s *Shards) Sync(ctx context.Context) error { return ctx.Err() }

// Index is the group's unacked.Index.
type Index struct{ n *Node }

var (
	_ unacked.Index   = (*Index)(nil)
	_ unacked.Claimer = (*Index)(nil)
)

// checkStates rejects an entry whose state is neither Delivered nor
// Returned.
func checkStates(entries []unacked.Entry) error {
	for i, e := range entries {
		if e.State != unacked.Delivered && e.State != unacked.Returned {
			return fmt.Errorf("raft: unacked entry %d (queue %q offset %d) has invalid state %d",
				i, e.Queue, e.Offset, e.State)
		}
	}
	return nil
}

// Put inserts or replaces entries in one command: all or none.
func (x *Index) Put(ctx context.Context, entries []unacked.Entry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(entries) == 0 {
		return nil
	}
	if err := checkStates(entries); err != nil {
		return err
	}
	var c cmd
	var scratch []byte
	for i := range entries {
		scratch = codec.AppendEntry(scratch[:0], &entries[i])
		c.set(unackedKey(entries[i].Key), scratch)
	}
	_, err := x.n.submit(ctx, &c)
	return err
}

// Claim applies c as one command, decided when it is applied, in log
// order, on every node: unless, when c.Move, the cursor of c.VHost/c.Queue
// (the one Offset and CompareAndSwapOffset use; unset reads as 0) is at
// c.From, and every c.Taken key is an entry in state Returned, it reports
// false and writes nothing; otherwise it writes c.Entries and, when c.Move,
// sets the cursor to c.To. Of two claims racing for the same offsets or
// the same returned entries exactly one succeeds, whichever node they
// were made on. A claim with nothing to check or write succeeds without a
// proposal. An error leaves the outcome unknown, as for every write.
func (x *Index) Claim(ctx context.Context, c unacked.Claim) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := checkStates(c.Entries); err != nil {
		return false, err
	}
	if !c.Move && len(c.Taken) == 0 && len(c.Entries) == 0 {
		return true, nil
	}
	var cm cmd
	cm.claim(&c)
	r, err := x.n.submit(ctx, &cm)
	if err != nil {
		return false, err
	}
	return r.ok, nil
}

// Get returns the entry or an error matching unacked.ErrNotFound.
func (x *Index) Get(ctx context.Context, k unacked.Key) (unacked.Entry, error) {
	var e unacked.Entry
	err := x.n.read(ctx, func(db *pebble.DB) error {
		v, closer, err := db.Get(unackedKey(k))
		if errors.Is(err, pebble.ErrNotFound) {
			return fmt.Errorf("%w: offset %d of queue %q in vhost %q", unacked.ErrNotFound, k.Offset, k.Queue, k.VHost)
		}
		if err != nil {
			return fmt.Errorf("raft: read unacked entry: %w", err)
		}
		defer closer.Close()
		e, err = readEntry(k, v)
		return err
	})
	return e, err
}

// Delete removes entries; missing keys are ignored.
func (x *Index) Delete(ctx context.Context, keys []unacked.Key) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(keys) == 0 {
		return nil
	}
	var c cmd
	for _, k := range keys {
		c.del(unackedKey(k))
	}
	_, err := x.n.submit(ctx, &c)
	return err
}

// Queue calls fn for each entry of one queue in offset order until fn
// returns false. fn runs on a consistent view; it may call the Index.
func (x *Index) Queue(ctx context.Context, vhost, queue string, fn func(unacked.Entry) bool) error {
	return x.scan(ctx, unackedQueuePrefix(vhost, queue), fn)
}

// Scan calls fn for every entry until fn returns false.
func (x *Index) Scan(ctx context.Context, fn func(unacked.Entry) bool) error {
	return x.scan(ctx, []byte{'u'}, fn)
}

func (x *Index) scan(ctx context.Context, prefix []byte, fn func(unacked.Entry) bool) error {
	return x.n.read(ctx, func(db *pebble.DB) error {
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: codec.Successor(prefix)})
		if err != nil {
			return fmt.Errorf("raft: scan unacked: %w", err)
		}
		defer it.Close()
		for ok := it.First(); ok; ok = it.Next() {
			k, err := parseUnackedKey(it.Key())
			if err != nil {
				return err
			}
			v, err := it.ValueAndErr()
			if err != nil {
				return fmt.Errorf("raft: scan unacked: %w", err)
			}
			e, err := readEntry(k, v)
			if err != nil {
				return err
			}
			if !fn(e) {
				return nil
			}
		}
		return it.Error()
	})
}

// DeleteQueue removes every entry of one queue.
func (x *Index) DeleteQueue(ctx context.Context, vhost, queue string) error {
	var c cmd
	p := unackedQueuePrefix(vhost, queue)
	c.delRange(p, codec.Successor(p))
	_, err := x.n.submit(ctx, &c)
	return err
}

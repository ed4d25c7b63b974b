package faultstore

import (
	"context"
	"fmt"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"
)

var (
	_ storage.ShardStore = (*Shards)(nil)
	_ storage.Syncer     = (*Shards)(nil)
	_ meta.Store         = (*Meta)(nil)
	_ unacked.Index      = (*Index)(nil)
)

// Shards wraps a storage.ShardStore.
type Shards struct {
	inner storage.ShardStore
	in    *Injector
}

// WrapShards returns s with in's faults.
func WrapShards(s storage.ShardStore, in *Injector) *Shards { return &Shards{inner: s, in: in} }

// Inner returns the wrapped store.
func (s *Shards) Inner() storage.ShardStore { return s.inner }

func (s *Shards) Append(ctx context.Context, shard string, recs []storage.Record) (first uint64, err error) {
	err = s.in.do(&Call{Op: Append, Shard: shard, Records: recs}, func() error {
		var e error
		first, e = s.inner.Append(ctx, shard, recs)
		return e
	})
	return first, err
}

func (s *Shards) Read(ctx context.Context, shard string, from uint64, max int) (recs []storage.Record, err error) {
	err = s.in.do(&Call{Op: Read, Shard: shard, From: from}, func() error {
		var e error
		recs, e = s.inner.Read(ctx, shard, from, max)
		return e
	})
	return recs, err
}

func (s *Shards) DeleteByOffsets(ctx context.Context, shard string, offsets []uint64) error {
	return s.in.do(&Call{Op: DeleteByOffsets, Shard: shard, Offsets: offsets}, func() error {
		return s.inner.DeleteByOffsets(ctx, shard, offsets)
	})
}

func (s *Shards) FirstOffset(ctx context.Context, shard string) (off uint64, err error) {
	err = s.in.do(&Call{Op: FirstOffset, Shard: shard}, func() error {
		var e error
		off, e = s.inner.FirstOffset(ctx, shard)
		return e
	})
	return off, err
}

func (s *Shards) Count(ctx context.Context, shard string) (n uint64, err error) {
	err = s.in.do(&Call{Op: Count, Shard: shard}, func() error {
		var e error
		n, e = s.inner.Count(ctx, shard)
		return e
	})
	return n, err
}

func (s *Shards) DeleteShard(ctx context.Context, shard string) error {
	return s.in.do(&Call{Op: DeleteShard, Shard: shard}, func() error {
		return s.inner.DeleteShard(ctx, shard)
	})
}

// Sync calls the inner store's Sync when it has one; otherwise it only
// checks ctx (after the Injector had its say), as storage.Syncer asks.
func (s *Shards) Sync(ctx context.Context) error {
	return s.in.do(&Call{Op: Sync}, func() error {
		if sy, ok := s.inner.(storage.Syncer); ok {
			return sy.Sync(ctx)
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("faultstore: sync: %w", err)
		}
		return nil
	})
}

// Meta wraps a meta.Store. Cursor and topology calls go through the
// Injector; accounts and IsLeader pass straight through.
type Meta struct {
	meta.Store
	in *Injector
}

// WrapMeta returns m with in's faults.
func WrapMeta(m meta.Store, in *Injector) *Meta { return &Meta{Store: m, in: in} }

// Inner returns the wrapped store.
func (m *Meta) Inner() meta.Store { return m.Store }

func (m *Meta) Offset(ctx context.Context, q meta.QueueKey) (off uint64, err error) {
	err = m.in.do(&Call{Op: Offset, Queue: q}, func() error {
		var e error
		off, e = m.Store.Offset(ctx, q)
		return e
	})
	return off, err
}

func (m *Meta) CompareAndSwapOffset(ctx context.Context, q meta.QueueKey, old, new uint64) (swapped bool, err error) {
	err = m.in.do(&Call{Op: CompareAndSwapOffset, Queue: q, Old: old, New: new}, func() error {
		var e error
		swapped, e = m.Store.CompareAndSwapOffset(ctx, q, old, new)
		return e
	})
	return swapped, err
}

func (m *Meta) PutExchange(ctx context.Context, e meta.Exchange) error {
	return m.in.do(&Call{Op: PutExchange}, func() error { return m.Store.PutExchange(ctx, e) })
}

func (m *Meta) GetExchange(ctx context.Context, vhost, name string) (e meta.Exchange, err error) {
	err = m.in.do(&Call{Op: GetExchange}, func() error {
		var x error
		e, x = m.Store.GetExchange(ctx, vhost, name)
		return x
	})
	return e, err
}

func (m *Meta) DeleteExchange(ctx context.Context, vhost, name string) error {
	return m.in.do(&Call{Op: DeleteExchange}, func() error { return m.Store.DeleteExchange(ctx, vhost, name) })
}

func (m *Meta) ListExchanges(ctx context.Context, vhost string) (es []meta.Exchange, err error) {
	err = m.in.do(&Call{Op: ListExchanges}, func() error {
		var x error
		es, x = m.Store.ListExchanges(ctx, vhost)
		return x
	})
	return es, err
}

func (m *Meta) PutQueue(ctx context.Context, q meta.Queue) error {
	return m.in.do(&Call{Op: PutQueue, Queue: q.Key()}, func() error { return m.Store.PutQueue(ctx, q) })
}

func (m *Meta) GetQueue(ctx context.Context, vhost, name string) (q meta.Queue, err error) {
	err = m.in.do(&Call{Op: GetQueue, Queue: meta.QueueKey{VHost: vhost, Name: name}}, func() error {
		var x error
		q, x = m.Store.GetQueue(ctx, vhost, name)
		return x
	})
	return q, err
}

func (m *Meta) DeleteQueue(ctx context.Context, vhost, name string) error {
	return m.in.do(&Call{Op: DeleteQueue, Queue: meta.QueueKey{VHost: vhost, Name: name}}, func() error {
		return m.Store.DeleteQueue(ctx, vhost, name)
	})
}

func (m *Meta) ListQueues(ctx context.Context, vhost string) (qs []meta.Queue, err error) {
	err = m.in.do(&Call{Op: ListQueues}, func() error {
		var x error
		qs, x = m.Store.ListQueues(ctx, vhost)
		return x
	})
	return qs, err
}

func (m *Meta) PutBinding(ctx context.Context, b meta.Binding) error {
	return m.in.do(&Call{Op: PutBinding}, func() error { return m.Store.PutBinding(ctx, b) })
}

func (m *Meta) DeleteBinding(ctx context.Context, b meta.Binding) error {
	return m.in.do(&Call{Op: DeleteBinding}, func() error { return m.Store.DeleteBinding(ctx, b) })
}

func (m *Meta) ListBindings(ctx context.Context, vhost string) (bs []meta.Binding, err error) {
	err = m.in.do(&Call{Op: ListBindings}, func() error {
		var x error
		bs, x = m.Store.ListBindings(ctx, vhost)
		return x
	})
	return bs, err
}

// Index wraps an unacked.Index.
type Index struct {
	inner unacked.Index
	in    *Injector
}

// WrapIndex returns x with in's faults.
func WrapIndex(x unacked.Index, in *Injector) *Index { return &Index{inner: x, in: in} }

// Inner returns the wrapped index.
func (x *Index) Inner() unacked.Index { return x.inner }

func (x *Index) Put(ctx context.Context, entries []unacked.Entry) error {
	return x.in.do(&Call{Op: IndexPut, Entries: entries}, func() error { return x.inner.Put(ctx, entries) })
}

func (x *Index) Get(ctx context.Context, k unacked.Key) (e unacked.Entry, err error) {
	err = x.in.do(&Call{Op: IndexGet, Keys: []unacked.Key{k}}, func() error {
		var y error
		e, y = x.inner.Get(ctx, k)
		return y
	})
	return e, err
}

func (x *Index) Delete(ctx context.Context, keys []unacked.Key) error {
	return x.in.do(&Call{Op: IndexDelete, Keys: keys}, func() error { return x.inner.Delete(ctx, keys) })
}

func (x *Index) Queue(ctx context.Context, vhost, queue string, fn func(unacked.Entry) bool) error {
	return x.in.do(&Call{Op: IndexQueue, Queue: meta.QueueKey{VHost: vhost, Name: queue}}, func() error {
		return x.inner.Queue(ctx, vhost, queue, fn)
	})
}

func (x *Index) Scan(ctx context.Context, fn func(unacked.Entry) bool) error {
	return x.in.do(&Call{Op: IndexScan}, func() error { return x.inner.Scan(ctx, fn) })
}

func (x *Index) DeleteQueue(ctx context.Context, vhost, queue string) error {
	return x.in.do(&Call{Op: IndexDeleteQueue, Queue: meta.QueueKey{VHost: vhost, Name: queue}}, func() error {
		return x.inner.DeleteQueue(ctx, vhost, queue)
	})
}

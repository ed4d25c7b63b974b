package sharedtest

import (
	"context"
	"errors"
	"sync"

	"github.com/warrenmq/broker/meta"
	metamemory "github.com/warrenmq/broker/meta/memory"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/storage/memory"
	"github.com/warrenmq/broker/unacked"
)

// Stores is one shared set of stores. Meta, Shards and Index may be handed
// to any number of brokers or queues.
type Stores struct {
	Meta   *Meta
	Shards *Shards
	Index  *Index

	mu       sync.Mutex // serializes writes and the changes they emit
	watchMu  sync.Mutex
	watchers map[int]func(meta.Change)
	nextID   int
}

// New returns empty shared stores.
func New() *Stores {
	s := &Stores{watchers: make(map[int]func(meta.Change))}
	s.Meta = &Meta{Store: metamemory.New(), s: s}
	s.Shards = &Shards{Store: memory.New(), s: s}
	s.Index = &Index{MemoryIndex: unacked.NewMemoryIndex(), s: s}
	return s
}

// Watch implements meta.ChangeFeed for the whole set.
func (s *Stores) Watch(fn func(meta.Change)) (cancel func()) {
	s.watchMu.Lock()
	id := s.nextID
	s.nextID++
	s.watchers[id] = fn
	s.watchMu.Unlock()
	return func() {
		// Changes are emitted under s.mu: taking it waits for a running fn.
		s.mu.Lock()
		defer s.mu.Unlock()
		s.watchMu.Lock()
		delete(s.watchers, id)
		s.watchMu.Unlock()
	}
}

// emit hands cs to every watcher; s.mu is held, so changes keep write
// order.
func (s *Stores) emit(cs ...meta.Change) {
	if len(cs) == 0 {
		return
	}
	s.watchMu.Lock()
	fns := make([]func(meta.Change), 0, len(s.watchers))
	for _, fn := range s.watchers {
		fns = append(fns, fn)
	}
	s.watchMu.Unlock()
	for _, c := range cs {
		for _, fn := range fns {
			fn(c)
		}
	}
}

// Meta is the shared meta.Store; it is the set's meta.ChangeFeed too.
type Meta struct {
	*metamemory.Store
	s *Stores
}

var (
	_ meta.Store      = (*Meta)(nil)
	_ meta.ChangeFeed = (*Meta)(nil)
)

// Watch implements meta.ChangeFeed.
func (m *Meta) Watch(fn func(meta.Change)) (cancel func()) { return m.s.Watch(fn) }

// IsLeader is true: every sharer may run the scanner in tests that want
// one; tests that need a single leader wrap Meta.
func (m *Meta) IsLeader() bool { return true }

func (m *Meta) topology(vhost string, err error) error {
	if err == nil {
		m.s.emit(meta.Change{Kind: meta.ChangeTopology, VHost: vhost})
	}
	return err
}

func (m *Meta) locked() func() {
	m.s.mu.Lock()
	return m.s.mu.Unlock
}

// CompareAndSwapOffset emits ChangeCursor when it swaps.
func (m *Meta) CompareAndSwapOffset(ctx context.Context, q meta.QueueKey, old, new uint64) (bool, error) {
	defer m.locked()()
	ok, err := m.Store.CompareAndSwapOffset(ctx, q, old, new)
	if ok && err == nil {
		m.s.emit(meta.Change{Kind: meta.ChangeCursor, VHost: q.VHost, Queue: q.Name, Offset: new})
	}
	return ok, err
}

func (m *Meta) PutExchange(ctx context.Context, e meta.Exchange) error {
	defer m.locked()()
	return m.topology(e.VHost, m.Store.PutExchange(ctx, e))
}

func (m *Meta) DeleteExchange(ctx context.Context, vhost, name string) error {
	defer m.locked()()
	return m.topology(vhost, m.Store.DeleteExchange(ctx, vhost, name))
}

func (m *Meta) PutQueue(ctx context.Context, q meta.Queue) error {
	defer m.locked()()
	return m.topology(q.VHost, m.Store.PutQueue(ctx, q))
}

func (m *Meta) DeleteQueue(ctx context.Context, vhost, name string) error {
	defer m.locked()()
	return m.topology(vhost, m.Store.DeleteQueue(ctx, vhost, name))
}

func (m *Meta) PutBinding(ctx context.Context, b meta.Binding) error {
	defer m.locked()()
	return m.topology(b.VHost, m.Store.PutBinding(ctx, b))
}

func (m *Meta) DeleteBinding(ctx context.Context, b meta.Binding) error {
	defer m.locked()()
	return m.topology(b.VHost, m.Store.DeleteBinding(ctx, b))
}

func (m *Meta) PutVHost(ctx context.Context, v meta.VHost) error {
	defer m.locked()()
	return m.topology("", m.Store.PutVHost(ctx, v))
}

func (m *Meta) DeleteVHost(ctx context.Context, name string) error {
	defer m.locked()()
	return m.topology("", m.Store.DeleteVHost(ctx, name))
}

// PutVHostLimit emits ChangeTopology for the vhost list, as meta/raft
// does for a vhost limit.
func (m *Meta) PutVHostLimit(ctx context.Context, l meta.VHostLimit) error {
	defer m.locked()()
	return m.topology("", m.Store.PutVHostLimit(ctx, l))
}

// DeleteVHostLimit emits ChangeTopology for the vhost list.
func (m *Meta) DeleteVHostLimit(ctx context.Context, vhost, name string) error {
	defer m.locked()()
	return m.topology("", m.Store.DeleteVHostLimit(ctx, vhost, name))
}

// Shards is the shared storage.ShardStore; Append emits ChangeAppended.
type Shards struct {
	*memory.Store
	s *Stores
}

var _ storage.ShardStore = (*Shards)(nil)

func (sh *Shards) Append(ctx context.Context, shard string, recs []storage.Record) (uint64, error) {
	sh.s.mu.Lock()
	defer sh.s.mu.Unlock()
	first, err := sh.Store.Append(ctx, shard, recs)
	if err == nil && len(recs) > 0 {
		sh.s.emit(meta.Change{Kind: meta.ChangeAppended, Shard: shard, Offset: first + uint64(len(recs))})
	}
	return first, err
}

// Index is the shared unacked.Index and unacked.Claimer.
type Index struct {
	*unacked.MemoryIndex
	s *Stores
}

var (
	_ unacked.Index   = (*Index)(nil)
	_ unacked.Claimer = (*Index)(nil)
)

// changes returns the Returned/Taken changes that writing es makes.
func (x *Index) changes(ctx context.Context, es []unacked.Entry) []meta.Change {
	var cs []meta.Change
	for _, e := range es {
		if e.State == unacked.Returned {
			cs = append(cs, meta.Change{Kind: meta.ChangeReturned, VHost: e.VHost, Queue: e.Queue, Offset: e.Offset, DeliveryCount: e.DeliveryCount})
			continue
		}
		if old, err := x.MemoryIndex.Get(ctx, e.Key); err == nil && old.State == unacked.Returned {
			cs = append(cs, meta.Change{Kind: meta.ChangeTaken, VHost: e.VHost, Queue: e.Queue, Offset: e.Offset})
		}
	}
	return cs
}

func (x *Index) Put(ctx context.Context, es []unacked.Entry) error {
	x.s.mu.Lock()
	defer x.s.mu.Unlock()
	cs := x.changes(ctx, es)
	if err := x.MemoryIndex.Put(ctx, es); err != nil {
		return err
	}
	x.s.emit(cs...)
	return nil
}

func (x *Index) Delete(ctx context.Context, keys []unacked.Key) error {
	x.s.mu.Lock()
	defer x.s.mu.Unlock()
	var cs []meta.Change
	for _, k := range keys {
		if old, err := x.MemoryIndex.Get(ctx, k); err == nil && old.State == unacked.Returned {
			cs = append(cs, meta.Change{Kind: meta.ChangeTaken, VHost: k.VHost, Queue: k.Queue, Offset: k.Offset})
		}
	}
	if err := x.MemoryIndex.Delete(ctx, keys); err != nil {
		return err
	}
	x.s.emit(cs...)
	return nil
}

// Claim implements unacked.Claimer: the checks and the writes happen under
// the set's mutex, as one raft entry would apply them.
func (x *Index) Claim(ctx context.Context, c unacked.Claim) (bool, error) {
	x.s.mu.Lock()
	defer x.s.mu.Unlock()
	q := meta.QueueKey{VHost: c.VHost, Name: c.Queue}
	if c.Move {
		cur, err := x.s.Meta.Store.Offset(ctx, q)
		if err != nil {
			return false, err
		}
		if cur != c.From {
			return false, nil
		}
	}
	for _, k := range c.Taken {
		e, err := x.MemoryIndex.Get(ctx, k)
		if errors.Is(err, unacked.ErrNotFound) || (err == nil && e.State != unacked.Returned) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
	cs := x.changes(ctx, c.Entries)
	if err := x.MemoryIndex.Put(ctx, c.Entries); err != nil {
		return false, err
	}
	if c.Move {
		if _, err := x.s.Meta.Store.CompareAndSwapOffset(ctx, q, c.From, c.To); err != nil {
			return false, err
		}
		cs = append(cs, meta.Change{Kind: meta.ChangeCursor, VHost: c.VHost, Queue: c.Queue, Offset: c.To})
	}
	x.s.emit(cs...)
	return true, nil
}

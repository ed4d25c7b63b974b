package delayed

import (
	"container/heap"
	"context"
	"slices"
	"sync"

	"github.com/warrenmq/broker/internal/memuse"
	"github.com/warrenmq/broker/internal/shrink"
)

// Store holds delayed messages keyed by (due time, sequence number). The
// scheduler reads the earliest, routes them, and deletes them once every
// queue they reached has stored them: a crash in between routes a message
// twice, never loses it. Implementations are safe for concurrent use.
type Store interface {
	// Put stores msgs. With sync, they are durable when Put returns.
	Put(ctx context.Context, msgs []Message, sync bool) error
	// Due returns up to max messages due at or before until, earliest
	// first. They stay stored until Delete.
	Due(ctx context.Context, until int64, max int) ([]Message, error)
	// Next returns the key of the earliest message skip does not
	// reject (nil skip rejects none); ok=false when there is none.
	Next(ctx context.Context, skip func(Key) bool) (k Key, ok bool, err error)
	// Delete removes msgs (by key; VHost and Exchange must be theirs).
	// Missing ones are ignored.
	Delete(ctx context.Context, msgs []Message) error
	// DeleteExchange removes every message held for an exchange and
	// returns how many there were.
	DeleteExchange(ctx context.Context, vhost, exchange string) (int, error)
	// Peek returns up to max of an exchange's messages, earliest first.
	Peek(ctx context.Context, vhost, exchange string, max int) ([]Message, error)
	// Count returns how many messages an exchange holds.
	Count(vhost, exchange string) int64
	// Len returns how many messages the store holds.
	Len() int64
	// LastSeq is the highest sequence number stored since the store was
	// opened, or found in it when opened.
	LastSeq() uint64
}

type exchangeKey struct{ vhost, exchange string }

// counts is the per-exchange message count both stores keep in memory:
// one map entry per exchange that holds messages, not per message.
type counts struct {
	mu    sync.Mutex
	by    map[exchangeKey]int64
	total int64
	seq   uint64
}

func (c *counts) add(vhost, exchange string, n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by == nil {
		c.by = make(map[exchangeKey]int64)
	}
	k := exchangeKey{vhost, exchange}
	c.by[k] += n
	if c.by[k] <= 0 {
		delete(c.by, k)
	}
	c.total += n
}

func (c *counts) sawSeq(s uint64) {
	c.mu.Lock()
	c.seq = max(c.seq, s)
	c.mu.Unlock()
}

func (c *counts) count(vhost, exchange string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.by[exchangeKey{vhost, exchange}]
}

func (c *counts) len() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total
}

func (c *counts) lastSeq() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seq
}

// Memory is a Store in the Go heap, for non-durable exchanges and brokers
// without a data directory: a binary heap by key, plus a map for deletes.
// What its messages hold (Message.HeapBytes each) counts against the
// memory alarm through held.
type Memory struct {
	mu    sync.Mutex
	h     memHeap
	byKey map[Key]*memItem
	// keyPeak rebuilds byKey, and the heap's array, once deletes left
	// them a quarter of their largest size (shrink.Map, shrink.Slice).
	keyPeak shrink.Peak
	c       counts
	held    *memuse.Counter
}

type memItem struct {
	m   Message
	idx int
}

type memHeap []*memItem

func (h memHeap) Len() int           { return len(h) }
func (h memHeap) Less(i, j int) bool { return h[i].m.Key.Less(h[j].m.Key) }
func (h memHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *memHeap) Push(x any) {
	it := x.(*memItem)
	it.idx = len(*h)
	*h = append(*h, it)
}
func (h *memHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return it
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty in-memory store, whose messages count in
// held (nil: not counted).
func NewMemory(held *memuse.Counter) *Memory {
	return &Memory{byKey: make(map[Key]*memItem), held: held}
}

func (s *Memory) Put(_ context.Context, msgs []Message, _ bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		if _, ok := s.byKey[m.Key]; ok {
			continue
		}
		it := &memItem{m: m}
		heap.Push(&s.h, it)
		s.byKey[m.Key] = it
		s.c.add(m.VHost, m.Exchange, 1)
		s.c.sawSeq(m.Seq)
		s.held.Add(m.HeapBytes())
	}
	return nil
}

func (s *Memory) Due(_ context.Context, until int64, max int) ([]Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Pop the due ones in order, then put them back: they stay until
	// Delete.
	var items []*memItem
	for len(s.h) > 0 && len(items) < max && s.h[0].m.Due <= until {
		items = append(items, heap.Pop(&s.h).(*memItem))
	}
	out := make([]Message, len(items))
	for i, it := range items {
		out[i] = it.m
		heap.Push(&s.h, it)
	}
	return out, nil
}

func (s *Memory) Next(_ context.Context, skip func(Key) bool) (Key, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.h) == 0 {
		return Key{}, false, nil
	}
	if skip == nil || !skip(s.h[0].m.Key) {
		return s.h[0].m.Key, true, nil
	}
	// Pop the skipped ones in order, then put them back.
	var popped []*memItem
	defer func() {
		for _, it := range popped {
			heap.Push(&s.h, it)
		}
	}()
	for len(s.h) > 0 {
		it := heap.Pop(&s.h).(*memItem)
		popped = append(popped, it)
		if !skip(it.m.Key) {
			return it.m.Key, true, nil
		}
	}
	return Key{}, false, nil
}

func (s *Memory) Delete(_ context.Context, msgs []Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		it, ok := s.byKey[m.Key]
		if !ok {
			continue
		}
		heap.Remove(&s.h, it.idx)
		delete(s.byKey, m.Key)
		s.byKey = shrink.Map(s.byKey, &s.keyPeak)
		s.h = shrink.Slice(s.h)
		s.c.add(it.m.VHost, it.m.Exchange, -1)
		s.held.Add(-it.m.HeapBytes())
	}
	return nil
}

func (s *Memory) matching(vhost, exchange string) []Message {
	var out []Message
	for _, it := range s.h {
		if it.m.VHost == vhost && it.m.Exchange == exchange {
			out = append(out, it.m)
		}
	}
	slices.SortFunc(out, func(a, b Message) int {
		if a.Key.Less(b.Key) {
			return -1
		}
		return 1
	})
	return out
}

func (s *Memory) DeleteExchange(ctx context.Context, vhost, exchange string) (int, error) {
	s.mu.Lock()
	doomed := s.matching(vhost, exchange)
	s.mu.Unlock()
	return len(doomed), s.Delete(ctx, doomed)
}

func (s *Memory) Peek(_ context.Context, vhost, exchange string, max int) ([]Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.matching(vhost, exchange)
	if len(out) > max {
		out = out[:max]
	}
	return out, nil
}

func (s *Memory) Count(vhost, exchange string) int64 { return s.c.count(vhost, exchange) }
func (s *Memory) Len() int64                         { return s.c.len() }
func (s *Memory) LastSeq() uint64                    { return s.c.lastSeq() }

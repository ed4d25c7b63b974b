package unacked

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/warrenmq/broker/internal/shrink"
)

var (
	_ Index = (*MemoryIndex)(nil)
)

// CheckEntries rejects a batch holding an entry no reader could interpret.
// An Index's Put calls it before writing anything, so Put stays all or
// none (MemoryIndex and storage/pebble's Index do).
func CheckEntries(entries []Entry) error {
	for i := range entries {
		if s := entries[i].State; s != Delivered && s != Returned {
			return fmt.Errorf("unacked: entry %d (queue %q offset %d) has invalid state %d",
				i, entries[i].Queue, entries[i].Offset, s)
		}
	}
	return nil
}

// queueName is a queue's identity inside the indexes.
type queueName struct{ vhost, queue string }

// MemoryIndex is an Index in memory, the default for in-memory brokers. It
// is safe for concurrent use. Queue and Scan copy what they visit first, so
// fn runs without the lock held and may call the index.
type MemoryIndex struct {
	mu struct {
		sync.RWMutex
		queues map[queueName]map[uint64]Entry
		// queuesPeak rebuilds queues once deletes left it a quarter of
		// its largest size (shrink.Map).
		queuesPeak shrink.Peak
	}
}

// NewMemoryIndex returns an empty MemoryIndex.
func NewMemoryIndex() *MemoryIndex {
	x := &MemoryIndex{}
	x.mu.queues = make(map[queueName]map[uint64]Entry)
	return x
}

// Put inserts or replaces entries, all or none.
func (x *MemoryIndex) Put(ctx context.Context, entries []Entry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := CheckEntries(entries); err != nil {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, e := range entries {
		qn := queueName{e.VHost, e.Queue}
		q := x.mu.queues[qn]
		if q == nil {
			q = make(map[uint64]Entry)
			x.mu.queues[qn] = q
		}
		q[e.Offset] = e
	}
	return nil
}

// Get returns the entry under k or an error matching ErrNotFound.
func (x *MemoryIndex) Get(ctx context.Context, k Key) (Entry, error) {
	if err := ctx.Err(); err != nil {
		return Entry{}, err
	}
	x.mu.RLock()
	e, ok := x.mu.queues[queueName{k.VHost, k.Queue}][k.Offset]
	x.mu.RUnlock()
	if !ok {
		return Entry{}, fmt.Errorf("%w: queue %q in vhost %q, offset %d", ErrNotFound, k.Queue, k.VHost, k.Offset)
	}
	return e, nil
}

// Delete removes entries; missing keys are ignored.
func (x *MemoryIndex) Delete(ctx context.Context, keys []Key) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	// An emptied queue keeps its map: claim and ack cycles would otherwise
	// rebuild it every time. DeleteQueue drops it.
	for _, k := range keys {
		delete(x.mu.queues[queueName{k.VHost, k.Queue}], k.Offset)
	}
	return nil
}

// Queue calls fn for each entry of one queue in offset order until fn
// returns false.
func (x *MemoryIndex) Queue(ctx context.Context, vhost, queue string, fn func(Entry) bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	x.mu.RLock()
	q := x.mu.queues[queueName{vhost, queue}]
	snap := make([]Entry, 0, len(q))
	for _, e := range q {
		snap = append(snap, e)
	}
	x.mu.RUnlock()
	slices.SortFunc(snap, func(a, b Entry) int { return cmp.Compare(a.Offset, b.Offset) })
	return visit(ctx, snap, fn)
}

// Scan calls fn for every entry until fn returns false. Entries of one
// queue come together; queues come in no particular order.
func (x *MemoryIndex) Scan(ctx context.Context, fn func(Entry) bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	x.mu.RLock()
	var snap []Entry
	for _, q := range x.mu.queues {
		for _, e := range q {
			snap = append(snap, e)
		}
	}
	x.mu.RUnlock()
	return visit(ctx, snap, fn)
}

// DeleteQueue removes every entry of one queue.
func (x *MemoryIndex) DeleteQueue(ctx context.Context, vhost, queue string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	x.mu.Lock()
	delete(x.mu.queues, queueName{vhost, queue})
	x.mu.queues = shrink.Map(x.mu.queues, &x.mu.queuesPeak)
	x.mu.Unlock()
	return nil
}

// ctxCheckEvery is how many entries an iteration visits between looks at
// its context: often enough to stop a long scan soon, rarely enough to cost
// nothing.
const ctxCheckEvery = 1024

func visit(ctx context.Context, entries []Entry, fn func(Entry) bool) error {
	for i, e := range entries {
		if i%ctxCheckEvery == ctxCheckEvery-1 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if !fn(e) {
			return nil
		}
	}
	return nil
}

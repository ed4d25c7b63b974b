package memory

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/warrenmq/broker/internal/shrink"
	"github.com/warrenmq/broker/meta"
)

var _ meta.Store = (*Store)(nil)

// Store is an in-memory meta.Store. The zero value is not usable; call New.
// Its entities are meta.Typed's, on an ordered map in memory; the cursors
// are its own.
type Store struct {
	*meta.Typed
	cursors struct {
		sync.RWMutex
		// A cursor is created on first use and dropped by DeleteQueue. A
		// swap that loaded the pointer before the delete lands on the
		// dropped word: it is ordered before the delete, which is allowed
		// because the two calls overlapped.
		m map[meta.QueueKey]*atomic.Uint64
		// peak rebuilds m once deletes left it a quarter of its largest
		// size (shrink.Map).
		peak shrink.Peak
	}
}

// New returns an empty store.
func New() *Store {
	s := &Store{Typed: meta.NewTyped(newKV())}
	s.cursors.m = make(map[meta.QueueKey]*atomic.Uint64)
	return s
}

// IsLeader is always true: an in-memory store serves a single node.
func (s *Store) IsLeader() bool { return true }

// Offset returns the queue's cursor, 0 if it was never set.
func (s *Store) Offset(ctx context.Context, q meta.QueueKey) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.cursors.RLock()
	c := s.cursors.m[q]
	s.cursors.RUnlock()
	if c == nil {
		return 0, nil
	}
	return c.Load(), nil
}

// CompareAndSwapOffset sets the queue's cursor to new if it is old.
func (s *Store) CompareAndSwapOffset(ctx context.Context, q meta.QueueKey, old, new uint64) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	return s.cursor(q).CompareAndSwap(old, new), nil
}

// cursor returns q's cursor word, creating it at 0.
func (s *Store) cursor(q meta.QueueKey) *atomic.Uint64 {
	s.cursors.RLock()
	c := s.cursors.m[q]
	s.cursors.RUnlock()
	if c != nil {
		return c
	}
	s.cursors.Lock()
	defer s.cursors.Unlock()
	if c = s.cursors.m[q]; c == nil {
		c = new(atomic.Uint64)
		s.cursors.m[q] = c
	}
	return c
}

// DeleteQueue removes the queue and its cursor; a missing one is not an
// error.
func (s *Store) DeleteQueue(ctx context.Context, vhost, name string) error {
	// Under the cursors' lock, so nobody reads the cursor of a queue
	// already gone.
	s.cursors.Lock()
	defer s.cursors.Unlock()
	if err := s.Typed.DeleteQueue(ctx, vhost, name); err != nil {
		return err
	}
	delete(s.cursors.m, meta.QueueKey{VHost: vhost, Name: name})
	s.cursors.m = shrink.Map(s.cursors.m, &s.cursors.peak)
	return nil
}

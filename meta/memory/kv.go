package memory

import (
	"bytes"
	"context"
	"sync"

	"github.com/RaduBerinde/btreemap"

	"github.com/warrenmq/broker/meta"
)

// kv is the meta.KV under a Store: an ordered map of keys to records
// behind one RWMutex (metadata changes rarely). It keeps the key and value
// slices of the batches written to it (meta.KV allows it; meta.Typed
// builds both for each write), so a write copies nothing, and never
// changes a value it holds, so Get hands out the stored slice.
type kv struct {
	mu sync.RWMutex
	m  *btreemap.BTreeMap[[]byte, []byte]
}

func newKV() *kv {
	return &kv{m: btreemap.New[[]byte, []byte](16, bytes.Compare)}
}

// Get returns the value under key: the stored slice, which the caller
// only reads (meta.KV).
func (s *kv) Get(ctx context.Context, key []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	_, v, ok := s.m.Get(key)
	s.mu.RUnlock()
	if !ok {
		return nil, meta.ErrNotFound
	}
	return v, nil
}

// Scan calls fn under the read lock, in key order.
func (s *kv) Scan(ctx context.Context, prefix []byte, fn func(key, value []byte) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for k, v := range s.m.Ascend(btreemap.GE(prefix), btreemap.Max[[]byte]()) {
		if !bytes.HasPrefix(k, prefix) {
			break
		}
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}

// Write applies b under the write lock; it keeps b's values, which
// meta.Typed encoded for it.
func (s *kv) Write(ctx context.Context, b meta.Batch) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range b.Set {
		s.m.ReplaceOrInsert(r.Key, r.Value)
	}
	for _, k := range b.Delete {
		s.m.Delete(k)
	}
	return nil
}

package memory

import (
	"bytes"
	"context"
	"strings"
	"sync"

	"github.com/RaduBerinde/btreemap"

	"github.com/warrenmq/broker/meta"
)

// kv is the meta.KV under a Store: an ordered map of keys to records
// behind one RWMutex (metadata changes rarely). The keys are strings, so
// the map holds its own copy of each.
type kv struct {
	mu sync.RWMutex
	m  *btreemap.BTreeMap[string, []byte]
}

func newKV() *kv {
	return &kv{m: btreemap.New[string, []byte](16, strings.Compare)}
}

// Get returns a copy of the value under key.
func (s *kv) Get(ctx context.Context, key []byte) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	_, v, ok := s.m.Get(string(key))
	s.mu.RUnlock()
	if !ok {
		return nil, meta.ErrNotFound
	}
	return bytes.Clone(v), nil
}

// Scan calls fn under the read lock, in key order.
func (s *kv) Scan(ctx context.Context, prefix []byte, fn func(key, value []byte) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p := string(prefix)
	s.mu.RLock()
	defer s.mu.RUnlock()
	for k, v := range s.m.Ascend(btreemap.GE(p), btreemap.Max[string]()) {
		if !strings.HasPrefix(k, p) {
			break
		}
		if err := fn([]byte(k), v); err != nil {
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
		s.m.ReplaceOrInsert(string(r.Key), r.Value)
	}
	for _, k := range b.Delete {
		s.m.Delete(string(k))
	}
	return nil
}

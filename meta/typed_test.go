package meta_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta"
)

// mapKV is a meta.KV on a map that records what Typed asks of it.
type mapKV struct {
	mu      sync.Mutex
	m       map[string][]byte
	gets    int
	batches []meta.Batch
}

func (k *mapKV) Get(_ context.Context, key []byte) ([]byte, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.gets++
	v, ok := k.m[string(key)]
	if !ok {
		return nil, meta.ErrNotFound
	}
	return slices.Clone(v), nil
}

func (k *mapKV) Scan(_ context.Context, prefix []byte, fn func(key, value []byte) error) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	var keys []string
	for key := range k.m {
		if strings.HasPrefix(key, string(prefix)) {
			keys = append(keys, key)
		}
	}
	slices.Sort(keys)
	for _, key := range keys {
		if err := fn([]byte(key), k.m[key]); err != nil {
			return err
		}
	}
	return nil
}

func (k *mapKV) Write(_ context.Context, b meta.Batch) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	// A KV keeps a batch's keys and values, not its slices (meta.KV).
	b.Set, b.Delete = slices.Clone(b.Set), slices.Clone(b.Delete)
	k.batches = append(k.batches, b)
	for _, r := range b.Set {
		k.m[string(r.Key)] = r.Value
	}
	for _, key := range b.Delete {
		delete(k.m, string(key))
	}
	return nil
}

// selectiveKV syncs only what asks: Typed must tell it which deletes.
type selectiveKV struct{ *mapKV }

func (selectiveKV) SyncsOnRequest() {}

// TestTypedDurability: a put is durable when its entity is (accounts
// always); on a KV that syncs on request a delete is durable when the
// entity it removes was, and a missing one writes nothing but a queue's
// cursor; on any other KV no delete reads first.
func TestTypedDurability(t *testing.T) {
	ctx := context.Background()
	for _, selective := range []bool{true, false} {
		k := &mapKV{m: map[string][]byte{}}
		var kv meta.KV = k
		if selective {
			kv = selectiveKV{k}
		}
		s := meta.NewTyped(kv)
		last := func() meta.Batch { return k.batches[len(k.batches)-1] }

		require.NoError(t, s.PutQueue(ctx, meta.Queue{VHost: "/", Name: "d", Durable: true}))
		require.True(t, last().Durable)
		require.NoError(t, s.PutQueue(ctx, meta.Queue{VHost: "/", Name: "t"}))
		require.False(t, last().Durable)
		require.NoError(t, s.PutUser(ctx, meta.User{Name: "u"}))
		require.True(t, last().Durable, "an account write is always durable")

		gets := k.gets
		require.NoError(t, s.DeleteQueue(ctx, "/", "t"))
		require.Len(t, last().Delete, 2, "the queue and its cursor")
		if selective {
			require.False(t, last().Durable, "a transient queue's deletion is not synced")
			require.NoError(t, s.DeleteQueue(ctx, "/", "d"))
			require.True(t, last().Durable, "a durable queue's deletion is synced")
			n := len(k.batches)
			require.NoError(t, s.DeleteExchange(ctx, "/", "missing"))
			require.Len(t, k.batches, n, "a missing exchange is not deleted")
			require.NoError(t, s.DeleteQueue(ctx, "/", "missing"))
			require.Len(t, k.batches, n+1, "a missing queue's cursor still goes")
		} else {
			require.Equal(t, gets, k.gets, "no read before a delete")
		}
	}
}

// TestTypedChecks: Typed refuses what no store may keep, with errors
// matching meta.ErrInvalid, and writes nothing for them.
func TestTypedChecks(t *testing.T) {
	ctx := context.Background()
	k := &mapKV{m: map[string][]byte{}}
	s := meta.NewTyped(k)
	for name, err := range map[string]error{
		"user":             s.PutUser(ctx, meta.User{}),
		"permission":       s.PutPermission(ctx, meta.Permission{VHost: "/"}),
		"topic permission": s.PutTopicPermission(ctx, meta.TopicPermission{VHost: "/"}),
		"binding":          s.PutBinding(ctx, meta.Binding{VHost: "/", DestinationKind: "table"}),
		"binding delete":   s.DeleteBinding(ctx, meta.Binding{VHost: "/"}),
	} {
		require.ErrorIs(t, err, meta.ErrInvalid, name)
	}
	require.Empty(t, k.batches)
}

// TestTypedRecordsAsEncodeRecord: what a put stores is EncodeRecord's
// record of the entity, byte for byte, for the nouns put encodes from a
// pooled copy too (exchanges, queues, bindings), whatever their strings
// and arguments hold, and a put after a put of a larger entity keeps
// nothing of it.
func TestTypedRecordsAsEncodeRecord(t *testing.T) {
	ctx := context.Background()
	kv := &mapKV{m: map[string][]byte{}}
	s := meta.NewTyped(kv)
	odd := "<a href=\"x\">&amp; \u2028 \x00 é \xff"
	args := []byte{0, 1, 2, 0xff}
	last := func() []byte {
		b := kv.batches[len(kv.batches)-1]
		require.Len(t, b.Set, 1)
		return b.Set[0].Value
	}
	for _, tc := range []struct {
		name string
		put  func() error
		v    any
	}{
		{"exchange", func() error {
			return s.PutExchange(ctx, meta.Exchange{VHost: odd, Name: "x", Type: "topic", Durable: true, Arguments: args})
		}, meta.Exchange{VHost: odd, Name: "x", Type: "topic", Durable: true, Arguments: args}},
		{"queue", func() error {
			return s.PutQueue(ctx, meta.Queue{VHost: "/", Name: odd, Durable: true, Owner: "c1", Arguments: args})
		}, meta.Queue{VHost: "/", Name: odd, Durable: true, Owner: "c1", Arguments: args}},
		{"smaller queue after a larger", func() error { return s.PutQueue(ctx, meta.Queue{VHost: "/", Name: "q"}) }, meta.Queue{VHost: "/", Name: "q"}},
		{"binding", func() error {
			return s.PutBinding(ctx, meta.Binding{VHost: "/", Source: "x", Destination: odd, DestinationKind: meta.DestinationQueue, RoutingKey: odd, Arguments: args})
		}, meta.Binding{VHost: "/", Source: "x", Destination: odd, DestinationKind: meta.DestinationQueue, RoutingKey: odd, Arguments: args}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, tc.put())
			want, err := meta.EncodeRecord(tc.v)
			require.NoError(t, err)
			require.Equal(t, string(want), string(last()))
		})
	}
}

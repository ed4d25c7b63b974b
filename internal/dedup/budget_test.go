package dedup

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/measure"
	"github.com/warrenmq/broker/internal/memuse"
	"github.com/warrenmq/broker/storage"
)

// key returns the i-th distinct key of n bytes.
func key(i, n int) []byte {
	k := fmt.Appendf(nil, "s%09d", i)
	return append(k, bytes.Repeat([]byte{'x'}, max(n-len(k), 0))...)
}

// What a cache in memory counts is what it holds: its estimate
// (memEntryBytes) and the live heap agree within a fifth, for short keys
// and for 1 KiB ones, so the memory alarm sees a cache's real size.
func TestMemoryEntryBytes(t *testing.T) {
	for _, size := range []int{16, 1024} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			const n = 20_000
			b := NewBudget(1<<40, nil)
			keys := make([][]byte, n)
			for i := range keys {
				keys[i] = key(i, size)
			}
			base := measure.LiveHeap()
			c := b.NewCache("/x", clock.Real, 0, 0)
			for _, k := range keys {
				seen, err := c.Seen(k, 0)
				require.NoError(t, err)
				require.False(t, seen)
			}
			heap := measure.LiveHeap() - base
			counted := b.MemoryBytes()
			t.Logf("%d entries of %d-byte keys: counted %d bytes each, live heap %d", n, size, counted/n, heap/n)
			require.Equal(t, c.MemoryBytes(), counted)
			require.InDelta(t, float64(heap), float64(counted), float64(heap)/5)
			runtime.KeepAlive(keys)
			require.NoError(t, c.Drop())
			require.Zero(t, b.MemoryBytes(), "dropped: nothing counted")
		})
	}
}

// A budget bounds its caches together: a cache declared with a huge
// size and fed distinct keys stops at the budget, evicting its oldest
// entries (the newest are still recognised), while a small cache on the
// same budget keeps what it holds; the eviction is logged once.
func TestBudgetEvicts(t *testing.T) {
	const limit = 1 << 20
	var logs amqptest.SyncBuffer
	b := NewBudget(limit, slog.New(slog.NewTextHandler(&logs, nil)))
	small := b.NewCache("/small", clock.Real, 10, 0)
	for i := range 10 {
		_, err := small.Seen(key(i, 100), 0)
		require.NoError(t, err)
	}
	big := b.NewCache("/big", clock.Real, MaxSize, 0)
	const n = 10_000 // about 10 MiB of 1 KiB keys
	for i := range n {
		seen, err := big.Seen(key(i, 1024), 0)
		require.NoError(t, err)
		require.False(t, seen)
		require.LessOrEqual(t, b.MemoryBytes(), int64(limit)+memEntryBytes(string(key(i, 1024))), "after %d keys", i)
	}
	require.Less(t, big.Len(), int64(n/8))
	for i := n - 10; i < n; i++ {
		seen, err := big.Seen(key(i, 1024), 0)
		require.NoError(t, err)
		require.True(t, seen, "recent key %d was evicted", i)
	}
	seen, err := big.Seen(key(0, 1024), 0)
	require.NoError(t, err)
	require.False(t, seen, "the oldest key was evicted")
	require.EqualValues(t, 10, small.Len(), "the small cache kept its entries")
	require.Equal(t, 1, strings.Count(logs.String(), "evict their oldest entries"), logs.String())
	require.Contains(t, logs.String(), "cache=/big")

	require.NoError(t, big.Drop())
	small.Release()
	require.Zero(t, b.MemoryBytes())
}

// A cache whose entries expire gives their memory back as it records,
// without waiting for its size or its budget.
func TestMemoryCacheDropsExpired(t *testing.T) {
	fc := clock.NewFake(time.Unix(1000, 0))
	b := NewBudget(1<<40, nil)
	c := b.NewCache("/x", fc, 0, time.Second)
	for i := range 100 {
		_, err := c.Seen(key(i, 100), 0)
		require.NoError(t, err)
	}
	fc.Advance(2 * time.Second)
	for i := range 100 {
		_, err := c.Seen(key(1000+i, 100), 0)
		require.NoError(t, err)
	}
	require.EqualValues(t, 100, c.Len(), "each record dropped an expired entry")
	require.Equal(t, 100*memEntryBytes(string(key(0, 100))), b.MemoryBytes())
}

// The keys of a deduplicating queue count what they hold, from Admit to
// the delete of their message, within a fifth of the live heap.
func TestQueueKeyBytes(t *testing.T) {
	const n = 20_000
	var held memuse.Counter
	keys, st := NewQueueStore(&discardShards{}, &held)
	recs := make([]storage.Record, n)
	for i := range recs {
		p := amqp.Properties{Headers: amqp.Table{"x-deduplication-header": string(key(i, 64))}}
		recs[i].Properties = p.Append(nil)
	}
	base := measure.LiveHeap()
	for i := range recs {
		require.True(t, keys.Admit(&recs[i]))
	}
	_, err := st.Append(t.Context(), "q", recs)
	require.NoError(t, err)
	heap := measure.LiveHeap() - base
	counted := held.MemoryBytes()
	t.Logf("%d keys: counted %d bytes each, live heap %d", n, counted/n, heap/n)
	require.Equal(t, keys.MemoryBytes(), counted)
	require.InDelta(t, float64(heap), float64(counted), float64(heap)/5)
	offsets := make([]uint64, n/2)
	for i := range offsets {
		offsets[i] = uint64(i)
	}
	require.NoError(t, st.DeleteByOffsets(t.Context(), "q", offsets))
	require.InDelta(t, float64(counted)/2, float64(held.MemoryBytes()), float64(counted)/100)
	require.NoError(t, st.DeleteShard(t.Context(), "q"))
	require.Zero(t, held.MemoryBytes())
	require.Zero(t, keys.Len())
	runtime.KeepAlive(recs)
}

// discardShards numbers what it is given and keeps nothing, so that a
// test measures only what QueueStore keeps.
type discardShards struct {
	storage.ShardStore
	next uint64
}

func (s *discardShards) Append(_ context.Context, _ string, recs []storage.Record) (uint64, error) {
	first := s.next
	for i := range recs {
		recs[i].Offset = s.next
		s.next++
	}
	return first, nil
}

func (s *discardShards) DeleteByOffsets(context.Context, string, []uint64) error { return nil }
func (s *discardShards) DeleteShard(context.Context, string) error               { return nil }

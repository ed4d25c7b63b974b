package queue

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/unacked"
)

// onceIndex records which entries it was told were put once.
type onceIndex struct {
	unacked.Index
	mu   sync.Mutex
	once []uint64
}

func (x *onceIndex) DeletePutOnce(ctx context.Context, keys []unacked.Key, once int) error {
	x.mu.Lock()
	for _, k := range keys[:once] {
		x.once = append(x.once, k.Offset)
	}
	x.mu.Unlock()
	return x.Index.Delete(ctx, keys)
}

// TestSettleDeletesEntriesPutOnce checks that an ack tells the index
// which entries were written once (claimed from the cursor, never
// requeued), and never one rewritten by a requeue.
func TestSettleDeletesEntriesPutOnce(t *testing.T) {
	ctx := context.Background()
	st := newStores()
	x := &onceIndex{Index: st.Index}
	st.Index = x
	q := start(t, st)
	publish(t, q, "a", "b", "c")
	s := newSink()
	require.NoError(t, q.Consume(ctx, &Consumer{Tag: "x", Owner: owner, Receiver: s}))
	a, b, c := s.next(t), s.next(t), s.next(t)
	require.NoError(t, q.Settle(Requeue, b.Ref))
	b2 := s.next(t)
	require.True(t, b2.Redelivered)
	require.NoError(t, q.Settle(Ack, a.Ref, b2.Ref, c.Ref))
	stats, err := q.Stats(ctx)
	require.NoError(t, err)
	require.Zero(t, stats.Unacked)
	x.mu.Lock()
	once := slices.Sorted(slices.Values(x.once))
	x.mu.Unlock()
	require.Equal(t, []uint64{a.Ref.Offset, c.Ref.Offset}, once)
	n := 0
	require.NoError(t, x.Scan(ctx, func(unacked.Entry) bool { n++; return true }))
	require.Zero(t, n, "index entries left")
}

package queue

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/storage"
)

// TestRequeueIsServedBeforeTheCreditItFrees: a channel requeues a delivery
// and only then frees its prefetch credit (the session's order). The
// actor, even when it is busy dispatching (publishes keep arriving), must
// hand that credit to the requeued message, not to the next one from the
// cursor: a requeued message keeps its place at the head.
func TestRequeueIsServedBeforeTheCreditItFrees(t *testing.T) {
	ctx := context.Background()
	q := start(t, newStores())
	publish(t, q, bodies(10)...)
	s := newSink()
	credit := &Credit{}
	credit.SetLimit(1)
	require.NoError(t, q.Consume(ctx, &Consumer{Tag: "a", Owner: owner, Credit: credit, Receiver: s}))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // keeps the actor waking up and dispatching
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if q.Publish(storage.Record{Body: []byte("more")}, NoTTL, nil, 0) != nil {
				return
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()

	m := s.next(t)
	for range 300 {
		require.NoError(t, q.Settle(Requeue, m.Ref))
		credit.Release(1)
		q.Kick()
		again := s.next(t)
		require.Equal(t, m.Offset, again.Offset, "the requeued message comes back first")
		require.True(t, again.Redelivered)
		m = again
	}
}

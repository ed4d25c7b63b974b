package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A watcher is poked by the steps that change what demand is read from
// (empty or not, the consumer count), not once per message: a hundred
// publishes to an empty queue poke once, a hundred gets that empty it
// once more, a consumer once, and a cancelled watch never again.
func TestNotifyPokesOnDemandChangesOnly(t *testing.T) {
	ctx := context.Background()
	q := start(t, newStores())
	ch := make(chan struct{}, 1000) // room for every poke: they are counted
	cancel := q.Notify(ch)
	pokes := func(want int) {
		t.Helper()
		require.Eventually(t, func() bool { return len(ch) >= want }, 5*time.Second, time.Millisecond)
		_, err := q.Stats(ctx) // one more step: it pokes nobody
		require.NoError(t, err)
		require.Len(t, ch, want)
	}
	publish(t, q, bodies(100)...)
	waitReady(t, q, 100)
	pokes(1)
	for range 100 {
		m, _, ok, err := q.Get(ctx, owner, true)
		require.NoError(t, err)
		require.True(t, ok, m.Ref)
	}
	waitReady(t, q, 0)
	pokes(2)
	require.NoError(t, q.Consume(ctx, &Consumer{Tag: "a", Owner: owner, Receiver: newSink()}))
	require.Eventually(t, func() bool { return q.Counts().Consumers == 1 }, 5*time.Second, time.Millisecond)
	pokes(3)
	cancel()
	_, err := q.Cancel(ctx, owner, "a")
	require.NoError(t, err)
	publish(t, q, bodies(10)...)
	waitReady(t, q, 10)
	pokes(3)
}

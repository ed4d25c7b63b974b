package queue

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// flushSink is a sink that is also a Flusher: it records, in order, each
// delivery ("d") and each flush ("f").
type flushSink struct {
	*sink
	mu     sync.Mutex
	events []byte
}

func (s *flushSink) Deliver(c *Consumer, m Message) bool {
	s.mu.Lock()
	s.events = append(s.events, 'd')
	s.mu.Unlock()
	return s.sink.Deliver(c, m)
}

func (s *flushSink) Flush() {
	s.mu.Lock()
	s.events = append(s.events, 'f')
	s.mu.Unlock()
}

// TestFlusherFlushedAfterEachBatch: a Flusher receiver is flushed after
// its deliveries, at most once per delivery and never with a delivery
// left unflushed, whether messages were waiting when it subscribed (a
// batch) or arrive one by one.
func TestFlusherFlushedAfterEachBatch(t *testing.T) {
	ctx := context.Background()
	q := start(t, newStores())
	publish(t, q, bodies(100)...)
	s := &flushSink{sink: newSink()}
	require.NoError(t, q.Consume(ctx, &Consumer{Tag: "c", Owner: owner, NoAck: true, Receiver: s}))
	for range 100 {
		s.next(t)
	}
	publish(t, q, bodies(10)...)
	for range 10 {
		s.next(t)
	}
	// The flush of the last delivery runs after Deliver returned: ask the
	// actor something, so it is done with that batch.
	_, err := q.Stats(ctx)
	require.NoError(t, err)

	s.mu.Lock()
	events := string(s.events)
	s.mu.Unlock()
	deliveries, flushes := 0, 0
	for _, e := range events {
		if e == 'd' {
			deliveries++
		} else {
			flushes++
		}
	}
	require.Equal(t, 110, deliveries)
	require.GreaterOrEqual(t, flushes, 1)
	require.Less(t, flushes, deliveries, "the 100 waiting messages went as batches")
	require.Equal(t, byte('f'), events[len(events)-1], "deliveries left unflushed: %s", events)
	require.NotContains(t, events, "ff", "a flush without a delivery before it")
}

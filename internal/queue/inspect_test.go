package queue

import (
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/storage"
)

// TestInspectHonoursContext: an ended context returns its error without
// a round trip, and an inspection whose caller gave up while it waited in
// the mailbox is skipped when the actor reaches it (its caller no longer
// reads what it would write).
func TestInspectHonoursContext(t *testing.T) {
	q := start(t, newStores())
	publish(t, q, "a")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for name, call := range map[string]func(context.Context) error{
		"peek":        func(ctx context.Context) error { _, err := q.Peek(ctx, 1); return err },
		"outstanding": func(ctx context.Context) error { _, err := q.Outstanding(ctx, true); return err },
		"usage":       func(ctx context.Context) error { _, err := q.Usage(ctx); return err },
		"idle":        func(ctx context.Context) error { _, err := q.Idle(ctx); return err },
	} {
		require.ErrorIs(t, call(cancelled), context.Canceled, name)
	}

	// Hold the actor in an inspection, queue a second one behind it, give
	// up on the second, then let the actor go on.
	entered, release := make(chan struct{}), make(chan struct{})
	go func() {
		_ = q.inspect(context.Background(), func(context.Context) {
			close(entered)
			<-release
		})
	}()
	<-entered
	ctx, giveUp := context.WithCancel(context.Background())
	var ran atomic.Bool
	errc := make(chan error, 1)
	go func() { errc <- q.inspect(ctx, func(context.Context) { ran.Store(true) }) }()
	for q.queued.Load() < 2 { // the held op and the queued one
		runtime.Gosched()
	}
	giveUp()
	require.ErrorIs(t, <-errc, context.Canceled)
	close(release)
	// Ops are handled in order: once this one is answered, the given-up
	// one has been reached.
	require.NoError(t, q.inspect(context.Background(), func(context.Context) {}))
	require.False(t, ran.Load(), "the actor ran an inspection nobody waited for")
}

// TestInspectGivesUpWaitingForRoom: with the actor busy and its mailbox
// full, an inspection whose context ends returns instead of waiting for
// room like a held-back publisher.
func TestInspectGivesUpWaitingForRoom(t *testing.T) {
	q := start(t, newStores())
	entered, release := make(chan struct{}), make(chan struct{})
	go func() {
		_ = q.inspect(context.Background(), func(context.Context) {
			close(entered)
			<-release
		})
	}()
	<-entered
	for range maxMailbox {
		require.NoError(t, q.Publish(storage.Record{Body: []byte("x")}, NoTTL, nil, 0))
	}
	ctx, giveUp := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := q.Peek(ctx, 1); errc <- err }()
	waiting := func() bool { // the peek waits for room in the mailbox
		q.mbox.mu.Lock()
		defer q.mbox.mu.Unlock()
		return q.mbox.waiters > 0
	}
	for !waiting() {
		runtime.Gosched()
	}
	giveUp()
	select {
	case err := <-errc:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second): // a guard, not a measurement
		close(release)
		t.Fatal("Peek waited for room after its context ended")
	}
	close(release)
	st, err := q.Stats(context.Background())
	require.NoError(t, err)
	require.Equal(t, uint64(maxMailbox), st.Ready, "the publishes behind the busy actor all arrived")
}

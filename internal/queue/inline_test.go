package queue

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/storage"
)

// A get that runs on the caller's goroutine must still see every op sent
// before it: here the publish is usually still in the mailbox when Get
// looks, and Get must not answer get-empty past it.
func TestGetSeesThePublishBeforeIt(t *testing.T) {
	ctx := context.Background()
	q := start(t, newStores())
	for i := range 2000 {
		body := fmt.Sprint(i)
		require.NoError(t, q.Publish(storage.Record{Body: []byte(body)}, NoTTL, nil, 0))
		m, ready, ok, err := q.Get(ctx, owner, false)
		require.NoError(t, err)
		require.True(t, ok, "get after publish %d found the queue empty", i)
		require.Equal(t, body, string(m.Body))
		require.Zero(t, ready)
		require.NoError(t, q.AckGot(m.Ref))
	}
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, Stats{}, st)
}

// An ack settled in place is seen by the next op, whichever goroutine runs
// it: a requeue of the same delivery after AckGot does nothing.
func TestAckGotWinsOverALaterRequeue(t *testing.T) {
	ctx := context.Background()
	q := start(t, newStores())
	publish(t, q, bodies(100)...)
	for range 100 {
		m, _, ok, err := q.Get(ctx, owner, false)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, q.AckGot(m.Ref))
		require.NoError(t, q.Settle(Requeue, m.Ref))
	}
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, Stats{}, st)
}

// Gets and acks on callers' goroutines race with the actor serving a
// consumer, publishers and requeues: every message is settled exactly once.
func TestInlineGetsRaceTheActor(t *testing.T) {
	ctx := context.Background()
	q := start(t, newStores())
	s := newSink()
	acked := getRace{
		publishers: 3, perPublisher: 1500, getters: 3,
		credit: 20, requeueEvery: 7,
		receiver: s, msgs: s.msgs, stop: s.close,
	}.run(t, q)
	for body, n := range acked {
		require.Equal(t, 1, n, "%s settled %d times", body, n)
	}
	require.Len(t, acked, 3*1500)
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	require.Zero(t, st.Ready)
}

// A get while a persistent batch is being synced must wait for that batch
// on the actor, not on the caller's goroutine: the actor also waits for the
// commit's outcome, and had it taken it while the caller held the work
// mutex, neither would ever go on.
func TestGetDuringCommitWaitsOnTheActor(t *testing.T) {
	ctx := context.Background()
	q, shards := startSyncing(t)
	require.NoError(t, q.Publish(storage.Record{Body: []byte("p"), Persistent: true}, NoTTL, nil, 0))
	<-shards.entered // the committer is in Append

	got := make(chan Message, 1)
	go func() {
		m, _, ok, err := q.Get(ctx, owner, false)
		if err == nil && ok {
			got <- m
		}
		close(got)
	}()
	time.Sleep(20 * time.Millisecond) // the get is waiting for the batch
	shards.gate <- struct{}{}
	select {
	case m, ok := <-got:
		require.True(t, ok, "get found nothing")
		require.Equal(t, "p", string(m.Body))
		require.NoError(t, q.AckGot(m.Ref))
	case <-time.After(5 * time.Second):
		t.Fatal("get never returned: the actor and the caller wait on each other")
	}
}

package queue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/internal/faultstore"
	"github.com/warrenmq/broker/storage"
)

// startDLX starts queue "q" on s dead-lettering to target.
func startDLX(t *testing.T, s Stores, args amqp.Table, c clock.Clock, target func() *Queue) *Queue {
	t.Helper()
	a, err := ParseArgs(args)
	require.NoError(t, err)
	q, err := Start(context.Background(), Config{
		VHost: "/", Name: "q", Shard: "/q", Stores: s, Broker: "n1", Incarnation: 1, Clock: c,
		Features: Features{Args: a, DeadLetter: func(exchange, key string, props []byte) []*Queue {
			return []*Queue{target()}
		}},
	})
	require.NoError(t, err)
	t.Cleanup(q.Stop)
	return q
}

func startNamed(t *testing.T, name string) *Queue {
	t.Helper()
	q, err := Start(context.Background(), Config{VHost: "/", Name: name, Shard: "/" + name, Stores: newStores(), Broker: "n1", Incarnation: 1})
	require.NoError(t, err)
	t.Cleanup(q.Stop)
	return q
}

// waitReady polls Stats until the queue has n ready messages.
func waitReady(t *testing.T, q *Queue, n uint64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := q.Stats(context.Background())
		require.NoError(t, err)
		if st.Ready == n {
			return
		}
		require.False(t, time.Now().After(deadline), "ready %d, want %d", st.Ready, n)
		time.Sleep(time.Millisecond)
	}
}

// TestDeadLetterCrashLeavesADuplicate: the copy is written to the target
// before the source deletes its record; a crash at that delete leaves the
// message in both queues after a restart — a duplicate, never a loss.
func TestDeadLetterCrashLeavesADuplicate(t *testing.T) {
	ctx := context.Background()
	wrapped, inner, in := faulty()
	dlq := startNamed(t, "dlq")
	q := startDLX(t, wrapped, amqp.Table{"x-dead-letter-exchange": "dlx"}, nil, func() *Queue { return dlq })
	publish(t, q, "a")
	m, _, ok, err := q.Get(ctx, owner, false)
	require.NoError(t, err)
	require.True(t, ok)
	crash := in.CrashAt(faultstore.On(faultstore.DeleteByOffsets))
	require.NoError(t, q.Settle(Reject, m.Ref))
	waitFired(t, crash)
	q.Stop()

	// The copy was stored before the source tried to delete.
	waitReady(t, dlq, 1)
	d, _, ok, err := dlq.Get(ctx, owner, true)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "a", string(d.Body))
	p, err := amqp.DecodeProperties(d.Properties)
	require.NoError(t, err)
	require.Equal(t, "rejected", p.Headers["x-first-death-reason"])

	q2 := start(t, inner)
	bodies, redelivered := drainGets(t, q2)
	require.Equal(t, []string{"a"}, bodies, "the source still has it: a duplicate, not a loss")
	require.Equal(t, []bool{true}, redelivered)
}

// TestExpiredMessagesNeverDelivered: a consumer attached after the TTL
// passed gets nothing; the expiry is driven by the fake clock alone.
func TestExpiredMessagesNeverDelivered(t *testing.T) {
	ctx := context.Background()
	fake := clock.NewFake(time.Unix(100, 0))
	dlq := startNamed(t, "dlq")
	q := startDLX(t, newStores(), amqp.Table{"x-message-ttl": int32(50), "x-dead-letter-exchange": ""}, fake, func() *Queue { return dlq })
	require.NoError(t, q.Publish(storage.Record{Body: []byte("short")}, TTL{D: 10 * time.Millisecond, Set: true}, nil, 0))
	publish(t, q, "queue-ttl")
	waitReady(t, q, 2)
	fake.Advance(11 * time.Millisecond)
	waitReady(t, dlq, 1)
	s := newSink()
	require.NoError(t, q.Consume(ctx, &Consumer{Tag: "c", Owner: owner, NoAck: true, Receiver: s}))
	require.Equal(t, "queue-ttl", string((<-s.msgs).Body))
	d, _, ok, err := dlq.Get(ctx, owner, true)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "short", string(d.Body))
}

// TestLargestTTLsHoldTillTheirDeadline: at the largest TTL and expiry
// RabbitMQ accepts (MaxExpiry ms), through x-message-ttl, the expiration
// property and x-expires, the deadline neither overflows nor wraps: the
// message and the queue last exactly that long on the fake clock: a
// message goes when its age reaches the TTL (RabbitMQ: Now >= Expiry).
func TestLargestTTLsHoldTillTheirDeadline(t *testing.T) {
	const max = MaxExpiry * time.Millisecond
	for _, tc := range []struct {
		name    string
		args    amqp.Table
		propTTL time.Duration // the expiration property, when > 0
	}{
		{name: "x-message-ttl", args: amqp.Table{"x-message-ttl": int64(MaxExpiry)}},
		{name: "expiration", propTTL: max},
		{name: "both", args: amqp.Table{"x-message-ttl": int64(MaxExpiry)}, propTTL: max},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Late in the clock's range: a deadline past year 2262 would
			// overflow int64 nanoseconds.
			fake := clock.NewFake(time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC).Add(-2 * max))
			dlq := startNamed(t, "dlq")
			args := amqp.Table{"x-dead-letter-exchange": ""}
			for k, v := range tc.args {
				args[k] = v
			}
			q := startDLX(t, newStores(), args, fake, func() *Queue { return dlq })
			rec := storage.Record{Body: []byte("m"), Persistent: true}
			if tc.propTTL > 0 {
				require.NoError(t, q.Publish(rec, TTL{D: tc.propTTL, Set: true}, nil, 0))
			} else {
				require.NoError(t, q.Publish(rec, NoTTL, nil, 0))
			}
			waitReady(t, q, 1)
			fake.Advance(max - time.Millisecond)
			waitReady(t, q, 1) // a millisecond before the deadline it is still there
			fake.Advance(time.Millisecond)
			waitReady(t, q, 0) // it expires once its age reaches the TTL, as RabbitMQ's do
			waitReady(t, dlq, 1)
		})
	}
	t.Run("x-expires", func(t *testing.T) {
		fake := clock.NewFake(time.Unix(100, 0))
		a, err := ParseArgs(amqp.Table{"x-expires": int64(MaxExpiry)})
		require.NoError(t, err)
		expired := make(chan struct{}, 1)
		q, err := Start(context.Background(), Config{
			VHost: "/", Name: "x", Shard: "/x", Stores: newStores(), Broker: "n1", Incarnation: 1, Clock: fake,
			Features: Features{Args: a, Expired: func() { expired <- struct{}{} }},
		})
		require.NoError(t, err)
		t.Cleanup(q.Stop)
		fake.Advance(max - time.Millisecond)
		require.False(t, q.Unused(context.Background()))
		select {
		case <-expired:
			t.Fatal("x-expires fired early")
		default:
		}
		fake.Advance(time.Millisecond)
		<-expired
		require.True(t, q.Unused(context.Background()))
	})
}

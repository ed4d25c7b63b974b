package queue

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/storage"
)

// TestFailedCountRecovered: a queue that counts failed deliveries only
// (4.3 quorum queues) finds the count in the index entry at restart, and
// a delivery still out when the queue stopped (as in a crash: nobody
// settled it) counts as one more failure, its channel being lost.
func TestFailedCountRecovered(t *testing.T) {
	ctx := context.Background()
	s := newStores()
	args, err := ParseArgs(amqp.Table{"x-queue-type": "quorum"})
	require.NoError(t, err)
	startQ := func(incarnation uint64) *Queue {
		q, err := Start(ctx, Config{VHost: "/", Name: "q", Shard: "/q", Stores: s, Broker: "n1", Incarnation: incarnation,
			Features: Features{Args: args, CountFailedOnly: true}})
		require.NoError(t, err)
		t.Cleanup(q.Stop)
		return q
	}
	q := startQ(1)
	props := (&amqp.Properties{}).Append(nil)
	require.NoError(t, q.Publish(storage.Record{Body: []byte("m"), Properties: props, Persistent: true}, NoTTL, nil, 0))
	m, _, ok, err := q.Get(ctx, owner, false)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, q.Settle(Requeue, m.Ref)) // a reject: failed 1
	_, _, ok, err = q.Get(ctx, owner, false)     // out when the queue stops
	require.NoError(t, err)
	require.True(t, ok)
	q.Stop()

	q2 := startQ(2)
	m, _, ok, err = q2.Get(ctx, owner, false)
	require.NoError(t, err)
	require.True(t, ok)
	p, err := amqp.DecodeProperties(m.Properties)
	require.NoError(t, err)
	require.Equal(t, int64(2), p.Headers["x-delivery-count"], "one reject and one lost delivery")
	require.Equal(t, int64(2), p.Headers["x-acquired-count"])
}

package queue

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
)

// startInGroup starts queue name on s in group g, dead-lettering to
// target when target is not nil.
func startInGroup(t *testing.T, s Stores, name string, g *Group, target func() *Queue) *Queue {
	t.Helper()
	f := Features{Group: g}
	if target != nil {
		a, err := ParseArgs(amqp.Table{"x-dead-letter-exchange": ""})
		require.NoError(t, err)
		f.Args = a
		f.DeadLetter = func(string, string, []byte) []*Queue { return []*Queue{target()} }
	}
	q, err := Start(context.Background(), Config{
		VHost: "/", Name: name, Shard: "/" + name, Stores: s, Broker: "n1", Incarnation: 1, Features: f,
	})
	require.NoError(t, err)
	t.Cleanup(q.Stop)
	return q
}

// getOne takes the one ready message of q, unacked.
func getOne(t *testing.T, q *Queue) Message {
	t.Helper()
	m, _, ok, err := q.Get(context.Background(), owner, false)
	require.NoError(t, err)
	require.True(t, ok)
	return m
}

// TestStopAllFinishesDeadLettering: a reject to a dead-letter queue
// accepted just before the queues stop together completes: after a
// restart the message is in the target only, whatever order the actors
// stop in.
func TestStopAllFinishesDeadLettering(t *testing.T) {
	for round := range 50 {
		srcStores, dlqStores := newStores(), newStores()
		g := NewGroup()
		dlq := startInGroup(t, dlqStores, "dlq", g, nil)
		q := startInGroup(t, srcStores, "q", g, func() *Queue { return dlq })
		publish(t, q, "a")
		m := getOne(t, q)
		require.NoError(t, q.Settle(Reject, m.Ref))
		order := []*Queue{dlq, q}
		if round%2 == 1 {
			order = []*Queue{q, dlq}
		}
		StopAll(order)

		q2 := startInGroup(t, srcStores, "q", nil, nil)
		dlq2 := startInGroup(t, dlqStores, "dlq", nil, nil)
		srcBodies, _ := drainGets(t, q2)
		dlqBodies, _ := drainGets(t, dlq2)
		require.Empty(t, srcBodies, "round %d: the source deleted it", round)
		require.Equal(t, []string{"a"}, dlqBodies, "round %d: the target stored it", round)
		q2.Stop()
		dlq2.Stop()
	}
}

// TestDeadLetterToAStoppedQueueKeepsTheMessage: a target that stopped for
// shutdown (not deleted) refuses the copy, so the source keeps the
// message instead of deleting it.
func TestDeadLetterToAStoppedQueueKeepsTheMessage(t *testing.T) {
	srcStores := newStores()
	dlq := startNamed(t, "dlq")
	q := startInGroup(t, srcStores, "q", nil, func() *Queue { return dlq })
	publish(t, q, "a")
	m := getOne(t, q)
	dlq.Stop()
	require.NoError(t, q.Settle(Reject, m.Ref))
	waitReady(t, q, 1)
	q.Stop()

	q2 := start(t, srcStores)
	bodies, redelivered := drainGets(t, q2)
	require.Equal(t, []string{"a"}, bodies)
	require.Equal(t, []bool{true}, redelivered)
}

// TestDeadLetterToADeletedQueueDrops: a target deleted meanwhile drops the
// copy, as RabbitMQ does, and the source settles the message.
func TestDeadLetterToADeletedQueueDrops(t *testing.T) {
	srcStores := newStores()
	dlq := startNamed(t, "dlq")
	q := startInGroup(t, srcStores, "q", nil, func() *Queue { return dlq })
	publish(t, q, "a")
	m := getOne(t, q)
	_, err := dlq.Delete(context.Background())
	require.NoError(t, err)
	require.NoError(t, q.Settle(Reject, m.Ref))
	q.Stop()

	q2 := start(t, srcStores)
	bodies, _ := drainGets(t, q2)
	require.Empty(t, bodies)
}

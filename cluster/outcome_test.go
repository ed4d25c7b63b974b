package cluster_test

import (
	"context"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta/raft"
)

// TestUnknownOutcomeIsNotNacked: a publish on the leader is replicated to
// both followers, but their answers never reach the leader, so it cannot
// commit; it steps down (CheckQuorum) and the write's outcome is unknown to
// it, while a follower is elected and commits the entry. The publisher
// must not hear basic.nack (a nack promises "not stored", and a publisher
// that republishes it makes a duplicate): its connection is closed with
// 541 instead, and the message is delivered once.
func TestUnknownOutcomeIsNotNacked(t *testing.T) {
	c := newTestCluster(t)
	lead := c.leader()
	conn, ch := c.dial(lead)
	_, err := ch.QueueDeclare("jobs", true, false, false, false, nil)
	require.NoError(t, err)
	p := newConfirmer(t, ch)
	require.True(t, p.publish("", "jobs", "before", waitFor))

	for i := range c.nodes {
		if i != lead {
			c.net.SetLink(uint64(i+1), uint64(lead+1), raft.Link{Drop: true})
		}
	}
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	require.NoError(t, ch.PublishWithContext(context.Background(), "", "jobs", false, false,
		amqp091.Publishing{Body: []byte("limbo"), DeliveryMode: amqp091.Persistent}))
	select {
	case cf, ok := <-p.confirms:
		require.False(t, ok, "no confirm may come for a publish whose outcome is unknown, got %+v", cf)
	case e := <-closed:
		require.NotNil(t, e)
		require.Equal(t, amqp091.InternalError, e.Code, "closed with %v", e)
	case <-time.After(waitFor):
		t.Fatal("the publisher hears nothing")
	}

	c.net.Heal()
	got := newTally()
	_, nch := c.dial(c.leader()) // the old leader may win again
	consume(t, nch, "jobs", got)
	require.Eventually(t, func() bool { return got.has([]string{"before", "limbo"}) }, waitFor, 10*time.Millisecond,
		"the message whose outcome the publisher did not learn was stored")
	got.mu.Lock()
	defer got.mu.Unlock()
	require.Equal(t, map[string]int{"before": 1, "limbo": 1}, got.seen)
}

package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/cluster"
)

// TestLocalRandomExchange: an x-local-random exchange routes a message to
// a queue bound to it on the node the publisher is connected to. Node 1
// and node 2 each bind an exclusive queue of their own (it lives on its
// node); what is published on a node reaches that node's queue only, and
// node 3, with no queue of its own bound, returns a mandatory message. A
// durable queue is served by every node, so it is local to each: once one
// is bound, node 3 routes to it, and nodes 1 and 2 pick among it and
// their own.
func TestLocalRandomExchange(t *testing.T) {
	c := newTestCluster(t, func(cfg *cluster.Config) { cfg.Broker.RabbitMQVersion = "4.4" })
	_, ch1 := c.dial(0)
	require.NoError(t, ch1.ExchangeDeclare("lr", "x-local-random", true, false, false, false, nil))
	_, ch2 := c.dial(1)
	for i, ch := range []*amqp091.Channel{ch1, ch2} {
		q := fmt.Sprint("on-", i+1)
		_, err := ch.QueueDeclare(q, false, false, true, false, nil)
		require.NoError(t, err)
		require.NoError(t, ch.QueueBind(q, "", "lr", false, nil))
	}
	count := func(ch *amqp091.Channel, q string) int {
		st, err := ch.QueueDeclarePassive(q, false, false, true, false, nil)
		require.NoError(t, err)
		return st.Messages
	}
	for i, ch := range []*amqp091.Channel{ch1, ch2} {
		p := newConfirmer(t, mustChannel(t, c, i))
		for j := range 20 {
			require.True(t, p.publish("lr", fmt.Sprint("k", j), "m", waitFor), "publish on node %d", i+1)
		}
		require.Equal(t, 20, count(ch, fmt.Sprint("on-", i+1)), "node %d's queue", i+1)
	}
	require.Equal(t, 20, count(ch1, "on-1"), "nothing from node 2 reached node 1's queue")

	conn3, ch3 := c.dial(2)
	returns := ch3.NotifyReturn(make(chan amqp091.Return, 1))
	require.Eventually(t, func() bool { return exchangeKnown(conn3, "lr") }, waitFor, 10*time.Millisecond)
	require.NoError(t, ch3.PublishWithContext(context.Background(), "lr", "k", true, false, amqp091.Publishing{Body: []byte("m")}))
	select {
	case r := <-returns:
		require.Equal(t, uint16(312), r.ReplyCode)
	case <-time.After(waitFor):
		t.Fatal("the mandatory message published on node 3 was not returned")
	}

	_, err := ch1.QueueDeclare("shared", true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch1.QueueBind("shared", "", "lr", false, nil))
	c.declared(2, "shared")
	p3 := newConfirmer(t, mustChannel(t, c, 2))
	require.Eventually(t, func() bool {
		require.True(t, p3.publish("lr", "k", "m", waitFor))
		return count(ch1, "shared") > 0 // once node 3 follows the binding
	}, waitFor, 10*time.Millisecond)
}

// mustChannel opens a channel on a new connection to node i.
func mustChannel(t *testing.T, c *testCluster, i int) *amqp091.Channel {
	_, ch := c.dial(i)
	return ch
}

// exchangeKnown reports whether conn's node has the exchange.
func exchangeKnown(conn *amqp091.Connection, name string) bool {
	ch, err := conn.Channel()
	if err != nil {
		return false
	}
	defer ch.Close()
	return ch.ExchangeDeclarePassive(name, "x-local-random", true, false, false, false, nil) == nil
}

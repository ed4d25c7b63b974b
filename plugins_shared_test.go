package broker

import (
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/sharedtest"
)

// In shared mode (a cluster's nodes) a delayed message is held by the
// node that accepted it, in its memory, and routed once, by that node,
// into the shared queue every node serves: what docs/exchange-types.md
// says a cluster does.
func TestSharedDelayedHeldByAcceptingNode(t *testing.T) {
	fc := clock.NewFake(time.Unix(1_800_000_000, 0))
	s := sharedtest.New()
	b1 := startBroker(t, Options{Storage: StorageOptions{Meta: notLeader{s.Meta}, Shards: s.Shards, Unacked: s.Index}, Node: "n1", Clock: fc})
	b2 := startBroker(t, Options{Storage: StorageOptions{Meta: s.Meta, Shards: s.Shards, Unacked: s.Index}, Node: "n2", Clock: fc})
	ch1, ch2 := sharedChannel(t, b1), sharedChannel(t, b2)
	require.NoError(t, ch1.Confirm(false))
	require.NoError(t, ch1.ExchangeDeclare("dx", "x-delayed-message", true, false, false, false,
		amqp091.Table{"x-delayed-type": "direct"}))
	amqptest.DeclareQueue(t, ch1, "q", true)
	require.NoError(t, ch1.QueueBind("q", "k", "dx", false, nil))
	waitQueue(t, b2, "q", true)
	amqptest.Poll(t, func() bool {
		vh, _ := b2.lookupVHost("/")
		return vh.ExchangeExists("dx")
	}, "dx on n2")

	amqptest.PublishMsg(t, ch1, "dx", "k", amqp091.Publishing{Body: []byte("once"),
		Headers: amqp091.Table{"x-delay": int32(1000)}, DeliveryMode: amqp091.Persistent})
	n1, _ := b1.DelayedCount("/", "dx")
	n2, _ := b2.DelayedCount("/", "dx")
	require.Equal(t, [2]int64{1, 0}, [2]int64{n1, n2}, "held by the node that accepted it")

	msgs, err := ch2.Consume("q", "", false, false, false, false, nil)
	require.NoError(t, err)
	fc.Advance(time.Second)
	d := amqptest.Next(t, msgs)
	require.Equal(t, "once", string(d.Body))
	require.NoError(t, d.Ack(false))
	amqptest.Poll(t, func() bool { n, _ := b1.DelayedCount("/", "dx"); return n == 0 }, "routed")
	select {
	case d := <-msgs:
		t.Fatalf("routed twice: %s", d.Body)
	case <-time.After(50 * time.Millisecond):
	}
}

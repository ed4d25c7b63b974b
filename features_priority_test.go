package broker_test

import (
	"context"
	"fmt"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/amqptest"
)

// publishPriorities publishes one persistent message per priority, bodies
// naming their position and priority.
func publishPriorities(t *testing.T, ch *amqp091.Channel, queue string, prios ...uint8) {
	t.Helper()
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, len(prios)))
	for i, p := range prios {
		require.NoError(t, ch.PublishWithContext(context.Background(), "", queue, false, false, amqp091.Publishing{
			DeliveryMode: amqp091.Persistent, Priority: p, Body: []byte(fmt.Sprintf("%d/p%d", i, p)),
		}))
	}
	for range prios {
		require.True(t, (<-confirms).Ack)
	}
}

func getBodies(t *testing.T, ch *amqp091.Channel, queue string, n int) []string {
	t.Helper()
	var out []string
	for range n {
		d, ok, err := ch.Get(queue, true)
		require.NoError(t, err)
		require.True(t, ok)
		require.False(t, d.Redelivered, "%s was never delivered before", d.Body)
		out = append(out, string(d.Body))
	}
	_, ok, err := ch.Get(queue, true)
	require.NoError(t, err)
	require.False(t, ok)
	return out
}

// An x-max-priority queue serves higher priorities first, FIFO within a
// priority, with priorities above the maximum capped at it (RabbitMQ).
func TestMessagePriorities(t *testing.T) {
	b := startBroker(t, broker.Options{})
	ch := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
	_, err := ch.QueueDeclare("prio", false, false, false, false, amqp091.Table{"x-max-priority": int32(10)})
	require.NoError(t, err)
	publishPriorities(t, ch, "prio", 1, 5, 3, 10, 0, 7, 15, 5)
	q, err := ch.QueueDeclarePassive("prio", false, false, false, false, amqp091.Table{"x-max-priority": int32(10)})
	require.NoError(t, err)
	require.Equal(t, 8, q.Messages)
	require.Equal(t,
		[]string{"3/p10", "6/p15", "5/p7", "1/p5", "7/p5", "2/p3", "0/p1", "4/p0"},
		getBodies(t, ch, "prio", 8))

	// A requeued message goes back to its place in its priority level.
	publishPriorities(t, ch, "prio", 2, 9, 2)
	require.NoError(t, ch.Qos(2, 0, false))
	msgs, err := ch.Consume("prio", "", false, false, false, false, nil)
	require.NoError(t, err)
	first := amqptest.Next(t, msgs)
	require.Equal(t, "1/p9", string(first.Body))
	second := amqptest.Next(t, msgs)
	require.Equal(t, "0/p2", string(second.Body))
	require.NoError(t, first.Nack(false, true))
	again := amqptest.Next(t, msgs)
	require.Equal(t, "1/p9", string(again.Body))
	require.True(t, again.Redelivered)
	require.NoError(t, again.Ack(false))
	require.Equal(t, "2/p2", string(amqptest.Next(t, msgs).Body))
}

// Priorities survive a restart: the claimed-but-undelivered messages come
// back from the unacked index in the same order, not redelivered.
func TestMessagePrioritiesAfterRestart(t *testing.T) {
	dir := t.TempDir()
	b, err := broker.New(broker.Options{DataDir: dir})
	require.NoError(t, err)
	_, err = b.Listen("127.0.0.1:0")
	require.NoError(t, err)
	conn, err := amqp091.Dial(b.URL())
	require.NoError(t, err)
	ch, err := conn.Channel()
	require.NoError(t, err)
	_, err = ch.QueueDeclare("prio", true, false, false, false, amqp091.Table{"x-max-priority": int32(5)})
	require.NoError(t, err)
	publishPriorities(t, ch, "prio", 0, 4, 2, 4, 1)
	require.NoError(t, conn.Close())
	require.NoError(t, b.Close())

	b2 := startBroker(t, broker.Options{DataDir: dir})
	ch2 := amqptest.Channel(t, amqptest.Dial(t, b2.URL(), amqp091.Config{}))
	require.Equal(t, []string{"1/p4", "3/p4", "2/p2", "4/p1", "0/p0"}, getBodies(t, ch2, "prio", 5))
}

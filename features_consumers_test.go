package broker_test

import (
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
)

// TestConsumerPriority: while the high-priority consumer has credit it
// gets every message; once its prefetch is full the lower one gets the
// rest.
func TestConsumerPriority(t *testing.T) {
	b, _, ch := featureBroker(t)
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	high := amqptest.Channel(t, conn)
	require.NoError(t, high.Qos(2, 0, false))
	amqptest.DeclareQueue(t, ch, "p", false)
	low, err := ch.Consume("p", "low", false, false, false, false, amqp091.Table{"x-priority": int32(1)})
	require.NoError(t, err)
	hi, err := high.Consume("p", "high", false, false, false, false, amqp091.Table{"x-priority": int32(10)})
	require.NoError(t, err)
	amqptest.PublishConfirmed(t, amqptest.Channel(t, conn), "p", false, amqptest.Numbered("m", 5)...)
	require.Equal(t, "m-0", string(amqptest.Next(t, hi).Body))
	require.Equal(t, "m-1", string(amqptest.Next(t, hi).Body))
	for i := 2; i < 5; i++ {
		require.Equal(t, amqptest.Numbered("m", 5)[i], string(amqptest.Next(t, low).Body))
	}
	st := waitStats(t, b, "p", func(s queueCounts) bool { return s.Unacked == 5 })
	require.Equal(t, 2, st.Consumers)
}

func TestConsumerPriorityInvalid(t *testing.T) {
	_, _, ch := featureBroker(t)
	amqptest.DeclareQueue(t, ch, "p", false)
	_, err := ch.Consume("p", "", false, false, false, false, amqp091.Table{"x-priority": "high"})
	amqptest.RequireCode(t, err, 406)
}

// TestSingleActiveConsumer: only the first consumer gets messages; when it
// cancels, the next one takes over.
func TestSingleActiveConsumer(t *testing.T) {
	b, _, ch := featureBroker(t)
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	declareWith(t, ch, "sac", amqp091.Table{"x-single-active-consumer": true})
	ch2 := amqptest.Channel(t, conn)
	first, err := ch.Consume("sac", "first", true, false, false, false, nil)
	require.NoError(t, err)
	second, err := ch2.Consume("sac", "second", true, false, false, false, nil)
	require.NoError(t, err)
	pub := amqptest.Channel(t, conn)
	amqptest.PublishConfirmed(t, pub, "sac", false, "a", "b", "c")
	for _, want := range []string{"a", "b", "c"} {
		require.Equal(t, want, string(amqptest.Next(t, first).Body))
	}
	require.Empty(t, second)
	require.NoError(t, ch.Cancel("first", false))
	amqptest.PublishBodies(t, pub, "sac", false, "d")
	require.Equal(t, "d", string(amqptest.Next(t, second).Body))
}

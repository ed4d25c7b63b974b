package broker

import (
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/queue"
)

// TestConsumerPriority: while the high-priority consumer has credit it
// gets every message; once its prefetch is full the lower one gets the
// rest.
func TestConsumerPriority(t *testing.T) {
	b, _, ch := featureBroker(t)
	conn := dial(t, b.URL(), amqp091.Config{})
	high := amqptest.Channel(t, conn)
	require.NoError(t, high.Qos(2, 0, false))
	declareQueue(t, ch, "p", false)
	low, err := ch.Consume("p", "low", false, false, false, false, amqp091.Table{"x-priority": int32(1)})
	require.NoError(t, err)
	hi, err := high.Consume("p", "high", false, false, false, false, amqp091.Table{"x-priority": int32(10)})
	require.NoError(t, err)
	publishConfirmed(t, amqptest.Channel(t, conn), "p", false, numbered("m", 5)...)
	require.Equal(t, "m-0", string(next(t, hi).Body))
	require.Equal(t, "m-1", string(next(t, hi).Body))
	for i := 2; i < 5; i++ {
		require.Equal(t, numbered("m", 5)[i], string(next(t, low).Body))
	}
	st := waitStats(t, b, "p", func(s queue.Stats) bool { return s.Unacked == 5 })
	require.Equal(t, 2, st.Consumers)
}

func TestConsumerPriorityInvalid(t *testing.T) {
	_, _, ch := featureBroker(t)
	declareQueue(t, ch, "p", false)
	_, err := ch.Consume("p", "", false, false, false, false, amqp091.Table{"x-priority": "high"})
	amqptest.RequireCode(t, err, 406)
}

// TestSingleActiveConsumer: only the first consumer gets messages; when it
// cancels, the next one takes over.
func TestSingleActiveConsumer(t *testing.T) {
	b, _, ch := featureBroker(t)
	conn := dial(t, b.URL(), amqp091.Config{})
	declareWith(t, ch, "sac", amqp091.Table{"x-single-active-consumer": true})
	ch2 := amqptest.Channel(t, conn)
	first, err := ch.Consume("sac", "first", true, false, false, false, nil)
	require.NoError(t, err)
	second, err := ch2.Consume("sac", "second", true, false, false, false, nil)
	require.NoError(t, err)
	pub := amqptest.Channel(t, conn)
	publishConfirmed(t, pub, "sac", false, "a", "b", "c")
	for _, want := range []string{"a", "b", "c"} {
		require.Equal(t, want, string(next(t, first).Body))
	}
	require.Empty(t, second)
	require.NoError(t, ch.Cancel("first", false))
	publishBodies(t, pub, "sac", false, "d")
	require.Equal(t, "d", string(next(t, second).Body))
}

package broker_test

import (
	"context"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/amqptest"
)

// A delivery held past Options.ConsumerTimeout closes its channel with 406
// in RabbitMQ's words; the message goes back in place, redelivered, and the
// connection stays usable.
func TestEngineConsumerTimeoutClosesChannel(t *testing.T) {
	amqptest.CheckGoroutines(t) // Close stops the scanner goroutine too
	const timeout = 300 * time.Millisecond
	b := startBroker(t, broker.Options{ConsumerTimeout: timeout})
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	ch := amqptest.Channel(t, conn)
	amqptest.DeclareQueue(t, ch, "slow", false)
	amqptest.PublishConfirmed(t, ch, "slow", false, "a", "b")
	errs := ch.NotifyClose(make(chan *amqp091.Error, 1))
	require.NoError(t, ch.Qos(1, 0, false))
	msgs, err := ch.Consume("slow", "sleepy", false, false, false, false, nil)
	require.NoError(t, err)
	require.Equal(t, "a", string(amqptest.Next(t, msgs).Body)) // and never acked

	e := amqptest.AwaitClose(t, errs) // the scanner runs every timeout/2
	require.Equal(t, amqp.PreconditionFailed, uint16(e.Code))
	require.Equal(t, "PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. Timeout value used: 300 ms. This timeout value can be configured, see consumers doc guide to learn more", e.Reason)

	other := amqptest.Channel(t, conn) // same connection: only the channel closed
	d := amqptest.Get(t, other, "slow", true)
	require.Equal(t, "a", string(d.Body))
	require.True(t, d.Redelivered)
	require.Equal(t, "b", string(amqptest.Get(t, other, "slow", true).Body))
	waitStats(t, b, "slow", func(st queueCounts) bool { return st == queueCounts{} })
}

// The consumer timeout reaches channels of the direct API too. (The direct
// Channel tells its NotifyClose listeners only once its connection ends, so
// this watches IsClosed and the queue.)
func TestEngineConsumerTimeoutDirectChannel(t *testing.T) {
	b := startBroker(t, broker.Options{ConsumerTimeout: 200 * time.Millisecond})
	ch, err := b.Channel(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { _ = ch.Close() })
	_, err = ch.QueueDeclare("direct-slow", false, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.PublishWithContext(context.Background(), "", "direct-slow", false, false, amqp091.Publishing{Body: []byte("x")}))
	msgs, err := ch.Consume("direct-slow", "", false, false, false, false, nil)
	require.NoError(t, err)
	amqptest.Next(t, msgs)
	waitStats(t, b, "direct-slow", func(st queueCounts) bool { return st == queueCounts{Ready: 1} })
	require.True(t, ch.IsClosed())
}

package broker_test

import (
	"context"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/amqptest"
)

// A message rejected to a dead-letter exchange just before a graceful
// Close ends up in exactly one place after a restart: the dead-letter
// queue. Close finishes the dead-lettering it accepted (the copy is
// stored, then the source is deleted) instead of stopping the target under
// it. Each round races the reject against Close, so the test repeats it.
func TestEngineRejectToDLXThenCloseKeepsTheMessage(t *testing.T) {
	for round := range 40 {
		dir := t.TempDir()
		b, err := broker.New(broker.Options{DataDir: dir})
		require.NoError(t, err)
		ch, err := b.Channel(context.Background())
		require.NoError(t, err)
		_, err = ch.QueueDeclare("dlq", true, false, false, false, nil)
		require.NoError(t, err)
		_, err = ch.QueueDeclare("work", true, false, false, false, amqp091.Table{
			"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq",
		})
		require.NoError(t, err)
		require.NoError(t, ch.Confirm(false))
		confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1))
		require.NoError(t, ch.PublishWithContext(context.Background(), "", "work", false, false,
			amqp091.Publishing{Body: []byte("m"), DeliveryMode: amqp091.Persistent}))
		c, _ := amqptest.Receive(t, confirms)
		require.True(t, c.Ack)
		d, ok, err := ch.Get("work", false)
		require.NoError(t, err)
		require.True(t, ok)
		require.NoError(t, ch.Reject(d.DeliveryTag, false))
		require.NoError(t, b.Close())

		b2, err := broker.New(broker.Options{DataDir: dir})
		require.NoError(t, err)
		work, dlq := queueStats(t, b2, "work"), queueStats(t, b2, "dlq")
		require.NoError(t, b2.Close())
		require.Equal(t, [2]uint64{0, 1}, [2]uint64{work.Ready, dlq.Ready},
			"round %d: messages in work and dlq after the restart", round)
	}
}

// The same over TCP, with a short pause between the reject and Close.
func TestEngineRejectToDLXThenCloseOverTCP(t *testing.T) {
	for round := range 30 {
		dir := t.TempDir()
		b, err := broker.New(broker.Options{DataDir: dir})
		require.NoError(t, err)
		_, err = b.Listen("127.0.0.1:0")
		require.NoError(t, err)
		conn, err := amqp091.Dial(b.URL())
		require.NoError(t, err)
		ch := amqptest.Channel(t, conn)
		amqptest.DeclareQueue(t, ch, "dlq", true)
		_, err = ch.QueueDeclare("work", true, false, false, false, amqp091.Table{
			"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq",
		})
		require.NoError(t, err)
		amqptest.PublishConfirmed(t, ch, "work", true, "m")
		d := amqptest.Get(t, ch, "work", false)
		require.NoError(t, d.Reject(false))
		time.Sleep(50 * time.Microsecond)
		require.NoError(t, b.Close())
		_ = conn.Close()

		b2, err := broker.New(broker.Options{DataDir: dir})
		require.NoError(t, err)
		work, dlq := queueStats(t, b2, "work"), queueStats(t, b2, "dlq")
		require.NoError(t, b2.Close())
		// Over TCP the reject may still be on the wire when Close shuts
		// the connection: then the message is back in work, redelivered.
		require.Equal(t, uint64(1), work.Ready+dlq.Ready,
			"round %d: work %d, dlq %d after the restart", round, work.Ready, dlq.Ready)
	}
}

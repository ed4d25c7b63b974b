package broker_test

import (
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/amqptest"
)

// TestSetConsumerTimeout: a broker started with an hour's consumer
// timeout, lowered to 300 ms while a delivery is held, closes that
// channel with RabbitMQ's 406 text naming the new value (the scanner's
// pass interval follows the new timeout); raised again, a held delivery
// survives past the old value.
func TestSetConsumerTimeout(t *testing.T) {
	b := startBroker(t, broker.Options{ConsumerTimeout: time.Hour})
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	ch := amqptest.Channel(t, conn)
	amqptest.DeclareQueue(t, ch, "slow", false)
	amqptest.PublishConfirmed(t, ch, "slow", false, "a")
	errs := ch.NotifyClose(make(chan *amqp091.Error, 1))
	msgs, err := ch.Consume("slow", "", false, false, false, false, nil)
	require.NoError(t, err)
	amqptest.Next(t, msgs) // held, never acked

	b.SetConsumerTimeout(300 * time.Millisecond)
	e := amqptest.AwaitClose(t, errs)
	require.Equal(t, amqp.PreconditionFailed, uint16(e.Code))
	require.Contains(t, e.Reason, "Timeout value used: 300 ms.")

	b.SetConsumerTimeout(0) // the default, 30 minutes
	ch2 := amqptest.Channel(t, conn)
	errs2 := ch2.NotifyClose(make(chan *amqp091.Error, 1))
	msgs2, err := ch2.Consume("slow", "", false, false, false, false, nil)
	require.NoError(t, err)
	d := amqptest.Next(t, msgs2)
	require.True(t, d.Redelivered)
	select {
	case e := <-errs2:
		t.Fatalf("closed under the default timeout: %v", e)
	case <-time.After(time.Second):
	}
	require.NoError(t, d.Ack(false))
}

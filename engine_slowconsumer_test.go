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

// A consumer whose client stops reading must not make the broker buffer the
// whole queue for it: deliveries stop at the connection's outbox bound, the
// rest stays ready in the queue, and other clients are unaffected.
func TestSlowConsumerHoldsBoundedBuffer(t *testing.T) {
	amqptest.CheckGoroutines(t)
	b := startBroker(t, broker.Options{})
	ctx := context.Background()

	// The stuck client: no-ack consumer (no prefetch bound at all), and it
	// never reads after consume-ok.
	raw := amqptest.DialRaw(t, b.Addr().String())
	raw.Handshake()
	raw.OpenChannel(1)
	raw.SendMethod(1, &amqp.QueueDeclare{Queue: "slow"})
	_, ok := raw.ExpectMethod(1).(*amqp.QueueDeclareOk)
	require.True(t, ok)
	raw.SendMethod(1, &amqp.BasicConsume{Queue: "slow", ConsumerTag: "stuck", NoAck: true})
	_, ok = raw.ExpectMethod(1).(*amqp.BasicConsumeOk)
	require.True(t, ok)

	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	ch, err := conn.Channel()
	require.NoError(t, err)
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 4096))
	body := make([]byte, 16<<10)
	const n = 2000 // 32 MiB of bodies, far past the outbox bound
	for range n {
		require.NoError(t, ch.PublishWithContext(ctx, "", "slow", false, false, amqp091.Publishing{Body: body}))
	}
	for range n {
		select {
		case c := <-confirms:
			require.True(t, c.Ack)
		case <-time.After(10 * time.Second):
			t.Fatal("confirms stalled")
		}
	}
	// Most messages are still ready in the queue, not in the stuck
	// connection's buffers.
	q, err := ch.QueueDeclarePassive("slow", false, false, false, false, nil)
	require.NoError(t, err)
	require.Greater(t, q.Messages, n/2, "the queue kept what the stuck client could not take")

	// Others are unaffected.
	other := amqptest.Dial(t, b.URL(), amqp091.Config{})
	amqptest.RequireWorks(t, other)
}

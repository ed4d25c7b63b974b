package shovel_test

import (
	"context"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/shovel"
)

// TestWorkerFromStream copies a stream into a classic queue as
// RabbitMQ's "Move messages" does for a stream: src-consumer-args
// x-stream-offset first reaches the source consumer, so the link reads
// the stream from its start, and queue-length ends it after the
// stream's length. The stream keeps its messages (a stream is read, not
// emptied).
func TestWorkerFromStream(t *testing.T) {
	b := brokertest.New(t)
	ch := amqptest.ConfirmChannel(t, brokertest.Dial(t, b))
	_, err := ch.QueueDeclare("log", true, false, false, false, amqp091.Table{"x-queue-type": "stream"})
	require.NoError(t, err)
	bodies := amqptest.Numbered("e", 20)
	amqptest.PublishConfirmed(t, ch, "log", true, bodies...)

	def, err := shovel.Parse(mustJSON(t, map[string]any{
		"src-uri": "amqp://", "src-queue": "log", "dest-uri": "amqp://", "dest-queue": "copy",
		"src-delete-after": "queue-length", "src-prefetch-count": 1000,
		"src-consumer-args": map[string]any{"x-stream-offset": "first"},
	}))
	require.NoError(t, err)
	w := shovel.NewWorker(def, shovel.Local{User: b.Dial})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.ErrorIs(t, w.Run(ctx), shovel.ErrDone, "%+v", w.Status())
	require.Equal(t, int64(20), w.Status().Forwarded)
	require.Equal(t, bodies, amqptest.GetAll(t, ch, "copy"))
	q, err := ch.QueueDeclarePassive("log", true, false, false, false, amqp091.Table{"x-queue-type": "stream"})
	require.NoError(t, err)
	require.Equal(t, 20, q.Messages)
}

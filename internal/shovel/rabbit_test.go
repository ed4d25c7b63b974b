package shovel_test

import (
	"context"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/rabbitnode"
	"github.com/warrenmq/broker/internal/shovel"
)

// TestWorkerWithRabbitMQ moves a queue from Warren to a real RabbitMQ node
// and back again, on-confirm with src-delete-after queue-length.
func TestWorkerWithRabbitMQ(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a RabbitMQ node")
	}
	node := rabbitnode.Start(t, rabbitnode.Options{})
	warren := brokertest.New(t)
	const n = 500
	wch := amqptest.ConfirmChannel(t, brokertest.Dial(t, warren))
	amqptest.DeclareQueue(t, wch, "in", true)
	amqptest.PublishConfirmed(t, wch, "in", true, amqptest.Numbered("m", n)...)

	run := func(src, dest string) {
		def, err := shovel.Parse(mustJSON(t, map[string]any{
			"src-uri": src, "src-queue": "in", "dest-uri": dest, "dest-queue": "in",
			"src-delete-after": "queue-length",
		}))
		require.NoError(t, err)
		// Same queue name both ways: the second run moves it back.
		w := shovel.NewWorker(def, shovel.Local{User: warren.Dial})
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		require.ErrorIs(t, w.Run(ctx), shovel.ErrDone)
		require.Equal(t, int64(n), w.Status().Forwarded)
	}
	run("amqp://", node.URL())
	rconn, err := amqp091.Dial(node.URL())
	require.NoError(t, err)
	defer rconn.Close()
	q, err := amqptest.Channel(t, rconn).QueueDeclarePassive("in", true, false, false, false, nil)
	require.NoError(t, err)
	require.Equal(t, n, q.Messages)

	run(node.URL(), "amqp://")
	require.Equal(t, amqptest.Numbered("m", n), amqptest.GetAll(t, amqptest.Channel(t, brokertest.Dial(t, warren)), "in"))
}

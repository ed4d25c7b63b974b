package shovel_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/rabbitnode"
)

// TestShovelsBetweenWarrenAndRabbitMQ runs both directions a migration
// uses, each as a stored shovel parameter, on-confirm: a shovel on
// Warren (PutParameter, as PUT /api/parameters/shovel does) moves a
// Warren queue into RabbitMQ, and RabbitMQ's own shovel plugin (3.10.8,
// declared over its management API) consumes a Warren queue as its
// source and publishes into RabbitMQ. Every message arrives once, with
// its properties.
func TestShovelsBetweenWarrenAndRabbitMQ(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a RabbitMQ node")
	}
	const n = 2000
	node := rabbitnode.Start(t, rabbitnode.Options{Plugins: []string{"rabbitmq_shovel", "rabbitmq_shovel_management"}})
	warren := brokertest.New(t)
	wch := amqptest.ConfirmChannel(t, brokertest.Dial(t, warren))
	for _, q := range []string{"to-rabbit", "rabbit-reads"} {
		amqptest.DeclareQueue(t, wch, q, true)
		for _, body := range amqptest.Numbered(q, n) {
			amqptest.PublishMsg(t, wch, "", q, amqp091.Publishing{Body: []byte(body), MessageId: body,
				DeliveryMode: amqp091.Persistent, ContentType: "text/plain", Headers: amqp091.Table{"k": "v"}})
		}
	}

	t.Run("WarrenShovelIntoRabbitMQ", func(t *testing.T) {
		value, err := json.Marshal(map[string]any{
			"src-uri": "amqp://", "src-queue": "to-rabbit", "dest-uri": node.URL(), "dest-queue": "from-warren",
			"ack-mode": "on-confirm", "src-delete-after": "queue-length",
		})
		require.NoError(t, err)
		_, err = warren.Admin().PutParameter(context.Background(),
			broker.Parameter{Component: "shovel", VHost: "/", Name: "to-rabbit", Value: value})
		require.NoError(t, err)
		requireQueueHolds(t, node.URL(), "from-warren", amqptest.Numbered("to-rabbit", n))
		amqptest.RequireEmpty(t, amqptest.Channel(t, brokertest.Dial(t, warren)), "to-rabbit")
	})

	t.Run("RabbitMQShovelFromWarren", func(t *testing.T) {
		putParameter(t, node.MgmtURL(), "shovel", "/", "from-warren", map[string]any{
			"src-protocol": "amqp091", "src-uri": warren.URL(), "src-queue": "rabbit-reads",
			"dest-protocol": "amqp091", "dest-uri": "amqp://", "dest-queue": "read-from-warren",
			"ack-mode": "on-confirm",
		})
		requireQueueHolds(t, node.URL(), "read-from-warren", amqptest.Numbered("rabbit-reads", n))
		amqptest.RequireEmpty(t, amqptest.Channel(t, brokertest.Dial(t, warren)), "rabbit-reads")
		// RabbitMQ reports its link running, its source being Warren.
		status, body := mgmtDo(t, http.MethodGet, node.MgmtURL()+"/api/shovels/%2F", nil)
		require.Equal(t, http.StatusOK, status, "%s", body)
		var links []map[string]any
		require.NoError(t, json.Unmarshal(body, &links))
		require.Len(t, links, 1, "%s", body)
		require.Equal(t, "running", links[0]["state"], "%s", body)
	})
}

// requireQueueHolds waits until queue on uri holds len(want) messages,
// then reads them all: each body of want once, with the properties the
// publisher set.
func requireQueueHolds(t *testing.T, uri, queue string, want []string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		d, err := queueDepth(uri, queue)
		if err == nil && d >= len(want) {
			break
		}
		require.True(t, time.Now().Before(deadline), "%q holds %d of %d (%v)", queue, d, len(want), err)
		time.Sleep(20 * time.Millisecond)
	}
	conn := amqptest.Dial(t, uri, amqp091.Config{})
	ch := amqptest.Channel(t, conn)
	var got []string
	for {
		m, ok, err := ch.Get(queue, true)
		require.NoError(t, err)
		if !ok {
			break
		}
		require.Equal(t, string(m.Body), m.MessageId)
		require.Equal(t, uint8(amqp091.Persistent), m.DeliveryMode)
		require.Equal(t, "text/plain", m.ContentType)
		require.Equal(t, "v", m.Headers["k"])
		got = append(got, string(m.Body))
	}
	require.ElementsMatch(t, want, got)
}

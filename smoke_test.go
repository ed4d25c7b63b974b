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

func TestSmoke(t *testing.T) {
	b := startBroker(t, broker.Options{})
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	ch, err := conn.Channel()
	require.NoError(t, err)
	q, err := ch.QueueDeclare("jobs", false, false, false, false, nil)
	require.NoError(t, err)
	require.Equal(t, "jobs", q.Name)
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 10))
	ctx := context.Background()
	require.NoError(t, ch.PublishWithContext(ctx, "", "jobs", false, false, amqp091.Publishing{Body: []byte("hi")}))
	c := <-confirms
	require.True(t, c.Ack)
	msgs, err := ch.Consume("jobs", "", false, false, false, false, nil)
	require.NoError(t, err)
	select {
	case d := <-msgs:
		require.Equal(t, "hi", string(d.Body))
		require.NoError(t, d.Ack(false))
	case <-time.After(5 * time.Second):
		t.Fatal("no delivery")
	}
}

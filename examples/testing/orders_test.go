package orders_test

import (
	"context"
	"errors"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/brokertest"
	orders "github.com/warrenmq/broker/examples/testing"
)

// TestSubmitAndHandle is the whole pattern: a broker per test, amqp091-go
// dialled to it without a socket, the application code unchanged.
func TestSubmitAndHandle(t *testing.T) {
	t.Parallel()
	b := brokertest.New(t)
	ch, err := brokertest.Dial(t, b).Channel()
	require.NoError(t, err)

	require.NoError(t, orders.Declare(ch))
	ctx := context.Background()
	require.NoError(t, orders.Submit(ctx, ch, orders.Order{ID: "o-1", Item: "teapot", Quantity: 2}))
	require.Error(t, orders.Submit(ctx, ch, orders.Order{ID: "o-2", Item: "cup"}))

	got := make(chan orders.Order, 1)
	hctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() {
		_ = orders.Handle(hctx, ch, func(o orders.Order) error {
			got <- o
			stop()
			return nil
		})
	}()
	require.Equal(t, orders.Order{ID: "o-1", Item: "teapot", Quantity: 2}, <-got)
}

// TestFailedOrderIsRedelivered runs the same code on the in-process
// channel: *broker.Channel satisfies orders.Channel too.
func TestFailedOrderIsRedelivered(t *testing.T) {
	t.Parallel()
	b := brokertest.New(t)
	ch := brokertest.Channel(t, b)

	require.NoError(t, orders.Declare(ch))
	ctx := context.Background()
	require.NoError(t, orders.Submit(ctx, ch, orders.Order{ID: "o-1", Item: "teapot", Quantity: 1}))

	attempts := 0
	hctx, stop := context.WithCancel(ctx)
	defer stop()
	err := orders.Handle(hctx, ch, func(o orders.Order) error {
		attempts++
		if attempts == 1 {
			return errors.New("warehouse busy")
		}
		stop()
		return nil
	})
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 2, attempts, "the failed order came back")

	// The broker is a real AMQP endpoint on 127.0.0.1 for other clients too.
	conn, err := amqp091.Dial(b.URL())
	require.NoError(t, err)
	defer conn.Close()
	other, err := conn.Channel()
	require.NoError(t, err)
	q, err := other.QueueDeclarePassive(orders.Queue, true, false, false, false, nil)
	require.NoError(t, err)
	require.Equal(t, 0, q.Messages)
}

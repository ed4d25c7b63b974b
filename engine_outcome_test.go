package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/faultstore"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/storage/memory"
)

// A publish whose store cannot tell whether it stored it (a replicated
// store whose leader changed) is never nacked, since a nack promises "not
// stored": its confirm is withheld and the connection closed with 541;
// the publisher reconnects and carries on.
func TestEngineUnknownAppendOutcomeIsNotNacked(t *testing.T) {
	in := faultstore.New()
	b := startBroker(t, broker.Options{Storage: broker.StorageOptions{Shards: faultstore.WrapShards(memory.New(), in)}})
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	ch := amqptest.Channel(t, conn)
	amqptest.DeclareQueue(t, ch, "q", true)
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 4))
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	in.Fail(faultstore.On(faultstore.Append), 1, fmt.Errorf("leader changed: %w", storage.ErrOutcomeUnknown))
	require.NoError(t, ch.PublishWithContext(context.Background(), "", "q", false, false,
		amqp091.Publishing{Body: []byte("limbo"), DeliveryMode: amqp091.Persistent}))
	select {
	case e := <-closed:
		require.NotNil(t, e)
		require.Equal(t, amqp091.InternalError, e.Code, "%v", e)
		require.Contains(t, e.Reason, "may or may not be stored")
	case c := <-confirms:
		t.Fatalf("confirm %+v for a publish of unknown outcome", c)
	case <-time.After(amqptest.Timeout):
		t.Fatal("the connection is not closed")
	}
	for c := range confirms {
		t.Fatalf("confirm %+v for a publish of unknown outcome", c)
	}

	ch2 := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
	require.NoError(t, ch2.Confirm(false))
	confirms2 := ch2.NotifyPublish(make(chan amqp091.Confirmation, 1))
	require.NoError(t, ch2.PublishWithContext(context.Background(), "", "q", false, false,
		amqp091.Publishing{Body: []byte("next"), DeliveryMode: amqp091.Persistent}))
	require.True(t, (<-confirms2).Ack)
}

// tx.commit-ok promises the transaction's messages are stored: a store
// that failed under a commit closes the connection with 541 instead.
func TestEngineFailedAppendFailsTxCommit(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"failed", nil},
		{"outcome unknown", storage.ErrOutcomeUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := faultstore.New()
			b := startBroker(t, broker.Options{Storage: broker.StorageOptions{Shards: faultstore.WrapShards(memory.New(), in)}})
			ch := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
			amqptest.DeclareQueue(t, ch, "q", true)
			require.NoError(t, ch.Tx())
			require.NoError(t, ch.PublishWithContext(context.Background(), "", "q", false, false,
				amqp091.Publishing{Body: []byte("m"), DeliveryMode: amqp091.Persistent}))
			in.Fail(faultstore.On(faultstore.Append), 1, tc.err)
			amqptest.RequireCode(t, ch.TxCommit(), amqp091.InternalError)
		})
	}
}

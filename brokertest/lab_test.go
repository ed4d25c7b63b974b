package brokertest_test

import (
	"context"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/internal/amqptest"
)

// dialBoth connects through the Lab's TCP port and its socket-free door.
func dialBoth(t *testing.T, lab *brokertest.Lab) map[string]*amqp091.Connection {
	return map[string]*amqp091.Connection{
		"tcp":  amqptest.Dial(t, lab.URL(), amqp091.Config{}),
		"dial": lab.DialAMQP(t, ""),
	}
}

// A graceful restart keeps what RabbitMQ keeps across `rabbitmqctl stop`
// and a start: durable queues with their persistent messages, unacked
// deliveries back as redelivered; transient queues and transient messages
// are gone. Clients are told 320 and reconnect to the same address.
func TestLabRestart(t *testing.T) {
	for _, door := range []string{"tcp", "dial"} {
		t.Run(door, func(t *testing.T) {
			lab := brokertest.NewLab(t, broker.Options{})
			conn := dialBoth(t, lab)[door]
			ch := amqptest.Channel(t, conn)
			amqptest.DeclareQueue(t, ch, "durable", true)
			amqptest.DeclareQueue(t, ch, "transient", false)
			amqptest.PublishConfirmed(t, ch, "durable", true, "p1", "p2", "p3")
			amqptest.PublishConfirmed(t, ch, "durable", false, "t1")
			amqptest.PublishConfirmed(t, ch, "transient", true, "x")
			held := amqptest.Get(t, ch, "durable", false)
			require.Equal(t, "p1", string(held.Body))
			closed := conn.NotifyClose(make(chan *amqp091.Error, 1))

			require.NoError(t, lab.Restart())
			err, _ := amqptest.Receive(t, closed)
			require.NotNil(t, err)
			require.Equal(t, amqp091.ConnectionForced, err.Code)
			require.Equal(t, "CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'", err.Reason, "RabbitMQ's words")

			conn = dialBoth(t, lab)[door]
			ch = amqptest.Channel(t, conn)
			require.False(t, amqptest.QueueExists(t, conn, "transient"))
			d := amqptest.Get(t, ch, "durable", true)
			require.Equal(t, "p1", string(d.Body))
			require.True(t, d.Redelivered, "unacked at the restart")
			require.Equal(t, []string{"p2", "p3"}, amqptest.GetAll(t, ch, "durable"), "the transient message is gone")
		})
	}
}

// A crash keeps only what the stores had acknowledged: confirmed
// messages survive, a publish whose store write had not happened is lost
// (never confirmed), and clients see the connection drop without
// connection.close.
func TestLabCrash(t *testing.T) {
	lab := brokertest.NewLab(t, broker.Options{})
	conn := amqptest.Dial(t, lab.URL(), amqp091.Config{})
	ch := amqptest.Channel(t, conn)
	amqptest.DeclareQueue(t, ch, "q", true)
	amqptest.PublishConfirmed(t, ch, "q", true, "confirmed-1", "confirmed-2")
	held := amqptest.Get(t, ch, "q", false)
	require.Equal(t, "confirmed-1", string(held.Body))

	hang := lab.HangStore(brokertest.StoreAppend)
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1))
	amqptest.PublishBodies(t, ch, "q", true, "in-flight")
	<-hang.Arrived()
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	require.NoError(t, lab.Crash())
	hang.Release() // the dead broker's write must not land
	err, _ := amqptest.Receive(t, closed)
	require.NotNil(t, err)
	require.NotEqual(t, amqp091.ConnectionForced, err.Code, "a crash sends no connection.close")
	select {
	case c := <-confirms:
		require.False(t, c.Ack, "the in-flight publish was never confirmed")
	default:
	}

	conn = amqptest.Dial(t, lab.URL(), amqp091.Config{})
	ch = amqptest.Channel(t, conn)
	d := amqptest.Get(t, ch, "q", true)
	require.Equal(t, "confirmed-1", string(d.Body))
	require.True(t, d.Redelivered)
	require.Equal(t, []string{"confirmed-2"}, amqptest.GetAll(t, ch, "q"))
}

// bounded is a context that ends after amqptest.Timeout: a broken test
// fails instead of hanging.
func bounded(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), amqptest.Timeout)
	t.Cleanup(cancel)
	return ctx
}

package broker

import (
	"context"
	"net"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
)

// drainChannel is what the Shutdown tests do on a channel: amqp091-go's
// Channel and the broker's direct Channel both have it.
type drainChannel interface {
	QueueDeclare(name string, durable, autoDelete, exclusive, noWait bool, args amqp091.Table) (amqp091.Queue, error)
	Qos(prefetchCount, prefetchSize int, global bool) error
	Consume(queue, consumer string, autoAck, exclusive, noLocal, noWait bool, args amqp091.Table) (<-chan amqp091.Delivery, error)
	Confirm(noWait bool) error
	NotifyPublish(c chan amqp091.Confirmation) chan amqp091.Confirmation
	PublishWithContext(ctx context.Context, exchange, key string, mandatory, immediate bool, msg amqp091.Publishing) error
	Get(queue string, autoAck bool) (amqp091.Delivery, bool, error)
}

// drainDoor opens a channel on b through one of its doors, with a
// listener for the error its connection is closed with. The broker is
// closed by the test (Shutdown), not by cleanup.
type drainDoor struct {
	name string
	open func(t *testing.T, b *Broker) (drainChannel, chan *amqp091.Error)
}

var drainDoors = []drainDoor{
	{"tcp", func(t *testing.T, b *Broker) (drainChannel, chan *amqp091.Error) {
		return amqp091Door(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
	}},
	{"dial", func(t *testing.T, b *Broker) (drainChannel, chan *amqp091.Error) {
		return amqp091Door(t, amqptest.Dial(t, b.URL(), amqp091.Config{Dial: b.Dial}))
	}},
	{"direct", func(t *testing.T, b *Broker) (drainChannel, chan *amqp091.Error) {
		ch, err := b.Channel(context.Background())
		require.NoError(t, err)
		t.Cleanup(func() { _ = ch.Close() })
		return ch, ch.NotifyClose(make(chan *amqp091.Error, 1))
	}},
}

func amqp091Door(t *testing.T, conn *amqp091.Connection) (drainChannel, chan *amqp091.Error) {
	return amqptest.Channel(t, conn), conn.NotifyClose(make(chan *amqp091.Error, 1))
}

// newDrainBroker starts a broker on dir listening on loopback.
func newDrainBroker(t *testing.T, dir string) *Broker {
	t.Helper()
	b, err := New(Options{DataDir: dir})
	require.NoError(t, err)
	_, err = b.Listen("127.0.0.1:0")
	require.NoError(t, err)
	return b
}

// shutdownAsync runs Shutdown on its own goroutine and returns once
// publishes are refused; the result comes on the channel.
func shutdownAsync(t *testing.T, b *Broker, ctx context.Context) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- b.Shutdown(ctx) }()
	select {
	case <-b.drain.Started():
	case <-time.After(amqptest.Timeout):
		t.Fatal("Shutdown did not start draining")
	}
	return done
}

// shutdownResult waits for Shutdown's result.
func shutdownResult(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(amqptest.Timeout):
		t.Fatal("Shutdown did not return")
		return nil
	}
}

// publishDurable publishes persistent bodies to queue and waits for their
// confirms.
func publishDurable(t *testing.T, ch drainChannel, queue string, bodies ...string) {
	t.Helper()
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, len(bodies)))
	for _, body := range bodies {
		require.NoError(t, ch.PublishWithContext(context.Background(), "", queue, false, false,
			amqp091.Publishing{Body: []byte(body), DeliveryMode: amqp091.Persistent}))
	}
	for range bodies {
		select {
		case c := <-confirms:
			require.True(t, c.Ack)
		case <-time.After(amqptest.Timeout):
			t.Fatal("no publisher confirm")
		}
	}
}

// reopened restarts a broker on dir and returns every message of queue
// (bodies and redelivered flags), acking them.
func reopened(t *testing.T, dir, queue string) (bodies []string, redelivered []bool) {
	t.Helper()
	b := startBroker(t, Options{DataDir: dir})
	ch, err := b.Channel(context.Background())
	require.NoError(t, err)
	for {
		d, ok, err := ch.Get(queue, true)
		require.NoError(t, err)
		if !ok {
			return bodies, redelivered
		}
		bodies = append(bodies, string(d.Body))
		redelivered = append(redelivered, d.Redelivered)
	}
}

// requireRefusesConnections requires every door of a draining broker to
// refuse a new connection.
func requireRefusesConnections(t *testing.T, b *Broker, addr string) {
	t.Helper()
	_, err := b.Dial("", "")
	require.ErrorIs(t, err, ErrClosed)
	_, err = b.Channel(context.Background())
	require.ErrorIs(t, err, ErrClosed)
	_, err = b.Listen("127.0.0.1:0")
	require.ErrorIs(t, err, ErrClosed)
	nc, err := net.Dial("tcp", addr)
	if err == nil {
		// The listener is closed: nothing accepts, so the AMQP
		// handshake gets no answer but the close.
		nc.Close()
	}
	require.Error(t, err, "the listener still accepts")
}

// A consumer holding deliveries when Shutdown starts gets no new ones,
// acks what it holds, and then Shutdown returns nil: the acks are kept
// and the messages it never received stay ready, not redelivered.
func TestShutdownLetsConsumersFinish(t *testing.T) {
	for _, door := range drainDoors {
		t.Run(door.name, func(t *testing.T) {
			dir := t.TempDir()
			b := newDrainBroker(t, dir)
			addr := b.Addr().String()
			ch, closed := door.open(t, b)
			_, err := ch.QueueDeclare("work", true, false, false, false, nil)
			require.NoError(t, err)
			publishDurable(t, ch, "work", "w0", "w1", "w2", "w3", "w4")
			require.NoError(t, ch.Qos(3, 0, false))
			msgs, err := ch.Consume("work", "worker", false, false, false, false, nil)
			require.NoError(t, err)
			held := []amqp091.Delivery{amqptest.Next(t, msgs), amqptest.Next(t, msgs), amqptest.Next(t, msgs)}

			done := shutdownAsync(t, b, context.Background())
			requireRefusesConnections(t, b, addr)
			_, ok, err := ch.Get("work", false)
			require.NoError(t, err)
			require.False(t, ok, "basic.get took a message while draining")
			for _, d := range held {
				require.NoError(t, d.Ack(false))
			}
			require.NoError(t, shutdownResult(t, done))
			for d := range msgs {
				t.Fatalf("delivered %q while draining", d.Body)
			}
			e := amqptest.AwaitClose(t, closed)
			require.Equal(t, amqp091.ConnectionForced, e.Code, e.Reason)

			// Shutdown again and Close are safe and return at once.
			require.NoError(t, b.Shutdown(context.Background()))
			require.NoError(t, b.Close())

			bodies, redelivered := reopened(t, dir, "work")
			require.Equal(t, []string{"w3", "w4"}, bodies, "the acks survived")
			require.Equal(t, []bool{false, false}, redelivered)
		})
	}
}

// A publish during Shutdown closes its connection with 320
// CONNECTION_FORCED; it is not stored, and everything confirmed before is.
func TestShutdownRefusesPublishes(t *testing.T) {
	for _, door := range drainDoors {
		t.Run(door.name, func(t *testing.T) {
			dir := t.TempDir()
			b := newDrainBroker(t, dir)
			pub, closed := door.open(t, b)
			_, err := pub.QueueDeclare("jobs", true, false, false, false, nil)
			require.NoError(t, err)
			publishDurable(t, pub, "jobs", "j0", "j1", "j2")

			// A consumer holding j0 keeps the drain going meanwhile.
			holder, err := b.Channel(context.Background())
			require.NoError(t, err)
			require.NoError(t, holder.Qos(1, 0, false))
			msgs, err := holder.Consume("jobs", "", false, false, false, false, nil)
			require.NoError(t, err)
			d := amqptest.Next(t, msgs)
			require.Equal(t, "j0", string(d.Body))

			done := shutdownAsync(t, b, context.Background())
			err = pub.PublishWithContext(context.Background(), "", "jobs", false, false,
				amqp091.Publishing{Body: []byte("late"), DeliveryMode: amqp091.Persistent})
			if err == nil {
				// amqp091-go publishes asynchronously: the refusal is the
				// connection's close.
				err = amqptest.AwaitClose(t, closed)
			}
			amqptest.RequireCode(t, err, amqp091.ConnectionForced)

			require.NoError(t, d.Ack(false))
			require.NoError(t, shutdownResult(t, done))

			bodies, _ := reopened(t, dir, "jobs")
			require.Equal(t, []string{"j1", "j2"}, bodies, "nothing confirmed is lost, the refused publish is not stored")
		})
	}
}

// A consumer that never acks makes Shutdown give up when ctx ends: it
// returns ctx's error, closes anyway, and the held messages come back
// redelivered after a restart.
func TestShutdownDeadline(t *testing.T) {
	for _, door := range drainDoors {
		t.Run(door.name, func(t *testing.T) {
			dir := t.TempDir()
			b := newDrainBroker(t, dir)
			ch, closed := door.open(t, b)
			_, err := ch.QueueDeclare("stuck", true, false, false, false, nil)
			require.NoError(t, err)
			publishDurable(t, ch, "stuck", "s0", "s1", "s2")
			require.NoError(t, ch.Qos(2, 0, false))
			msgs, err := ch.Consume("stuck", "", false, false, false, false, nil)
			require.NoError(t, err)
			amqptest.Next(t, msgs)
			amqptest.Next(t, msgs)

			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			require.ErrorIs(t, b.Shutdown(ctx), context.DeadlineExceeded)
			e := amqptest.AwaitClose(t, closed)
			require.Equal(t, amqp091.ConnectionForced, e.Code, e.Reason)
			require.NoError(t, b.Close())

			bodies, redelivered := reopened(t, dir, "stuck")
			require.Equal(t, []string{"s0", "s1", "s2"}, bodies)
			require.Equal(t, []bool{true, true, false}, redelivered)
		})
	}
}

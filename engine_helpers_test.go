package broker

import (
	"context"
	"fmt"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/queue"
)

// waitFor bounds every wait of the engine tests. It is generous on purpose:
// it only decides how long a broken test hangs, never whether a working one
// passes.
const waitFor = 10 * time.Second

// declareQueue declares a queue that is neither exclusive nor auto-delete.
func declareQueue(t *testing.T, ch *amqp091.Channel, name string, durable bool) {
	t.Helper()
	_, err := ch.QueueDeclare(name, durable, false, false, false, nil)
	require.NoError(t, err)
}

// publishBodies publishes one message per body to queue through the default
// exchange; persistent sets delivery mode 2.
func publishBodies(t *testing.T, ch *amqp091.Channel, queue string, persistent bool, bodies ...string) {
	t.Helper()
	mode := amqp091.Transient
	if persistent {
		mode = amqp091.Persistent
	}
	for _, b := range bodies {
		require.NoError(t, ch.PublishWithContext(context.Background(), "", queue, false, false,
			amqp091.Publishing{Body: []byte(b), DeliveryMode: mode}))
	}
}

// publishConfirmed publishes bodies in confirm mode and waits until every
// one is acked.
func publishConfirmed(t *testing.T, ch *amqp091.Channel, queue string, persistent bool, bodies ...string) {
	t.Helper()
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, len(bodies)))
	publishBodies(t, ch, queue, persistent, bodies...)
	for range bodies {
		select {
		case c := <-confirms:
			require.True(t, c.Ack, "publish %d nacked", c.DeliveryTag)
		case <-time.After(waitFor):
			t.Fatal("no publisher confirm")
		}
	}
}

// numbered returns n bodies "prefix-0" ... "prefix-(n-1)".
func numbered(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// next receives one delivery or fails the test.
func next(t *testing.T, msgs <-chan amqp091.Delivery) amqp091.Delivery {
	t.Helper()
	select {
	case d, ok := <-msgs:
		require.True(t, ok, "delivery channel closed")
		return d
	case <-time.After(waitFor):
		t.Fatal("no delivery")
		return amqp091.Delivery{}
	}
}

// get does one basic.get that must find a message.
func get(t *testing.T, ch *amqp091.Channel, queue string, autoAck bool) amqp091.Delivery {
	t.Helper()
	d, ok, err := ch.Get(queue, autoAck)
	require.NoError(t, err)
	require.True(t, ok, "queue %s is empty", queue)
	return d
}

// requireEmpty requires basic.get-empty.
func requireEmpty(t *testing.T, ch *amqp091.Channel, queue string) {
	t.Helper()
	d, ok, err := ch.Get(queue, true)
	require.NoError(t, err)
	require.False(t, ok, "unexpected message %q", d.Body)
}

// closeErr waits for the error a channel or connection was closed with.
func closeErr(t *testing.T, errs chan *amqp091.Error) *amqp091.Error {
	t.Helper()
	select {
	case e := <-errs:
		require.NotNil(t, e, "closed without an error")
		return e
	case <-time.After(waitFor):
		t.Fatal("not closed")
		return nil
	}
}

// queueStats asks the queue's actor for its counts, after every call the
// broker has already handed it.
func queueStats(t *testing.T, b *Broker, name string) queue.Stats {
	t.Helper()
	q, err := b.vhosts["/"].Queue("", name)
	require.NoError(t, err)
	st, err := q.Stats(context.Background())
	require.NoError(t, err)
	return st
}

// waitStats polls the queue's counts until cond holds. Settles reach the
// actor asynchronously (basic.ack has no reply), so a test that must see
// one applied waits for its effect rather than sleeping.
func waitStats(t *testing.T, b *Broker, name string, cond func(queue.Stats) bool) queue.Stats {
	t.Helper()
	deadline := time.Now().Add(waitFor)
	for {
		st := queueStats(t, b, name)
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue %s never reached the expected state; last %+v", name, st)
		}
		time.Sleep(time.Millisecond)
	}
}

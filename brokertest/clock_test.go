package brokertest_test

import (
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/internal/amqptest"
)

// A message expires once its age reaches the TTL, as in RabbitMQ
// (rabbit_amqqueue_process's drop_expired_msgs: Now >= Expiry): advancing
// the clock by exactly the TTL expires it, one nanosecond less does not.
func TestTTLExpiresAtExactlyTheTTL(t *testing.T) {
	for _, per := range []string{"queue", "message"} {
		t.Run(per, func(t *testing.T) {
			lab := brokertest.NewLab(t, broker.Options{Clock: clock.NewFake(time.Unix(1_700_000_000, 0))})
			ch := brokertest.Channel(t, lab.Broker())
			var args amqp091.Table
			msg := amqp091.Publishing{Body: []byte("m")}
			if per == "queue" {
				args = amqp091.Table{"x-message-ttl": int32(1000)}
			} else {
				msg.Expiration = "1000"
			}
			_, err := ch.QueueDeclare("q", false, false, false, false, args)
			require.NoError(t, err)
			require.NoError(t, ch.Publish("", "q", false, false, msg))
			amqptest.Idle(t, lab.WaitIdle)
			lab.Advance(time.Second - 1)
			amqptest.Idle(t, lab.WaitIdle)
			_, err = lab.WaitQueue(bounded(t), "q", brokertest.Ready(1))
			require.NoError(t, err)
			lab.Advance(1)
			_, err = lab.WaitQueue(bounded(t), "q", brokertest.Ready(0))
			require.NoError(t, err, "expired at age == TTL")
		})
	}
}

// A publish is stamped when the broker accepts it, not when its queue
// gets round to it: publish, then Advance by the TTL at once, and every
// message expires, with no WaitIdle anywhere (a queue that takes a
// publish after the clock moved finds it already due and expires it
// without waiting for another Advance).
func TestPublishThenAdvanceExpires(t *testing.T) {
	lab := brokertest.NewLab(t, broker.Options{Clock: clock.NewFake(time.Unix(1_700_000_000, 0))})
	ch := brokertest.Channel(t, lab.Broker())
	_, err := ch.QueueDeclare("q", false, false, false, false, amqp091.Table{"x-message-ttl": int32(1000)})
	require.NoError(t, err)
	const n = 500
	for range n {
		require.NoError(t, ch.Publish("", "q", false, false, amqp091.Publishing{Body: []byte("m")}))
	}
	lab.Advance(time.Second) // no WaitIdle before or after: nothing else is needed
	_, err = lab.WaitQueue(bounded(t), "q", brokertest.Ready(0))
	require.NoError(t, err, "every message was accepted before the clock moved")
}

// The consumer timeout is measured with the broker's clock, the one its
// deliveries are stamped with: with a fake clock nothing times out until
// the clock has moved by the timeout, and then the channel is closed as
// RabbitMQ closes it.
func TestConsumerTimeoutFollowsTheClock(t *testing.T) {
	lab := brokertest.NewLab(t, broker.Options{
		Clock:           clock.NewFake(time.Unix(1_700_000_000, 0)),
		ConsumerTimeout: time.Minute,
		ScanInterval:    5 * time.Millisecond,
	})
	ch := amqptest.Channel(t, lab.DialAMQP(t, ""))
	amqptest.DeclareQueue(t, ch, "q", false)
	amqptest.PublishConfirmed(t, ch, "q", false, "m")
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	amqptest.Get(t, ch, "q", false)
	// Many scan passes on real time: the fake clock has not moved.
	select {
	case e := <-closed:
		t.Fatalf("timed out before the clock moved: %v", e)
	case <-time.After(200 * time.Millisecond):
	}
	lab.Advance(time.Minute + time.Millisecond) // held longer than the timeout
	e, _ := amqptest.Receive(t, closed)
	require.Equal(t, amqp091.PreconditionFailed, e.Code)
	require.Contains(t, e.Reason, "Timeout value used: 60000 ms")
}

// The same over the socket-free door with amqp091-go: once Publish has
// returned, the broker has the bytes, and the message's age counts from
// then, even if its frames are routed after the clock moved.
func TestPublishThenAdvanceExpiresOverDial(t *testing.T) {
	lab := brokertest.NewLab(t, broker.Options{Clock: clock.NewFake(time.Unix(1_700_000_000, 0))})
	ch := amqptest.Channel(t, lab.DialAMQP(t, ""))
	_, err := ch.QueueDeclare("q", false, false, false, false, amqp091.Table{"x-message-ttl": int32(1000)})
	require.NoError(t, err)
	const n = 500
	amqptest.PublishBodies(t, ch, "q", false, amqptest.Numbered("m", n)...)
	lab.Advance(time.Second) // no WaitIdle before or after: nothing else is needed
	_, err = lab.WaitQueue(bounded(t), "q", brokertest.Ready(0))
	require.NoError(t, err, "every message was accepted before the clock moved")
}

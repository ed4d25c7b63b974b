package broker_test

import (
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/amqptest"
)

const replyQueue = "amq.rabbitmq.reply-to"

// replyDoors are parityDoors plus amqp091-go over TCP: direct reply-to
// must work through each way in.
func replyDoors() []struct {
	name string
	open func(t *testing.T, b *broker.Broker) func() parityChannel
} {
	doors := append(parityDoors[:len(parityDoors):len(parityDoors)], struct {
		name string
		open func(t *testing.T, b *broker.Broker) func() parityChannel
	}{"tcp", func(t *testing.T, b *broker.Broker) func() parityChannel {
		conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
		return func() parityChannel { return amqptest.Channel(t, conn) }
	}})
	return doors
}

// requestReply publishes a request with reply_to = amq.rabbitmq.reply-to
// on requester to queue "rpc", and returns the request as the responder's
// consumer received it.
func requestReply(t *testing.T, requester parityChannel, requests <-chan amqp091.Delivery, corr string) amqp091.Delivery {
	t.Helper()
	require.NoError(t, requester.PublishWithContext(t.Context(), "", "rpc", false, false, amqp091.Publishing{
		ReplyTo: replyQueue, CorrelationId: corr, Body: []byte("request " + corr),
	}))
	req := amqptest.Next(t, requests)
	require.Equal(t, corr, req.CorrelationId)
	require.True(t, strings.HasPrefix(req.ReplyTo, replyQueue+"."), "reply_to rewritten: %q", req.ReplyTo)
	require.Greater(t, len(req.ReplyTo), len(replyQueue)+20, "the token is long enough not to be guessed")
	return req
}

// replyConfirmed publishes a reply to name through the default exchange,
// mandatory, on a confirm-mode responder, and reports whether the broker
// returned it: a basic.return precedes the publish's confirm, so once the
// confirm is in, returns holds the return if there is one.
func replyConfirmed(t *testing.T, responder parityChannel, confirms <-chan amqp091.Confirmation, returns <-chan amqp091.Return, name, corr string) (amqp091.Return, bool) {
	t.Helper()
	require.NoError(t, responder.PublishWithContext(t.Context(), "", name, true, false, amqp091.Publishing{
		CorrelationId: corr, Body: []byte("reply " + corr),
	}))
	c, _ := amqptest.Receive(t, confirms)
	require.True(t, c.Ack)
	select {
	case r := <-returns:
		return r, true
	default:
		return amqp091.Return{}, false
	}
}

func TestDirectReplyTo(t *testing.T) {
	for _, door := range replyDoors() {
		t.Run(door.name, func(t *testing.T) {
			b := startBroker(t, broker.Options{})
			open := door.open(t, b)

			responder := open()
			_, err := responder.QueueDeclare("rpc", false, false, false, false, nil)
			require.NoError(t, err)
			requests, err := responder.Consume("rpc", "", true, false, false, false, nil)
			require.NoError(t, err)
			require.NoError(t, responder.Confirm(false))
			confirms := responder.NotifyPublish(make(chan amqp091.Confirmation, 8))
			returns := responder.NotifyReturn(make(chan amqp091.Return, 8))

			// Two requesters, each with its own reply consumer.
			type requester struct {
				ch      parityChannel
				replies <-chan amqp091.Delivery
				name    string
			}
			rs := make([]requester, 2)
			for i := range rs {
				rs[i].ch = open()
				rs[i].replies, err = rs[i].ch.Consume(replyQueue, "", true, false, false, false, nil)
				require.NoError(t, err)
			}
			for i, r := range rs {
				corr := []string{"a", "b"}[i]
				req := requestReply(t, r.ch, requests, corr)
				rs[i].name = req.ReplyTo
			}
			require.NotEqual(t, rs[0].name, rs[1].name)

			// A responder may check that the requester is still there.
			q, err := responder.QueueDeclarePassive(rs[0].name, false, false, false, false, nil)
			require.NoError(t, err)
			require.Equal(t, amqp091.Queue{Name: rs[0].name, Messages: 0, Consumers: 1}, q)

			// Replies in the opposite order reach their own requesters;
			// a delivered mandatory reply is routed, not returned.
			for i := len(rs) - 1; i >= 0; i-- {
				corr := []string{"a", "b"}[i]
				_, returned := replyConfirmed(t, responder, confirms, returns, rs[i].name, corr)
				require.False(t, returned, "a reply that reached its requester is routed")
				d := amqptest.Next(t, rs[i].replies)
				require.Equal(t, corr, d.CorrelationId)
				require.Equal(t, "reply "+corr, string(d.Body))
				require.Equal(t, "", d.Exchange)
				require.Equal(t, rs[i].name, d.RoutingKey)
			}

			// The requester's channel closes: its name is unroutable, a
			// mandatory reply comes back 312 NO_ROUTE, and the name is 404.
			require.NoError(t, rs[0].ch.Close())
			r, returned := replyConfirmed(t, responder, confirms, returns, rs[0].name, "late")
			require.True(t, returned, "a reply to a closed requester is returned")
			require.Equal(t, uint16(amqp091.NoRoute), r.ReplyCode)
			require.Equal(t, "NO_ROUTE", r.ReplyText)
			require.Equal(t, rs[0].name, r.RoutingKey)
			require.Equal(t, "late", r.CorrelationId)

			probe := open()
			_, err = probe.QueueDeclarePassive(rs[0].name, false, false, false, false, nil)
			amqptest.RequireReply(t, err, amqp091.NotFound, "no queue '"+rs[0].name+"' in vhost '/'")

			// The other requester still gets its replies; a cancel ends them.
			_, returned = replyConfirmed(t, responder, confirms, returns, rs[1].name, "b2")
			require.False(t, returned)
			require.Equal(t, "b2", amqptest.Next(t, rs[1].replies).CorrelationId)
		})
	}
}

// TestDirectReplyToCancel: after basic.cancel of the reply consumer, its
// name is gone and a request naming the pseudo-queue is refused.
func TestDirectReplyToCancel(t *testing.T) {
	_, conn := setup(t)
	ch := amqptest.ConfirmChannel(t, conn)
	_, err := ch.Consume(replyQueue, "replies", true, false, false, false, nil)
	require.NoError(t, err)
	amqptest.DeclareQueue(t, ch, "rpc", false)
	amqptest.PublishMsg(t, ch, "", "rpc", amqp091.Publishing{ReplyTo: replyQueue})
	req := amqptest.Get(t, ch, "rpc", true)
	require.NoError(t, ch.Cancel("replies", false))

	probe := amqptest.Channel(t, conn)
	_, err = probe.QueueDeclarePassive(req.ReplyTo, false, false, false, false, nil)
	amqptest.RequireReply(t, err, amqp091.NotFound, "no queue '"+req.ReplyTo+"'")

	closes := ch.NotifyClose(make(chan *amqp091.Error, 1))
	require.NoError(t, ch.Publish("", "rpc", false, false, amqp091.Publishing{ReplyTo: replyQueue}))
	e := amqptest.AwaitClose(t, closes)
	amqptest.RequireReply(t, e, amqp091.PreconditionFailed, "fast reply consumer does not exist")
}

// TestDirectReplyToErrors: RabbitMQ's codes and texts for misuse of the
// pseudo-queue, and its declare answers.
func TestDirectReplyToErrors(t *testing.T) {
	_, conn := setup(t)

	t.Run("consume in ack mode", func(t *testing.T) {
		ch := amqptest.Channel(t, conn)
		_, err := ch.Consume(replyQueue, "", false, false, false, false, nil)
		amqptest.RequireReply(t, err, amqp091.PreconditionFailed, "reply consumer cannot acknowledge")
	})
	t.Run("second reply consumer", func(t *testing.T) {
		ch := amqptest.Channel(t, conn)
		_, err := ch.Consume(replyQueue, "", true, false, false, false, nil)
		require.NoError(t, err)
		_, err = ch.Consume(replyQueue, "", true, false, false, false, nil)
		amqptest.RequireReply(t, err, amqp091.PreconditionFailed, "reply consumer already set")
	})
	t.Run("publish without a reply consumer", func(t *testing.T) {
		ch := amqptest.Channel(t, conn)
		closes := ch.NotifyClose(make(chan *amqp091.Error, 1))
		require.NoError(t, ch.Publish("", "anywhere", false, false, amqp091.Publishing{ReplyTo: replyQueue}))
		e := amqptest.AwaitClose(t, closes)
		amqptest.RequireReply(t, e, amqp091.PreconditionFailed, "fast reply consumer does not exist")
	})
	t.Run("reply consumer on another channel", func(t *testing.T) {
		consumer := amqptest.Channel(t, conn)
		_, err := consumer.Consume(replyQueue, "", true, false, false, false, nil)
		require.NoError(t, err)
		ch := amqptest.Channel(t, conn)
		closes := ch.NotifyClose(make(chan *amqp091.Error, 1))
		require.NoError(t, ch.Publish("", "anywhere", false, false, amqp091.Publishing{ReplyTo: replyQueue}))
		e := amqptest.AwaitClose(t, closes)
		amqptest.RequireReply(t, e, amqp091.PreconditionFailed, "fast reply consumer does not exist")
	})
	t.Run("declare the pseudo-queue", func(t *testing.T) {
		ch := amqptest.Channel(t, conn)
		for _, passive := range []bool{true, false} {
			var q amqp091.Queue
			var err error
			if passive {
				q, err = ch.QueueDeclarePassive(replyQueue, false, false, false, false, nil)
			} else {
				q, err = ch.QueueDeclare(replyQueue, false, false, false, false, nil)
			}
			require.NoError(t, err, "passive=%t", passive)
			require.Equal(t, amqp091.Queue{Name: replyQueue, Consumers: 1}, q)
		}
	})
	t.Run("declare a name nobody consumes", func(t *testing.T) {
		ch := amqptest.Channel(t, conn)
		_, err := ch.QueueDeclare(replyQueue+".guessed", false, false, false, false, nil)
		amqptest.RequireReply(t, err, amqp091.NotFound, "no queue '"+replyQueue+".guessed' in vhost '/'")
	})
	t.Run("reply to a name nobody consumes", func(t *testing.T) {
		ch := amqptest.ConfirmChannel(t, conn)
		returns := ch.NotifyReturn(make(chan amqp091.Return, 1))
		confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1))
		r, returned := replyConfirmed(t, ch, confirms, returns, replyQueue+".guessed", "x")
		require.True(t, returned)
		require.Equal(t, uint16(amqp091.NoRoute), r.ReplyCode)
	})
}

// TestDirectReplyToConnectionGone: when the requester's connection ends
// without closing its channel, its name goes with it.
func TestDirectReplyToConnectionGone(t *testing.T) {
	b, conn := setup(t)
	requesterConn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	requester := amqptest.Channel(t, requesterConn)
	_, err := requester.Consume(replyQueue, "", true, false, false, false, nil)
	require.NoError(t, err)
	ch := amqptest.ConfirmChannel(t, conn)
	amqptest.DeclareQueue(t, ch, "rpc", false)
	require.NoError(t, requester.Publish("", "rpc", false, false, amqp091.Publishing{ReplyTo: replyQueue}))
	var name string
	amqptest.Poll(t, func() bool {
		d, ok, err := ch.Get("rpc", true)
		require.NoError(t, err)
		name = d.ReplyTo
		return ok
	}, "request not queued")
	_, err = ch.QueueDeclarePassive(name, false, false, false, false, nil)
	require.NoError(t, err)

	require.NoError(t, requesterConn.Close())
	probe := amqptest.Channel(t, conn)
	amqptest.Poll(t, func() bool {
		_, err := probe.QueueDeclarePassive(name, false, false, false, false, nil)
		if err == nil {
			return false
		}
		amqptest.RequireReply(t, err, amqp091.NotFound, "no queue '"+name+"'")
		probe = amqptest.Channel(t, conn)
		return true
	}, "reply name %s outlived its connection", name)
}

// TestDirectReplyToOneChannel: requester and responder on one channel, as
// pika's example does; and a reply_to naming anything else is left alone.
func TestDirectReplyToOneChannel(t *testing.T) {
	_, conn := setup(t)
	ch := amqptest.ConfirmChannel(t, conn)
	amqptest.DeclareQueue(t, ch, "rpc", false)
	replies, err := ch.Consume(replyQueue, "", true, false, false, false, nil)
	require.NoError(t, err)
	requests, err := ch.Consume("rpc", "", true, false, false, false, nil)
	require.NoError(t, err)

	amqptest.PublishMsg(t, ch, "", "rpc", amqp091.Publishing{ReplyTo: "my-own-queue", CorrelationId: "plain"})
	require.Equal(t, "my-own-queue", amqptest.Next(t, requests).ReplyTo)

	amqptest.PublishMsg(t, ch, "", "rpc", amqp091.Publishing{ReplyTo: replyQueue, CorrelationId: "1", Body: []byte("marco")})
	req := amqptest.Next(t, requests)
	amqptest.PublishMsg(t, ch, "", req.ReplyTo, amqp091.Publishing{CorrelationId: req.CorrelationId, Body: []byte("polo")})
	rep := amqptest.Next(t, replies)
	require.Equal(t, "polo", string(rep.Body))
	require.Equal(t, "1", rep.CorrelationId)
}

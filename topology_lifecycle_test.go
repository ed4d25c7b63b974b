package broker_test

import (
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
)

// The topology's lifecycle rules through amqp091-go: exclusive and
// auto-delete queues, auto-delete exchanges, server-named queues and the ""
// shortcut, declare-ok and purge-ok counts, nowait, exchange-to-exchange
// bindings, alternate and internal exchanges, and what redeclaring or
// deleting leaves alone.

func TestTopologyExclusiveQueue(t *testing.T) {
	b, owner := setup(t)
	other := amqptest.Dial(t, b.URL(), amqp091.Config{})

	ch := amqptest.ConfirmChannel(t, owner)
	// durable is accepted and ignored: an exclusive queue never outlives its
	// connection (RabbitMQ's Durable = durable andalso not exclusive).
	q, err := ch.QueueDeclare("excl", true, false, true, false, nil)
	require.NoError(t, err)
	require.Equal(t, "excl", q.Name)
	require.NoError(t, ch.QueueBind("excl", "k", "amq.direct", false, nil))

	// Any channel of the owner's connection may use it.
	ch2 := amqptest.ConfirmChannel(t, owner)
	_, err = ch2.QueueDeclare("excl", true, false, true, false, nil)
	require.NoError(t, err)
	amqptest.Publish(t, ch2, "amq.direct", "k", "mine")
	require.Equal(t, []string{"mine"}, amqptest.GetAll(t, ch2, "excl"))
	// RabbitMQ's strict check: even the owner may not redeclare it as
	// non-exclusive.
	_, err = amqptest.Channel(t, owner).QueueDeclare("excl", true, false, false, false, nil)
	amqptest.RequireReply(t, err, 405, "RESOURCE_LOCKED - cannot obtain exclusive access to locked queue 'excl' in vhost '/'")

	// Every other connection gets 405 RESOURCE_LOCKED, whatever it tries.
	cases := []struct {
		name string
		op   func(ch *amqp091.Channel) error
	}{
		{"queue.declare exclusive", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclare("excl", false, false, true, false, nil)
			return err
		}},
		{"queue.declare", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclare("excl", false, false, false, false, nil)
			return err
		}},
		{"queue.declare passive", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclarePassive("excl", false, false, false, false, nil)
			return err
		}},
		{"queue.bind", func(ch *amqp091.Channel) error { return ch.QueueBind("excl", "k2", "amq.direct", false, nil) }},
		{"queue.unbind", func(ch *amqp091.Channel) error { return ch.QueueUnbind("excl", "k", "amq.direct", nil) }},
		{"queue.purge", func(ch *amqp091.Channel) error {
			_, err := ch.QueuePurge("excl", false)
			return err
		}},
		{"queue.delete", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDelete("excl", false, false, false)
			return err
		}},
		{"basic.consume", func(ch *amqp091.Channel) error {
			_, err := ch.Consume("excl", "", false, false, false, false, nil)
			return err
		}},
		{"basic.get", func(ch *amqp091.Channel) error {
			_, _, err := ch.Get("excl", false)
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.op(amqptest.Channel(t, other))
			amqptest.RequireReply(t, err, 405, "RESOURCE_LOCKED - cannot obtain exclusive access to locked queue 'excl' in vhost '/'")
			requireServes(t, other)
		})
	}
	// The queue and its binding are untouched.
	amqptest.Publish(t, ch2, "amq.direct", "k", "still mine")
	require.Equal(t, []string{"still mine"}, amqptest.GetAll(t, ch2, "excl"))

	// It goes with the owner's connection; then the name is free.
	require.NoError(t, owner.Close())
	awaitQueueGone(t, other, "excl")
	och := amqptest.ConfirmChannel(t, other)
	q, err = och.QueueDeclare("excl", false, false, true, false, nil)
	require.NoError(t, err)
	require.Equal(t, 0, q.Messages)
	// Its bindings went with it.
	amqptest.Publish(t, och, "amq.direct", "k", "unbound")
	require.Empty(t, amqptest.GetAll(t, och, "excl"))
}

func TestTopologyAutoDeleteQueue(t *testing.T) {
	b, conn := setup(t)
	ch1 := amqptest.Channel(t, conn)
	ch2 := amqptest.Channel(t, conn)

	_, err := ch1.QueueDeclare("ad", false, true, false, false, nil)
	require.NoError(t, err)
	// A queue that never had a consumer stays.
	require.True(t, amqptest.QueueExists(t, conn, "ad"))

	_, err = ch1.Consume("ad", "c1", false, false, false, false, nil)
	require.NoError(t, err)
	_, err = ch2.Consume("ad", "c2", false, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch1.Cancel("c1", false))
	q, err := amqptest.Channel(t, conn).QueueDeclarePassive("ad", false, true, false, false, nil)
	require.NoError(t, err, "deleted while a consumer was left")
	require.Equal(t, 1, q.Consumers)

	// basic.cancel-ok follows the deletion.
	require.NoError(t, ch2.Cancel("c2", false))
	require.False(t, amqptest.QueueExists(t, conn, "ad"))

	// A consumer also goes when its channel or its connection closes.
	t.Run("channel closes", func(t *testing.T) {
		ch := amqptest.Channel(t, conn)
		_, err := ch.QueueDeclare("ad.channel", false, true, false, false, nil)
		require.NoError(t, err)
		_, err = ch.Consume("ad.channel", "", false, false, false, false, nil)
		require.NoError(t, err)
		require.NoError(t, ch.Close())
		awaitQueueGone(t, conn, "ad.channel")
	})
	t.Run("connection closes", func(t *testing.T) {
		other := amqptest.Dial(t, b.URL(), amqp091.Config{})
		ch := amqptest.Channel(t, other)
		_, err := ch.QueueDeclare("ad.conn", false, true, false, false, nil)
		require.NoError(t, err)
		_, err = ch.Consume("ad.conn", "", false, false, false, false, nil)
		require.NoError(t, err)
		require.NoError(t, other.Close())
		awaitQueueGone(t, conn, "ad.conn")
	})
	requireServes(t, conn)
}

func TestTopologyAutoDeleteExchange(t *testing.T) {
	_, conn := setup(t)
	ch := amqptest.Channel(t, conn)
	for _, q := range []string{"q1", "q2"} {
		_, err := ch.QueueDeclare(q, false, false, false, false, nil)
		require.NoError(t, err)
	}
	declare := func(name string) {
		t.Helper()
		require.NoError(t, ch.ExchangeDeclare(name, "direct", false, true, false, false, nil))
	}

	t.Run("last queue.unbind", func(t *testing.T) {
		declare("ad.unbind")
		// An exchange that never had a binding stays.
		require.True(t, amqptest.ExchangeExists(t, conn, "ad.unbind"))
		require.NoError(t, ch.QueueBind("q1", "k", "ad.unbind", false, nil))
		require.NoError(t, ch.QueueBind("q2", "k", "ad.unbind", false, nil))
		require.NoError(t, ch.QueueUnbind("q1", "k", "ad.unbind", nil))
		require.True(t, amqptest.ExchangeExists(t, conn, "ad.unbind"))
		require.NoError(t, ch.QueueUnbind("q2", "k", "ad.unbind", nil))
		require.False(t, amqptest.ExchangeExists(t, conn, "ad.unbind"))
	})
	t.Run("queue.delete of the last bound queue", func(t *testing.T) {
		declare("ad.qdel")
		_, err := ch.QueueDeclare("ad.victim", false, false, false, false, nil)
		require.NoError(t, err)
		require.NoError(t, ch.QueueBind("ad.victim", "k", "ad.qdel", false, nil))
		_, err = ch.QueueDelete("ad.victim", false, false, false)
		require.NoError(t, err)
		require.False(t, amqptest.ExchangeExists(t, conn, "ad.qdel"))
	})
	t.Run("exchange.unbind", func(t *testing.T) {
		declare("ad.e2e")
		require.NoError(t, ch.ExchangeBind("amq.fanout", "k", "ad.e2e", false, nil))
		require.NoError(t, ch.ExchangeUnbind("amq.fanout", "k", "ad.e2e", false, nil))
		require.False(t, amqptest.ExchangeExists(t, conn, "ad.e2e"))
	})
	t.Run("exchange.delete of the destination", func(t *testing.T) {
		declare("ad.src")
		require.NoError(t, ch.ExchangeDeclare("dst", "fanout", false, false, false, false, nil))
		require.NoError(t, ch.ExchangeBind("dst", "k", "ad.src", false, nil))
		require.NoError(t, ch.ExchangeDelete("dst", false, false))
		require.False(t, amqptest.ExchangeExists(t, conn, "ad.src"))
	})
	t.Run("a chain goes link by link", func(t *testing.T) {
		declare("ad.head")
		declare("ad.tail")
		_, err := ch.QueueDeclare("ad.end", false, false, false, false, nil)
		require.NoError(t, err)
		require.NoError(t, ch.ExchangeBind("ad.tail", "k", "ad.head", false, nil))
		require.NoError(t, ch.QueueBind("ad.end", "k", "ad.tail", false, nil))
		_, err = ch.QueueDelete("ad.end", false, false, false)
		require.NoError(t, err)
		require.False(t, amqptest.ExchangeExists(t, conn, "ad.tail"))
		require.False(t, amqptest.ExchangeExists(t, conn, "ad.head"))
	})
	t.Run("binding to it as destination does not keep it", func(t *testing.T) {
		// Only bindings with the exchange as source count (RabbitMQ's
		// has_for_source).
		declare("ad.dest")
		require.NoError(t, ch.ExchangeBind("ad.dest", "k", "amq.direct", false, nil))
		require.NoError(t, ch.QueueBind("q1", "k", "ad.dest", false, nil))
		require.NoError(t, ch.QueueUnbind("q1", "k", "ad.dest", nil))
		require.False(t, amqptest.ExchangeExists(t, conn, "ad.dest"))
	})
	requireServes(t, conn)
}

func TestTopologyServerNamedQueues(t *testing.T) {
	_, conn := setup(t)
	ch := amqptest.ConfirmChannel(t, conn)

	q1, err := ch.QueueDeclare("", false, false, true, false, nil)
	require.NoError(t, err)
	require.Regexp(t, `^amq\.gen-[A-Za-z0-9_-]{22}$`, q1.Name)
	q2, err := ch.QueueDeclare("", false, false, true, false, nil)
	require.NoError(t, err)
	require.Regexp(t, `^amq\.gen-[A-Za-z0-9_-]{22}$`, q2.Name)
	require.NotEqual(t, q1.Name, q2.Name)

	// From here "" is q2, the channel's last declared queue. queue.bind with
	// "" for both queue and key binds it by its own name.
	require.NoError(t, ch.QueueBind("", "", "amq.direct", false, nil))
	amqptest.Publish(t, ch, "amq.direct", q2.Name, "via the shortcut")
	p, err := ch.QueueDeclarePassive("", false, false, true, false, nil)
	require.NoError(t, err)
	require.Equal(t, q2.Name, p.Name)
	require.Equal(t, 1, p.Messages)

	n, err := ch.QueuePurge("", false)
	require.NoError(t, err)
	require.Equal(t, 1, n)

	amqptest.Publish(t, ch, "", q2.Name, "got")
	d, ok, err := ch.Get("", true)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "got", string(d.Body))

	msgs, err := ch.Consume("", "c", true, false, false, false, nil)
	require.NoError(t, err)
	amqptest.Publish(t, ch, "", q2.Name, "consumed")
	require.Equal(t, "consumed", string(amqptest.Next(t, msgs).Body))
	require.NoError(t, ch.Cancel("c", false))

	require.NoError(t, ch.QueueUnbind("", "", "amq.direct", nil))
	amqptest.Publish(t, ch, "amq.direct", q2.Name, "unbound")
	require.Empty(t, amqptest.GetAll(t, ch, q2.Name))

	n, err = ch.QueueDelete("", false, false, false)
	require.NoError(t, err)
	require.Equal(t, 0, n)
	require.False(t, amqptest.QueueExists(t, conn, q2.Name))
	require.True(t, amqptest.QueueExists(t, conn, q1.Name))

	// A passive declare makes its queue the last one too.
	_, err = ch.QueueDeclarePassive(q1.Name, false, false, true, false, nil)
	require.NoError(t, err)
	_, err = ch.QueueDelete("", false, false, false)
	require.NoError(t, err)
	require.False(t, amqptest.QueueExists(t, conn, q1.Name))

	// The last queue is the channel's own: another channel has none.
	_, err = amqptest.Channel(t, conn).QueuePurge("", false)
	amqptest.RequireReply(t, err, 404, "no previously declared queue")
	requireServes(t, conn)
}

func TestTopologyDeclareOkCounts(t *testing.T) {
	_, conn := setup(t)
	ch := amqptest.ConfirmChannel(t, conn)

	q, err := ch.QueueDeclare("counts", false, false, false, false, nil)
	require.NoError(t, err)
	require.Equal(t, amqp091.Queue{Name: "counts"}, q, "a new queue has no messages and no consumers")

	for _, body := range []string{"1", "2", "3"} {
		amqptest.Publish(t, ch, "", "counts", body)
	}
	q, err = ch.QueueDeclare("counts", false, false, false, false, nil)
	require.NoError(t, err)
	require.Equal(t, amqp091.Queue{Name: "counts", Messages: 3}, q, "redeclare")
	q, err = ch.QueueDeclarePassive("counts", false, false, false, false, nil)
	require.NoError(t, err)
	require.Equal(t, amqp091.Queue{Name: "counts", Messages: 3}, q, "passive")

	// Counts are of ready messages: a delivery held by a consumer is not one.
	consume := func(tag string) amqp091.Delivery {
		c := amqptest.Channel(t, conn)
		require.NoError(t, c.Qos(1, 0, false))
		msgs, err := c.Consume("counts", tag, false, false, false, false, nil)
		require.NoError(t, err)
		return amqptest.Next(t, msgs)
	}
	require.Equal(t, "1", string(consume("c1").Body))
	q, err = ch.QueueDeclarePassive("counts", false, false, false, false, nil)
	require.NoError(t, err)
	require.Equal(t, amqp091.Queue{Name: "counts", Messages: 2, Consumers: 1}, q)
	require.Equal(t, "2", string(consume("c2").Body))
	q, err = ch.QueueDeclare("counts", false, false, false, false, nil)
	require.NoError(t, err)
	require.Equal(t, amqp091.Queue{Name: "counts", Messages: 1, Consumers: 2}, q)
}

func TestTopologyPurgeCount(t *testing.T) {
	_, conn := setup(t)
	ch := amqptest.ConfirmChannel(t, conn)
	_, err := ch.QueueDeclare("purge", false, false, false, false, nil)
	require.NoError(t, err)

	n, err := ch.QueuePurge("purge", false)
	require.NoError(t, err)
	require.Equal(t, 0, n, "empty queue")

	for range 5 {
		amqptest.Publish(t, ch, "", "purge", "m")
	}
	n, err = ch.QueuePurge("purge", false)
	require.NoError(t, err)
	require.Equal(t, 5, n)
	require.Empty(t, amqptest.GetAll(t, ch, "purge"))

	// Purge takes ready messages only; an unacknowledged one stays with its
	// holder and comes back when requeued.
	for _, body := range []string{"held", "a", "b"} {
		amqptest.Publish(t, ch, "", "purge", body)
	}
	held, ok, err := ch.Get("purge", false)
	require.NoError(t, err)
	require.True(t, ok)
	n, err = ch.QueuePurge("purge", false)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.NoError(t, held.Nack(false, true))
	require.Equal(t, []string{"held"}, amqptest.GetAll(t, ch, "purge"))

	// queue.delete-ok counts what the deletion dropped.
	amqptest.Publish(t, ch, "", "purge", "x")
	amqptest.Publish(t, ch, "", "purge", "y")
	n, err = ch.QueueDelete("purge", false, false, false)
	require.NoError(t, err)
	require.Equal(t, 2, n)
}

func TestTopologyNoWait(t *testing.T) {
	_, conn := setup(t)
	ch := amqptest.ConfirmChannel(t, conn)
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))

	// Each nowait method takes effect in order with the methods after it,
	// though no reply comes.
	require.NoError(t, ch.ExchangeDeclare("nw.src", "fanout", false, false, false, true, nil))
	require.NoError(t, ch.ExchangeDeclare("nw.topic", "topic", false, false, false, true, nil))
	q, err := ch.QueueDeclare("nw.q", false, false, false, true, nil)
	require.NoError(t, err)
	require.Equal(t, "nw.q", q.Name)
	require.NoError(t, ch.QueueBind("nw.q", "a.#", "nw.topic", true, nil))
	require.NoError(t, ch.ExchangeBind("nw.topic", "", "nw.src", true, nil))
	amqptest.Publish(t, ch, "nw.src", "a.b", "routed")
	q, err = ch.QueueDeclarePassive("nw.q", false, false, false, false, nil)
	require.NoError(t, err)
	require.Equal(t, 1, q.Messages)

	_, err = ch.QueuePurge("nw.q", true)
	require.NoError(t, err)
	q, err = ch.QueueDeclarePassive("nw.q", false, false, false, false, nil)
	require.NoError(t, err)
	require.Equal(t, 0, q.Messages)

	require.NoError(t, ch.ExchangeUnbind("nw.topic", "", "nw.src", true, nil))
	amqptest.Publish(t, ch, "nw.src", "a.b", "unrouted")
	require.Empty(t, amqptest.GetAll(t, ch, "nw.q"))

	require.NoError(t, ch.ExchangeDelete("nw.src", false, true))
	_, err = ch.QueueDelete("nw.q", false, false, true)
	require.NoError(t, err)
	require.NoError(t, ch.ExchangeDelete("nw.topic", false, true))
	require.False(t, amqptest.ExchangeExists(t, conn, "nw.src"))
	require.False(t, amqptest.ExchangeExists(t, conn, "nw.topic"))
	require.False(t, amqptest.QueueExists(t, conn, "nw.q"))

	select {
	case e := <-closed:
		require.FailNow(t, "channel closed", "%v", e)
	default:
	}
}

func TestTopologyExchangeToExchange(t *testing.T) {
	_, conn := setup(t)
	ch := amqptest.ConfirmChannel(t, conn)
	for _, x := range []struct{ name, kind string }{{"e.a", "topic"}, {"e.b", "direct"}, {"e.c", "fanout"}} {
		require.NoError(t, ch.ExchangeDeclare(x.name, x.kind, false, false, false, false, nil))
	}
	for _, q := range []string{"e.q", "e.q2"} {
		_, err := ch.QueueDeclare(q, false, false, false, false, nil)
		require.NoError(t, err)
	}
	// Three paths from e.a to e.q: a->b->q, a->c->q and a->q; and a cycle
	// c->a.
	require.NoError(t, ch.ExchangeBind("e.b", "#", "e.a", false, nil))
	require.NoError(t, ch.QueueBind("e.q", "k", "e.b", false, nil))
	require.NoError(t, ch.ExchangeBind("e.c", "k", "e.a", false, nil))
	require.NoError(t, ch.QueueBind("e.q", "", "e.c", false, nil))
	require.NoError(t, ch.QueueBind("e.q", "k", "e.a", false, nil))
	require.NoError(t, ch.ExchangeBind("e.a", "", "e.c", false, nil))
	require.NoError(t, ch.QueueBind("e.q2", "k", "e.b", false, nil))
	// Binding the same binding again adds nothing.
	require.NoError(t, ch.ExchangeBind("e.b", "#", "e.a", false, nil))

	for _, tc := range []struct {
		name, exchange string
		q, q2          []string
	}{
		{"into the head", "e.a", []string{"m"}, []string{"m"}},
		{"into the cycle", "e.c", []string{"m"}, []string{"m"}},
		{"into the middle", "e.b", []string{"m"}, []string{"m"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			amqptest.Publish(t, ch, tc.exchange, "k", "m")
			require.Equal(t, tc.q, amqptest.GetAll(t, ch, "e.q"), "each queue gets one copy")
			require.Equal(t, tc.q2, amqptest.GetAll(t, ch, "e.q2"))
		})
	}

	// Removing paths one by one: the message arrives while one is left.
	require.NoError(t, ch.QueueUnbind("e.q", "k", "e.a", nil))
	require.NoError(t, ch.ExchangeUnbind("e.c", "k", "e.a", false, nil))
	amqptest.Publish(t, ch, "e.a", "k", "via b")
	require.Equal(t, []string{"via b"}, amqptest.GetAll(t, ch, "e.q"))
	require.Equal(t, []string{"via b"}, amqptest.GetAll(t, ch, "e.q2"))
	require.NoError(t, ch.ExchangeUnbind("e.b", "#", "e.a", false, nil))
	amqptest.Publish(t, ch, "e.a", "k", "nowhere")
	require.Empty(t, amqptest.GetAll(t, ch, "e.q"))
	require.Empty(t, amqptest.GetAll(t, ch, "e.q2"))

	// Deleting an exchange removes the bindings to it as well as from it.
	require.NoError(t, ch.ExchangeBind("e.b", "k", "e.a", false, nil))
	require.NoError(t, ch.ExchangeDelete("e.b", false, false))
	require.NoError(t, ch.ExchangeDeclare("e.b", "direct", false, false, false, false, nil))
	require.NoError(t, ch.QueueBind("e.q", "k", "e.b", false, nil))
	amqptest.Publish(t, ch, "e.a", "k", "old binding")
	require.Empty(t, amqptest.GetAll(t, ch, "e.q"))
}

func TestTopologyAlternateExchange(t *testing.T) {
	_, conn := setup(t)
	ch := amqptest.ConfirmChannel(t, conn)
	returns := ch.NotifyReturn(make(chan amqp091.Return, 10))
	for _, q := range []string{"routed", "unrouted"} {
		_, err := ch.QueueDeclare(q, false, false, false, false, nil)
		require.NoError(t, err)
	}
	require.NoError(t, ch.ExchangeDeclare("ae", "fanout", false, false, false, false, nil))
	require.NoError(t, ch.QueueBind("unrouted", "", "ae", false, nil))
	// The alternate need not exist when the exchange is declared.
	require.NoError(t, ch.ExchangeDeclare("main", "direct", false, false, false, false, amqp091.Table{"alternate-exchange": "ae"}))
	require.NoError(t, ch.QueueBind("routed", "k", "main", false, nil))
	require.NoError(t, ch.ExchangeDeclare("dangling", "direct", false, false, false, false, amqp091.Table{"alternate-exchange": "missing"}))
	// An internal exchange can serve as alternate.
	require.NoError(t, ch.ExchangeDeclare("ae.internal", "fanout", false, false, true, false, nil))
	require.NoError(t, ch.QueueBind("unrouted", "", "ae.internal", false, nil))
	require.NoError(t, ch.ExchangeDeclare("main2", "direct", false, false, false, false, amqp091.Table{"alternate-exchange": "ae.internal"}))

	publish := func(exchange, key, body string) {
		t.Helper()
		ctx := t.Context()
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, key, true, false, amqp091.Publishing{Body: []byte(body)})
		require.NoError(t, err)
		acked, err := dc.WaitContext(ctx)
		require.NoError(t, err)
		require.True(t, acked)
	}
	noReturn := func() {
		t.Helper()
		select {
		case r := <-returns:
			require.FailNow(t, "unexpected basic.return", "%+v", r)
		default:
		}
	}

	publish("main", "k", "matched")
	require.Equal(t, []string{"matched"}, amqptest.GetAll(t, ch, "routed"))
	require.Empty(t, amqptest.GetAll(t, ch, "unrouted"))
	noReturn()

	// Unmatched: the alternate takes it, so mandatory returns nothing.
	publish("main", "other", "alternate")
	require.Empty(t, amqptest.GetAll(t, ch, "routed"))
	require.Equal(t, []string{"alternate"}, amqptest.GetAll(t, ch, "unrouted"))
	noReturn()

	publish("main2", "other", "internal alternate")
	require.Equal(t, []string{"internal alternate"}, amqptest.GetAll(t, ch, "unrouted"))
	noReturn()

	// A missing alternate is ignored: the message is unroutable. basic.return
	// comes before the confirm.
	publish("dangling", "other", "lost")
	select {
	case r := <-returns:
		require.Equal(t, uint16(312), r.ReplyCode)
		require.Equal(t, "dangling", r.Exchange)
		require.Equal(t, "lost", string(r.Body))
	default:
		require.FailNow(t, "mandatory unroutable message not returned")
	}
	// Once it exists, it is used.
	require.NoError(t, ch.ExchangeDeclare("missing", "fanout", false, false, false, false, nil))
	require.NoError(t, ch.QueueBind("unrouted", "", "missing", false, nil))
	publish("dangling", "other", "found")
	require.Equal(t, []string{"found"}, amqptest.GetAll(t, ch, "unrouted"))
	noReturn()
}

func TestTopologyInternalExchange(t *testing.T) {
	_, conn := setup(t)
	ch := amqptest.ConfirmChannel(t, conn)
	_, err := ch.QueueDeclare("behind", false, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.ExchangeDeclare("inside", "fanout", false, false, true, false, nil))
	require.NoError(t, ch.QueueBind("behind", "", "inside", false, nil))
	require.NoError(t, ch.ExchangeDeclare("front", "direct", false, false, false, false, nil))
	require.NoError(t, ch.ExchangeBind("inside", "k", "front", false, nil))

	// Reached through another exchange it routes like any other.
	amqptest.Publish(t, ch, "front", "k", "through")
	require.Equal(t, []string{"through"}, amqptest.GetAll(t, ch, "behind"))

	// Published to directly: 403, and the message goes nowhere.
	pub := amqptest.Channel(t, conn)
	closed := pub.NotifyClose(make(chan *amqp091.Error, 1))
	require.NoError(t, pub.Publish("inside", "", false, false, amqp091.Publishing{Body: []byte("direct")}))
	e := amqptest.AwaitClose(t, closed)
	amqptest.RequireReply(t, e, 403, "cannot publish to internal exchange 'inside' in vhost '/'")
	require.Empty(t, amqptest.GetAll(t, ch, "behind"))
	requireServes(t, conn)
}

func TestTopologyRedeclareAndDeleteLeaveThingsAlone(t *testing.T) {
	_, conn := setup(t)
	ch := amqptest.ConfirmChannel(t, conn)

	t.Run("equivalent redeclares", func(t *testing.T) {
		// Integer widths do not matter; unknown arguments are not compared.
		_, err := ch.QueueDeclare("same", true, false, false, false, amqp091.Table{"x-max-length": int32(10), "x-custom": "a"})
		require.NoError(t, err)
		_, err = ch.QueueDeclare("same", true, false, false, false, amqp091.Table{"x-max-length": int64(10), "x-custom": "b"})
		require.NoError(t, err)
		args := amqp091.Table{"alternate-exchange": "ae"}
		require.NoError(t, ch.ExchangeDeclare("same", "topic", true, false, false, false, args))
		require.NoError(t, ch.ExchangeDeclare("same", "topic", true, false, false, false, args))
		// The predeclared exchanges as RabbitMQ declares them.
		for _, x := range []struct{ name, kind string }{
			{"amq.direct", "direct"}, {"amq.fanout", "fanout"}, {"amq.topic", "topic"},
			{"amq.headers", "headers"}, {"amq.match", "headers"},
		} {
			require.NoError(t, ch.ExchangeDeclare(x.name, x.kind, true, false, false, false, nil), x.name)
		}
	})
	t.Run("deleting what does not exist", func(t *testing.T) {
		n, err := ch.QueueDelete("never", false, false, false)
		require.NoError(t, err)
		require.Equal(t, 0, n)
		require.NoError(t, ch.ExchangeDelete("never", false, false))
		require.NoError(t, ch.ExchangeDelete("never", true, false))
		// Unbinding what is not bound, or from what does not exist,
		// succeeds: there is nothing to remove.
		require.NoError(t, ch.QueueUnbind("same", "nokey", "amq.direct", nil))
		require.NoError(t, ch.QueueUnbind("never", "k", "amq.direct", nil))
		require.NoError(t, ch.QueueUnbind("same", "k", "never", nil))
		require.NoError(t, ch.ExchangeUnbind("never", "k", "amq.direct", false, nil))
		require.NoError(t, ch.ExchangeUnbind("amq.direct", "k", "never", false, nil))
	})
	t.Run("conditional deletes that apply", func(t *testing.T) {
		_, err := ch.QueueDeclare("idle", false, false, false, false, nil)
		require.NoError(t, err)
		n, err := ch.QueueDelete("idle", true, true, false)
		require.NoError(t, err)
		require.Equal(t, 0, n)
		require.NoError(t, ch.ExchangeDeclare("unused", "direct", false, false, false, false, nil))
		// A binding to it as destination does not make it used.
		require.NoError(t, ch.ExchangeBind("unused", "k", "amq.direct", false, nil))
		require.NoError(t, ch.ExchangeDelete("unused", true, false))
		require.False(t, amqptest.ExchangeExists(t, conn, "unused"))
	})
	t.Run("a deleted queue's bindings go with it", func(t *testing.T) {
		_, err := ch.QueueDeclare("reborn", false, false, false, false, nil)
		require.NoError(t, err)
		require.NoError(t, ch.QueueBind("reborn", "k", "amq.topic", false, nil))
		_, err = ch.QueueDelete("reborn", false, false, false)
		require.NoError(t, err)
		_, err = ch.QueueDeclare("reborn", false, false, false, false, nil)
		require.NoError(t, err)
		amqptest.Publish(t, ch, "amq.topic", "k", "m")
		require.Empty(t, amqptest.GetAll(t, ch, "reborn"))
		// The default exchange's implicit binding comes back with it.
		amqptest.Publish(t, ch, "", "reborn", "m")
		require.Equal(t, []string{"m"}, amqptest.GetAll(t, ch, "reborn"))
	})
}

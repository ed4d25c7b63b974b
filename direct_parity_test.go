package broker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/internal/amqptest"
)

// parityChannel is what an application would declare to run against either
// door: every method of *amqp091.Channel, which *broker.Channel has too.
type parityChannel = amqp091Channel

// parityDoors opens channels on a fresh broker through amqp091-go (over the
// socket-free wire) or directly.
var parityDoors = []struct {
	name string
	open func(t *testing.T, b *broker.Broker) func() parityChannel
}{
	{"amqp091", func(t *testing.T, b *broker.Broker) func() parityChannel {
		conn := brokertest.Dial(t, b)
		return func() parityChannel {
			ch, err := conn.Channel()
			require.NoError(t, err)
			return ch
		}
	}},
	{"direct", func(t *testing.T, b *broker.Broker) func() parityChannel {
		return func() parityChannel {
			ch, err := b.Channel(t.Context())
			require.NoError(t, err)
			t.Cleanup(func() { _ = ch.Close() })
			return ch
		}
	}},
}

// parityTranscript collects what a scenario observes, one line per fact.
type parityTranscript struct {
	t     *testing.T
	lines []string
}

func (tr *parityTranscript) add(format string, args ...any) {
	tr.lines = append(tr.lines, fmt.Sprintf(format, args...))
}

// err records an error as amqp091-go reports it: its code and reason.
func (tr *parityTranscript) err(what string, err error) {
	if err == nil {
		tr.add("%s: ok", what)
		return
	}
	var ae *amqp091.Error
	require.ErrorAs(tr.t, err, &ae, "%s", what)
	tr.add("%s: %d %s", what, ae.Code, ae.Reason)
}

// delivery records everything a delivery carries but its Acknowledger.
func (tr *parityTranscript) delivery(what string, d amqp091.Delivery) {
	d.Acknowledger = nil
	tr.add("%s: %+v", what, d)
}

func parityPublishing(i int) amqp091.Publishing {
	return amqp091.Publishing{
		Headers: amqp091.Table{
			"i":      int32(i),
			"nested": amqp091.Table{"s": "x", "d": amqp091.Decimal{Scale: 2, Value: 314}},
			"list":   []any{int64(1), "two", amqp091.Table{"three": true}},
			"bytes":  []byte{1, 2},
			"time":   time.Unix(1700000000, 0),
		},
		ContentType:   "text/plain",
		DeliveryMode:  amqp091.Persistent,
		Priority:      3,
		CorrelationId: fmt.Sprintf("corr-%d", i),
		ReplyTo:       "replies",
		MessageId:     fmt.Sprintf("id-%d", i),
		Timestamp:     time.Unix(1700000000+int64(i), 0),
		Type:          "greeting",
		UserId:        "guest",
		AppId:         "parity",
		Body:          fmt.Appendf(nil, "m%d", i),
	}
}

// parityScenario publishes, consumes, acks, nacks, gets, uses transactions
// and recovers, and provokes channel errors, writing down what it sees.
func parityScenario(t *testing.T, open func() parityChannel) []string {
	tr := &parityTranscript{t: t}
	ctx := context.Background()
	ch := open()

	tr.err("exchange.declare", ch.ExchangeDeclare("orders", "direct", false, false, false, false, nil))
	tr.err("exchange.declare passive", ch.ExchangeDeclarePassive("orders", "direct", false, false, false, false, nil))
	q, err := ch.QueueDeclare("work", false, false, false, false, amqp091.Table{"x-max-length": int32(100)})
	tr.err("queue.declare", err)
	tr.add("queue: %+v", q)
	tr.err("queue.bind", ch.QueueBind("work", "new", "orders", false, nil))

	// Publisher confirms, and a mandatory publish nobody routes.
	tr.err("confirm.select", ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 16))
	returns := ch.NotifyReturn(make(chan amqp091.Return, 1))
	for i := range 5 {
		tr.err("publish", ch.PublishWithContext(ctx, "orders", "new", false, false, parityPublishing(i)))
	}
	tr.err("publish mandatory", ch.PublishWithContext(ctx, "orders", "nowhere", true, false, parityPublishing(99)))
	ret, _ := amqptest.Receive(t, returns)
	tr.add("return: %+v", ret)
	for range 6 {
		c, _ := amqptest.Receive(t, confirms)
		tr.add("confirm: %+v", c)
	}
	q, err = ch.QueueDeclarePassive("work", false, false, false, false, nil)
	tr.err("queue.declare passive", err)
	tr.add("queue: %+v", q)

	// basic.get: a nack with requeue puts m0 back in its place, ahead of m2.
	g0, ok, err := ch.Get("work", false)
	tr.err("get", err)
	tr.add("get ok: %t", ok)
	tr.delivery("get", g0)
	g1, _, err := ch.Get("work", false)
	tr.err("get", err)
	tr.delivery("get", g1)
	tr.err("nack requeue", g0.Nack(false, true))
	g0again, _, err := ch.Get("work", false)
	tr.err("get", err)
	tr.delivery("get after nack", g0again)
	tr.err("ack multiple", ch.Ack(g0again.DeliveryTag, true))

	// A consumer with prefetch 3 takes m2, m3, m4 in order. (Requeues are
	// made while nothing else is ready: which message a consumer gets
	// first when a requeue races with the queue's cursor is the engine's
	// business, not the door's.)
	tr.err("basic.qos", ch.Qos(3, 0, false))
	msgs, err := ch.Consume("work", "c1", false, false, false, false, nil)
	tr.err("basic.consume", err)
	d2, _ := amqptest.Receive(t, msgs)
	d3, _ := amqptest.Receive(t, msgs)
	d4, _ := amqptest.Receive(t, msgs)
	tr.delivery("deliver", d2)
	tr.delivery("deliver", d3)
	tr.delivery("deliver", d4)
	tr.err("nack requeue", d2.Nack(false, true))
	d2again, _ := amqptest.Receive(t, msgs)
	tr.delivery("redeliver", d2again)
	tr.err("ack", d3.Ack(false))
	tr.err("reject", d4.Reject(false)) // discarded: no dead-letter exchange
	tr.err("recover", ch.Recover(true))
	d2third, _ := amqptest.Receive(t, msgs)
	tr.delivery("redeliver after recover", d2third)
	tr.err("basic.cancel", ch.Cancel("c1", false))
	_, open1 := amqptest.Receive(t, msgs)
	tr.add("deliveries open after cancel: %t", open1)

	// basic.get on what the cancelled consumer left unacked.
	_, ok, err = ch.Get("work", false)
	tr.err("get", err)
	tr.add("get ok: %t (the unacked stay unacked after cancel)", ok)
	tr.err("nack all", ch.Nack(0, true, true))
	g, ok, err := ch.Get("work", false)
	tr.err("get", err)
	tr.add("get ok: %t", ok)
	tr.delivery("get", g)
	tr.err("ack", g.Ack(false))
	_, ok, err = ch.Get("work", true)
	tr.err("get", err)
	tr.add("get empty: %t", !ok)

	// Transactions.
	tx := open()
	tr.err("tx.select", tx.Tx())
	tr.err("publish in tx", tx.PublishWithContext(ctx, "", "work", false, false, parityPublishing(10)))
	tr.err("tx.rollback", tx.TxRollback())
	tr.err("publish in tx", tx.PublishWithContext(ctx, "", "work", false, false, parityPublishing(11)))
	tr.err("tx.commit", tx.TxCommit())
	n, err := tx.QueuePurge("work", false)
	tr.err("queue.purge", err)
	tr.add("purged: %d", n)
	tr.err("close", tx.Close())

	// Exchange-to-exchange bindings, unbind, delete.
	tr.err("exchange.declare", ch.ExchangeDeclare("audit", "fanout", false, false, false, false, nil))
	tr.err("exchange.bind", ch.ExchangeBind("audit", "new", "orders", false, nil))
	tr.err("exchange.unbind", ch.ExchangeUnbind("audit", "new", "orders", false, nil))
	tr.err("exchange.delete", ch.ExchangeDelete("audit", false, false))
	tr.err("queue.unbind", ch.QueueUnbind("work", "new", "orders", nil))

	// A queue deleted under its consumer: basic.cancel from the broker.
	cancels := ch.NotifyCancel(make(chan string, 1))
	_, err = ch.QueueDeclare("doomed", false, false, false, false, nil)
	tr.err("queue.declare", err)
	ctxMsgs, err := ch.ConsumeWithContext(ctx, "doomed", "c2", true, false, false, false, nil)
	tr.err("basic.consume", err)
	other := open()
	n, err = other.QueueDelete("doomed", false, false, false)
	tr.err("queue.delete", err)
	tr.add("deleted with %d messages", n)
	tag, _ := amqptest.Receive(t, cancels)
	tr.add("cancelled by the broker: %s", tag)
	_, open2 := amqptest.Receive(t, ctxMsgs)
	tr.add("deliveries open after broker cancel: %t", open2)
	tr.err("close", other.Close())

	// 406: an inequivalent redeclare closes the channel.
	closes := ch.NotifyClose(make(chan *amqp091.Error, 1))
	_, err = ch.QueueDeclare("work", true, false, false, false, nil)
	tr.err("inequivalent queue.declare", err)
	e, _ := amqptest.Receive(t, closes)
	tr.err("notify close", e)
	tr.err("declare on the closed channel", ch.ExchangeDeclare("late", "direct", false, false, false, false, nil))
	tr.err("close after error", ch.Close())

	// 404 on a fresh channel, and a 406 for an unknown tag, which
	// amqp091-go learns only afterwards (through NotifyClose).
	ch404 := open()
	_, err = ch404.QueueDeclarePassive("missing", false, false, false, false, nil)
	tr.err("passive declare of a missing queue", err)
	chTag := open()
	closes = chTag.NotifyClose(make(chan *amqp091.Error, 1))
	if err := chTag.Ack(42, false); err != nil {
		var ae *amqp091.Error
		require.ErrorAs(t, err, &ae)
		require.Equal(t, amqp091.PreconditionFailed, ae.Code, "the direct channel may report it at once")
	}
	e, _ = amqptest.Receive(t, closes)
	tr.err("notify close after unknown tag", e)
	return tr.lines
}

// TestParityWithAMQP091 runs one scenario through amqp091-go and through
// the direct Channel, each on a fresh broker, and requires the same
// transcript: order, redelivered flags, tags, properties, counts, errors.
func TestParityWithAMQP091(t *testing.T) {
	results := make([][]string, len(parityDoors))
	for i, door := range parityDoors {
		t.Run(door.name, func(t *testing.T) {
			b := brokertest.NewUnstarted(t, broker.Options{})
			results[i] = parityScenario(t, door.open(t, b))
		})
	}
	require.NotEmpty(t, results[0])
	require.Equal(t, results[0], results[1])
}

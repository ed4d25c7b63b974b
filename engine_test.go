package broker_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/amqptest"
)

// The tests in this file drive the queue engine through amqp091-go over TCP
// and check the engine's promises (internal/queue/doc.go), one behaviour
// per test.

func TestEngineCompetingConsumersGetDistinctMessages(t *testing.T) {
	b := startBroker(t, broker.Options{})
	pub := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
	amqptest.DeclareQueue(t, pub, "work", false)

	const n = 2000
	type got struct {
		consumer int
		body     string
	}
	results := make(chan got, n)
	for i := range 3 {
		ch := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
		require.NoError(t, ch.Qos(10, 0, false))
		msgs, err := ch.Consume("work", "", false, false, false, false, nil)
		require.NoError(t, err)
		go func() {
			for d := range msgs {
				results <- got{i, string(d.Body)}
				_ = d.Ack(false)
			}
		}()
	}
	amqptest.PublishBodies(t, pub, "work", false, amqptest.Numbered("m", n)...)

	seen := make(map[string]int, n)
	per := make(map[int]int)
	for range n {
		select {
		case g := <-results:
			seen[g.body]++
			per[g.consumer]++
		case <-time.After(amqptest.Timeout):
			t.Fatalf("only %d of %d messages consumed", len(seen), n)
		}
	}
	require.Len(t, seen, n)
	for body, c := range seen {
		require.Equal(t, 1, c, "%s delivered %d times", body, c)
	}
	require.Len(t, per, 3, "every consumer got a share: %v", per)
	waitStats(t, b, "work", func(st queueCounts) bool { return st == queueCounts{Consumers: 3} })
}

// basic.get and basic.consume claim from one cursor: under load, with
// both running at once, each message is seen exactly once. On Pebble the
// publishes are persistent, so gets also meet batches still being synced
// (a get runs in place only when none is).
func TestEngineGetAndConsumeShareOneCursor(t *testing.T) {
	t.Run("memory", func(t *testing.T) { testGetAndConsumeShareOneCursor(t, broker.Options{}, false) })
	t.Run("pebble", func(t *testing.T) { testGetAndConsumeShareOneCursor(t, broker.Options{DataDir: t.TempDir()}, true) })
}

func testGetAndConsumeShareOneCursor(t *testing.T, opts broker.Options, durable bool) {
	b := startBroker(t, opts)
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	pub := amqptest.Channel(t, conn)
	amqptest.DeclareQueue(t, pub, "mixed", durable)

	const n = 3000
	seen := make(chan string, 2*n)
	cons := amqptest.Channel(t, conn)
	require.NoError(t, cons.Qos(5, 0, false))
	msgs, err := cons.Consume("mixed", "c", false, false, false, false, nil)
	require.NoError(t, err)
	go func() {
		for d := range msgs {
			seen <- string(d.Body)
			_ = d.Ack(false)
		}
	}()

	getter := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
	stop := make(chan struct{})
	getErr := make(chan error, 1)
	var gets int
	go func() {
		defer close(getErr)
		for {
			select {
			case <-stop:
				return
			default:
			}
			d, ok, err := getter.Get("mixed", false)
			if err != nil {
				getErr <- err
				return
			}
			if ok {
				gets++
				seen <- string(d.Body)
				if err := d.Ack(false); err != nil {
					getErr <- err
					return
				}
			}
		}
	}()
	amqptest.PublishBodies(t, pub, "mixed", durable, amqptest.Numbered("m", n)...)

	count := make(map[string]int, n)
	for len(count) < n {
		select {
		case body := <-seen:
			count[body]++
		case <-time.After(amqptest.Timeout):
			t.Fatalf("only %d of %d messages seen", len(count), n)
		}
	}
	close(stop)
	require.NoError(t, <-getErr)
	// Anything still in flight would be a duplicate.
	waitStats(t, b, "mixed", func(st queueCounts) bool { return st.Ready == 0 && st.Unacked == 0 })
	for len(seen) > 0 {
		count[<-seen]++
	}
	for body, c := range count {
		require.Equal(t, 1, c, "%s seen %d times", body, c)
	}
	require.Positive(t, gets, "basic.get took part")
	require.Less(t, gets, n, "the consumer took part")
}

func TestEnginePrefetchBoundsUnacked(t *testing.T) {
	t.Run("per consumer", func(t *testing.T) {
		b := startBroker(t, broker.Options{})
		ch := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
		amqptest.DeclareQueue(t, ch, "pf", false)
		amqptest.PublishConfirmed(t, ch, "pf", false, amqptest.Numbered("m", 10)...)
		require.NoError(t, ch.Qos(3, 0, false))
		msgs, err := ch.Consume("pf", "", false, false, false, false, nil)
		require.NoError(t, err)
		// A second consumer on the same channel gets its own 3.
		msgs2, err := ch.Consume("pf", "", false, false, false, false, nil)
		require.NoError(t, err)
		var first []amqp091.Delivery
		for range 3 {
			first = append(first, amqptest.Next(t, msgs))
			amqptest.Next(t, msgs2)
		}
		require.Equal(t, queueCounts{Ready: 4, Unacked: 6, Consumers: 2}, queueStats(t, b, "pf"))
		// Each ack frees one slot for its consumer only.
		require.NoError(t, first[0].Ack(false))
		d := amqptest.Next(t, msgs)
		require.False(t, d.Redelivered)
		require.Equal(t, queueCounts{Ready: 3, Unacked: 6, Consumers: 2}, queueStats(t, b, "pf"))
	})
	t.Run("global per channel", func(t *testing.T) {
		b := startBroker(t, broker.Options{})
		ch := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
		amqptest.DeclareQueue(t, ch, "g1", false)
		amqptest.DeclareQueue(t, ch, "g2", false)
		amqptest.PublishConfirmed(t, ch, "g1", false, amqptest.Numbered("a", 5)...)
		amqptest.PublishConfirmed(t, ch, "g2", false, amqptest.Numbered("b", 5)...) // stored before the counts below are read
		cons := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
		require.NoError(t, cons.Qos(4, 0, true))
		m1, err := cons.Consume("g1", "", false, false, false, false, nil)
		require.NoError(t, err)
		m2, err := cons.Consume("g2", "", false, false, false, false, nil)
		require.NoError(t, err)
		var out []amqp091.Delivery
		for len(out) < 4 {
			select {
			case d := <-m1:
				out = append(out, d)
			case d := <-m2:
				out = append(out, d)
			case <-time.After(amqptest.Timeout):
				t.Fatalf("only %d deliveries", len(out))
			}
		}
		s1, s2 := queueStats(t, b, "g1"), queueStats(t, b, "g2")
		require.EqualValues(t, 4, s1.Unacked+s2.Unacked, "the channel holds at most 4")
		require.EqualValues(t, 6, s1.Ready+s2.Ready)
		// Acking everything lets the rest through, still 4 at a time.
		require.NoError(t, cons.Ack(out[len(out)-1].DeliveryTag, true))
		got := 0
		for got < 4 {
			select {
			case <-m1:
				got++
			case <-m2:
				got++
			case <-time.After(amqptest.Timeout):
				t.Fatalf("only %d deliveries after the ack", got)
			}
		}
		s1, s2 = queueStats(t, b, "g1"), queueStats(t, b, "g2")
		require.EqualValues(t, 4, s1.Unacked+s2.Unacked)
		require.EqualValues(t, 2, s1.Ready+s2.Ready)
	})
}

// A connection that drops (no close handshake) with unacked deliveries:
// they go to another consumer, redelivered, in their original order ahead
// of the messages never delivered.
func TestEngineDroppedConnectionRedelivers(t *testing.T) {
	b := startBroker(t, broker.Options{})
	pub := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
	amqptest.DeclareQueue(t, pub, "drop", true)
	amqptest.PublishConfirmed(t, pub, "drop", true, amqptest.Numbered("m", 8)...)

	var sock net.Conn
	victim := amqptest.Dial(t, b.URL(), amqp091.Config{Dial: func(network, addr string) (net.Conn, error) {
		c, err := net.Dial(network, addr)
		sock = c
		return c, err
	}})
	vch := amqptest.Channel(t, victim)
	require.NoError(t, vch.Qos(5, 0, false))
	msgs, err := vch.Consume("drop", "", false, false, false, false, nil)
	require.NoError(t, err)
	for i := range 5 {
		require.Equal(t, amqptest.Numbered("m", 8)[i], string(amqptest.Next(t, msgs).Body))
	}
	require.NoError(t, sock.Close()) // no connection.close: the socket just goes
	// The broker notices and requeues; then the messages are all ready.
	waitStats(t, b, "drop", func(st queueCounts) bool { return st == queueCounts{Ready: 8} })

	other := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
	msgs2, err := other.Consume("drop", "", false, false, false, false, nil)
	require.NoError(t, err)
	for i, want := range amqptest.Numbered("m", 8) {
		d := amqptest.Next(t, msgs2)
		require.Equal(t, want, string(d.Body))
		require.Equal(t, i < 5, d.Redelivered, "message %s", want)
		require.NoError(t, d.Ack(false))
	}
}

func TestEngineMultipleAckAndNack(t *testing.T) {
	b := startBroker(t, broker.Options{})
	ch := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
	amqptest.DeclareQueue(t, ch, "multi", false)
	amqptest.PublishConfirmed(t, ch, "multi", false, amqptest.Numbered("m", 10)...)
	msgs, err := ch.Consume("multi", "", false, false, false, false, nil)
	require.NoError(t, err)
	var ds []amqp091.Delivery
	for range 10 {
		ds = append(ds, amqptest.Next(t, msgs))
	}
	require.NoError(t, ds[3].Ack(true)) // tags 1..4
	waitStats(t, b, "multi", func(st queueCounts) bool { return st.Unacked == 6 })
	require.NoError(t, ds[6].Nack(true, false)) // tags 5..7 discarded
	waitStats(t, b, "multi", func(st queueCounts) bool { return st.Unacked == 3 && st.Ready == 0 })
	require.NoError(t, ds[9].Nack(true, true)) // tags 8..10 requeued
	for _, want := range []string{"m-7", "m-8", "m-9"} {
		d := amqptest.Next(t, msgs)
		require.Equal(t, want, string(d.Body))
		require.True(t, d.Redelivered)
	}
	// Every earlier tag is settled: multiple=true with the last tag acks
	// exactly the three redeliveries.
	require.NoError(t, ch.Ack(13, true))
	waitStats(t, b, "multi", func(st queueCounts) bool { return st == queueCounts{Consumers: 1} })
}

// nack/reject with requeue put a message back where it was, ahead of
// everything behind it, and it comes back redelivered.
func TestEngineRequeueKeepsOriginalPosition(t *testing.T) {
	b := startBroker(t, broker.Options{})
	ch := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
	amqptest.DeclareQueue(t, ch, "pos", false)
	amqptest.PublishConfirmed(t, ch, "pos", false, "a", "b", "c", "d", "e")

	a, bb, c := amqptest.Get(t, ch, "pos", false), amqptest.Get(t, ch, "pos", false), amqptest.Get(t, ch, "pos", false)
	require.NoError(t, c.Reject(true))
	require.NoError(t, a.Nack(false, true))
	var order []string
	var redelivered []bool
	for range 4 {
		d := amqptest.Get(t, ch, "pos", true)
		order = append(order, string(d.Body))
		redelivered = append(redelivered, d.Redelivered)
	}
	require.Equal(t, []string{"a", "c", "d", "e"}, order)
	require.Equal(t, []bool{true, true, false, false}, redelivered)
	amqptest.RequireEmpty(t, ch, "pos")
	require.NoError(t, bb.Ack(false))

	// The same through a consumer.
	amqptest.PublishConfirmed(t, ch, "pos", false, "1", "2", "3")
	msgs, err := ch.Consume("pos", "", false, false, false, false, nil)
	require.NoError(t, err)
	d1, d2, d3 := amqptest.Next(t, msgs), amqptest.Next(t, msgs), amqptest.Next(t, msgs)
	require.NoError(t, d2.Nack(false, true))
	again := amqptest.Next(t, msgs)
	require.Equal(t, "2", string(again.Body))
	require.True(t, again.Redelivered)
	require.NoError(t, ch.Ack(again.DeliveryTag, true))
	_, _ = d1, d3
	waitStats(t, b, "pos", func(st queueCounts) bool { return st == queueCounts{Consumers: 1} })
}

func TestEngineRecoverRequeues(t *testing.T) {
	b := startBroker(t, broker.Options{})
	ch := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
	amqptest.DeclareQueue(t, ch, "rec", false)
	amqptest.PublishConfirmed(t, ch, "rec", false, "x", "y", "z")
	msgs, err := ch.Consume("rec", "", false, false, false, false, nil)
	require.NoError(t, err)
	for _, want := range []string{"x", "y", "z"} {
		require.Equal(t, want, string(amqptest.Next(t, msgs).Body))
	}
	require.NoError(t, ch.Recover(true))
	for _, want := range []string{"x", "y", "z"} {
		d := amqptest.Next(t, msgs)
		require.Equal(t, want, string(d.Body))
		require.True(t, d.Redelivered)
		require.NoError(t, d.Ack(false))
	}
	waitStats(t, b, "rec", func(st queueCounts) bool { return st == queueCounts{Consumers: 1} })

	// requeue=false (redeliver to the same consumer) is not implemented, as
	// in RabbitMQ: 540, which closes the connection.
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	errs := conn.NotifyClose(make(chan *amqp091.Error, 1))
	ch2 := amqptest.Channel(t, conn)
	_ = ch2.Recover(false)
	require.Equal(t, amqp.NotImplemented, uint16(amqptest.AwaitClose(t, errs).Code))
}

func TestEngineChannelErrors(t *testing.T) {
	b := startBroker(t, broker.Options{})
	setup := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
	amqptest.DeclareQueue(t, setup, "errs", false)

	t.Run("unknown delivery tag is 406", func(t *testing.T) {
		ch := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
		errs := ch.NotifyClose(make(chan *amqp091.Error, 1))
		require.NoError(t, ch.Ack(42, false))
		e := amqptest.AwaitClose(t, errs)
		require.Equal(t, amqp.PreconditionFailed, uint16(e.Code))
		require.Contains(t, e.Reason, "unknown delivery tag 42")
	})
	t.Run("multiple ack of an unknown tag is 406", func(t *testing.T) {
		ch := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
		errs := ch.NotifyClose(make(chan *amqp091.Error, 1))
		require.NoError(t, ch.Nack(7, true, true))
		require.Equal(t, amqp.PreconditionFailed, uint16(amqptest.AwaitClose(t, errs).Code))
	})
	t.Run("multiple ack above every outstanding tag is 406 and acks nothing", func(t *testing.T) {
		// RabbitMQ's collect_acks: tag itself must be unacked, else the
		// channel closes and the older deliveries stay unacked (here they
		// go back to the queue with the channel).
		amqptest.DeclareQueue(t, setup, "multi-above", false)
		amqptest.PublishBodies(t, setup, "multi-above", false, "a", "b")
		// The gets come from another connection, which nothing orders after
		// setup's publishes: wait until the queue holds both.
		amqptest.Poll(t, func() bool {
			q, err := setup.QueueDeclarePassive("multi-above", false, false, false, false, nil)
			require.NoError(t, err)
			return q.Messages == 2
		}, "both messages in the queue")
		ch := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
		errs := ch.NotifyClose(make(chan *amqp091.Error, 1))
		amqptest.Get(t, ch, "multi-above", false)
		last := amqptest.Get(t, ch, "multi-above", false)
		require.NoError(t, ch.Ack(last.DeliveryTag+3, true))
		amqptest.RequireReply(t, amqptest.AwaitClose(t, errs), amqp091.PreconditionFailed,
			fmt.Sprintf("PRECONDITION_FAILED - unknown delivery tag %d", last.DeliveryTag+3))
		amqptest.Poll(t, func() bool {
			q, err := setup.QueueDeclarePassive("multi-above", false, false, false, false, nil)
			require.NoError(t, err)
			return q.Messages == 2
		}, "both deliveries back in the queue")
		require.Equal(t, []string{"a", "b"}, amqptest.GetAll(t, setup, "multi-above"))
	})
	t.Run("duplicate consumer tag is 530", func(t *testing.T) {
		conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
		ch := amqptest.Channel(t, conn)
		_, err := ch.Consume("errs", "dup", false, false, false, false, nil)
		require.NoError(t, err)
		_, err = ch.Consume("errs", "dup", false, false, false, false, nil)
		amqptest.RequireCode(t, err, amqp091.NotAllowed)
	})
	t.Run("exclusive consumer locks out others with 403", func(t *testing.T) {
		amqptest.DeclareQueue(t, setup, "excl", false)
		owner := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
		_, err := owner.Consume("excl", "owner", false, true, false, false, nil)
		require.NoError(t, err)
		other := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
		_, err = other.Consume("excl", "", false, false, false, false, nil)
		amqptest.RequireCode(t, err, amqp091.AccessRefused)
		// And an exclusive consume on a queue with consumers.
		amqptest.DeclareQueue(t, setup, "busy", false)
		_, err = owner.Consume("busy", "plain", false, false, false, false, nil)
		require.NoError(t, err)
		third := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
		_, err = third.Consume("busy", "", false, true, false, false, nil)
		amqptest.RequireCode(t, err, amqp091.AccessRefused)
	})
	t.Run("immediate is 540", func(t *testing.T) {
		conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
		errs := conn.NotifyClose(make(chan *amqp091.Error, 1))
		ch := amqptest.Channel(t, conn)
		_ = ch.PublishWithContext(context.Background(), "", "errs", false, true, amqp091.Publishing{Body: []byte("x")})
		e := amqptest.AwaitClose(t, errs)
		require.Equal(t, amqp.NotImplemented, uint16(e.Code))
		require.Contains(t, e.Reason, "immediate")
	})
}

// The server names consumers amq.ctag-… when the client leaves the tag
// empty. amqp091-go always sends a tag of its own, so this speaks raw
// frames.
func TestEngineServerGeneratedConsumerTag(t *testing.T) {
	b := startBroker(t, broker.Options{})
	c := amqptest.DialRaw(t, b.Addr().String())
	c.Handshake()
	c.OpenChannel(1)
	c.SendMethod(1, &amqp.QueueDeclare{Queue: "tags"})
	_, ok := c.ExpectMethod(1).(*amqp.QueueDeclareOk)
	require.True(t, ok)
	tags := map[string]bool{}
	for range 2 {
		c.SendMethod(1, &amqp.BasicConsume{Queue: "tags"})
		ok, isOk := c.ExpectMethod(1).(*amqp.BasicConsumeOk)
		require.True(t, isOk)
		require.Regexp(t, `^amq\.ctag-[A-Za-z0-9_-]{22}$`, ok.ConsumerTag)
		tags[ok.ConsumerTag] = true
	}
	require.Len(t, tags, 2, "tags are unique")
}

func TestEngineQueueDeleteCancelsConsumers(t *testing.T) {
	b := startBroker(t, broker.Options{})
	ch := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
	amqptest.DeclareQueue(t, ch, "doomed", false)
	cancels := ch.NotifyCancel(make(chan string, 1))
	msgs, err := ch.Consume("doomed", "watcher", false, false, false, false, nil)
	require.NoError(t, err)

	admin := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
	_, err = admin.QueueDelete("doomed", false, false, false)
	require.NoError(t, err)
	select {
	case tag := <-cancels:
		require.Equal(t, "watcher", tag)
	case <-time.After(amqptest.Timeout):
		t.Fatal("no basic.cancel from the server")
	}
	// amqp091-go closes the consumer's delivery channel on basic.cancel.
	select {
	case _, open := <-msgs:
		require.False(t, open)
	case <-time.After(amqptest.Timeout):
		t.Fatal("delivery channel not closed")
	}
	// The channel stays usable.
	amqptest.DeclareQueue(t, ch, "after", false)
}

// A mandatory publish nobody can route comes back with basic.return 312
// NO_ROUTE, and the return reaches the client before the publish's ack.
func TestEngineMandatoryReturnPrecedesConfirm(t *testing.T) {
	b := startBroker(t, broker.Options{})
	ch := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
	require.NoError(t, ch.Confirm(false))
	// amqp091-go hands frames to these channels on its reader goroutine in
	// the order they arrived, so buffered channels preserve frame order.
	returns := ch.NotifyReturn(make(chan amqp091.Return, 10))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 10))
	for i := range 3 {
		require.NoError(t, ch.PublishWithContext(context.Background(), "", "nowhere", true, false,
			amqp091.Publishing{Body: []byte{byte('a' + i)}, MessageId: "id"}))
		var c amqp091.Confirmation
		select {
		case c = <-confirms:
		case <-time.After(amqptest.Timeout):
			t.Fatal("no confirm")
		}
		require.True(t, c.Ack, "an unroutable publish is acked")
		require.EqualValues(t, i+1, c.DeliveryTag)
		select {
		case r := <-returns:
			require.EqualValues(t, amqp.NoRoute, r.ReplyCode)
			require.Equal(t, "NO_ROUTE", r.ReplyText)
			require.Equal(t, "nowhere", r.RoutingKey)
			require.Equal(t, []byte{byte('a' + i)}, r.Body)
			require.Equal(t, "id", r.MessageId)
		default:
			t.Fatal("the confirm overtook the basic.return")
		}
	}
	// Not mandatory: dropped silently, still acked.
	require.NoError(t, ch.PublishWithContext(context.Background(), "", "nowhere", false, false, amqp091.Publishing{}))
	require.True(t, (<-confirms).Ack)
	require.Empty(t, returns)
}

func TestEnginePublisherConfirmsInOrder(t *testing.T) {
	b := startBroker(t, broker.Options{})
	ch := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
	amqptest.DeclareQueue(t, ch, "confirms", true)
	require.NoError(t, ch.Confirm(false))
	const n = 2000
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, n))
	for i, body := range amqptest.Numbered("m", n) {
		// Mix persistent and transient publishes: the persistent ones wait
		// for a sync, the confirms still come in publish order.
		require.NoError(t, ch.PublishWithContext(context.Background(), "", "confirms", false, false,
			amqp091.Publishing{Body: []byte(body), DeliveryMode: uint8(1 + i%2)}))
	}
	// amqp091-go expands multiple=true acks into one Confirmation per tag,
	// in tag order; a gap or reordering would show here.
	for i := 1; i <= n; i++ {
		select {
		case c := <-confirms:
			require.Equal(t, uint64(i), c.DeliveryTag)
			require.True(t, c.Ack)
		case <-time.After(amqptest.Timeout):
			t.Fatalf("confirm %d missing", i)
		}
	}
	q, err := ch.QueueDeclarePassive("confirms", true, false, false, false, nil)
	require.NoError(t, err)
	require.Equal(t, n, q.Messages)
}

// confirm.select with nowait=true gets no select-ok, and publishes are
// confirmed all the same. (amqp091-go waits for a select-ok even with
// noWait, so this speaks raw frames.)
func TestEngineConfirmSelectNowait(t *testing.T) {
	b := startBroker(t, broker.Options{})
	c := amqptest.DialRaw(t, b.Addr().String())
	c.Handshake()
	c.OpenChannel(1)
	c.SendMethod(1, &amqp.QueueDeclare{Queue: "nw"})
	_, ok := c.ExpectMethod(1).(*amqp.QueueDeclareOk)
	require.True(t, ok)
	c.SendMethod(1, &amqp.ConfirmSelect{Nowait: true})
	noProps := (&amqp.Properties{}).Append(nil)
	var buf []byte
	for range 2 {
		buf = amqp.AppendMethodFrame(buf, 1, &amqp.BasicPublish{RoutingKey: "nw"})
		buf = amqp.AppendHeaderFrame(buf, 1, amqp.ClassBasic, 1, noProps)
		buf = amqp.AppendFrame(buf, amqp.FrameBody, 1, []byte("x"))
	}
	c.Send(buf)
	var last uint64
	for last < 2 {
		m := c.ExpectMethod(1)
		ack, ok := m.(*amqp.BasicAck)
		require.True(t, ok, "want basic.ack, got %s", m.Name())
		last = ack.DeliveryTag
	}
	require.EqualValues(t, 2, last)
}

func TestEngineTransactions(t *testing.T) {
	b := startBroker(t, broker.Options{})
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	ch := amqptest.Channel(t, conn)
	amqptest.DeclareQueue(t, ch, "tx", false)
	peek := amqptest.Channel(t, conn)
	ready := func() int {
		q, err := peek.QueueDeclarePassive("tx", false, false, false, false, nil)
		require.NoError(t, err)
		return q.Messages
	}

	require.NoError(t, ch.Tx())
	amqptest.PublishBodies(t, ch, "tx", false, "r1", "r2")
	require.Equal(t, 0, ready(), "publishes wait for commit")
	require.NoError(t, ch.TxRollback())
	require.Equal(t, 0, ready(), "rolled back")
	amqptest.PublishBodies(t, ch, "tx", false, "c1", "c2", "c3")
	require.NoError(t, ch.TxCommit())
	require.Equal(t, 3, ready(), "committed")

	// Acks are held too; a rolled-back ack leaves the message unacked, and
	// it can be acked again.
	d := amqptest.Get(t, ch, "tx", false)
	require.Equal(t, "c1", string(d.Body))
	require.NoError(t, d.Ack(false))
	require.Equal(t, queueCounts{Ready: 2, Unacked: 1}, queueStats(t, b, "tx"))
	require.NoError(t, ch.TxRollback())
	require.Equal(t, queueCounts{Ready: 2, Unacked: 1}, queueStats(t, b, "tx"))
	require.NoError(t, d.Ack(false))
	require.NoError(t, ch.TxCommit())
	require.Equal(t, queueCounts{Ready: 2}, queueStats(t, b, "tx"))

	// A requeue inside a transaction happens at commit, in place.
	d2 := amqptest.Get(t, ch, "tx", false)
	require.NoError(t, d2.Reject(true))
	require.Equal(t, queueCounts{Ready: 1, Unacked: 1}, queueStats(t, b, "tx"))
	require.NoError(t, ch.TxCommit())
	d3 := amqptest.Get(t, ch, "tx", true)
	require.Equal(t, "c2", string(d3.Body))
	require.True(t, d3.Redelivered)

	// tx and confirm modes exclude each other (406).
	errs := ch.NotifyClose(make(chan *amqp091.Error, 1))
	_ = ch.Confirm(false)
	require.Equal(t, amqp.PreconditionFailed, uint16(amqptest.AwaitClose(t, errs).Code))

	// A delivery settled earlier in the transaction is gone: settling it
	// again is 406, as in RabbitMQ, even before the commit.
	_, err := peek.QueuePurge("tx", false)
	require.NoError(t, err)
	for _, second := range []func(d amqp091.Delivery) error{
		func(d amqp091.Delivery) error { return d.Ack(false) },
		func(d amqp091.Delivery) error { return d.Nack(true, true) },
	} {
		ch2 := amqptest.Channel(t, conn)
		amqptest.PublishBodies(t, peek, "tx", false, "x")
		require.NoError(t, ch2.Tx())
		d := amqptest.Get(t, ch2, "tx", false)
		require.NoError(t, d.Ack(false))
		errs2 := ch2.NotifyClose(make(chan *amqp091.Error, 1))
		require.NoError(t, second(d))
		e := amqptest.AwaitClose(t, errs2)
		require.Equal(t, amqp.PreconditionFailed, uint16(e.Code))
		require.Contains(t, e.Reason, "unknown delivery tag")
		// The channel closed before the commit: the ack never happened,
		// and the close requeued the message.
		d = amqptest.Get(t, peek, "tx", true)
		require.Equal(t, "x", string(d.Body))
		require.True(t, d.Redelivered)
	}
}

func TestEngineMessageCounts(t *testing.T) {
	b := startBroker(t, broker.Options{})
	ch := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
	q, err := ch.QueueDeclare("counts", false, false, false, false, nil)
	require.NoError(t, err)
	require.Zero(t, q.Messages)
	amqptest.PublishConfirmed(t, ch, "counts", false, amqptest.Numbered("m", 5)...)

	q, err = ch.QueueDeclare("counts", false, false, false, false, nil)
	require.NoError(t, err)
	require.Equal(t, 5, q.Messages)
	d := amqptest.Get(t, ch, "counts", false)
	require.EqualValues(t, 4, d.MessageCount, "get-ok counts the messages left")
	q, err = ch.QueueDeclarePassive("counts", false, false, false, false, nil)
	require.NoError(t, err)
	require.Equal(t, 4, q.Messages, "unacked messages are not ready")
	require.NoError(t, d.Nack(false, true))
	d = amqptest.Get(t, ch, "counts", true)
	require.EqualValues(t, 4, d.MessageCount)
	require.True(t, d.Redelivered)

	msgs, err := ch.Consume("counts", "", false, false, false, false, nil)
	require.NoError(t, err)
	for range 4 {
		amqptest.Next(t, msgs)
	}
	q, err = ch.QueueDeclarePassive("counts", false, false, false, false, nil)
	require.NoError(t, err)
	require.Zero(t, q.Messages)
	require.Equal(t, 1, q.Consumers)
}

// Every one of the 14 basic properties and a headers table with every
// field type pass through the broker byte for byte: publish with raw
// frames, basic.get, compare the content header.
func TestEngineAllPropertiesPassThrough(t *testing.T) {
	b := startBroker(t, broker.Options{})
	props := amqp.Properties{
		ContentType:     "application/json",
		ContentEncoding: "gzip",
		Headers: amqp.Table{
			"string": "v", "int32": int32(-7), "int64": int64(1 << 40), "bool": true,
			"float64": 2.5, "bytes": []byte{0, 1, 2}, "time": time.Unix(1700000000, 0).UTC(),
			"nested": amqp.Table{"a": int32(1)}, "array": []any{"x", int32(2)},
			"decimal": amqp.Decimal{Scale: 2, Value: 12345}, "void": nil,
		},
		DeliveryMode:  2,
		Priority:      7,
		CorrelationID: "corr",
		ReplyTo:       "replies",
		Expiration:    "3600000",
		MessageID:     "msg-1",
		Timestamp:     time.Unix(1700000001, 0).UTC(),
		Type:          "order.created",
		UserID:        "guest",
		AppID:         "app",
		ClusterID:     "cluster",
	}
	raw := props.Append(nil)
	body := []byte("payload")

	c := amqptest.DialRaw(t, b.Addr().String())
	c.Handshake()
	c.OpenChannel(1)
	c.SendMethod(1, &amqp.QueueDeclare{Queue: "props"})
	_, ok := c.ExpectMethod(1).(*amqp.QueueDeclareOk)
	require.True(t, ok)
	var buf []byte
	buf = amqp.AppendMethodFrame(buf, 1, &amqp.BasicPublish{RoutingKey: "props"})
	buf = amqp.AppendHeaderFrame(buf, 1, amqp.ClassBasic, uint64(len(body)), raw)
	buf = amqp.AppendFrame(buf, amqp.FrameBody, 1, body)
	c.Send(buf)
	c.SendMethod(1, &amqp.BasicGet{Queue: "props", NoAck: true})
	_, ok = c.ExpectMethod(1).(*amqp.BasicGetOk)
	require.True(t, ok)
	f, err := c.Frames.ReadFrame()
	require.NoError(t, err)
	require.Equal(t, amqp.FrameHeader, f.Type)
	h, err := amqp.ParseContentHeader(f.Payload)
	require.NoError(t, err)
	require.Equal(t, raw, h.Properties, "properties byte for byte")
	require.EqualValues(t, len(body), h.BodySize)
	f, err = c.Frames.ReadFrame()
	require.NoError(t, err)
	require.Equal(t, body, f.Payload)

	// And through amqp091-go's view of the same fields.
	ch := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
	pub := amqp091.Publishing{
		ContentType: "text/plain", ContentEncoding: "utf-8",
		Headers:      amqp091.Table{"k": "v", "n": int32(3), "t": amqp091.Table{"x": true}},
		DeliveryMode: 2, Priority: 3, CorrelationId: "c", ReplyTo: "r", Expiration: "60000",
		MessageId: "m", Timestamp: time.Unix(1700000002, 0), Type: "t", UserId: "guest", AppId: "a",
		Body: []byte("b"),
	}
	require.NoError(t, ch.PublishWithContext(context.Background(), "", "props", false, false, pub))
	d := amqptest.Get(t, ch, "props", true)
	require.Equal(t, pub.ContentType, d.ContentType)
	require.Equal(t, pub.ContentEncoding, d.ContentEncoding)
	require.Equal(t, pub.Headers, d.Headers)
	require.Equal(t, pub.DeliveryMode, d.DeliveryMode)
	require.Equal(t, pub.Priority, d.Priority)
	require.Equal(t, pub.CorrelationId, d.CorrelationId)
	require.Equal(t, pub.ReplyTo, d.ReplyTo)
	require.Equal(t, pub.Expiration, d.Expiration)
	require.Equal(t, pub.MessageId, d.MessageId)
	require.True(t, pub.Timestamp.Equal(d.Timestamp))
	require.Equal(t, pub.Type, d.Type)
	require.Equal(t, pub.UserId, d.UserId)
	require.Equal(t, pub.AppId, d.AppId)
	require.Equal(t, pub.Body, d.Body)
}

// Many goroutines consuming, acking, nacking and closing channels at once
// must neither lose nor duplicate a message beyond redelivery.
func TestEngineChurnLosesNothing(t *testing.T) {
	b := startBroker(t, broker.Options{})
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	pub := amqptest.Channel(t, conn)
	amqptest.DeclareQueue(t, pub, "churn", false)
	const n = 1500
	amqptest.PublishConfirmed(t, pub, "churn", false, amqptest.Numbered("m", n)...)

	acked := make(chan string, n)
	done := make(chan struct{}) // closed once n acks were counted
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := 0; ; round++ {
				ch, err := conn.Channel()
				if err != nil {
					errs <- err
					return
				}
				_ = ch.Qos(7, 0, false)
				msgs, err := ch.Consume("churn", "", false, false, false, false, nil)
				if err != nil {
					errs <- err
					return
				}
			deliveries:
				for i := 0; ; i++ {
					var d amqp091.Delivery
					select {
					case d = <-msgs:
					case <-done:
						_ = ch.Close()
						return
					}
					switch (i + w + round) % 7 {
					case 0:
						_ = d.Nack(false, true) // back in place
					case 1:
						// Close with this delivery, and whatever else is
						// prefetched, unacked: all of it is requeued. (A
						// worker never waits while holding unacked
						// messages, or the last ones would never come.)
						break deliveries
					default:
						// Count before acking: once the ack is sent the
						// message may be gone before the count, never the
						// other way round.
						acked <- string(d.Body)
						_ = d.Ack(false)
					}
				}
				_ = ch.Close()
			}
		}()
	}
	count := map[string]int{}
	for len(count) < n {
		select {
		case body := <-acked:
			count[body]++
			require.Equal(t, 1, count[body], "%s acked twice", body)
		case <-time.After(amqptest.Timeout):
			select {
			case err := <-errs:
				t.Fatalf("only %d of %d messages acked: %v", len(count), n, err)
			default:
			}
			t.Fatalf("only %d of %d messages acked; queue %+v", len(count), n, queueStats(t, b, "churn"))
		}
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Empty(t, acked, "a message was acked twice")
	waitStats(t, b, "churn", func(st queueCounts) bool { return st == queueCounts{} })
}

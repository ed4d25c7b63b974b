package broker

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/internal/amqptest"
)

// queueDetail returns queue name's entry of s.QueueDetails; the test fails
// if there is none.
func queueDetail(t *testing.T, s Stats, name string) QueueStats {
	t.Helper()
	for _, q := range s.QueueDetails {
		if q.Name == name {
			return q
		}
	}
	t.Fatalf("queue %q not in Stats", name)
	return QueueStats{}
}

// TestWaitIdleReplacesSleep publishes without confirms and looks at the
// queue right after WaitIdle: no sleep, no polling. Then a consumer takes
// messages up to its prefetch, one is nacked back and redelivered, and
// WaitIdle again makes Unacked exact.
func TestWaitIdleReplacesSleep(t *testing.T) {
	b := newDirectBroker(t, Options{})
	conn := amqptest.DialVia(t, b.Dial, "guest", "producer")
	ch := amqptest.Channel(t, conn)
	_, err := ch.QueueDeclare("jobs", false, false, false, false, nil)
	require.NoError(t, err)
	for i := range 100 {
		require.NoError(t, ch.PublishWithContext(context.Background(), "", "jobs", false, false,
			amqp091.Publishing{Body: []byte(fmt.Sprint("m", i))}))
	}
	// Without WaitIdle the publishes could still be on their way to the
	// queue: Publish returns once the client wrote the frames.
	amqptest.Idle(t, b.WaitIdle)
	q := queueDetail(t, b.Stats(context.Background()), "jobs")
	require.Equal(t, uint64(100), q.Ready)
	require.Equal(t, uint64(100), q.Counters.Enqueued)

	cons := amqptest.Channel(t, amqptest.DialVia(t, b.Dial, "guest", "consumer"))
	require.NoError(t, cons.Qos(10, 0, false))
	_, err = cons.Consume("jobs", "worker", false, false, false, false, nil)
	require.NoError(t, err)
	amqptest.Idle(t, b.WaitIdle)
	un, err := b.Unacked(t.Context(), "/", "jobs")
	require.NoError(t, err)
	require.Len(t, un, 10)
	for i, u := range un {
		require.Equal(t, uint64(i+1), u.DeliveryTag)
		require.Equal(t, uint32(1), u.DeliveryCount)
		require.Equal(t, "worker", u.ConsumerTag)
		require.Equal(t, uint16(1), u.Channel)
	}

	// The nack frees one unit of credit: the message comes back in its
	// place and goes out again at once, as tag 11, delivered twice.
	require.NoError(t, cons.Nack(1, false, true))
	amqptest.Idle(t, b.WaitIdle)
	un, err = b.Unacked(t.Context(), "", "jobs")
	require.NoError(t, err)
	require.Len(t, un, 10)
	require.Equal(t, uint64(2), un[0].DeliveryTag)
	last := un[len(un)-1]
	require.Equal(t, uint64(11), last.DeliveryTag)
	require.Equal(t, uint32(2), last.DeliveryCount)

	s := b.Stats(context.Background())
	q = queueDetail(t, s, "jobs")
	require.Equal(t, uint64(90), q.Ready)
	require.Equal(t, uint64(10), q.Unacked)
	require.Equal(t, 1, q.Consumers)
	require.Equal(t, uint64(11), q.Counters.Delivered)
	require.Equal(t, uint64(1), q.Counters.Redelivered)
	require.Equal(t, uint64(100), s.Totals.Published)

	conns := b.Connections()
	require.Len(t, conns, 2)
	require.Equal(t, un[0].Connection, conns[1].ID, "Unacked names the consumer's connection")
	require.Equal(t, "consumer", conns[1].ClientProperties["connection_name"])
	require.Equal(t, "running", conns[1].State)
	require.Equal(t, "guest", conns[1].User)
	require.Equal(t, "/", conns[1].VHost)
}

func TestPeekQueueDoesNotConsume(t *testing.T) {
	b := newDirectBroker(t, Options{})
	ch := amqptest.Channel(t, amqptest.DialVia(t, b.Dial, "guest", "c"))
	_, err := ch.QueueDeclare("q", false, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 3))
	ts := time.Unix(1700000000, 0).UTC()
	pub := amqp091.Publishing{
		Headers: amqp091.Table{"n": int32(7), "nested": amqp091.Table{"s": "x"}}, ContentType: "text/plain",
		DeliveryMode: 2, Priority: 3, CorrelationId: "corr", MessageId: "id-0", Timestamp: ts, Body: []byte("first"),
	}
	require.NoError(t, ch.PublishWithContext(context.Background(), "", "q", false, false, pub))
	require.NoError(t, ch.PublishWithContext(context.Background(), "", "q", false, false, amqp091.Publishing{Body: []byte("second")}))
	for range 2 {
		require.True(t, (<-confirms).Ack)
	}

	for range 2 { // peeking twice sees the same
		msgs, err := b.PeekQueue(t.Context(), "/", "q", 10)
		require.NoError(t, err)
		require.Len(t, msgs, 2)
		require.Equal(t, "first", string(msgs[0].Publishing.Body))
		require.Equal(t, "second", string(msgs[1].Publishing.Body))
		require.False(t, msgs[0].Redelivered)
		require.Equal(t, uint32(0), msgs[0].DeliveryCount)
		require.Equal(t, "q", msgs[0].RoutingKey)
		p := msgs[0].Publishing
		require.Equal(t, "text/plain", p.ContentType)
		require.Equal(t, uint8(2), p.DeliveryMode)
		require.Equal(t, uint8(3), p.Priority)
		require.Equal(t, "corr", p.CorrelationId)
		require.Equal(t, ts, p.Timestamp)
		require.Equal(t, int32(7), p.Headers["n"])
		require.Equal(t, amqp091.Table{"s": "x"}, p.Headers["nested"])
	}
	one, err := b.PeekQueue(t.Context(), "/", "q", 1)
	require.NoError(t, err)
	require.Len(t, one, 1)

	// A get after the peeks is the first delivery.
	d, ok, err := ch.Get("q", false)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "first", string(d.Body))
	require.False(t, d.Redelivered)
	// The delivered message is not ready: peek shows the second only,
	// until it is requeued in its place.
	msgs, err := b.PeekQueue(t.Context(), "/", "q", 10)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	require.NoError(t, d.Nack(false, true))
	amqptest.Idle(t, b.WaitIdle)
	msgs, err = b.PeekQueue(t.Context(), "/", "q", 10)
	require.NoError(t, err)
	require.Len(t, msgs, 2)
	require.Equal(t, "first", string(msgs[0].Publishing.Body))
	require.True(t, msgs[0].Redelivered)
	require.Equal(t, uint32(1), msgs[0].DeliveryCount)

	_, err = b.PeekQueue(t.Context(), "/", "missing", 1)
	require.ErrorIs(t, err, ErrNotFound)
	_, err = b.PeekQueue(t.Context(), "nope", "q", 1)
	require.ErrorIs(t, err, ErrNotFound)
	msgs, err = b.PeekQueue(t.Context(), "/", "q", 0)
	require.NoError(t, err)
	require.Empty(t, msgs)
}

// TestPeekQueueReadsPastTheCache peeks deeper than the records the actor
// keeps in memory, so the rest comes from the store.
func TestPeekQueueReadsPastTheCache(t *testing.T) {
	b, err := New(Options{DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	conn, err := amqp091.DialConfig(b.URL(), amqp091.Config{Dial: b.Dial})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	ch := amqptest.Channel(t, conn)
	_, err = ch.QueueDeclare("deep", true, false, false, false, nil)
	require.NoError(t, err)
	const n = 5000
	for i := range n {
		require.NoError(t, ch.PublishWithContext(context.Background(), "", "deep", false, false,
			amqp091.Publishing{Body: []byte(fmt.Sprint(i))}))
	}
	amqptest.Idle(t, b.WaitIdle)
	msgs, err := b.PeekQueue(t.Context(), "/", "deep", n+10)
	require.NoError(t, err)
	require.Len(t, msgs, n)
	for i, m := range msgs {
		require.Equal(t, fmt.Sprint(i), string(m.Publishing.Body))
	}
}

func TestCloseConnection(t *testing.T) {
	b := newDirectBroker(t, Options{})
	conn := amqptest.DialVia(t, b.Dial, "guest", "victim")
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	conns := b.Connections()
	require.Len(t, conns, 1)

	require.ErrorIs(t, b.CloseConnection("no such", 320, "x"), ErrNotFound)
	require.Error(t, b.CloseConnection(conns[0].ID, 404, "x"), "404 is a channel-level code")
	require.NoError(t, b.CloseConnection(conns[0].ID, 320, "test says bye"))
	e := amqptest.AwaitClose(t, closed)
	require.Equal(t, 320, e.Code)
	require.Equal(t, "CONNECTION_FORCED - test says bye", e.Reason)
	amqptest.Idle(t, b.WaitIdle)
}

func TestStatsCountsMessages(t *testing.T) {
	b := newDirectBroker(t, Options{})
	conn := amqptest.DialVia(t, b.Dial, "guest", "c")
	ch := amqptest.Channel(t, conn)
	_, err := ch.QueueDeclare("a", false, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.ExchangeDeclare("fan", "fanout", false, false, false, false, nil))
	require.NoError(t, ch.QueueBind("a", "", "fan", false, nil))
	_, err = ch.QueueDeclare("b", false, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.QueueBind("b", "", "fan", false, nil))
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 10))
	returns := ch.NotifyReturn(make(chan amqp091.Return, 1))
	ctx := context.Background()
	for range 3 {
		require.NoError(t, ch.PublishWithContext(ctx, "fan", "", false, false, amqp091.Publishing{Body: []byte("x")}))
	}
	require.NoError(t, ch.PublishWithContext(ctx, "", "nowhere", true, false, amqp091.Publishing{Body: []byte("r")}))
	require.NoError(t, ch.PublishWithContext(ctx, "", "nowhere", false, false, amqp091.Publishing{Body: []byte("d")}))
	for range 5 {
		require.True(t, (<-confirms).Ack)
	}
	<-returns
	_, ok, err := ch.Get("a", true)
	require.NoError(t, err)
	require.True(t, ok)
	d, ok, err := ch.Get("b", false)
	require.NoError(t, err)
	require.True(t, ok)
	require.NoError(t, d.Ack(false))
	amqptest.Idle(t, b.WaitIdle)

	s := b.Stats(context.Background())
	require.Equal(t, MessageCounters{
		Published: 5, ReturnedUnroutable: 1, DroppedUnroutable: 1, Confirmed: 5,
		Enqueued: 6, Got: 1, GotNoAck: 1, Acked: 1,
	}, s.Totals)
	require.Equal(t, 1, s.Connections)
	require.Equal(t, 1, s.Channels)
	require.Equal(t, 2, s.Queues)
	require.Equal(t, uint64(4), s.Ready)
	require.Equal(t, 7, s.Exchanges, "the default exchange, 5 predeclared amq.* and fan")
	require.Equal(t, uint64(1), s.ConnectionsOpened)
	require.Equal(t, uint64(1), s.ChannelsOpened)
	qa := queueDetail(t, s, "a")
	require.Equal(t, MessageCounters{Enqueued: 3, GotNoAck: 1}, qa.Counters)
	require.Positive(t, qa.Memory)

	// Counters of a deleted queue stay in the totals.
	_, err = ch.QueueDelete("b", false, false, false)
	require.NoError(t, err)
	require.Equal(t, uint64(6), b.Stats(context.Background()).Totals.Enqueued)
	require.NoError(t, ch.Close())
	amqptest.Idle(t, b.WaitIdle)
	s = b.Stats(context.Background())
	require.Equal(t, uint64(1), s.ChannelsClosed)
	require.Zero(t, s.Channels)
}

func TestWaitIdleHonoursContext(t *testing.T) {
	b := newDirectBroker(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, b.WaitIdle(ctx), context.Canceled)
	// A connection that never finishes its handshake is idle: its reader
	// waits for input.
	nc, err := b.Dial("", "")
	require.NoError(t, err)
	defer nc.Close()
	amqptest.Idle(t, b.WaitIdle)
}

// TestWaitIdleCoversTCP: on a socket, a reply the client waited for
// proves its earlier frames arrived; WaitIdle then covers their effects.
func TestWaitIdleCoversTCP(t *testing.T) {
	b := newDirectBroker(t, Options{})
	_, err := b.Listen("127.0.0.1:0")
	require.NoError(t, err)
	conn, err := amqp091.Dial(b.URL())
	require.NoError(t, err)
	defer conn.Close()
	ch := amqptest.Channel(t, conn)
	_, err = ch.QueueDeclare("tcp", false, false, false, false, nil)
	require.NoError(t, err)
	for range 10 {
		require.NoError(t, ch.PublishWithContext(context.Background(), "", "tcp", false, false, amqp091.Publishing{Body: []byte("x")}))
	}
	// queue.declare-ok comes after the publishes on the same channel.
	_, err = ch.QueueDeclarePassive("tcp", false, false, false, false, nil)
	require.NoError(t, err)
	amqptest.Idle(t, b.WaitIdle)
	require.Equal(t, uint64(10), queueDetail(t, b.Stats(context.Background()), "tcp").Ready)
}

func TestUnackedErrors(t *testing.T) {
	b := newDirectBroker(t, Options{})
	_, err := b.Unacked(t.Context(), "/", "none")
	require.True(t, errors.Is(err, ErrNotFound))
	_, err = b.Unacked(t.Context(), "none", "none")
	require.True(t, errors.Is(err, ErrNotFound))
}

// TestUnackedSaysWhichMessage: a consumer holds a delivery; Unacked names
// the message (id, properties, redelivered, count, when it was delivered)
// and UnackedWithBodies adds the body. After a requeue the redelivery says
// redelivered, counts two and carries the later time.
func TestUnackedSaysWhichMessage(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	clk := clock.NewFake(t0)
	b, err := New(Options{Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	ch := amqptest.Channel(t, amqptest.DialVia(t, b.Dial, "guest", "worker"))
	_, err = ch.QueueDeclare("orders", false, false, false, false, nil)
	require.NoError(t, err)
	ts := time.Unix(1_700_000_000, 0).UTC()
	pub := amqp091.Publishing{
		Headers: amqp091.Table{"tenant": "acme"}, ContentType: "application/json",
		DeliveryMode: 2, CorrelationId: "corr-1", MessageId: "order-42", Timestamp: ts,
		Body: []byte(`{"id":42}`),
	}
	require.NoError(t, ch.PublishWithContext(t.Context(), "", "orders", false, false, pub))
	ds, err := ch.Consume("orders", "worker", false, false, false, false, nil)
	require.NoError(t, err)
	first := <-ds
	amqptest.Idle(t, b.WaitIdle)

	check := func(wantTag uint64, wantCount uint32, wantRedelivered bool, wantAt time.Time) {
		t.Helper()
		for _, tc := range []struct {
			name     string
			call     func(context.Context, string, string) ([]UnackedDelivery, error)
			wantBody []byte
		}{
			{"Unacked", b.Unacked, nil},
			{"UnackedWithBodies", b.UnackedWithBodies, pub.Body},
		} {
			un, err := tc.call(t.Context(), "/", "orders")
			require.NoError(t, err, tc.name)
			require.Len(t, un, 1, tc.name)
			u := un[0]
			require.Equal(t, wantTag, u.DeliveryTag, tc.name)
			require.Equal(t, "worker", u.ConsumerTag, tc.name)
			require.Equal(t, wantCount, u.DeliveryCount, tc.name)
			require.Equal(t, wantRedelivered, u.Redelivered, tc.name)
			require.True(t, wantAt.Equal(u.DeliveredAt), "%s: delivered at %v", tc.name, u.DeliveredAt)
			require.Equal(t, "order-42", u.MessageID, tc.name)
			require.Equal(t, len(pub.Body), u.BodySize, tc.name)
			p := u.Publishing
			require.Equal(t, "order-42", p.MessageId, tc.name)
			require.Equal(t, "application/json", p.ContentType, tc.name)
			require.Equal(t, uint8(2), p.DeliveryMode, tc.name)
			require.Equal(t, "corr-1", p.CorrelationId, tc.name)
			require.Equal(t, ts, p.Timestamp, tc.name)
			require.Equal(t, amqp091.Table{"tenant": "acme"}, p.Headers, tc.name)
			require.Equal(t, tc.wantBody, p.Body, tc.name)
		}
	}
	check(first.DeliveryTag, 1, false, t0)
	require.False(t, first.Redelivered)

	// A nack with requeue hands the message straight back to the consumer.
	clk.Advance(5 * time.Second)
	require.NoError(t, first.Nack(false, true))
	second := <-ds
	require.True(t, second.Redelivered)
	amqptest.Idle(t, b.WaitIdle)
	check(second.DeliveryTag, 2, true, t0.Add(5*time.Second))
}

// TestIntrospectionHonoursCancelledContext: a context cancelled before
// the call returns context.Canceled (wrapped) without asking the queue.
func TestIntrospectionHonoursCancelledContext(t *testing.T) {
	b := newDirectBroker(t, Options{})
	ch := amqptest.Channel(t, amqptest.DialVia(t, b.Dial, "guest", "c"))
	_, err := ch.QueueDeclare("q", false, false, false, false, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		call func(context.Context) error
	}{
		{"PeekQueue", func(ctx context.Context) error { _, err := b.PeekQueue(ctx, "/", "q", 10); return err }},
		{"PeekQueue none", func(ctx context.Context) error { _, err := b.PeekQueue(ctx, "/", "q", 0); return err }},
		{"Unacked", func(ctx context.Context) error { _, err := b.Unacked(ctx, "/", "q"); return err }},
		{"UnackedWithBodies", func(ctx context.Context) error { _, err := b.UnackedWithBodies(ctx, "/", "q"); return err }},
	} {
		require.ErrorIs(t, tc.call(ctx), context.Canceled, tc.name)
	}
}

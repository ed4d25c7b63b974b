package broker_test

import (
	"context"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/internal/amqptest"
)

// dedupMsg carries deduplication key key (none when nil) and, when ttl is
// not nil, a per-message x-cache-ttl.
func dedupMsg(body string, key, ttl any) amqp091.Publishing {
	h := amqp091.Table{}
	if key != nil {
		h["x-deduplication-header"] = key
	}
	if ttl != nil {
		h["x-cache-ttl"] = ttl
	}
	return amqp091.Publishing{Body: []byte(body), Headers: h}
}

// A deduplicating exchange routes like fanout, drops a message whose key
// it has seen (confirming it all the same), forgets keys after their TTL
// by the broker's clock, and evicts the oldest key when full.
func TestDedupExchange(t *testing.T) {
	type pub struct {
		body    string
		key     any
		ttl     any
		advance time.Duration // move the clock first
		routed  bool
	}
	tests := []struct {
		name string
		args amqp091.Table
		pubs []pub
	}{
		{"duplicates dropped", amqp091.Table{"x-cache-size": int32(10)}, []pub{
			{body: "a", key: "k1", routed: true},
			{body: "a-again", key: "k1"},
			{body: "b", key: "k2", routed: true},
			{body: "int", key: int32(1), routed: true},
			{body: "same int, other width", key: int64(1)},
			{body: "string 1 is not int 1", key: "1", routed: true},
			{body: "no key", routed: true},
			{body: "no key again", routed: true},
			{body: "much later", key: "k1", advance: 1000 * time.Hour},
		}},
		{"exchange ttl", amqp091.Table{"x-cache-size": int32(10), "x-cache-ttl": int32(1000)}, []pub{
			{body: "a", key: "k", routed: true},
			{body: "a at 999ms", key: "k", advance: 999 * time.Millisecond},
			{body: "a at 1000ms", key: "k", advance: time.Millisecond, routed: true},
		}},
		{"message ttl", amqp091.Table{"x-cache-size": "10", "x-cache-ttl": int32(1000)}, []pub{
			{body: "a", key: "k", ttl: int32(5000), routed: true},
			{body: "a at 4s", key: "k", advance: 4 * time.Second},
			{body: "a at 5s", key: "k", advance: time.Second, routed: true},
		}},
		{"size evicts the oldest", amqp091.Table{"x-cache-size": int32(2)}, []pub{
			{body: "a", key: "a", routed: true},
			{body: "b", key: "b", routed: true},
			{body: "c", key: "c", routed: true},
			{body: "b again", key: "b"},
			{body: "a evicted", key: "a", routed: true},
			{body: "b evicted by a", key: "b", routed: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, fc, ch := fakeBroker(t, broker.Options{})
			returns := ch.NotifyReturn(make(chan amqp091.Return, len(tt.pubs)))
			require.NoError(t, ch.ExchangeDeclare("dd", "x-message-deduplication", true, false, false, false, tt.args))
			for _, q := range []string{"q1", "q2"} {
				amqptest.DeclareQueue(t, ch, q, false)
				require.NoError(t, ch.QueueBind(q, "ignored-"+q, "dd", false, nil))
			}
			var want []string
			ctx := context.Background()
			for _, p := range tt.pubs {
				fc.Advance(p.advance)
				dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "dd", "rk", true, false, dedupMsg(p.body, p.key, p.ttl))
				require.NoError(t, err)
				acked, err := dc.WaitContext(ctx)
				require.NoError(t, err)
				require.True(t, acked, "a duplicate is confirmed too")
				if p.routed {
					want = append(want, p.body)
				} else {
					r, _ := amqptest.Receive(t, returns)
					require.Equal(t, p.body, string(r.Body), "a mandatory duplicate is returned")
				}
			}
			require.Equal(t, want, amqptest.GetAll(t, ch, "q1"))
			require.Equal(t, want, amqptest.GetAll(t, ch, "q2"))
			_ = b
		})
	}
}

// The cache of a durable deduplicating exchange survives a restart.
func TestDedupSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	fc := clock.NewFake(time.Unix(1_800_000_000, 0))
	open := func() (*broker.Broker, *amqp091.Channel) {
		b, err := broker.New(broker.Options{DataDir: dir, Clock: fc})
		require.NoError(t, err)
		ch := amqptest.ConfirmChannel(t, amqptest.DialVia(t, b.Dial, "guest", "guest"))
		require.NoError(t, ch.ExchangeDeclare("dd", "x-message-deduplication", true, false, false, false,
			amqp091.Table{"x-cache-size": int32(100), "x-cache-ttl": int32(60_000)}))
		amqptest.DeclareQueue(t, ch, "q", true)
		require.NoError(t, ch.QueueBind("q", "", "dd", false, nil))
		return b, ch
	}
	b, ch := open()
	msg := dedupMsg("first", "order-1", nil)
	msg.DeliveryMode = amqp091.Persistent
	amqptest.PublishMsg(t, ch, "dd", "", msg)
	require.NoError(t, b.Close())

	b, ch = open()
	defer b.Close()
	amqptest.PublishMsg(t, ch, "dd", "", dedupMsg("duplicate after restart", "order-1", nil))
	fc.Advance(time.Minute)
	amqptest.PublishMsg(t, ch, "dd", "", dedupMsg("after the ttl", "order-1", nil))
	require.Equal(t, []string{"first", "after the ttl"}, amqptest.GetAll(t, ch, "q"))
}

// A queue declared with x-message-deduplication: true refuses (and
// confirms) a message whose key is in the queue, ready or unacked, and
// takes it again once the message has left: acked, expired or purged.
func TestDedupQueue(t *testing.T) {
	dir := t.TempDir()
	fc := clock.NewFake(time.Unix(1_800_000_000, 0))
	open := func() (*broker.Broker, *amqp091.Channel) {
		b, err := broker.New(broker.Options{DataDir: dir, Clock: fc})
		require.NoError(t, err)
		ch := amqptest.ConfirmChannel(t, amqptest.DialVia(t, b.Dial, "guest", "guest"))
		_, err = ch.QueueDeclare("q", true, false, false, false, amqp091.Table{
			"x-message-deduplication": true, "x-message-ttl": int32(60_000)})
		require.NoError(t, err)
		return b, ch
	}
	b, ch := open()
	ready := func() int {
		q, err := ch.QueueDeclarePassive("q", true, false, false, false, nil)
		require.NoError(t, err)
		return q.Messages
	}
	pub := func(body string, key any) {
		m := dedupMsg(body, key, nil)
		m.DeliveryMode = amqp091.Persistent
		amqptest.PublishMsg(t, ch, "", "q", m) // confirmed either way
	}
	pub("a", "k1")
	pub("a-dup", "k1")
	pub("b", "k2")
	pub("no key", nil)
	pub("no key again", nil)
	require.Equal(t, 4, ready())

	// Unacked still counts as in the queue; acked does not.
	d := amqptest.Get(t, ch, "q", false)
	require.Equal(t, "a", string(d.Body))
	pub("a while unacked", "k1")
	require.Equal(t, 3, ready())
	require.NoError(t, d.Ack(false))
	pub("a after ack", "k1")
	require.Equal(t, 4, ready())

	// A restart keeps the keys of what is stored.
	require.NoError(t, b.Close())
	b, ch = open()
	defer b.Close()
	pub("b after restart", "k2")
	require.Equal(t, 4, ready())

	// Expiry frees the keys (x-message-ttl 60 s, strictly past).
	fc.Advance(time.Minute + time.Millisecond)
	amqptest.Poll(t, func() bool { return ready() == 0 }, "expired")
	pub("b after expiry", "k2")
	require.Equal(t, 1, ready())
	_, err := ch.QueuePurge("q", false)
	require.NoError(t, err)
	pub("b after purge", "k2")
	require.Equal(t, []string{"b after purge"}, amqptest.GetAll(t, ch, "q"))
}

// A message dead-lettered into a deduplicating exchange is checked like a
// publish: the second copy of a key is dropped.
func TestDedupDeadLetter(t *testing.T) {
	_, _, ch := fakeBroker(t, broker.Options{})
	require.NoError(t, ch.ExchangeDeclare("dd", "x-message-deduplication", false, false, false, false,
		amqp091.Table{"x-cache-size": int32(10)}))
	amqptest.DeclareQueue(t, ch, "out", false)
	require.NoError(t, ch.QueueBind("out", "", "dd", false, nil))
	_, err := ch.QueueDeclare("in", false, false, false, false, amqp091.Table{"x-dead-letter-exchange": "dd"})
	require.NoError(t, err)
	for _, body := range []string{"first", "second"} {
		amqptest.PublishMsg(t, ch, "", "in", dedupMsg(body, "same", nil))
		d := amqptest.Get(t, ch, "in", false)
		require.NoError(t, d.Nack(false, false))
	}
	amqptest.Poll(t, func() bool {
		q, err := ch.QueueDeclarePassive("in", false, false, false, false, nil)
		return err == nil && q.Messages == 0
	}, "dead-lettered")
	require.Equal(t, []string{"first"}, amqptest.GetAll(t, ch, "out"))
}

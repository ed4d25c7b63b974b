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

// featureBroker starts a broker on a fake clock and returns a channel.
func featureBroker(t *testing.T) (*broker.Broker, *clock.Fake, *amqp091.Channel) {
	t.Helper()
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	b := startBroker(t, broker.Options{Clock: fake})
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	return b, fake, amqptest.Channel(t, conn)
}

func declareWith(t *testing.T, ch *amqp091.Channel, name string, args amqp091.Table) {
	t.Helper()
	_, err := ch.QueueDeclare(name, false, false, false, false, args)
	require.NoError(t, err)
}

// deathOf returns the x-death entry for queue and reason.
func deathOf(t *testing.T, h amqp091.Table, queueName, reason string) amqp091.Table {
	t.Helper()
	deaths, ok := h["x-death"].([]any)
	require.True(t, ok, "no x-death in %v", h)
	for _, e := range deaths {
		d := e.(amqp091.Table)
		if d["queue"] == queueName && d["reason"] == reason {
			return d
		}
	}
	require.FailNow(t, "no x-death entry", "%s/%s in %v", queueName, reason, deaths)
	return nil
}

func rejectedCount(h amqp091.Table, queueName string) int64 {
	deaths, _ := h["x-death"].([]any)
	for _, e := range deaths {
		d := e.(amqp091.Table)
		if d["queue"] == queueName && d["reason"] == "rejected" {
			return d["count"].(int64)
		}
	}
	return 0
}

// TestRetryPattern is the retry-with-backoff pattern: a work queue dead-letters
// rejected messages to a retry queue whose TTL dead-letters them back;
// the consumer counts attempts from x-death and parks the message after 3.
func TestRetryPattern(t *testing.T) {
	b, fake, ch := featureBroker(t)
	require.NoError(t, ch.ExchangeDeclare("retry.dlx", "direct", false, false, false, false, nil))
	declareWith(t, ch, "work", amqp091.Table{
		"x-dead-letter-exchange": "retry.dlx", "x-dead-letter-routing-key": "retry",
	})
	declareWith(t, ch, "work.retry", amqp091.Table{
		"x-message-ttl": int32(5000), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "work",
	})
	require.NoError(t, ch.QueueBind("work.retry", "retry", "retry.dlx", false, nil))
	amqptest.DeclareQueue(t, ch, "work.parked", false)

	amqptest.PublishConfirmed(t, ch, "work", true, "job-1")
	msgs, err := ch.Consume("work", "", false, false, false, false, nil)
	require.NoError(t, err)
	const maxAttempts = 3
	for attempt := 1; ; attempt++ {
		d := amqptest.Next(t, msgs)
		require.Equal(t, "job-1", string(d.Body))
		seen := rejectedCount(d.Headers, "work") + 1
		require.EqualValues(t, attempt, seen, "attempt read from x-death")
		if seen >= maxAttempts {
			require.NoError(t, ch.PublishWithContext(context.Background(), "", "work.parked", false, false,
				amqp091.Publishing{Headers: d.Headers, Body: d.Body}))
			require.NoError(t, d.Ack(false))
			break
		}
		require.NoError(t, d.Nack(false, false))
		waitStats(t, b, "work.retry", func(s queueCounts) bool { return s.Ready == 1 })
		fake.Advance(4 * time.Second)
		require.EqualValues(t, 1, queueStats(t, b, "work.retry").Ready, "not expired before its TTL")
		fake.Advance(time.Second + time.Millisecond)
	}
	parked := amqptest.Get(t, ch, "work.parked", true)
	h := parked.Headers
	require.EqualValues(t, 2, deathOf(t, h, "work", "rejected")["count"])
	require.EqualValues(t, 2, deathOf(t, h, "work.retry", "expired")["count"])
	require.Equal(t, "retry.dlx", deathOf(t, h, "work.retry", "expired")["exchange"])
	require.Equal(t, []any{"retry"}, deathOf(t, h, "work.retry", "expired")["routing-keys"])
	deaths := h["x-death"].([]any)
	require.Len(t, deaths, 2)
	require.Equal(t, "work.retry", deaths[0].(amqp091.Table)["queue"], "most recent first")
	require.Equal(t, "work", h["x-first-death-queue"])
	require.Equal(t, "rejected", h["x-first-death-reason"])
	require.Equal(t, "", h["x-first-death-exchange"])
	require.Equal(t, "work.retry", h["x-last-death-queue"])
	require.Equal(t, "expired", h["x-last-death-reason"])
	amqptest.RequireEmpty(t, ch, "work")
	amqptest.RequireEmpty(t, ch, "work.retry")
}

// TestQuorumDeliveryLimit: x-delivery-limit dead-letters a message once it
// has been delivered more often than the limit allows.
func TestQuorumDeliveryLimit(t *testing.T) {
	b, _, ch := featureBroker(t)
	amqptest.DeclareQueue(t, ch, "poison", false)
	_, err := ch.QueueDeclare("qq", true, false, false, false, amqp091.Table{
		"x-queue-type": "quorum", "x-delivery-limit": int32(2),
		"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "poison",
	})
	require.NoError(t, err)
	amqptest.PublishConfirmed(t, ch, "qq", true, "bad")
	msgs, err := ch.Consume("qq", "", false, false, false, false, nil)
	require.NoError(t, err)
	for i := range 3 {
		d := amqptest.Next(t, msgs)
		if i == 0 {
			_, has := d.Headers["x-delivery-count"]
			require.False(t, has, "first delivery carries no x-delivery-count")
		} else {
			require.EqualValues(t, i, d.Headers["x-delivery-count"])
			require.True(t, d.Redelivered)
		}
		require.NoError(t, d.Nack(false, true))
	}
	waitStats(t, b, "poison", func(s queueCounts) bool { return s.Ready == 1 })
	dead := amqptest.Get(t, ch, "poison", true)
	require.Equal(t, "bad", string(dead.Body))
	require.EqualValues(t, 1, deathOf(t, dead.Headers, "qq", "delivery_limit")["count"])
	require.Equal(t, "delivery_limit", dead.Headers["x-first-death-reason"])
	amqptest.RequireEmpty(t, ch, "qq")
}

// TestDeliveryLimitWithoutDLXDrops: past the limit and without a DLX the
// message is dropped.
func TestDeliveryLimitWithoutDLXDrops(t *testing.T) {
	b, _, ch := featureBroker(t)
	// Durable: quorum queues refuse to be anything else.
	_, err := ch.QueueDeclare("q", true, false, false, false, amqp091.Table{"x-queue-type": "quorum", "x-delivery-limit": int32(0)})
	require.NoError(t, err)
	amqptest.PublishConfirmed(t, ch, "q", false, "m")
	d := amqptest.Get(t, ch, "q", false)
	require.NoError(t, d.Nack(false, true))
	waitStats(t, b, "q", func(s queueCounts) bool { return s.Ready == 0 && s.Unacked == 0 })
	amqptest.RequireEmpty(t, ch, "q")
}

// TestMessageTTL covers x-message-ttl and the expiration property: the
// lower wins, expired messages are never delivered and are dead-lettered
// with reason expired and original-expiration.
func TestMessageTTL(t *testing.T) {
	b, fake, ch := featureBroker(t)
	amqptest.DeclareQueue(t, ch, "dlq", false)
	declareWith(t, ch, "ttl", amqp091.Table{
		"x-message-ttl": int64(10_000), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq",
	})
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 3))
	for _, p := range []amqp091.Publishing{
		{Body: []byte("short"), Expiration: "1000"},
		{Body: []byte("queue-ttl")},
		{Body: []byte("long"), Expiration: "60000"}, // the queue's 10 s wins
	} {
		require.NoError(t, ch.PublishWithContext(context.Background(), "", "ttl", false, false, p))
	}
	for range 3 {
		require.True(t, (<-confirms).Ack)
	}
	fake.Advance(999 * time.Millisecond)
	require.EqualValues(t, 3, queueStats(t, b, "ttl").Ready)
	fake.Advance(2 * time.Millisecond)
	waitStats(t, b, "dlq", func(s queueCounts) bool { return s.Ready == 1 })
	d := amqptest.Get(t, ch, "dlq", true)
	require.Equal(t, "short", string(d.Body))
	require.Equal(t, "", d.Expiration, "the copy does not expire again")
	e := deathOf(t, d.Headers, "ttl", "expired")
	require.Equal(t, "1000", e["original-expiration"])
	require.EqualValues(t, 1, e["count"])

	fake.Advance(9 * time.Second)
	waitStats(t, b, "dlq", func(s queueCounts) bool { return s.Ready == 2 })
	require.Equal(t, "queue-ttl", string(amqptest.Get(t, ch, "dlq", true).Body))
	require.Equal(t, "long", string(amqptest.Get(t, ch, "dlq", true).Body))
	amqptest.RequireEmpty(t, ch, "ttl")
}

// TestTTLZeroExpiresUnlessDeliveredAtOnce: expiration "0" reaches a
// waiting consumer, and is dropped when nobody can take it.
func TestTTLZeroExpiresUnlessDeliveredAtOnce(t *testing.T) {
	b, fake, ch := featureBroker(t)
	amqptest.DeclareQueue(t, ch, "z", false)
	publishTTL := func(body string) {
		require.NoError(t, ch.PublishWithContext(context.Background(), "", "z", false, false,
			amqp091.Publishing{Body: []byte(body), Expiration: "0"}))
	}
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 2))
	publishTTL("nobody")
	require.True(t, (<-confirms).Ack)
	fake.Advance(time.Millisecond)
	waitStats(t, b, "z", func(s queueCounts) bool { return s.Ready == 0 })
	amqptest.RequireEmpty(t, ch, "z")

	msgs, err := ch.Consume("z", "", true, false, false, false, nil)
	require.NoError(t, err)
	publishTTL("at-once")
	require.Equal(t, "at-once", string(amqptest.Next(t, msgs).Body))
}

// TestInvalidExpiration: a bad expiration property closes the channel
// with 406, as RabbitMQ does.
// Past queue.MaxExpiry (2^32-1 ms) RabbitMQ refuses the value too; Warren
// used to confirm such a message and expire it at once (its deadline past
// year 2262 overflowed).
func TestInvalidExpiration(t *testing.T) {
	b, fake, _ := featureBroker(t)
	for _, tc := range []struct {
		expiration string
		text       string
	}{
		{"-5", "value negative"},
		{"4294967296", "above the maximum 4294967295"},
		{"7428000000000", "above the maximum 4294967295"},
		{"99999999999999999999", "above the maximum 4294967295"},
	} {
		t.Run(tc.expiration, func(t *testing.T) {
			ch := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
			amqptest.DeclareQueue(t, ch, "q", false)
			errs := ch.NotifyClose(make(chan *amqp091.Error, 1))
			require.NoError(t, ch.PublishWithContext(context.Background(), "", "q", false, false,
				amqp091.Publishing{Body: []byte("x"), Expiration: tc.expiration}))
			e := amqptest.AwaitClose(t, errs)
			require.Equal(t, 406, e.Code)
			require.Contains(t, e.Reason, "invalid expiration '"+tc.expiration+"'")
			require.Contains(t, e.Reason, tc.text)
			require.EqualValues(t, 0, queueStats(t, b, "q").Ready, "nothing was enqueued")
		})
	}
	t.Run("the largest is kept until it expires", func(t *testing.T) {
		ch := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
		amqptest.DeclareQueue(t, ch, "max", false)
		publishWith := amqp091.Publishing{Body: []byte("x"), Expiration: "4294967295"}
		require.NoError(t, ch.Confirm(false))
		confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1))
		require.NoError(t, ch.PublishWithContext(context.Background(), "", "max", false, false, publishWith))
		require.True(t, (<-confirms).Ack)
		// Kept for one millisecond less than its TTL; expired once its
		// age reaches the TTL (RabbitMQ: Now >= Expiry).
		fake.Advance(4294967294 * time.Millisecond)
		require.EqualValues(t, 1, queueStats(t, b, "max").Ready)
		fake.Advance(time.Millisecond)
		waitStats(t, b, "max", func(s queueCounts) bool { return s.Ready == 0 })
	})
}

// TestQueueArgumentValidation: wrong types and ranges are refused with a
// text naming the argument.
func TestQueueArgumentValidation(t *testing.T) {
	b, _, _ := featureBroker(t)
	for _, tc := range []struct {
		name string
		args amqp091.Table
		code int
		text string
	}{
		{"negative ttl", amqp091.Table{"x-message-ttl": int32(-1)}, 406, "invalid arg 'x-message-ttl' for queue 'v' in vhost '/'"},
		{"ttl as string", amqp091.Table{"x-message-ttl": "10"}, 406, "x-message-ttl"},
		{"unknown overflow", amqp091.Table{"x-overflow": "drop-tail"}, 406, "x-overflow"},
		{"zero expires", amqp091.Table{"x-expires": int32(0)}, 406, "x-expires"},
		{"priority too high", amqp091.Table{"x-max-priority": int32(256)}, 406, "x-max-priority"},
		{"stream with a classic argument", amqp091.Table{"x-queue-type": "stream", "x-max-priority": int32(5)}, 406, "invalid arg 'x-max-priority' for queue 'v' in vhost '/' of queue type rabbit_stream_queue"},
		{"negative max length", amqp091.Table{"x-max-length": int64(-3)}, 406, "x-max-length"},
		{"ttl above the maximum", amqp091.Table{"x-message-ttl": int64(4294967296)}, 406, "invalid arg 'x-message-ttl' for queue 'v' in vhost '/': value 4294967296 is above the maximum 4294967295"},
		{"ttl past year 2262", amqp091.Table{"x-message-ttl": int64(7_428_000_000_000)}, 406, "'x-message-ttl' for queue 'v' in vhost '/': value 7428000000000 is above the maximum"},
		{"expires above the maximum", amqp091.Table{"x-expires": int64(4294967296)}, 406, "invalid arg 'x-expires' for queue 'v' in vhost '/': value 4294967296 is above the maximum 4294967295"},
		{"expires that wraps", amqp091.Table{"x-expires": int64(18_446_744_073_710)}, 406, "'x-expires' for queue 'v' in vhost '/': value 18446744073710 is above the maximum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// 540 closes the connection, so each case gets its own.
			ch := amqptest.Channel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
			_, err := ch.QueueDeclare("v", false, false, false, false, tc.args)
			amqptest.RequireCode(t, err, tc.code)
			require.Contains(t, err.Error(), tc.text)
		})
	}
}

// TestQueueExpires: an unused queue is deleted after x-expires; a
// consumer keeps it, and its period starts again when the consumer goes.
func TestQueueExpires(t *testing.T) {
	b, fake, ch := featureBroker(t)
	declareWith(t, ch, "gone", amqp091.Table{"x-expires": int32(1000)})
	declareWith(t, ch, "kept", amqp091.Table{"x-expires": int32(1000)})
	_, err := ch.Consume("kept", "c", false, false, false, false, nil)
	require.NoError(t, err)
	fake.Advance(999 * time.Millisecond)
	_, err = ch.QueueDeclarePassive("gone", false, false, false, false, nil)
	require.NoError(t, err)
	fake.Advance(time.Millisecond)
	require.False(t, queueExists(b, "gone"), "expired queue still there")
	require.True(t, queueExists(b, "kept"))

	require.NoError(t, ch.Cancel("c", false))
	fake.Advance(1000 * time.Millisecond)
	require.False(t, queueExists(b, "kept"))
}

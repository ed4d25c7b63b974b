package broker_test

import (
	"context"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
)

// publishAll publishes bodies to queue in confirm mode and returns the
// acks in order (true ack, false nack).
func publishAll(t *testing.T, ch *amqp091.Channel, q string, bodies ...string) []bool {
	t.Helper()
	require.NoError(t, ch.Confirm(false))
	ctx, cancel := context.WithTimeout(context.Background(), amqptest.Timeout)
	defer cancel()
	var dcs []*amqp091.DeferredConfirmation
	for _, body := range bodies {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q, false, false,
			amqp091.Publishing{Body: []byte(body)})
		require.NoError(t, err)
		dcs = append(dcs, dc)
	}
	acks := make([]bool, len(bodies))
	for i, dc := range dcs {
		ack, err := dc.WaitContext(ctx)
		require.NoError(t, err)
		acks[i] = ack
	}
	return acks
}

func bodiesOf(t *testing.T, ch *amqp091.Channel, q string) []string {
	t.Helper()
	var out []string
	for {
		d, ok, err := ch.Get(q, true)
		require.NoError(t, err)
		if !ok {
			return out
		}
		out = append(out, string(d.Body))
	}
}

func TestMaxLength(t *testing.T) {
	dlx := amqp091.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"}
	with := func(extra amqp091.Table) amqp091.Table {
		t := amqp091.Table{}
		for k, v := range dlx {
			t[k] = v
		}
		for k, v := range extra {
			t[k] = v
		}
		return t
	}
	for _, tc := range []struct {
		name     string
		args     amqp091.Table
		acks     []bool
		kept     []string
		dead     []string
		deadWhy  string
		deadWhen int // Ready count of dlq to wait for
	}{
		{"drop-head", with(amqp091.Table{"x-max-length": int32(2)}),
			[]bool{true, true, true, true}, []string{"m2", "m3"}, []string{"m0", "m1"}, "maxlen", 2},
		{"bytes drop-head", with(amqp091.Table{"x-max-length-bytes": int32(5)}),
			[]bool{true, true, true, true}, []string{"m2", "m3"}, []string{"m0", "m1"}, "maxlen", 2},
		{"reject-publish", with(amqp091.Table{"x-max-length": int32(2), "x-overflow": "reject-publish"}),
			[]bool{true, true, false, false}, []string{"m0", "m1"}, nil, "", 0},
		{"reject-publish-dlx", with(amqp091.Table{"x-max-length": int32(2), "x-overflow": "reject-publish-dlx"}),
			[]bool{true, true, false, false}, []string{"m0", "m1"}, []string{"m2", "m3"}, "maxlen", 2},
		{"no dlx drops", amqp091.Table{"x-max-length": int32(1)},
			[]bool{true, true, true, true}, []string{"m3"}, nil, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _, ch := featureBroker(t)
			amqptest.DeclareQueue(t, ch, "dlq", false)
			declareWith(t, ch, "lim", tc.args)
			require.Equal(t, tc.acks, publishAll(t, ch, "lim", "m0", "m1", "m2", "m3"))
			require.EqualValues(t, len(tc.kept), queueStats(t, b, "lim").Ready)
			waitStats(t, b, "dlq", func(s queueCounts) bool { return s.Ready == uint64(tc.deadWhen) })
			var dead []string
			for range tc.dead {
				d := amqptest.Get(t, ch, "dlq", true)
				dead = append(dead, string(d.Body))
				require.EqualValues(t, 1, deathOf(t, d.Headers, "lim", tc.deadWhy)["count"])
			}
			require.Equal(t, tc.dead, dead)
			require.Equal(t, tc.kept, bodiesOf(t, ch, "lim"))
		})
	}
}

// TestMaxLengthCountsReadyOnly: unacknowledged messages do not count
// toward x-max-length (RabbitMQ).
func TestMaxLengthCountsReadyOnly(t *testing.T) {
	b, _, ch := featureBroker(t)
	declareWith(t, ch, "lim", amqp091.Table{"x-max-length": int32(1), "x-overflow": "reject-publish"})
	require.Equal(t, []bool{true}, publishAll(t, ch, "lim", "a"))
	d := amqptest.Get(t, ch, "lim", false)
	require.Equal(t, []bool{true, false}, publishAll(t, ch, "lim", "b", "c")[:2])
	require.NoError(t, d.Ack(false))
	waitStats(t, b, "lim", func(s queueCounts) bool { return s.Unacked == 0 })
	require.Equal(t, []string{"b"}, bodiesOf(t, ch, "lim"))
}

// TestDeadLetterCycleDropped: a queue that dead-letters expired messages
// to itself drops them (RabbitMQ's cycle detection); a rejection breaks
// the cycle, so a rejected message does come back.
func TestDeadLetterCycleDropped(t *testing.T) {
	b, fake, ch := featureBroker(t)
	declareWith(t, ch, "self", amqp091.Table{
		"x-message-ttl": int32(100), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "self",
	})
	require.Equal(t, []bool{true}, publishAll(t, ch, "self", "loop"))
	fake.Advance(time.Second)
	waitStats(t, b, "self", func(s queueCounts) bool { return s.Ready == 0 })
	amqptest.RequireEmpty(t, ch, "self")

	require.Equal(t, []bool{true}, publishAll(t, ch, "self", "rejected")[:1])
	d := amqptest.Get(t, ch, "self", false)
	require.NoError(t, d.Reject(false))
	waitStats(t, b, "self", func(s queueCounts) bool { return s.Ready == 1 })
	back := amqptest.Get(t, ch, "self", true)
	require.Equal(t, "rejected", string(back.Body))
	require.EqualValues(t, 1, deathOf(t, back.Headers, "self", "rejected")["count"])
}

// TestMissingDeadLetterExchangeDrops: a DLX that does not exist drops the
// message, as RabbitMQ does.
func TestMissingDeadLetterExchangeDrops(t *testing.T) {
	b, _, ch := featureBroker(t)
	declareWith(t, ch, "q", amqp091.Table{"x-dead-letter-exchange": "nowhere"})
	require.Equal(t, []bool{true}, publishAll(t, ch, "q", "m"))
	d := amqptest.Get(t, ch, "q", false)
	require.NoError(t, d.Nack(false, false))
	waitStats(t, b, "q", func(s queueCounts) bool { return s.Unacked == 0 && s.Ready == 0 })
}

// TestAlternateExchange: an unroutable publish to an exchange with an
// alternate-exchange reaches the alternate's queues.
func TestAlternateExchange(t *testing.T) {
	_, _, ch := featureBroker(t)
	require.NoError(t, ch.ExchangeDeclare("ae", "fanout", false, false, false, false, nil))
	require.NoError(t, ch.ExchangeDeclare("main", "direct", false, false, false, false,
		amqp091.Table{"alternate-exchange": "ae"}))
	amqptest.DeclareQueue(t, ch, "unrouted", false)
	amqptest.DeclareQueue(t, ch, "routed", false)
	require.NoError(t, ch.QueueBind("unrouted", "", "ae", false, nil))
	require.NoError(t, ch.QueueBind("routed", "k", "main", false, nil))
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 2))
	for _, key := range []string{"k", "other"} {
		require.NoError(t, ch.PublishWithContext(context.Background(), "main", key, true, false,
			amqp091.Publishing{Body: []byte(key)}))
	}
	require.True(t, (<-confirms).Ack)
	require.True(t, (<-confirms).Ack)
	require.Equal(t, []string{"k"}, bodiesOf(t, ch, "routed"))
	require.Equal(t, []string{"other"}, bodiesOf(t, ch, "unrouted"))
}

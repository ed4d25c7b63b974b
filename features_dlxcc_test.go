package broker_test

import (
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
)

// TestDeadLetterWithCC: a message published with CC and BCC keys and
// dead-lettered is routed, as RabbitMQ 3.13's rabbit_dead_letter does,
// with its routing key and its CC keys (its BCC header is gone since the
// publish) and keeps its CC header; its x-death routing-keys list the
// routing key and the CC keys, never the BCC ones. A queue with an
// x-dead-letter-routing-key routes the copy with that key alone and drops
// the CC header, but x-death still lists the keys it was published with.
func TestDeadLetterWithCC(t *testing.T) {
	b, _, ch := featureBroker(t)
	require.NoError(t, ch.Confirm(false))
	require.NoError(t, ch.ExchangeDeclare("dlx", "direct", false, false, false, false, nil))
	for _, q := range []string{"dl-k", "dl-c1", "dl-c2", "dl-r"} {
		amqptest.DeclareQueue(t, ch, q, false)
	}
	for _, b := range [][2]string{{"dl-k", "k"}, {"dl-c1", "c1"}, {"dl-c2", "c2"}, {"dl-r", "r"}} {
		require.NoError(t, ch.QueueBind(b[0], b[1], "dlx", false, nil))
	}
	declareWith(t, ch, "src", amqp091.Table{"x-dead-letter-exchange": "dlx"})
	declareWith(t, ch, "src-rk", amqp091.Table{"x-dead-letter-exchange": "dlx", "x-dead-letter-routing-key": "r"})
	require.NoError(t, ch.ExchangeDeclare("in", "direct", false, false, false, false, nil))

	for _, tc := range []struct {
		queue  string
		want   []string // dead-letter queues that get the copy
		keepCC bool
	}{
		{"src", []string{"dl-k", "dl-c1", "dl-c2"}, true},
		{"src-rk", []string{"dl-r"}, false},
	} {
		t.Run(tc.queue, func(t *testing.T) {
			require.NoError(t, ch.QueueBind(tc.queue, "k", "in", false, nil))
			defer func() { require.NoError(t, ch.QueueUnbind(tc.queue, "k", "in", nil)) }()
			amqptest.PublishMsg(t, ch, "in", "k", amqp091.Publishing{Body: []byte(tc.queue),
				Headers: amqp091.Table{"CC": []any{"c1", "c2"}, "BCC": []any{"b1"}}})
			d := amqptest.Get(t, ch, tc.queue, false)
			require.NoError(t, d.Reject(false))
			// A reply after the reject's, then idle: the dead letter is
			// routed by the source queue's actor.
			_, err := ch.QueueDeclarePassive(tc.queue, false, false, false, false, nil)
			require.NoError(t, err)
			amqptest.Idle(t, b.WaitIdle)
			for _, q := range []string{"dl-k", "dl-c1", "dl-c2", "dl-r"} {
				if !contains(tc.want, q) {
					amqptest.RequireEmpty(t, ch, q)
					continue
				}
				got := amqptest.Get(t, ch, q, true)
				require.Equal(t, tc.queue, string(got.Body), q)
				require.NotContains(t, got.Headers, "BCC")
				if tc.keepCC {
					require.Equal(t, []any{"c1", "c2"}, got.Headers["CC"], q)
				} else {
					require.NotContains(t, got.Headers, "CC", q)
				}
				death := deathOf(t, got.Headers, tc.queue, "rejected")
				require.Equal(t, []any{"k", "c1", "c2"}, death["routing-keys"], q)
				require.Equal(t, "in", death["exchange"])
				amqptest.RequireEmpty(t, ch, q)
			}
		})
	}
}

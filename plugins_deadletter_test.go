package broker_test

import (
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/amqptest"
)

// A message dead-lettered to an x-delayed-message exchange with an x-delay
// is held for that delay, as the plugin's exchange type holds whatever it
// is asked to route (dead letters too): the retry-with-backoff pattern of
// a work queue whose dead-letter exchange is delayed. A message that a
// delayed exchange routed before carries the negated delay and is not
// held again; one without x-delay is routed at once.
func TestDeadLetterIntoDelayedExchange(t *testing.T) {
	tests := []struct {
		name    string
		headers amqp091.Table
		held    bool
	}{
		{"x-delay holds it", amqp091.Table{"x-delay": int32(5000)}, true},
		{"negated x-delay routes at once", amqp091.Table{"x-delay": int32(-5000)}, false},
		{"no x-delay routes at once", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, fc, ch := fakeBroker(t, broker.Options{})
			require.NoError(t, ch.ExchangeDeclare("retry", "x-delayed-message", true, false, false, false,
				amqp091.Table{"x-delayed-type": "direct"}))
			_, err := ch.QueueDeclare("work", true, false, false, false, amqp091.Table{"x-dead-letter-exchange": "retry"})
			require.NoError(t, err)
			amqptest.DeclareQueue(t, ch, "retried", true)
			require.NoError(t, ch.QueueBind("retried", "work", "retry", false, nil))

			amqptest.PublishMsg(t, ch, "", "work", amqp091.Publishing{Body: []byte("job"), Headers: tt.headers, DeliveryMode: amqp091.Persistent})
			d := amqptest.Get(t, ch, "work", false)
			require.NoError(t, d.Reject(false))
			waitStats(t, b, "work", func(c queueCounts) bool { return c.Ready == 0 && c.Unacked == 0 })

			if tt.held {
				amqptest.Poll(t, func() bool { return delayedCount(t, b, "retry") == 1 }, "held by retry")
				require.Zero(t, queueStats(t, b, "retried").Ready)
				fc.Advance(4999 * time.Millisecond)
				require.Zero(t, queueStats(t, b, "retried").Ready)
				fc.Advance(time.Millisecond)
			}
			waitStats(t, b, "retried", func(c queueCounts) bool { return c.Ready == 1 })
			// The queue stores the routed copy before the delayed service
			// deletes its own; WaitIdle covers the delete.
			require.NoError(t, b.WaitIdle(t.Context()))
			require.Zero(t, delayedCount(t, b, "retry"))
			got := amqptest.Get(t, ch, "retried", true)
			require.Equal(t, "job", string(got.Body))
			require.NotEmpty(t, got.Headers["x-death"], "dead-lettered")
			if tt.held {
				require.Equal(t, int32(-5000), got.Headers["x-delay"])
			}
		})
	}
}

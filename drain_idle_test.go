package broker_test

import (
	"context"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/clock"
)

// readyIn returns how many messages queue q of vhost "/" holds ready.
func readyIn(t *testing.T, b *broker.Broker, q string) uint64 {
	t.Helper()
	for _, s := range b.Stats(context.Background()).QueueDetails {
		if s.VHost == "/" && s.Name == q {
			return s.Ready
		}
	}
	t.Fatalf("no queue %q", q)
	return 0
}

// Publish, WaitIdle, then look, for every asynchronous path a message
// takes after the publisher's channel moved on: each step is looked at
// right after WaitIdle, with no sleep, on both doors, many times.
func TestWaitIdleCoversAsyncPaths(t *testing.T) {
	const rounds = 10
	tests := []struct {
		name string
		// run sets up on ch, then does rounds steps, each followed by
		// WaitIdle and a look.
		run func(t *testing.T, b *broker.Broker, fc *clock.Fake, ch parityChannel)
	}{
		{"dedup", func(t *testing.T, b *broker.Broker, _ *clock.Fake, ch parityChannel) {
			require.NoError(t, ch.ExchangeDeclare("dd", "x-message-deduplication", true, false, false, false,
				amqp091.Table{"x-cache-size": int32(100)}))
			declareBound(t, ch, "q", "dd", "")
			for i := range rounds {
				for range 2 { // the second is a duplicate: dropped
					require.NoError(t, ch.PublishWithContext(t.Context(), "dd", "", false, false,
						dedupMsg("m", int32(i), nil)))
				}
				require.NoError(t, b.WaitIdle(t.Context()))
				require.Equal(t, uint64(i+1), readyIn(t, b, "q"), "after key %d", i)
			}
		}},
		{"dead-letter on reject", func(t *testing.T, b *broker.Broker, _ *clock.Fake, ch parityChannel) {
			declareDLX(t, ch, amqp091.Table{})
			for i := range rounds {
				require.NoError(t, ch.PublishWithContext(t.Context(), "", "q", false, false, amqp091.Publishing{Body: []byte("m")}))
				require.NoError(t, b.WaitIdle(t.Context()))
				d, ok, err := ch.Get("q", false)
				require.NoError(t, err)
				require.True(t, ok)
				require.NoError(t, d.Reject(false))
				require.NoError(t, b.WaitIdle(t.Context()))
				require.Equal(t, uint64(i+1), readyIn(t, b, "dlq"), "after reject %d", i)
			}
		}},
		{"dead-letter on overflow", func(t *testing.T, b *broker.Broker, _ *clock.Fake, ch parityChannel) {
			declareDLX(t, ch, amqp091.Table{"x-max-length": int32(1)})
			for i := range rounds + 1 {
				require.NoError(t, ch.PublishWithContext(t.Context(), "", "q", false, false, amqp091.Publishing{Body: []byte("m")}))
				require.NoError(t, b.WaitIdle(t.Context()))
				require.Equal(t, uint64(i), readyIn(t, b, "dlq"), "after publish %d", i)
			}
		}},
		{"delayed message due", func(t *testing.T, b *broker.Broker, fc *clock.Fake, ch parityChannel) {
			require.NoError(t, ch.ExchangeDeclare("dx", "x-delayed-message", false, false, false, false,
				amqp091.Table{"x-delayed-type": "fanout"}))
			declareBound(t, ch, "q", "dx", "")
			for i := range rounds {
				require.NoError(t, ch.PublishWithContext(t.Context(), "dx", "", false, false, delayedMsg("m", 1000, nil)))
				require.NoError(t, b.WaitIdle(t.Context()))
				require.Equal(t, int64(1), delayedCount(t, b, "dx"))
				fc.Advance(time.Second)
				require.NoError(t, b.WaitIdle(t.Context()))
				require.Equal(t, int64(0), delayedCount(t, b, "dx"), "after due %d", i)
				require.Equal(t, uint64(i+1), readyIn(t, b, "q"), "after due %d", i)
			}
		}},
	}
	for _, tt := range tests {
		for _, door := range parityDoors {
			t.Run(tt.name+"/"+door.name, func(t *testing.T) {
				fc := clock.NewFake(time.Unix(1_800_000_000, 0))
				b := startBroker(t, broker.Options{Clock: fc})
				tt.run(t, b, fc, door.open(t, b)())
			})
		}
	}
}

// declareBound declares queue q bound to exchange x with key.
func declareBound(t *testing.T, ch parityChannel, q, x, key string) {
	t.Helper()
	_, err := ch.QueueDeclare(q, false, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.QueueBind(q, key, x, false, nil))
}

// declareDLX declares queue q with args and a dead-letter exchange "dlx"
// that routes to queue dlq.
func declareDLX(t *testing.T, ch parityChannel, args amqp091.Table) {
	t.Helper()
	require.NoError(t, ch.ExchangeDeclare("dlx", "fanout", false, false, false, false, nil))
	declareBound(t, ch, "dlq", "dlx", "")
	args["x-dead-letter-exchange"] = "dlx"
	_, err := ch.QueueDeclare("q", false, false, false, false, args)
	require.NoError(t, err)
}

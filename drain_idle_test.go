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
		// realClock runs the broker on the real clock (fc is nil).
		realClock bool
		// run sets up on ch, then does rounds steps, each followed by
		// WaitIdle and a look.
		run func(t *testing.T, b *broker.Broker, fc *clock.Fake, ch parityChannel)
	}{
		{"dedup", false, func(t *testing.T, b *broker.Broker, _ *clock.Fake, ch parityChannel) {
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
		{"dead-letter on reject", false, func(t *testing.T, b *broker.Broker, _ *clock.Fake, ch parityChannel) {
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
		{"dead-letter on overflow", false, func(t *testing.T, b *broker.Broker, _ *clock.Fake, ch parityChannel) {
			declareDLX(t, ch, amqp091.Table{"x-max-length": int32(1)})
			for i := range rounds + 1 {
				require.NoError(t, ch.PublishWithContext(t.Context(), "", "q", false, false, amqp091.Publishing{Body: []byte("m")}))
				require.NoError(t, b.WaitIdle(t.Context()))
				require.Equal(t, uint64(i), readyIn(t, b, "dlq"), "after publish %d", i)
			}
		}},
		{name: "expired by per-message TTL 0", realClock: true,
			run: expireEachRound(amqp091.Table{}, "0", 0)},
		{name: "expired by x-message-ttl 0", realClock: true,
			run: expireEachRound(amqp091.Table{"x-message-ttl": int32(0)}, "", 0)},
		{name: "expired by per-message TTL, clock advanced",
			run: expireEachRound(amqp091.Table{}, "1000", time.Second)},
		{name: "expired by x-message-ttl, clock advanced",
			run: expireEachRound(amqp091.Table{"x-message-ttl": int32(1000)}, "", time.Second)},
		{"delayed message due", false, func(t *testing.T, b *broker.Broker, fc *clock.Fake, ch parityChannel) {
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
				var fc *clock.Fake
				opts := broker.Options{}
				if !tt.realClock {
					fc = clock.NewFake(time.Unix(1_800_000_000, 0))
					opts.Clock = fc
				}
				b := startBroker(t, opts)
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

// expireEachRound is a TestWaitIdleCoversAsyncPaths case: queue q (args,
// dead-lettering to dlq) gets one message per round, published with
// expiration (none when ""); after WaitIdle it is still ready while the
// clock has not reached its TTL, and once it has (ttl 0 on the real clock
// at once, otherwise when the fake clock is advanced by ttl) it is in dlq
// and gone from q.
func expireEachRound(args amqp091.Table, expiration string, ttl time.Duration) func(*testing.T, *broker.Broker, *clock.Fake, parityChannel) {
	return func(t *testing.T, b *broker.Broker, fc *clock.Fake, ch parityChannel) {
		const rounds = 10
		declareDLX(t, ch, args)
		for i := range rounds {
			require.NoError(t, ch.PublishWithContext(t.Context(), "", "q", false, false,
				amqp091.Publishing{Body: []byte("m"), Expiration: expiration}))
			require.NoError(t, b.WaitIdle(t.Context()))
			if fc != nil {
				require.Equal(t, uint64(1), readyIn(t, b, "q"), "before expiry %d", i)
				require.Equal(t, uint64(i), readyIn(t, b, "dlq"), "before expiry %d", i)
				fc.Advance(ttl)
				require.NoError(t, b.WaitIdle(t.Context()))
			}
			require.Equal(t, uint64(0), readyIn(t, b, "q"), "after expiry %d", i)
			require.Equal(t, uint64(i+1), readyIn(t, b, "dlq"), "after expiry %d", i)
		}
	}
}

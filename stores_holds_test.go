package broker_test

import (
	"context"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/amqptest"
)

// holdsChannel is what TestHeldRecordsKeepTheConfirmPromise needs of a
// channel: *amqp091.Channel over Broker.Dial and the direct
// *broker.Channel both have it.
type holdsChannel interface {
	ExchangeDeclare(name, kind string, durable, autoDelete, internal, noWait bool, args amqp091.Table) error
	Confirm(noWait bool) error
	PublishWithDeferredConfirmWithContext(ctx context.Context, exchange, key string, mandatory, immediate bool, msg amqp091.Publishing) (*amqp091.DeferredConfirmation, error)
}

// A persistent message confirmed by a durable x-delayed-message exchange
// survives a restart with the same stores, or the exchange is refused at
// declare (406, saying why) when the broker has nowhere durable to hold
// it: Pebble-backed stores given in Options without DataDir. The same for
// a durable x-message-deduplication exchange's cache. Each door: TCP
// through Broker.Dial and the direct Channel.
func TestHeldRecordsKeepTheConfirmPromise(t *testing.T) {
	ctx := context.Background()
	doors := map[string]func(t *testing.T, b *broker.Broker) holdsChannel{
		"dial": func(t *testing.T, b *broker.Broker) holdsChannel {
			conn := amqptest.DialVia(t, b.Dial, "guest", "holds")
			t.Cleanup(func() { _ = conn.Close() })
			return amqptest.Channel(t, conn)
		},
		"direct": func(t *testing.T, b *broker.Broker) holdsChannel {
			ch, err := b.Channel(ctx)
			require.NoError(t, err)
			t.Cleanup(func() { _ = ch.Close() })
			return ch
		},
	}
	stores := map[string]struct {
		opts func(t *testing.T) broker.Options
		// refused: durable holding exchanges are refused at declare.
		refused bool
	}{
		"given pebble stores": {opts: func(t *testing.T) broker.Options { return pebbleOptions(t, vfs.NewMem()) }, refused: true},
		"data dir":            {opts: func(t *testing.T) broker.Options { return broker.Options{DataDir: t.TempDir()} }},
	}
	for door, open := range doors {
		for name, st := range stores {
			t.Run(door+"/"+name, func(t *testing.T) {
				opts := st.opts(t)
				b, err := broker.New(opts)
				require.NoError(t, err)
				ch := open(t, b)
				require.NoError(t, ch.Confirm(false))
				derr := ch.ExchangeDeclare("dx", "x-delayed-message", true, false, false, false, amqp091.Table{"x-delayed-type": "direct"})
				if st.refused {
					amqptest.RequireCode(t, derr, amqp091.PreconditionFailed)
					require.Contains(t, derr.Error(), "Options.DataDir")
					ch = open(t, b)
					err := ch.ExchangeDeclare("ddx", "x-message-deduplication", true, false, false, false, amqp091.Table{"x-cache-size": int32(10)})
					amqptest.RequireCode(t, err, amqp091.PreconditionFailed)
					// Non-durable ones promise nothing across a restart: served.
					ch = open(t, b)
					require.NoError(t, ch.ExchangeDeclare("tx", "x-delayed-message", false, false, false, false, amqp091.Table{"x-delayed-type": "direct"}))
					require.NoError(t, ch.ExchangeDeclare("tdx", "x-message-deduplication", false, false, false, false, amqp091.Table{"x-cache-size": int32(10)}))
					require.NoError(t, b.Close())
					return
				}
				require.NoError(t, derr)
				dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "dx", "k", false, false, amqp091.Publishing{
					DeliveryMode: amqp091.Persistent, Body: []byte("later"), Headers: amqp091.Table{"x-delay": int32(3_600_000)},
				})
				require.NoError(t, err)
				ok, err := dc.WaitContext(ctx)
				require.NoError(t, err)
				require.True(t, ok)
				require.Equal(t, int64(1), delayedCount(t, b, "dx"))
				require.NoError(t, b.Close())

				b, err = broker.New(opts)
				require.NoError(t, err)
				defer func() { require.NoError(t, b.Close()) }()
				require.Equal(t, int64(1), delayedCount(t, b, "dx"), "confirmed and held before the restart")
			})
		}
	}
}

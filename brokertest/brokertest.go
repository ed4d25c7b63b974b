package brokertest

import (
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker"
)

// New returns a fresh in-memory broker with the default Options (user
// guest/guest, vhost "/"), serving 127.0.0.1 on a free port for clients
// that need a socket. It is closed by t.Cleanup. Brokers are independent,
// so parallel tests each take their own.
func New(t testing.TB) *broker.Broker {
	t.Helper()
	b := NewUnstarted(t, broker.Options{})
	Start(t, b)
	return b
}

// NewUnstarted returns a broker built from opts that does not listen yet:
// Dial and Channel work at once; call Start (or b.Listen) for a port. It is
// closed by t.Cleanup. opts.DataDir is used as given: point it into
// t.TempDir() for a persistent broker.
func NewUnstarted(t testing.TB, opts broker.Options) *broker.Broker {
	t.Helper()
	b, err := broker.New(opts)
	if err != nil {
		t.Fatalf("brokertest: %v", err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("brokertest: close: %v", err)
		}
	})
	return b
}

// Start makes b listen on 127.0.0.1 on a free port; b.URL names it.
func Start(t testing.TB, b *broker.Broker) {
	t.Helper()
	if _, err := b.Listen("127.0.0.1:0"); err != nil {
		t.Fatalf("brokertest: %v", err)
	}
}

// Dial connects amqp091-go to b through b.Dial, the socket-free door: the
// real protocol, no port. The connection is closed by t.Cleanup (before
// the broker, which was created first).
func Dial(t testing.TB, b *broker.Broker) *amqp091.Connection {
	t.Helper()
	conn, err := amqp091.DialConfig(b.URL(), amqp091.Config{Dial: b.Dial})
	if err != nil {
		t.Fatalf("brokertest: dial: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// Channel opens a direct channel on b, closed by t.Cleanup; opts are
// Broker.Channel's (broker.AsUser, broker.OnVHost).
func Channel(t testing.TB, b *broker.Broker, opts ...broker.ChannelOption) *broker.Channel {
	t.Helper()
	ch, err := b.Channel(t.Context(), opts...)
	if err != nil {
		t.Fatalf("brokertest: channel: %v", err)
	}
	t.Cleanup(func() { _ = ch.Close() })
	return ch
}

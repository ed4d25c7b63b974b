package broker

import (
	"runtime"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
)

// checkGoroutines fails the test if goroutines started during it are still
// running after its other cleanups (so call it first). Goroutines wind down
// asynchronously after Close (amqp091-go's, the runtime's timer callbacks),
// hence the short wait loop; a leak shows up as a count that never returns.
// This is goleak's idea without the dependency.
func checkGoroutines(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("goroutine leak: %d before, %d after\n%s", before, n, buf)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

// startBroker serves a new broker on 127.0.0.1:0 and closes it on cleanup.
func startBroker(t *testing.T, opts Options) *Broker {
	t.Helper()
	b, err := New(opts)
	require.NoError(t, err)
	_, err = b.Listen("127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	return b
}

// dial connects amqp091-go and closes it on cleanup.
func dial(t *testing.T, url string, cfg amqp091.Config) *amqp091.Connection {
	t.Helper()
	conn, err := amqp091.DialConfig(url, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// requireWorks opens and closes a channel on conn.
func requireWorks(t *testing.T, conn *amqp091.Connection) {
	t.Helper()
	ch, err := conn.Channel()
	require.NoError(t, err)
	require.NoError(t, ch.Close())
}

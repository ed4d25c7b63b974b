package shovel_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/shovel"
)

// TestWorkerStopsWhileConnecting: a worker whose source accepts the TCP
// connection and never answers the AMQP handshake (a broker holding a
// login, as one without a raft leader does) returns as soon as its
// context ends, not when amqp091's 30 s handshake timeout would end it.
// In a cluster another member may start the link soon after.
func TestWorkerStopsWhileConnecting(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c // hold it open, say nothing
		}
	}()
	def, err := shovel.Parse(mustJSON(t, map[string]any{
		"src-uri": "amqp://guest:guest@" + l.Addr().String() + "/", "src-queue": "in",
		"dest-uri": "amqp://guest:guest@" + l.Addr().String() + "/", "dest-queue": "out",
	}))
	require.NoError(t, err)
	w := shovel.NewWorker(def, shovel.Local{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	select {
	case c := <-accepted:
		defer c.Close()
	case <-time.After(10 * time.Second):
		t.Fatal("the worker never connected")
	}
	cancel()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(2 * time.Second):
		t.Fatal("the worker did not return while its handshake hung")
	}
}

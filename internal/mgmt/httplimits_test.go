package mgmt_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/amqptest"
)

// serveLimited serves the management API and metrics of b on loopback
// with lim, stopped on cleanup; it returns the address.
func serveLimited(t *testing.T, b *broker.Broker, lim broker.HTTPLimits) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle("/api/", b.ManagementHandler())
	mux.Handle("/metrics", b.MetricsHandler())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := lim.Server(mux)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(lim.Listener(ln)) }()
	t.Cleanup(func() {
		require.NoError(t, srv.Close())
		require.ErrorIs(t, <-done, http.ErrServerClosed)
	})
	return ln.Addr().String()
}

// rawGet sends one complete request on c and reads the response status.
func rawGet(t *testing.T, c net.Conn, path string) int {
	t.Helper()
	_, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Basic Z3Vlc3Q6Z3Vlc3Q=\r\n\r\n", path)
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(20*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestHTTPTimeoutsCloseStalledConnections: every way of holding an HTTP
// connection without finishing with it (connected and silent, headers
// half sent, body half sent, keep-alive after a response) ends with the
// server closing it once its timeout passes. With http.Server's zero
// timeouts they stayed open for ever.
func TestHTTPTimeoutsCloseStalledConnections(t *testing.T) {
	b := mgmtBroker(t)
	addr := serveLimited(t, b, broker.HTTPLimits{
		ReadHeaderTimeout: 100 * time.Millisecond, ReadTimeout: 300 * time.Millisecond,
		WriteTimeout: time.Second, IdleTimeout: 300 * time.Millisecond,
	})
	for _, tc := range []struct {
		name string
		send string
	}{
		{"silent", ""},
		{"half a header", "GET /api/overview HTTP/1.1\r\nHost: x\r\nX-Slow: "},
		{"half a body", "POST /api/definitions HTTP/1.1\r\nHost: x\r\nAuthorization: Basic Z3Vlc3Q6Z3Vlc3Q=\r\n" +
			"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"queues\":["},
		{"keep-alive after a response", "keepalive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			defer c.Close()
			if tc.send == "keepalive" {
				require.Equal(t, 200, rawGet(t, c, "/api/overview"))
			} else if tc.send != "" {
				_, err = io.WriteString(c, tc.send)
				require.NoError(t, err)
			}
			amqptest.WaitClosed(t, c)
		})
	}
}

// TestHTTPConnectionLimit: beyond MaxConnections a connection is closed
// unserved while AMQP goes on accepting; a slot freed is usable again.
func TestHTTPConnectionLimit(t *testing.T) {
	const limit = 4
	b := mgmtBroker(t)
	amqpAddr, err := b.Listen("127.0.0.1:0")
	require.NoError(t, err)
	// Timeouts far longer than amqptest.WaitClosed waits: only the limit closes
	// the flood.
	addr := serveLimited(t, b, broker.HTTPLimits{MaxConnections: limit, ReadHeaderTimeout: time.Minute, IdleTimeout: time.Minute})

	var held []net.Conn
	for range limit {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		require.Equal(t, 200, rawGet(t, c, "/api/overview"), "within the limit: served, then kept alive")
		held = append(held, c)
	}
	var flood []net.Conn
	for range 50 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		flood = append(flood, c)
	}
	for _, c := range flood {
		amqptest.WaitClosed(t, c) // over the limit: closed without a byte
	}

	conn, err := amqp091.DialConfig("amqp://guest:guest@"+amqpAddr.String()+"/", amqp091.Config{Dial: amqp091.DefaultDial(10 * time.Second)})
	require.NoError(t, err, "AMQP still accepts during the flood")
	require.NoError(t, conn.Close())

	require.NoError(t, held[0].Close())
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		defer c.Close()
		_, err = io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
		if err != nil {
			return false
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, 20*time.Second, 10*time.Millisecond, "a closed connection gives its slot back")
}

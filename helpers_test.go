package broker

import (
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
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

// requireAMQPCode requires err to be an amqp091 error with code.
func requireAMQPCode(t *testing.T, err error, code int) {
	t.Helper()
	var ae *amqp091.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, code, ae.Code, "reason: %s", ae.Reason)
}

// rawClient speaks AMQP frame by frame over TCP (NATS's send/expect style).
type rawClient struct {
	t  *testing.T
	nc net.Conn
	fr *amqp.FrameReader
}

func dialRaw(t *testing.T, b *Broker) *rawClient {
	t.Helper()
	nc, err := net.Dial("tcp", b.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { nc.Close() })
	return &rawClient{t: t, nc: nc, fr: amqp.NewFrameReader(nc)}
}

func (c *rawClient) send(b []byte) {
	c.t.Helper()
	_, err := c.nc.Write(b)
	require.NoError(c.t, err)
}

func (c *rawClient) sendMethod(ch uint16, m amqp.Method) {
	c.t.Helper()
	c.send(amqp.AppendMethodFrame(nil, ch, m))
}

// expectMethod reads the next non-heartbeat frame: a method on channel ch.
func (c *rawClient) expectMethod(ch uint16) amqp.Method {
	c.t.Helper()
	for {
		f, err := c.fr.ReadFrame()
		require.NoError(c.t, err)
		if f.Type == amqp.FrameHeartbeat {
			continue
		}
		require.Equal(c.t, amqp.FrameMethod, f.Type)
		require.Equal(c.t, ch, f.Channel)
		m, err := amqp.DecodeMethod(f.Payload)
		require.NoError(c.t, err)
		return m
	}
}

// expectEOF requires the broker to close the connection.
func (c *rawClient) expectEOF() {
	c.t.Helper()
	_, err := io.Copy(io.Discard, c.nc)
	if err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "connection reset") {
		require.NoError(c.t, err)
	}
}

// expectClose requires connection.close with code, answers close-ok and
// requires the socket to close.
func (c *rawClient) expectClose(code uint16) {
	c.t.Helper()
	m := c.expectMethod(0)
	cl, ok := m.(*amqp.ConnectionClose)
	require.True(c.t, ok, "want connection.close, got %s", m.Name())
	require.Equal(c.t, code, cl.ReplyCode, "reply text %q", cl.ReplyText)
	// The broker may already have hung up (after a malformed frame).
	_, _ = c.nc.Write(amqp.AppendMethodFrame(nil, 0, &amqp.ConnectionCloseOk{}))
	c.expectEOF()
}

// handshake runs the client side up to open-ok as guest on "/".
func (c *rawClient) handshake() {
	c.t.Helper()
	c.send([]byte("AMQP\x00\x00\x09\x01"))
	_, ok := c.expectMethod(0).(*amqp.ConnectionStart)
	require.True(c.t, ok)
	c.sendMethod(0, &amqp.ConnectionStartOk{Mechanism: "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US"})
	tune, ok := c.expectMethod(0).(*amqp.ConnectionTune)
	require.True(c.t, ok)
	c.sendMethod(0, &amqp.ConnectionTuneOk{ChannelMax: tune.ChannelMax, FrameMax: tune.FrameMax})
	c.sendMethod(0, &amqp.ConnectionOpen{VirtualHost: "/"})
	_, ok = c.expectMethod(0).(*amqp.ConnectionOpenOk)
	require.True(c.t, ok)
}

func (c *rawClient) openChannel(ch uint16) {
	c.t.Helper()
	c.sendMethod(ch, &amqp.ChannelOpen{})
	_, ok := c.expectMethod(ch).(*amqp.ChannelOpenOk)
	require.True(c.t, ok)
}

package session

import (
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/amqptest"
)

// testConfig accepts guest/guest on "/" and proposes no heartbeat, so
// heartbeat frames never interleave with what a test expects.
func testConfig() *Config {
	return &Config{
		Authenticate: func(user, password string) bool { return user == "guest" && password == "guest" },
		VHostExists:  func(v string) bool { return v == "/" },
		Heartbeat:    -1,
		FrameMax:     8192,
		ChannelMax:   16,
		CloseTimeout: 5 * time.Second,
	}
}

// peer is a raw AMQP client (amqptest.RawClient) on the other end of a
// net.Pipe served by a Conn.
type peer struct {
	*amqptest.RawClient
	conn *Conn
	done chan error // Serve's result
}

// startPeer serves a new Conn with cfg and returns the client end. Cleanup
// closes the client and waits for Serve to return.
func startPeer(t *testing.T, cfg *Config) *peer {
	t.Helper()
	server, client := net.Pipe()
	p := &peer{RawClient: amqptest.NewRawClient(t, client), conn: NewConn(server, "test#1", cfg), done: make(chan error, 1)}
	go func() { p.done <- p.conn.Serve() }()
	t.Cleanup(func() {
		client.Close()
		<-p.done
	})
	return p
}

// serveResult waits for Serve to return and reports its result.
func (p *peer) serveResult() error {
	p.TB.Helper()
	err := <-p.done
	p.done <- err // for Cleanup
	return err
}

// amqplain encodes an AMQPLAIN response: a field table without its length.
func amqplain(t *testing.T, user, password string) string {
	t.Helper()
	b, err := amqp.AppendTable(nil, amqp.Table{"LOGIN": user, "PASSWORD": password})
	require.NoError(t, err)
	require.Equal(t, uint32(len(b)-4), binary.BigEndian.Uint32(b))
	return string(b[4:])
}

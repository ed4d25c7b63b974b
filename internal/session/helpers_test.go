package session

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
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

// peer is a raw AMQP client on the other end of a net.Pipe served by a Conn
// (the NATS send/expect style): it writes bytes or frames and expects
// frames back.
type peer struct {
	t    *testing.T
	nc   net.Conn
	fr   *amqp.FrameReader
	conn *Conn
	done chan error // Serve's result
}

// startPeer serves a new Conn with cfg and returns the client end. Cleanup
// closes the client and waits for Serve to return.
func startPeer(t *testing.T, cfg *Config) *peer {
	t.Helper()
	server, client := net.Pipe()
	p := &peer{t: t, nc: client, fr: amqp.NewFrameReader(client), conn: NewConn(server, "test#1", cfg), done: make(chan error, 1)}
	go func() { p.done <- p.conn.Serve() }()
	t.Cleanup(func() {
		client.Close()
		<-p.done
	})
	return p
}

func (p *peer) write(b []byte) {
	p.t.Helper()
	_, err := p.nc.Write(b)
	require.NoError(p.t, err)
}

func (p *peer) sendFrame(typ uint8, ch uint16, payload []byte) {
	p.t.Helper()
	p.write(amqp.AppendFrame(nil, typ, ch, payload))
}

func (p *peer) sendMethod(ch uint16, m amqp.Method) {
	p.t.Helper()
	p.write(amqp.AppendMethodFrame(nil, ch, m))
}

// sendHeader sends a content header for class basic with empty properties.
func (p *peer) sendHeader(ch uint16, classID uint16, bodySize uint64) {
	p.t.Helper()
	props := (&amqp.Properties{}).Append(nil)
	p.write(amqp.AppendHeaderFrame(nil, ch, classID, bodySize, props))
}

// readFrame reads the next frame, skipping heartbeats.
func (p *peer) readFrame() amqp.Frame {
	p.t.Helper()
	for {
		f, err := p.fr.ReadFrame()
		require.NoError(p.t, err)
		if f.Type != amqp.FrameHeartbeat {
			f.Payload = append([]byte(nil), f.Payload...)
			return f
		}
	}
}

// expectMethod reads the next frame and requires a method on channel ch.
func (p *peer) expectMethod(ch uint16) amqp.Method {
	p.t.Helper()
	f := p.readFrame()
	require.Equal(p.t, amqp.FrameMethod, f.Type, "frame type")
	require.Equal(p.t, ch, f.Channel, "channel")
	m, err := amqp.DecodeMethod(f.Payload)
	require.NoError(p.t, err)
	return m
}

// expectConnectionClose requires connection.close with code, answers
// close-ok, and requires the server to end the connection cleanly.
func (p *peer) expectConnectionClose(code uint16) *amqp.ConnectionClose {
	p.t.Helper()
	m := p.expectMethod(0)
	cl, ok := m.(*amqp.ConnectionClose)
	require.True(p.t, ok, "want connection.close, got %s", m.Name())
	require.Equal(p.t, code, cl.ReplyCode, "reply code (text %q)", cl.ReplyText)
	// After a malformed frame the server hangs up right after its close, so
	// this write may find the stream closed: that is fine.
	_, _ = p.nc.Write(amqp.AppendMethodFrame(nil, 0, &amqp.ConnectionCloseOk{}))
	p.expectEOF()
	return cl
}

// serveResult waits for Serve to return and reports its result.
func (p *peer) serveResult() error {
	p.t.Helper()
	err := <-p.done
	p.done <- err // for Cleanup
	return err
}

// expectEOF requires the server to close the stream after anything still
// in flight.
func (p *peer) expectEOF() {
	p.t.Helper()
	_, err := io.Copy(io.Discard, p.nc)
	// net.Pipe reports the far end's close as EOF, which Copy swallows.
	require.NoError(p.t, err)
}

// handshake performs the client side up to connection.open-ok.
func (p *peer) handshake() {
	p.t.Helper()
	p.write([]byte("AMQP\x00\x00\x09\x01"))
	_, ok := p.expectMethod(0).(*amqp.ConnectionStart)
	require.True(p.t, ok)
	p.sendMethod(0, &amqp.ConnectionStartOk{Mechanism: "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US"})
	tune, ok := p.expectMethod(0).(*amqp.ConnectionTune)
	require.True(p.t, ok)
	p.sendMethod(0, &amqp.ConnectionTuneOk{ChannelMax: tune.ChannelMax, FrameMax: tune.FrameMax, Heartbeat: 0})
	p.sendMethod(0, &amqp.ConnectionOpen{VirtualHost: "/"})
	_, ok = p.expectMethod(0).(*amqp.ConnectionOpenOk)
	require.True(p.t, ok)
}

// openChannel opens channel ch.
func (p *peer) openChannel(ch uint16) {
	p.t.Helper()
	p.sendMethod(ch, &amqp.ChannelOpen{})
	_, ok := p.expectMethod(ch).(*amqp.ChannelOpenOk)
	require.True(p.t, ok)
}

// amqplain encodes an AMQPLAIN response: a field table without its length.
func amqplain(t *testing.T, user, password string) string {
	t.Helper()
	b, err := amqp.AppendTable(nil, amqp.Table{"LOGIN": user, "PASSWORD": password})
	require.NoError(t, err)
	require.Equal(t, uint32(len(b)-4), binary.BigEndian.Uint32(b))
	return string(b[4:])
}

// isAMQPError reports whether err is an *amqp.Error with code.
func isAMQPError(err error, code uint16) bool {
	var ae *amqp.Error
	return errors.As(err, &ae) && ae.Code == code
}

package amqptest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
)

// Channel opens a channel on conn and closes it on cleanup (the error of
// closing a channel the server already closed is ignored).
func Channel(tb testing.TB, conn *amqp091.Connection) *amqp091.Channel {
	tb.Helper()
	ch, err := conn.Channel()
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = ch.Close() })
	return ch
}

// Code is a reply code as either error type spells it: amqp091-go's int or
// the amqp package's uint16 (and their untyped constants).
type Code interface {
	~int | ~uint16
}

// RequireCode requires err to carry the AMQP reply code code: err must wrap
// an *amqp091.Error (what the client library returns) or an *amqp.Error
// (what the broker's own packages return); any other error fails.
// msgAndArgs, as in testify, says what was being checked.
func RequireCode[C Code](tb testing.TB, err error, code C, msgAndArgs ...any) {
	tb.Helper()
	context := ""
	switch {
	case len(msgAndArgs) == 1:
		context = fmt.Sprint(msgAndArgs[0]) + ": "
	case len(msgAndArgs) > 1:
		format, _ := msgAndArgs[0].(string)
		context = fmt.Sprintf(format, msgAndArgs[1:]...) + ": "
	}
	got, text, ok := reply(err)
	if !ok {
		require.Failf(tb, "not an AMQP error", "%swant reply code %d, got %v", context, int(code), err)
	}
	require.Equal(tb, int(code), got, "%s%s", context, text)
}

// reply returns the reply code err carries, if it wraps an *amqp091.Error
// or an *amqp.Error, and its reply text labelled as that type names it.
func reply(err error) (code int, labelled string, ok bool) {
	var ce *amqp091.Error
	if errors.As(err, &ce) {
		return ce.Code, "reason: " + ce.Reason, true
	}
	var ae *amqp.Error
	if errors.As(err, &ae) {
		return int(ae.Code), "text: " + ae.Text, true
	}
	return 0, "", false
}

// RawClient speaks AMQP frame by frame over Conn (NATS's send/expect style):
// it writes bytes or frames and expects frames back. Conn and Frames are
// exported so a test can do what the methods do not (hang up, read a frame
// of any type).
type RawClient struct {
	TB     testing.TB
	Conn   net.Conn
	Frames *amqp.FrameReader
}

// NewRawClient wraps nc, the client end of a connection. It does not close
// nc: the caller owns it.
func NewRawClient(tb testing.TB, nc net.Conn) *RawClient {
	return &RawClient{TB: tb, Conn: nc, Frames: amqp.NewFrameReader(nc)}
}

// DialRaw connects a RawClient over TCP to addr and closes it on cleanup.
func DialRaw(tb testing.TB, addr string) *RawClient {
	tb.Helper()
	nc, err := net.Dial("tcp", addr)
	require.NoError(tb, err)
	tb.Cleanup(func() { nc.Close() })
	return NewRawClient(tb, nc)
}

// Send writes b as is.
func (c *RawClient) Send(b []byte) {
	c.TB.Helper()
	_, err := c.Conn.Write(b)
	require.NoError(c.TB, err)
}

// SendFrame writes one frame of type typ on channel ch.
func (c *RawClient) SendFrame(typ uint8, ch uint16, payload []byte) {
	c.TB.Helper()
	c.Send(amqp.AppendFrame(nil, typ, ch, payload))
}

// SendMethod writes method m on channel ch.
func (c *RawClient) SendMethod(ch uint16, m amqp.Method) {
	c.TB.Helper()
	c.Send(amqp.AppendMethodFrame(nil, ch, m))
}

// SendHeader writes a content header of classID with empty properties.
func (c *RawClient) SendHeader(ch uint16, classID uint16, bodySize uint64) {
	c.TB.Helper()
	props := (&amqp.Properties{}).Append(nil)
	c.Send(amqp.AppendHeaderFrame(nil, ch, classID, bodySize, props))
}

// ReadFrame reads the next frame, skipping heartbeats. The payload is a
// copy, so it stays valid after the next read.
func (c *RawClient) ReadFrame() amqp.Frame {
	c.TB.Helper()
	for {
		f, err := c.Frames.ReadFrame()
		require.NoError(c.TB, err)
		if f.Type != amqp.FrameHeartbeat {
			f.Payload = append([]byte(nil), f.Payload...)
			return f
		}
	}
}

// ExpectMethod reads the next non-heartbeat frame and requires a method on
// channel ch.
func (c *RawClient) ExpectMethod(ch uint16) amqp.Method {
	c.TB.Helper()
	f := c.ReadFrame()
	require.Equal(c.TB, amqp.FrameMethod, f.Type, "frame type")
	require.Equal(c.TB, ch, f.Channel, "channel")
	m, err := amqp.DecodeMethod(f.Payload)
	require.NoError(c.TB, err)
	return m
}

// ExpectClose requires connection.close with code, answers close-ok and
// requires the peer to end the connection.
func (c *RawClient) ExpectClose(code uint16) *amqp.ConnectionClose {
	c.TB.Helper()
	m := c.ExpectMethod(0)
	cl, ok := m.(*amqp.ConnectionClose)
	require.True(c.TB, ok, "want connection.close, got %s", m.Name())
	require.Equal(c.TB, code, cl.ReplyCode, "reply code (text %q)", cl.ReplyText)
	// After a malformed frame the peer hangs up right after its close, so
	// this write may find the stream closed: that is fine.
	_, _ = c.Conn.Write(amqp.AppendMethodFrame(nil, 0, &amqp.ConnectionCloseOk{}))
	c.ExpectEOF()
	return cl
}

// ExpectEOF requires the peer to close the stream after anything still in
// flight. A TCP peer that hangs up with unread data resets the connection,
// which counts as closing it.
func (c *RawClient) ExpectEOF() {
	c.TB.Helper()
	_, err := io.Copy(io.Discard, c.Conn)
	if err != nil && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "connection reset") {
		require.NoError(c.TB, err)
	}
}

// Handshake runs the client side up to connection.open-ok as guest/guest
// on "/", accepting the server's channel-max and frame-max and turning
// heartbeats off.
func (c *RawClient) Handshake() {
	c.TB.Helper()
	tune := c.StartToTune()
	c.SendMethod(0, &amqp.ConnectionTuneOk{ChannelMax: tune.ChannelMax, FrameMax: tune.FrameMax})
	c.SendMethod(0, &amqp.ConnectionOpen{VirtualHost: "/"})
	_, ok := c.ExpectMethod(0).(*amqp.ConnectionOpenOk)
	require.True(c.TB, ok)
}

// StartToTune sends the protocol header, logs in as guest/guest with
// PLAIN and returns the server's connection.tune, for tests that check
// or answer the tune themselves; Handshake goes on from there.
func (c *RawClient) StartToTune() *amqp.ConnectionTune {
	c.TB.Helper()
	c.Send([]byte("AMQP\x00\x00\x09\x01"))
	_, ok := c.ExpectMethod(0).(*amqp.ConnectionStart)
	require.True(c.TB, ok)
	c.SendMethod(0, &amqp.ConnectionStartOk{Mechanism: "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US"})
	tune, ok := c.ExpectMethod(0).(*amqp.ConnectionTune)
	require.True(c.TB, ok)
	return tune
}

// OpenChannel opens channel ch.
func (c *RawClient) OpenChannel(ch uint16) {
	c.TB.Helper()
	c.SendMethod(ch, &amqp.ChannelOpen{})
	_, ok := c.ExpectMethod(ch).(*amqp.ChannelOpenOk)
	require.True(c.TB, ok)
}

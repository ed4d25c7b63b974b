package session

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/internal/transport"
	"github.com/warrenmq/broker/internal/vhost"
)

// memTransport is a transport.Conn with no stream under it: the test hands
// the session decoded frames (in) and gets back, decoded, the frames the
// session wrote (out). Closing in is the peer hanging up.
type memTransport struct {
	header   [8]byte
	in       chan amqp.Frame
	out      chan amqp.Frame
	closed   chan struct{}
	once     sync.Once
	maxFrame uint32 // the reader's own

	recv, sent atomic.Uint64
	reading    atomic.Bool
}

var _ transport.Conn = (*memTransport)(nil)

func newMemTransport() *memTransport {
	return &memTransport{
		header: protocolHeader,
		in:     make(chan amqp.Frame),
		out:    make(chan amqp.Frame, 256),
		closed: make(chan struct{}),
	}
}

func (m *memTransport) ReadProtocolHeader() ([8]byte, error) {
	m.recv.Add(8)
	return m.header, nil
}

// ReadFrame hands the session the next frame the test sent, refusing one
// above frame-max as amqp.FrameReader does.
func (m *memTransport) ReadFrame() (amqp.Frame, error) {
	m.reading.Store(true)
	defer m.reading.Store(false)
	select {
	case f, ok := <-m.in:
		if !ok {
			return amqp.Frame{}, io.EOF
		}
		size := uint64(len(f.Payload)) + 8
		m.recv.Add(size)
		if m.maxFrame != 0 && size > uint64(m.maxFrame) {
			return amqp.Frame{}, amqp.NewError(amqp.FrameError, 0, 0, "frame of %d octets exceeds frame-max %d", size, m.maxFrame)
		}
		return f, nil
	case <-m.closed:
		return amqp.Frame{}, net.ErrClosed
	}
}

func (m *memTransport) SetMaxFrameSize(n uint32) { m.maxFrame = n }

// Discard waits for the peer to hang up or the session to close.
func (m *memTransport) Discard() {
	for {
		select {
		case _, ok := <-m.in:
			if !ok {
				return
			}
		case <-m.closed:
			return
		}
	}
}

// Write decodes the batch into frames for the test.
func (m *memTransport) Write(p []byte) error {
	select {
	case <-m.closed:
		return net.ErrClosed
	default:
	}
	fr := amqp.NewFrameReader(bytes.NewReader(p))
	for {
		f, err := fr.ReadFrame()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		f.Payload = bytes.Clone(f.Payload)
		m.out <- f
	}
	m.sent.Add(uint64(len(p)))
	return nil
}

func (m *memTransport) CloseWrite() error { return transport.ErrNoHalfClose }

func (m *memTransport) Close() error {
	m.once.Do(func() { close(m.closed) })
	return nil
}

func (m *memTransport) Peer() transport.Peer { return transport.Peer{} }

func (m *memTransport) Stats() transport.Stats {
	st := transport.Stats{Recv: m.recv.Load()}
	st.Reading = m.reading.Load()
	st.CaughtUp = true
	st.Sent = m.sent.Load()
	return st
}

// send hands the session one frame, as if it had been read.
func (m *memTransport) send(t *testing.T, f amqp.Frame) {
	t.Helper()
	select {
	case m.in <- f:
	case <-time.After(10 * time.Second):
		t.Fatal("the session did not read the frame")
	}
}

// next returns the next frame the session wrote.
func (m *memTransport) next(t *testing.T) amqp.Frame {
	t.Helper()
	select {
	case f := <-m.out:
		return f
	case <-time.After(10 * time.Second):
		t.Fatal("the session wrote nothing")
		return amqp.Frame{}
	}
}

// expect requires the session's next frame to be method want on channel
// ch.
func (m *memTransport) expect(t *testing.T, ch uint16, want amqp.Method) {
	t.Helper()
	f := m.next(t)
	require.Equal(t, amqp.FrameMethod, f.Type)
	require.Equal(t, ch, f.Channel)
	got, err := amqp.DecodeMethod(f.Payload)
	require.NoError(t, err)
	require.Equal(t, want, got)
}

// TestProtocolOverInMemoryTransport drives a whole connection through the
// transport boundary with frames in memory, no socket or pipe: handshake,
// queue.declare, a publish confirmed, a consumer getting it, and both
// closes. Every frame the session writes is checked, in order, and none
// is left over once Serve returned.
func TestProtocolOverInMemoryTransport(t *testing.T) {
	vh := testVHost(t)
	cfg := testConfig()
	cfg.VHostExists = nil
	cfg.VHost = func(name string) (*vhost.VHost, bool) { return vh, name == "/" }
	tr := newMemTransport()
	c := NewConnOn(tr, "mem#1", cfg)
	done := make(chan error, 1)
	go func() { done <- c.Serve() }()
	t.Cleanup(func() {
		c.Shutdown(amqp.ConnectionForced, "test over")
		tr.Close()
		<-done
	})

	// Handshake.
	f := tr.next(t)
	start, err := amqp.DecodeMethod(f.Payload)
	require.NoError(t, err)
	require.IsType(t, &amqp.ConnectionStart{}, start)
	require.Equal(t, "PLAIN AMQPLAIN", start.(*amqp.ConnectionStart).Mechanisms)
	tr.send(t, methodFrame(0, &amqp.ConnectionStartOk{Mechanism: "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US"}))
	tr.expect(t, 0, &amqp.ConnectionTune{ChannelMax: 16, FrameMax: 8192})
	tr.send(t, methodFrame(0, &amqp.ConnectionTuneOk{ChannelMax: 16, FrameMax: 8192}))
	tr.send(t, methodFrame(0, &amqp.ConnectionOpen{VirtualHost: "/"}))
	tr.expect(t, 0, &amqp.ConnectionOpenOk{})
	require.Equal(t, "running", c.Info().State)

	// Declare, publish with a confirm.
	tr.send(t, methodFrame(1, &amqp.ChannelOpen{}))
	tr.expect(t, 1, &amqp.ChannelOpenOk{})
	tr.send(t, methodFrame(1, &amqp.QueueDeclare{Queue: "q"}))
	tr.expect(t, 1, &amqp.QueueDeclareOk{Queue: "q"})
	tr.send(t, methodFrame(1, &amqp.ConfirmSelect{}))
	tr.expect(t, 1, &amqp.ConfirmSelectOk{})
	props := (&amqp.Properties{ContentType: "text/plain", MessageID: "m1"}).Append(nil)
	tr.send(t, methodFrame(1, &amqp.BasicPublish{RoutingKey: "q"}))
	tr.send(t, headerFrame(1, amqp.ClassBasic, 5, props))
	tr.send(t, bodyFrame(1, "hello"))
	tr.expect(t, 1, &amqp.BasicAck{DeliveryTag: 1})

	// Consume: consume-ok, then the delivery as method, header and body.
	tr.send(t, methodFrame(1, &amqp.BasicConsume{Queue: "q", ConsumerTag: "c1"}))
	tr.expect(t, 1, &amqp.BasicConsumeOk{ConsumerTag: "c1"})
	tr.expect(t, 1, &amqp.BasicDeliver{ConsumerTag: "c1", DeliveryTag: 1, RoutingKey: "q"})
	require.Equal(t, headerFrame(1, amqp.ClassBasic, 5, props), tr.next(t))
	require.Equal(t, bodyFrame(1, "hello"), tr.next(t))
	tr.send(t, methodFrame(1, &amqp.BasicAck{DeliveryTag: 1}))

	// Close the channel, then the connection; the peer hangs up after
	// close-ok and Serve reports a clean close.
	tr.send(t, methodFrame(1, &amqp.ChannelClose{ReplyCode: amqp.ReplySuccess}))
	tr.expect(t, 1, &amqp.ChannelCloseOk{})
	tr.send(t, methodFrame(0, &amqp.ConnectionClose{ReplyCode: amqp.ReplySuccess}))
	tr.expect(t, 0, &amqp.ConnectionCloseOk{})
	close(tr.in)
	select {
	case err := <-done:
		require.NoError(t, err)
		done <- err // for Cleanup
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
	require.Empty(t, tr.out, "nothing after connection.close-ok")
	select {
	case <-tr.closed:
	default:
		t.Fatal("Serve returned without closing the transport")
	}

	q, err := vh.Queue("", "q")
	require.NoError(t, err)
	st, err := q.Stats(context.Background())
	require.NoError(t, err)
	require.Equal(t, queue.Stats{}, st, "the ack settled the delivery; the consumer went with the channel")
}

// TestInPlaceWritesOnlyOnTCP: NewConn wires the reader's in-place replies
// (flushNow) to a TCP socket's transport and to nothing else, where a
// write could wait for the peer.
func TestInPlaceWritesOnlyOnTCP(t *testing.T) {
	require.NotNil(t, startTCPPeer(t, testConfig()).conn.inPlace)
	require.Nil(t, startPeer(t, testConfig()).conn.inPlace)
	require.Nil(t, NewConnOn(newMemTransport(), "mem#1", testConfig()).inPlace)
}

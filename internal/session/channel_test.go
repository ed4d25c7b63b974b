package session

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/amqptest"
)

// newOpenConn returns a Conn in the open state that is never served: tests
// call handleFrame on their own goroutine (the reader's role) and read what
// it queued with takeOut. No socket traffic happens.
func newOpenConn(t *testing.T) *Conn {
	t.Helper()
	server, client := net.Pipe()
	t.Cleanup(func() {
		server.Close()
		client.Close()
	})
	c := NewConn(server, "unit#1", testConfig())
	c.state.Store(int32(stateOpen))
	c.channelMax = 16
	// Hold the writer's turn, as a writer busy for ever would: no writer
	// starts, and what is sent stays in the outbox for takeOut.
	c.out.flushing = true
	return c
}

// takeOut parses and clears the frames queued in the outbox.
func takeOut(t *testing.T, c *Conn) []amqp.Frame {
	t.Helper()
	c.out.Lock()
	buf := c.out.buf
	c.out.buf = nil
	c.out.Unlock()
	fr := amqp.NewFrameReader(bytes.NewReader(buf))
	var frames []amqp.Frame
	for {
		f, err := fr.ReadFrame()
		if errors.Is(err, io.EOF) {
			return frames
		}
		require.NoError(t, err)
		f.Payload = bytes.Clone(f.Payload)
		frames = append(frames, f)
	}
}

// takeMethods is takeOut for frames that must all be methods.
func takeMethods(t *testing.T, c *Conn) []amqp.Method {
	t.Helper()
	var ms []amqp.Method
	for _, f := range takeOut(t, c) {
		require.Equal(t, amqp.FrameMethod, f.Type)
		m, err := amqp.DecodeMethod(f.Payload)
		require.NoError(t, err)
		ms = append(ms, m)
	}
	return ms
}

func methodFrame(ch uint16, m amqp.Method) amqp.Frame {
	return amqp.Frame{Type: amqp.FrameMethod, Channel: ch, Payload: amqp.AppendMethod(nil, m)}
}

func headerFrame(ch uint16, classID uint16, size uint64, props []byte) amqp.Frame {
	f := amqp.AppendHeaderFrame(nil, ch, classID, size, props)
	return amqp.Frame{Type: amqp.FrameHeader, Channel: ch, Payload: f[7 : len(f)-1]}
}

func bodyFrame(ch uint16, b string) amqp.Frame {
	return amqp.Frame{Type: amqp.FrameBody, Channel: ch, Payload: []byte(b)}
}

// TestSoftErrorClosesOnlyTheChannel: a soft error sends channel.close with
// the offending method's ids; then everything on the channel is discarded
// until close-ok, a crossing channel.close gets its close-ok, other channels
// carry on, and the number can be reused afterwards.
func TestSoftErrorClosesOnlyTheChannel(t *testing.T) {
	c := newOpenConn(t)
	for _, id := range []uint16{1, 2} {
		require.NoError(t, c.handleFrame(methodFrame(id, &amqp.ChannelOpen{})))
	}
	require.Len(t, takeMethods(t, c), 2)

	ch := c.channels[1]
	ch.fail(amqp.NewError(amqp.PreconditionFailed, amqp.ClassBasic, amqp.MethodBasicAck, "unknown delivery tag 7"))
	ms := takeMethods(t, c)
	require.Equal(t, []amqp.Method{&amqp.ChannelClose{
		ReplyCode: amqp.PreconditionFailed,
		ReplyText: "PRECONDITION_FAILED - unknown delivery tag 7",
		ClassId:   amqp.ClassBasic,
		MethodId:  amqp.MethodBasicAck,
	}}, ms)

	// Discarded, content and all, without an answer.
	publish := methodFrame(1, &amqp.BasicPublish{})
	for _, f := range []amqp.Frame{
		methodFrame(1, &amqp.BasicQos{}),
		publish,
		headerFrame(1, amqp.ClassBasic, 3, nil),
		bodyFrame(1, "abc"),
		bodyFrame(1, "stray body"),
		methodFrame(1, &amqp.ChannelOpen{}),
		{Type: amqp.FrameMethod, Channel: 1, Payload: []byte{0}}, // malformed
	} {
		require.NoError(t, c.handleFrame(f))
	}
	require.Empty(t, takeOut(t, c))

	// Channel 2 is unaffected.
	require.NoError(t, c.handleFrame(methodFrame(2, &amqp.ChannelFlow{Active: false})))
	require.Equal(t, []amqp.Method{&amqp.ChannelFlowOk{Active: false}}, takeMethods(t, c))
	require.False(t, c.channels[2].Active())

	// A crossing close is answered; the channel stays reserved for our
	// close-ok.
	require.NoError(t, c.handleFrame(methodFrame(1, &amqp.ChannelClose{ReplyCode: amqp.ReplySuccess})))
	require.Equal(t, []amqp.Method{&amqp.ChannelCloseOk{}}, takeMethods(t, c))
	require.NotNil(t, c.channels[1])

	require.NoError(t, c.handleFrame(methodFrame(1, &amqp.ChannelCloseOk{})))
	require.Nil(t, c.channels[1])

	require.NoError(t, c.handleFrame(methodFrame(1, &amqp.ChannelOpen{})))
	require.Equal(t, []amqp.Method{&amqp.ChannelOpenOk{}}, takeMethods(t, c))
}

func TestContentAssembly(t *testing.T) {
	props := (&amqp.Properties{ContentType: "text/plain", DeliveryMode: 2}).Append(nil)
	cases := []struct {
		name   string
		bodies []string
	}{
		{"empty body", nil},
		{"one frame", []string{"hello"}},
		{"three frames", []string{"he", "ll", "o!"}},
		{"empty body frame in between", []string{"ab", "", "c"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newOpenConn(t)
			require.NoError(t, c.handleFrame(methodFrame(1, &amqp.ChannelOpen{})))
			takeOut(t, c)
			ch := c.channels[1]

			size := 0
			for _, b := range tc.bodies {
				size += len(b)
			}
			require.NoError(t, ch.handleFrame(methodFrame(1, &amqp.BasicPublish{Exchange: "x", RoutingKey: "k"})))
			require.Equal(t, expectHeader, ch.asm.state)

			hdr := headerFrame(1, amqp.ClassBasic, uint64(size), props)
			err := ch.handleFrame(hdr)
			// The properties were copied: clobbering the frame changes nothing.
			for i := range hdr.Payload {
				hdr.Payload[i] = 0xff
			}
			if size == 0 {
				amqptest.RequireCode(t, err, amqp.NotImplemented, "complete at the header: %v", err)
				require.Equal(t, expectMethod, ch.asm.state)
				return
			}
			require.NoError(t, err)
			require.Equal(t, props, ch.asm.props)
			require.Zero(t, cap(ch.asm.body), "nothing reserved for a body that has not arrived")

			arrived := 0
			for i, b := range tc.bodies {
				err := ch.handleFrame(bodyFrame(1, b))
				arrived += len(b)
				if i < len(tc.bodies)-1 {
					require.NoError(t, err)
					require.Equal(t, props, ch.asm.props)
					require.LessOrEqual(t, cap(ch.asm.body), 2*arrived, "the buffer grows with what arrived")
					continue
				}
				// handlePublish answers 540 until the queue engine lands.
				amqptest.RequireCode(t, err, amqp.NotImplemented, "complete after the last body frame: %v", err)
				var ae *amqp.Error
				require.ErrorAs(t, err, &ae)
				require.Equal(t, amqp.ClassBasic, ae.ClassID)
				require.Equal(t, amqp.MethodBasicPublish, ae.MethodID)
			}
			require.Equal(t, expectMethod, ch.asm.state)
			require.Nil(t, ch.asm.body)
		})
	}
}

package transport

import (
	"bytes"
	"io"
	"net"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
)

// New picks what each stream can do: only a bare TCP socket writes in
// place; every stream from New offers the hangup watch (which only a TCP
// socket can use); a Pipe's server end is read as the pipe under it.
func TestNewCapabilities(t *testing.T) {
	s, _ := tcpPair(t)
	pipeServer, pipeClient := Pipe()
	a, b := net.Pipe()
	t.Cleanup(func() {
		for _, c := range []io.Closer{pipeServer, pipeClient, a, b} {
			c.Close()
		}
	})
	cases := []struct {
		name    string
		rwc     io.ReadWriteCloser
		inPlace bool
	}{
		{"tcp", s.TCPConn, true},
		{"pipe", pipeServer, false},
		{"net.Pipe", a, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := New(tc.rwc)
			_, inPlace := c.(InPlaceWriter)
			require.Equal(t, tc.inPlace, inPlace)
			_, watches := c.(HangupWatcher)
			require.True(t, watches)
		})
	}
}

// Frames, bytes and the reader's state are counted in both directions,
// in place or not; a TCP peer's addresses are known.
func TestConnReadsWritesAndCounts(t *testing.T) {
	s, client := tcpPair(t)
	c := New(s.TCPConn)
	require.Equal(t, client.LocalAddr().String(), c.Peer().Remote.String())
	require.Equal(t, client.RemoteAddr().String(), c.Peer().Local.String())
	require.Nil(t, c.Peer().TLS)

	hdr := []byte("AMQP\x00\x00\x09\x01")
	method := amqp.AppendMethodFrame(nil, 1, &amqp.ChannelOpen{})
	_, err := client.Write(append(append([]byte{}, hdr...), method...))
	require.NoError(t, err)
	got, err := c.ReadProtocolHeader()
	require.NoError(t, err)
	require.Equal(t, hdr, got[:])
	f, err := c.ReadFrame()
	require.NoError(t, err)
	require.Equal(t, amqp.FrameMethod, f.Type)
	require.Equal(t, uint16(1), f.Channel)

	reply := amqp.AppendMethodFrame(nil, 1, &amqp.ChannelOpenOk{})
	require.NoError(t, c.Write(reply))
	require.NoError(t, c.(InPlaceWriter).WriteInPlace(reply))
	back := make([]byte, 2*len(reply))
	_, err = io.ReadFull(client, back)
	require.NoError(t, err)
	require.Equal(t, append(append([]byte{}, reply...), reply...), back)

	st := c.Stats()
	require.Equal(t, uint64(len(hdr)+len(method)), st.Recv)
	require.Equal(t, uint64(2*len(reply)), st.Sent)
	require.False(t, st.Reading)
	require.True(t, st.CaughtUp, "a socket cannot tell, so it says yes")

	// A frame above the limit is refused by its header, as
	// amqp.FrameReader refuses it.
	c.SetMaxFrameSize(amqp.FrameMinSize)
	_, err = client.Write(amqp.AppendFrame(nil, amqp.FrameBody, 1, make([]byte, amqp.FrameMinSize)))
	require.NoError(t, err)
	_, err = c.ReadFrame()
	var ae *amqp.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, uint16(amqp.FrameError), ae.Code)

	// Half-close: the peer sees EOF after what was written, and Discard
	// drops input until the peer closes.
	require.NoError(t, c.CloseWrite())
	rest, err := io.ReadAll(client)
	require.NoError(t, err)
	require.Empty(t, rest)
	_, err = client.Write([]byte("more input"))
	require.NoError(t, err)
	require.NoError(t, client.Close())
	c.Discard()
	require.NoError(t, c.Close())
}

// A Pipe's server is caught up exactly when it has read everything the
// client wrote; a pipe cannot half-close.
func TestPipeCaughtUp(t *testing.T) {
	server, client := Pipe()
	defer client.Close()
	c := New(server)
	defer c.Close()
	require.True(t, c.Stats().CaughtUp)

	// One write of more than the reader's first buffer: the first read
	// takes part of it, and the write has not returned.
	const frames = 1000
	frame := amqp.AppendHeartbeatFrame(nil)
	wrote := make(chan error, 1)
	go func() {
		_, err := client.Write(bytes.Repeat(frame, frames))
		wrote <- err
	}()
	_, err := c.ReadFrame()
	require.NoError(t, err)
	st := c.Stats()
	require.Less(t, st.Recv, uint64(frames*len(frame)))
	require.False(t, st.CaughtUp, "the client's write is still in progress")

	for range frames - 1 {
		_, err := c.ReadFrame()
		require.NoError(t, err)
	}
	require.NoError(t, <-wrote)
	st = c.Stats()
	require.Equal(t, uint64(frames*len(frame)), st.Recv)
	require.True(t, st.CaughtUp)

	require.ErrorIs(t, c.CloseWrite(), ErrNoHalfClose)
	require.Equal(t, "pipe", c.Peer().Remote.Network())
	require.NoError(t, c.Close())
	_, err = c.ReadFrame()
	require.ErrorIs(t, err, io.ErrClosedPipe)
}

// The session's reader reads a frame and writes a reply in place once per
// basic.get: through Conn, as through the raw socket, neither allocates.
func TestConnReadFrameAndWriteInPlaceDoNotAllocate(t *testing.T) {
	s, client := tcpPair(t)
	c := New(s.TCPConn)
	w := c.(InPlaceWriter)
	get := amqp.AppendMethodFrame(nil, 1, &amqp.BasicGet{Queue: "q"})
	reply := amqp.AppendMethodFrame(nil, 1, &amqp.BasicGetEmpty{})
	buf := make([]byte, len(reply))
	read := func() {
		if _, err := client.Write(get); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ReadFrame(); err != nil {
			t.Fatal(err)
		}
		if err := w.WriteInPlace(reply); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(client, buf); err != nil {
			t.Fatal(err)
		}
	}
	read() // the frame reader's buffer
	require.Zero(t, testing.AllocsPerRun(200, read))
}

// ReadAt dates what was read: on a PipeClock pipe with the clock when the
// client's write began, even if the clock moved before the server read
// it; elsewhere with the clock right after the read.
func TestReadAt(t *testing.T) {
	var clk atomic.Int64
	clk.Store(100)
	now := func() int64 { return clk.Load() }
	frame := amqp.AppendHeartbeatFrame(nil)

	server, client := PipeClock(now)
	defer client.Close()
	c := New(server)
	defer c.Close()
	ck := c.(Clocked)
	require.Zero(t, ck.ReadAt())
	_, err := client.Write(frame) // buffered: returns before the server reads
	require.NoError(t, err)
	clk.Store(200)
	_, err = client.Write(frame)
	require.NoError(t, err)
	// The clock moved before the server read: each write keeps its date.
	_, err = c.ReadFrame()
	require.NoError(t, err)
	require.EqualValues(t, 100, ck.ReadAt())
	_, err = c.ReadFrame()
	require.NoError(t, err)
	require.EqualValues(t, 200, ck.ReadAt())

	a, b := net.Pipe()
	defer b.Close()
	plain := New(a)
	defer plain.Close()
	plain.(Clocked).SetClock(now)
	go func() { _, _ = b.Write(frame) }()
	_, err = plain.ReadFrame()
	require.NoError(t, err)
	require.EqualValues(t, 200, plain.(Clocked).ReadAt())
	clk.Store(300)
}

package transport

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
)

// tcpPair returns the two ends of a loopback TCP connection, the server's
// wrapped by wrapSocket.
func tcpPair(t *testing.T) (*rawSocket, *net.TCPConn) {
	t.Helper()
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan *net.TCPConn, 1)
	go func() {
		c, err := ln.AcceptTCP()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err := net.DialTCP("tcp", nil, ln.Addr().(*net.TCPAddr))
	require.NoError(t, err)
	server, ok := <-accepted
	require.True(t, ok)
	t.Cleanup(func() {
		client.Close()
		server.Close()
	})
	s, ok := wrapSocket(server).(*rawSocket)
	require.True(t, ok, "a TCP connection is wrapped")
	return s, client
}

func TestWrapSocketLeavesOtherStreamsAlone(t *testing.T) {
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	require.Same(t, a, wrapSocket(a))
}

func TestRawSocketReadsWhatArrivesThenEOF(t *testing.T) {
	s, client := tcpPair(t)
	buf := make([]byte, 64)

	// A read waits for data (the goroutine parks on EAGAIN).
	go func() {
		time.Sleep(20 * time.Millisecond)
		client.Write([]byte("hello"))
	}()
	n, err := s.Read(buf)
	require.NoError(t, err)
	require.Equal(t, "hello", string(buf[:n]))

	n, err = s.Read(buf[:0])
	require.NoError(t, err)
	require.Zero(t, n)

	_, err = client.Write([]byte("world"))
	require.NoError(t, err)
	require.NoError(t, client.CloseWrite())
	got, err := io.ReadAll(s)
	require.NoError(t, err, "ReadAll stops at io.EOF")
	require.Equal(t, "world", string(got))
}

func TestRawSocketReadErrors(t *testing.T) {
	cases := []struct {
		name  string
		cause func(s *rawSocket, client *net.TCPConn)
		is    error
	}{
		{"closed locally while waiting", func(s *rawSocket, _ *net.TCPConn) {
			time.Sleep(20 * time.Millisecond)
			s.Close()
		}, net.ErrClosed},
		{"read deadline", func(s *rawSocket, _ *net.TCPConn) {
			s.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		}, os.ErrDeadlineExceeded},
		{"reset by the peer", func(_ *rawSocket, client *net.TCPConn) {
			time.Sleep(20 * time.Millisecond)
			client.SetLinger(0) // close sends RST
			client.Close()
		}, syscall.ECONNRESET},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, client := tcpPair(t)
			go tc.cause(s, client)
			_, err := s.Read(make([]byte, 16))
			require.ErrorIs(t, err, tc.is)
			var op *net.OpError
			require.True(t, errors.As(err, &op), "a *net.OpError, as net.Conn returns")
		})
	}
}

// A write larger than the socket buffers parks on EAGAIN and finishes as
// the peer reads; every byte arrives, in order.
func TestRawSocketWriteInPlaceWaitsForRoom(t *testing.T) {
	s, client := tcpPair(t)
	want := make([]byte, 16<<20)
	for i := range want {
		want[i] = byte(i * 7)
	}
	got := make(chan []byte, 1)
	go func() {
		time.Sleep(50 * time.Millisecond) // let the buffers fill first
		b, _ := io.ReadAll(client)
		got <- b
	}()
	n, err := s.WriteInPlace(want)
	require.NoError(t, err)
	require.Equal(t, len(want), n)
	require.NoError(t, s.CloseWrite())
	require.True(t, bytes.Equal(want, <-got))
}

// TryWriteInPlace takes what the socket has room for and returns at once
// when it has none, with no error; a later WriteInPlace of the rest
// completes once the peer reads, and every byte arrives, in order.
func TestRawSocketTryWriteInPlaceNeverWaits(t *testing.T) {
	s, client := tcpPair(t)
	want := make([]byte, 16<<20) // more than the socket buffers hold
	for i := range want {
		want[i] = byte(i * 7)
	}
	n, err := s.TryWriteInPlace(want)
	require.NoError(t, err)
	require.Greater(t, n, 0)
	require.Less(t, n, len(want), "16 MiB fits no socket buffer")
	for { // the kernel may find a little more room; it returns 0 once full
		m, err := s.TryWriteInPlace(want[n:])
		require.NoError(t, err)
		if m == 0 {
			break
		}
		n += m
		require.Less(t, n, len(want))
	}
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(client)
		got <- b
	}()
	_, err = s.WriteInPlace(want[n:])
	require.NoError(t, err)
	require.NoError(t, s.CloseWrite())
	require.True(t, bytes.Equal(want, <-got))
}

// Writing to a peer that is gone fails with EPIPE or ECONNRESET and raises
// no SIGPIPE (which would end the test binary).
func TestRawSocketWriteInPlaceToAGonePeer(t *testing.T) {
	s, client := tcpPair(t)
	client.SetLinger(0)
	client.Close()
	var err error
	for range 100 {
		if _, err = s.WriteInPlace([]byte("anyone there?")); err != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	require.Error(t, err)
	require.True(t, errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET), "got %v", err)

	s.Close()
	_, err = s.WriteInPlace([]byte("x"))
	require.ErrorIs(t, err, net.ErrClosed)
}

// The reader's read and in-place write run once per request: neither may
// allocate.
func TestRawSocketReadAndWriteInPlaceDoNotAllocate(t *testing.T) {
	s, client := tcpPair(t)
	msg := []byte("basic.get")
	buf := make([]byte, 64)
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := client.Write(msg); err != nil {
			t.Fatal(err)
		}
		if n, err := s.Read(buf); err != nil || n == 0 {
			t.Fatal(n, err)
		}
		if _, err := s.WriteInPlace(msg); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(client, buf[:len(msg)]); err != nil {
			t.Fatal(err)
		}
	})
	require.Zero(t, allocs)
}

// watchHangup sees the peer hang up, by FIN or RST, with or without data
// still unread in the socket, and reads none of it: after stop the socket
// reads as before, every byte there.
func TestWatchHangup(t *testing.T) {
	cases := []struct {
		name    string
		pending string // written by the peer before it hangs up
		hangUp  func(client *net.TCPConn)
	}{
		{"FIN", "", func(c *net.TCPConn) { c.Close() }},
		{"FIN behind unread data", "basic.publish", func(c *net.TCPConn) { c.Close() }},
		{"half close", "basic.publish", func(c *net.TCPConn) { c.CloseWrite() }},
		{"RST", "basic.publish", func(c *net.TCPConn) {
			c.SetLinger(0)
			c.Close()
		}},
		{"no hangup", "basic.publish", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, client := tcpPair(t)
			hungUp, stop := watchHangup(s.TCPConn)
			require.NotNil(t, hungUp)
			if tc.pending != "" {
				_, err := client.Write([]byte(tc.pending))
				require.NoError(t, err)
			}
			if tc.hangUp == nil {
				stop()
				select {
				case <-hungUp:
					t.Fatal("hangup reported for a peer that only wrote")
				default:
				}
				got := make([]byte, len(tc.pending))
				_, err := io.ReadFull(s, got)
				require.NoError(t, err, "the deadline stop used is cleared")
				require.Equal(t, tc.pending, string(got), "the watch read nothing")
				return
			}
			tc.hangUp(client)
			select {
			case <-hungUp:
			case <-time.After(10 * time.Second):
				t.Fatal("hangup not noticed")
			}
			stop()
			if tc.name != "RST" {
				got, err := io.ReadAll(s)
				require.NoError(t, err)
				require.Equal(t, tc.pending, string(got), "the watch read nothing")
			}
		})
	}
}

// Only TCP sockets, bare or under TLS, are watched.
func TestWatchHangupStreams(t *testing.T) {
	s, _ := tcpPair(t)
	require.Same(t, s.TCPConn, tcpUnder(tls.Server(s.TCPConn, &tls.Config{})))
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	hungUp, stop := watchHangup(a)
	require.Nil(t, hungUp)
	stop()
}

// waitRecorder is an IdleWaiter that calls onWait, on the reader's
// goroutine, before each wait.
type waitRecorder struct {
	amqp.IdleWaiter
	onWait func()
}

func (w waitRecorder) WaitReadable() error {
	w.onWait()
	return w.IdleWaiter.WaitReadable()
}

// TestIdleSocketHoldsNoReadBuffer: a Conn over TCP reading frames gives its
// read buffer back while it waits for the next one, and reads on when the
// frame comes.
func TestIdleSocketHoldsNoReadBuffer(t *testing.T) {
	for _, parking := range []bool{false, true} {
		t.Run(fmt.Sprintf("parking=%v", parking), func(t *testing.T) { testIdleSocketHoldsNoReadBuffer(t, parking) })
	}
}

// parkRecorder is the raw socket as a ParkingReader that calls onPark, on
// the reader's goroutine, after each park.
type parkRecorder struct {
	*rawSocket
	onPark func()
}

func (p parkRecorder) ReadOrPark(next func() []byte, park func()) (int, error) {
	return p.rawSocket.ReadOrPark(next, func() { park(); p.onPark() })
}

// testIdleSocketHoldsNoReadBuffer is TestIdleSocketHoldsNoReadBuffer with
// the socket waiting in ReadOrPark (parking) or in WaitReadable.
func testIdleSocketHoldsNoReadBuffer(t *testing.T, parking bool) {
	s, client := tcpPair(t)
	c := New(s.TCPConn).(*tcpStream)
	c.ReleaseWhenIdle()
	var held []int
	waiting := make(chan struct{}, 16)
	onWait := func() {
		held = append(held, c.fr.BufferSize())
		waiting <- struct{}{}
	}
	if parking {
		c.idle = parkRecorder{rawSocket: c.idle.(*rawSocket), onPark: onWait}
	} else {
		c.idle = waitRecorder{IdleWaiter: c.idle, onWait: onWait}
	}
	frame := amqp.AppendMethodFrame(nil, 1, &amqp.ChannelOpen{})
	go func() {
		// Each frame only once the reader waits for it.
		for range 2 {
			<-waiting
			_, _ = client.Write(frame)
		}
	}()
	for range 2 {
		f, err := c.ReadFrame()
		require.NoError(t, err)
		require.Equal(t, uint16(1), f.Channel)
	}
	require.GreaterOrEqual(t, len(held), 2, "the reader never waited")
	for _, n := range held {
		require.Zero(t, n, "read buffer held while waiting")
	}
}

// TestReadOrParkParksWithoutABuffer: ReadOrPark on a socket with nothing
// to read gives the buffer back (park) before it parks, in the same call
// takes one again (next) once input comes, and reads into it; with input
// already there it reads at once and never parks.
func TestReadOrParkParksWithoutABuffer(t *testing.T) {
	s, client := tcpPair(t)
	var calls []string
	parked := make(chan struct{}, 1)
	buf := make([]byte, 64)
	next := func() []byte { calls = append(calls, "next"); return buf }
	park := func() {
		calls = append(calls, "park")
		select {
		case parked <- struct{}{}:
		default:
		}
	}
	go func() {
		<-parked
		_, _ = client.Write([]byte("hello"))
	}()
	n, err := s.ReadOrPark(next, park)
	require.NoError(t, err)
	require.Equal(t, "hello", string(buf[:n]))
	require.GreaterOrEqual(t, len(calls), 3)
	require.Equal(t, []string{"next", "park", "next"}, calls[:3])
	require.Equal(t, "next", calls[len(calls)-1], "read into a buffer taken after the park")

	calls = nil
	_, err = client.Write([]byte("again"))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		var b [1]byte
		m, _, _ := syscall.Recvfrom(int(fdOf(t, s)), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return m == 1
	}, 5*time.Second, time.Millisecond)
	n, err = s.ReadOrPark(next, park)
	require.NoError(t, err)
	require.Equal(t, "again", string(buf[:n]))
	require.Equal(t, []string{"next"}, calls, "input was there: no park")

	client.Close()
	_, err = s.ReadOrPark(next, park)
	require.ErrorIs(t, err, io.EOF)
}

// fdOf is s's file descriptor.
func fdOf(t *testing.T, s *rawSocket) uintptr {
	var fd uintptr
	require.NoError(t, s.rc.Control(func(f uintptr) { fd = f }))
	return fd
}

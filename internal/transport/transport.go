package transport

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync/atomic"

	"github.com/warrenmq/broker/amqp"
)

// FrameReader is the read side of a Conn. Only the connection's reader
// goroutine calls it.
type FrameReader interface {
	// ReadProtocolHeader reads the 8 octets that open a connection,
	// unchecked: the session decides how to answer a wrong one.
	ReadProtocolHeader() ([8]byte, error)
	// ReadFrame reads the next frame, as amqp.FrameReader.ReadFrame does:
	// a malformed frame is an *amqp.Error with code FrameError, checked
	// before its payload is read; the end of the stream is io.EOF between
	// frames and io.ErrUnexpectedEOF inside one. The payload is valid
	// until the next call.
	ReadFrame() (amqp.Frame, error)
	// SetMaxFrameSize sets the largest frame ReadFrame accepts, counting
	// its 8 octets of header and end, as frame-max does.
	SetMaxFrameSize(n uint32)
	// Discard reads and drops input until the stream ends or is closed:
	// what a closing connection does while its last frames reach the
	// peer (closing a socket with unread input resets it).
	Discard()
}

// FrameWriter is the write side of a Conn. One goroutine at a time writes
// (the session's writer, or its reader writing in place while the writer
// is idle); the session makes sure of that.
type FrameWriter interface {
	// Write writes all of p, a batch of encoded frames, or returns why it
	// could not.
	Write(p []byte) error
	// CloseWrite tells the peer that nothing more will be written (a TCP
	// FIN) while reading goes on, or returns an error when the stream
	// cannot half-close.
	CloseWrite() error
}

// Conn is one connection's stream as the session sees it: frames in,
// batches of encoded frames out. Close and Stats are safe from any
// goroutine; Close makes a read or write in progress return.
type Conn interface {
	FrameReader
	FrameWriter
	Close() error
	// Peer describes the other end.
	Peer() Peer
	// Stats counts the bytes moved so far.
	Stats() Stats
}

// Clocked is implemented by the Conns of New: after SetClock, ReadAt is
// the clock's reading (Unix nanoseconds) when the bytes last read arrived,
// which dates the frames they held: a publish is stamped with it, not
// with the time the session got round to it. On a PipeClock pipe it is
// when the client's write began. 0 before any read.
type Clocked interface {
	SetClock(now func() int64)
	ReadAt() int64
}

// InPlaceWriter is implemented by a Conn whose writes copy into a kernel
// buffer and return without waiting for the peer to read (a TCP socket).
// Only then may the session's reader goroutine write a small reply itself
// instead of waking the writer: on a pipe, a write waits for the peer, and
// a peer that does not read would hold the reader.
type InPlaceWriter interface {
	// WriteInPlace is Write, on the path for the reader goroutine's
	// replies (Linux: a raw syscall).
	WriteInPlace(p []byte) error
}

// TryWriter is implemented by a Conn that can write without waiting at
// all: what the session's heartbeat schedule uses to send an idle
// connection's heartbeat from its own goroutine, with no goroutine of the
// connection's woken for 8 bytes. The session calls it only while no
// other goroutine writes (its flushing flag).
type TryWriter interface {
	// TryWrite writes what the stream takes of p right now and returns
	// how much that was: all of it, unless the socket's send buffer is
	// full (then maybe nothing, and no error).
	TryWrite(p []byte) (int, error)
}

// FrameBufferer is implemented by a Conn that reads ahead: FrameBuffered
// reports whether a whole frame is buffered, so the next ReadFrame returns
// without reading from the stream (amqp.FrameReader.FrameBuffered). The
// session hands the publishes of one read to their queues together, and
// hands them over before a ReadFrame that may wait.
type FrameBufferer interface {
	FrameBuffered() bool
	// Buffered is how many bytes of the frames that follow already
	// arrived (amqp.FrameReader.Buffered).
	Buffered() int
}

// HangupWatcher is implemented by a Conn that can tell when its peer hung
// up without reading a byte of what the peer sent.
type HangupWatcher interface {
	// WatchHangup watches until stop is called: hungUp is closed once the
	// peer closed its side or reset the connection. hungUp is nil, never
	// firing, when the stream cannot be watched. stop returns once the
	// watch has ended and leaves the stream as it found it.
	WatchHangup() (hungUp <-chan struct{}, stop func())
}

// IdleReleaser is implemented by a Conn that can give its read buffer
// back while it waits for input (a TCP socket, whose poller tells when
// input comes), so an idle connection holds none.
type IdleReleaser interface {
	// ReleaseWhenIdle starts doing so: from the next read on, a read
	// that finds nothing buffered and nothing in the socket returns the
	// buffer to a shared pool before it waits (amqp.IdleWaiter). The
	// session asks once the handshake is over: during it every read
	// waits for the peer's next frame, and the extra check before each
	// wait would slow the accept rate down for nothing. Only the reader
	// goroutine calls it.
	ReleaseWhenIdle()
}

// Peer describes the other end of a Conn.
type Peer struct {
	// Local and Remote are the stream's addresses; nil when it has none.
	Local, Remote net.Addr
	// TLS is the connection's TLS state once its handshake completed
	// (which the first read does); nil without TLS.
	TLS *tls.ConnectionState
}

// Stats are a Conn's byte counts.
type Stats struct {
	// Recv and Sent count the bytes read and written.
	Recv, Sent uint64
	// Reading: the reader is inside a read of the stream (waiting for
	// bytes, unless they are arriving). Loaded after Recv, so a Recv that
	// includes a read and Reading set mean a later read.
	Reading bool
	// CaughtUp: the reader has read every byte the peer wrote. Only a
	// Pipe knows; any other stream reports true.
	CaughtUp bool
}

// ErrNoHalfClose is CloseWrite's error on a stream that cannot half-close.
var ErrNoHalfClose = errors.New("transport: stream cannot half-close")

// New returns the Conn that speaks over rwc. A *net.TCPConn becomes an
// InPlaceWriter (on Linux its reads and in-place writes call the kernel
// directly, socket_linux.go); a TCP socket, bare or under TLS, is a
// HangupWatcher that watches (Linux); the server end of a Pipe reports
// CaughtUp; any other stream (TLS, net.Pipe, an io.ReadWriteCloser of a
// test) is read and written as it is.
func New(rwc io.ReadWriteCloser) Conn {
	s := &stream{rwc: rwc}
	if p, ok := rwc.(*pipeEnd); ok {
		s.rwc, s.peer = p.Conn, &p.peer.written
		s.pipe, _ = p.Conn.(*pipeConn)
	}
	s.src = wrapSocket(s.rwc)
	s.fr = amqp.NewFrameReader(s)
	if w, ok := s.src.(amqp.IdleWaiter); ok {
		s.idle = w // used once the session asks (ReleaseWhenIdle)
	}
	if tc, ok := s.rwc.(*net.TCPConn); ok {
		t := &tcpStream{stream: s, tc: tc}
		t.raw, _ = s.src.(rawInPlaceWriter)
		return t
	}
	return s
}

// rawInPlaceWriter is the raw socket's in-place write (socket_linux.go).
type rawInPlaceWriter interface {
	WriteInPlace(p []byte) (int, error)
	TryWriteInPlace(p []byte) (int, error)
}

// stream is the Conn over an io.ReadWriteCloser.
type stream struct {
	rwc io.ReadWriteCloser // as given, or the pipe under a Pipe's server end
	src io.Reader          // where reads come from: rwc, or its raw socket
	fr  *amqp.FrameReader  // reads through stream.Read, which counts

	recv, sent atomic.Uint64
	reading    atomic.Bool
	// peer counts what the client end of a Pipe wrote; nil otherwise.
	peer *atomic.Uint64
	// pipe is the server end of a Pipe, whose reads are dated with when
	// the client's write began (PipeClock); nil otherwise.
	pipe *pipeConn
	// now is SetClock's clock; readAt what ReadAt reports.
	now    func() int64
	readAt atomic.Int64
	// idle is src when it can wait without a buffer (a raw socket);
	// stream's ReadNoWait and WaitReadable go to it.
	idle amqp.IdleWaiter
}

// SetClock implements Clocked.
func (s *stream) SetClock(now func() int64) { s.now = now }

// ReadAt implements Clocked.
func (s *stream) ReadAt() int64 { return s.readAt.Load() }

var (
	_ Conn          = (*stream)(nil)
	_ HangupWatcher = (*stream)(nil)
	_ Clocked       = (*stream)(nil)
	_ InPlaceWriter = (*tcpStream)(nil)
	_ TryWriter     = (*tcpStream)(nil)
	_ IdleReleaser  = (*stream)(nil)
)

func (s *stream) ReadProtocolHeader() ([8]byte, error) { return s.fr.ReadProtocolHeader() }
func (s *stream) ReadFrame() (amqp.Frame, error)       { return s.fr.ReadFrame() }
func (s *stream) FrameBuffered() bool                  { return s.fr.FrameBuffered() }
func (s *stream) Buffered() int                        { return s.fr.Buffered() }
func (s *stream) SetMaxFrameSize(n uint32)             { s.fr.SetMaxFrameSize(n) }

// Read is the FrameReader's and Discard's source. It counts what it read
// before it says it left the read, so Stats' promise about Recv and
// Reading holds.
func (s *stream) Read(p []byte) (int, error) { return s.read(p, false) }

// ReleaseWhenIdle implements IdleReleaser; a no-op on a stream that
// cannot wait without a buffer (TLS, pipes).
func (s *stream) ReleaseWhenIdle() {
	if s.idle != nil {
		s.fr.SetIdleWaiter(s)
	}
}

// ReadNoWait implements amqp.IdleWaiter for the FrameReader (only set
// when src is one).
func (s *stream) ReadNoWait(p []byte) (int, error) { return s.read(p, true) }

// ReadOrPark implements amqp.ParkingReader: through src's own when it has
// one (a raw socket), else as ReadNoWait and WaitReadable would, park
// first.
func (s *stream) ReadOrPark(next func() []byte, park func()) (int, error) {
	pr, ok := s.idle.(amqp.ParkingReader)
	if !ok {
		for {
			n, err := s.ReadNoWait(next())
			if err != amqp.ErrWouldBlock {
				return n, err
			}
			park()
			if err := s.WaitReadable(); err != nil {
				return 0, err
			}
		}
	}
	s.reading.Store(true)
	n, err := pr.ReadOrPark(next, park)
	if n > 0 && s.now != nil {
		s.readAt.Store(s.now())
	}
	s.reading.Store(false) // before Recv counts the bytes, as read says
	s.recv.Add(uint64(max(n, 0)))
	return n, err
}

// WaitReadable implements amqp.IdleWaiter: the reader is in a read.
func (s *stream) WaitReadable() error {
	s.reading.Store(true)
	err := s.idle.WaitReadable()
	s.reading.Store(false)
	return err
}

// read is Read, or ReadNoWait when noWait.
func (s *stream) read(p []byte, noWait bool) (int, error) {
	s.reading.Store(true)
	var n int
	var err error
	if noWait {
		n, err = s.idle.ReadNoWait(p)
		if n > 0 && s.now != nil {
			s.readAt.Store(s.now())
		}
	} else if s.pipe != nil {
		var at int64
		n, at, err = s.pipe.readAt(p)
		if n > 0 && at != 0 {
			s.readAt.Store(at)
		} else if n > 0 && s.now != nil {
			s.readAt.Store(s.now())
		}
	} else {
		n, err = s.src.Read(p)
		if n > 0 && s.now != nil {
			s.readAt.Store(s.now())
		}
	}
	// Reading is cleared before Recv counts the bytes: Stats loads Recv
	// first, so a Recv that includes them and Reading set can only mean
	// the next read. The other order left an instant in which Stats saw
	// the bytes read and the reader still reading, so the reader looked
	// caught up and idle before it had handled what it just read.
	s.reading.Store(false)
	s.recv.Add(uint64(max(n, 0)))
	return n, err
}

// Discard implements FrameReader.
func (s *stream) Discard() { _, _ = io.Copy(io.Discard, s) }

// Write implements FrameWriter: the writer goroutine's writes take the
// stream's ordinary path, also on a raw socket (socket_linux.go says why).
func (s *stream) Write(p []byte) error {
	n, err := s.rwc.Write(p)
	s.sent.Add(uint64(max(n, 0)))
	return err
}

// CloseWrite implements FrameWriter.
func (s *stream) CloseWrite() error {
	if cw, ok := s.rwc.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return ErrNoHalfClose
}

func (s *stream) Close() error { return s.rwc.Close() }

// Peer implements Conn.
func (s *stream) Peer() Peer {
	var p Peer
	if nc, ok := s.rwc.(net.Conn); ok {
		p.Local, p.Remote = nc.LocalAddr(), nc.RemoteAddr()
	}
	if tc, ok := s.rwc.(*tls.Conn); ok {
		if st := tc.ConnectionState(); st.HandshakeComplete {
			p.TLS = &st
		}
	}
	return p
}

// Stats implements Conn.
func (s *stream) Stats() Stats {
	st := Stats{Recv: s.recv.Load()}
	st.Reading = s.reading.Load()
	st.CaughtUp = s.peer == nil || s.peer.Load() == st.Recv
	st.Sent = s.sent.Load()
	return st
}

// WatchHangup implements HangupWatcher.
func (s *stream) WatchHangup() (<-chan struct{}, func()) { return watchHangup(s.rwc) }

// tcpStream is the Conn over a TCP socket.
type tcpStream struct {
	*stream
	tc  *net.TCPConn
	raw rawInPlaceWriter // nil where there is no raw socket: tc.Write
}

// WriteInPlace implements InPlaceWriter.
func (t *tcpStream) WriteInPlace(p []byte) error {
	var n int
	var err error
	if t.raw != nil {
		n, err = t.raw.WriteInPlace(p)
	} else {
		n, err = t.tc.Write(p)
	}
	t.sent.Add(uint64(max(n, 0)))
	return err
}

// TryWrite implements TryWriter. Without a raw socket (not Linux) it
// writes nothing: the caller leaves the bytes to its writer.
func (t *tcpStream) TryWrite(p []byte) (int, error) {
	if t.raw == nil {
		return 0, nil
	}
	n, err := t.raw.TryWriteInPlace(p)
	t.sent.Add(uint64(max(n, 0)))
	return n, err
}

// Pipe returns the two ends of an in-memory connection, the server's to
// be passed to New: its Conn's Stats then say exactly when the server has
// read everything the client wrote (CaughtUp), which no socket can, so a
// client call that returned is covered. Writes copy into a buffer (256
// KiB each way) and return without waiting for the reader, as a socket's
// do: net.Pipe's handoff of every write to the reader cost a goroutine
// switch each way per write, which made Broker.Dial slower than loopback
// TCP. Deadlines work as on a net.Conn.
func Pipe() (server, client net.Conn) {
	return PipeClock(nil)
}

// PipeClock is Pipe with a clock (Unix nanoseconds): each client write
// reads it before it hands its bytes over, and the server end's Conn
// reports that time as ReadAt for what it read of them. Calls made after
// a client write returned (a test advancing a fake clock) then cannot
// date the bytes, however late the server handles them.
func PipeClock(now func() int64) (server, client net.Conn) {
	s, c := bufPipe()
	cc := &countingConn{Conn: c, pc: c, now: now}
	return &pipeEnd{Conn: s, peer: cc}, cc
}

// pipeEnd is the server end of a Pipe: New unwraps it.
type pipeEnd struct {
	net.Conn
	peer *countingConn
}

// countingConn is the client end of a Pipe: it counts the bytes its
// writes delivered.
type countingConn struct {
	net.Conn
	pc      *pipeConn
	written atomic.Uint64
	now     func() int64 // PipeClock's clock; nil for none
}

func (c *countingConn) Write(p []byte) (int, error) {
	var at int64
	if c.now != nil {
		at = c.now()
	}
	n, err := c.pc.writeAt(p, at)
	c.written.Add(uint64(n))
	return n, err
}

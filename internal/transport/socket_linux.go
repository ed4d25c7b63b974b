package transport

import (
	"io"
	"net"
	"os"
	"syscall"
	"time"
	"unsafe"

	"github.com/warrenmq/broker/amqp"
)

// rawSocket is a TCP connection whose reads, and the writes the session's
// reader makes in place (InPlaceWriter), call the kernel directly instead
// of through the runtime's syscall entry.
//
// Why: the runtime's entersyscall wakes its sysmon thread whenever that
// thread sleeps, and it sleeps as soon as every P is idle, which on a
// request/response connection is between any two requests. A basic.get
// round trip then paid a futex wake-up of sysmon on the reader's own path,
// and sysmon's polling after it, on each request: 15 % of the broker's
// samples in a get benchmark. The socket is non-blocking (the net package
// sets it so), so a read or write returns at once, with EAGAIN when it
// would block, and needs none of what entersyscall is for (handing the P
// off during a long syscall). syscall.RawConn keeps the poller: when the
// kernel says EAGAIN, the goroutine parks until the socket is ready, and
// Close and deadlines behave as with net.Conn.
//
// The writer goroutine's small writes keep the ordinary path (Write,
// promoted from the TCPConn): measured with the latency scenario at 1,000
// msg/s, raw writes there made the median 10 % worse, the sysmon wake-up
// they skip apparently keeping the other CPU out of its idle state for the
// client's next wake-up (docs/performance.md). Its large batches, which
// only build up under load, are written in place (the session decides).
//
// One goroutine reads at a time and one writes in place at a time (the
// Conn's contract): each direction keeps its call's state in the struct,
// and its callback is bound once in wrapSocket, so a read or write
// allocates nothing.
type rawSocket struct {
	*net.TCPConn
	rc syscall.RawConn

	readFn  func(fd uintptr) bool // s.read, bound once
	readBuf []byte
	readN   int
	readErr syscall.Errno
	// noWait: the read returns at once (ReadNoWait); wouldBlock says the
	// socket had nothing.
	noWait, wouldBlock bool
	// next and park are ReadOrPark's: where to read once input came, and
	// what to call before parking; nil otherwise.
	next func() []byte
	park func()

	waitFn   func(fd uintptr) bool // s.wait, bound once
	waited   bool                  // wait's first call is done
	peekByte [1]byte

	writeFn  func(fd uintptr) bool // s.write, bound once
	writeBuf []byte
	written  int
	writeErr syscall.Errno
	// writeNoWait: the write returns at once with what the socket took
	// (TryWriteInPlace).
	writeNoWait bool
}

// wrapSocket returns rwc as a rawSocket when it is a TCP connection, and
// rwc itself otherwise (TLS, pipes).
func wrapSocket(rwc io.ReadWriteCloser) io.ReadWriteCloser {
	tc, ok := rwc.(*net.TCPConn)
	if !ok {
		return rwc
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return rwc
	}
	s := &rawSocket{TCPConn: tc, rc: rc}
	s.readFn, s.writeFn, s.waitFn = s.read, s.write, s.wait
	return s
}

// Read reads once, as net.Conn's Read does: what is there, up to len(p);
// io.EOF when the peer has closed its side.
func (s *rawSocket) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	s.readBuf, s.readN, s.readErr = p, 0, 0
	err := s.rc.Read(s.readFn)
	n, errno := s.readN, s.readErr
	s.readBuf = nil
	if err != nil {
		return 0, err
	}
	if errno != 0 {
		return 0, s.opError("read", errno)
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// ReadOrPark implements amqp.ParkingReader: it reads into next(), and
// when nothing is there calls park and parks in the same RawConn.Read, so
// the poller's wake-up is not lost and no MSG_PEEK is needed before the
// wait (wait says why WaitReadable needs one).
func (s *rawSocket) ReadOrPark(next func() []byte, park func()) (int, error) {
	s.next, s.park = next, park
	s.readBuf, s.readN, s.readErr = next(), 0, 0
	err := s.rc.Read(s.readFn)
	n, errno := s.readN, s.readErr
	s.readBuf, s.next, s.park = nil, nil, nil
	if err != nil {
		return 0, err
	}
	if errno != 0 {
		return 0, s.opError("read", errno)
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// ReadNoWait is Read, except that it returns amqp.ErrWouldBlock at once
// when nothing is there (amqp.IdleWaiter).
func (s *rawSocket) ReadNoWait(p []byte) (int, error) {
	s.noWait, s.wouldBlock = true, false
	n, err := s.Read(p)
	s.noWait = false
	if s.wouldBlock {
		return 0, amqp.ErrWouldBlock
	}
	return n, err
}

// WaitReadable parks until the socket has input, its end or an error
// (amqp.IdleWaiter), holding no buffer meanwhile.
func (s *rawSocket) WaitReadable() error {
	s.waited = false
	return s.rc.Read(s.waitFn)
}

// wait is WaitReadable's callback. Its first call asks the kernel (a
// one-byte MSG_PEEK): the poller forgets readiness it saw before the
// call, so only the socket can tell whether input already came. Later
// calls follow a wake-up of the poller and report ready without asking;
// a spurious one costs the caller a read that finds nothing.
func (s *rawSocket) wait(fd uintptr) bool {
	if s.waited {
		return true
	}
	s.waited = true
	for {
		_, _, e := syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&s.peekByte[0])), 1,
			syscall.MSG_PEEK|syscall.MSG_DONTWAIT, 0, 0)
		switch e {
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			return true // input, its end, or an error the next read reports
		}
	}
}

// read is Read's callback: false parks until the socket is readable.
func (s *rawSocket) read(fd uintptr) bool {
	if s.readBuf == nil { // ReadOrPark after a park: input came
		s.readBuf = s.next()
	}
	for {
		r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&s.readBuf[0])), uintptr(len(s.readBuf)))
		switch e {
		case 0:
			s.readN = int(r)
			return true
		case syscall.EINTR:
		case syscall.EAGAIN:
			if s.noWait {
				s.wouldBlock = true
				return true
			}
			if s.park != nil { // ReadOrPark: no buffer held while parked
				s.park()
				s.readBuf = nil
			}
			return false
		default:
			s.readErr = e
			return true
		}
	}
}

// WriteInPlace writes all of p, parking on EAGAIN until the socket takes
// more. MSG_NOSIGNAL: a peer that has gone yields EPIPE, not a SIGPIPE.
func (s *rawSocket) WriteInPlace(p []byte) (int, error) {
	s.writeBuf, s.written, s.writeErr = p, 0, 0
	err := s.rc.Write(s.writeFn)
	written, errno := s.written, s.writeErr
	s.writeBuf = nil
	if err != nil {
		return written, err
	}
	if errno != 0 {
		return written, s.opError("write", errno)
	}
	return written, nil
}

// TryWriteInPlace is WriteInPlace, except that it returns what the
// socket took, maybe nothing, instead of waiting for room.
func (s *rawSocket) TryWriteInPlace(p []byte) (int, error) {
	s.writeNoWait = true
	n, err := s.WriteInPlace(p)
	s.writeNoWait = false
	return n, err
}

// write is WriteInPlace's callback: false parks until the socket is
// writable.
func (s *rawSocket) write(fd uintptr) bool {
	for s.written < len(s.writeBuf) {
		rest := s.writeBuf[s.written:]
		r, _, e := syscall.RawSyscall6(syscall.SYS_SENDTO, fd,
			uintptr(unsafe.Pointer(&rest[0])), uintptr(len(rest)),
			syscall.MSG_NOSIGNAL, 0, 0)
		switch e {
		case 0:
			s.written += int(r)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return s.writeNoWait
		default:
			s.writeErr = e
			return true
		}
	}
	return true
}

// opError wraps errno as the net package would ("read tcp a->b: read:
// connection reset by peer"), so errors.Is(err, syscall.ECONNRESET) holds.
func (s *rawSocket) opError(op string, errno syscall.Errno) error {
	return &net.OpError{Op: op, Net: "tcp", Source: s.LocalAddr(), Addr: s.RemoteAddr(), Err: os.NewSyscallError(op, errno)}
}

// watchHangup watches the TCP socket under rwc (a *net.TCPConn, or a TLS
// connection over one) for its peer hanging up, without reading a byte of
// it: the reader is held by an alarm and what the peer sent must stay in
// the socket. hungUp is closed once the peer closed its side (FIN) or reset
// the connection; stop ends the watch and returns once its goroutine has
// exited, leaving the socket as it found it. For any other stream hungUp is
// nil and never fires.
//
// The goroutine parks in the runtime's poller (syscall.RawConn.Read), which
// wakes it on each new readiness of the socket: more data, FIN or RST. Each
// time it asks the kernel with ppoll, not recv, because a FIN queued behind
// unread data shows only as POLLRDHUP. A peer that keeps sending wakes it
// only until the socket's receive buffer is full. stop wakes the parked
// goroutine with a read deadline in the past, then clears the deadline, so
// only the reader's own reads see the socket afterwards.
func watchHangup(rwc io.ReadWriteCloser) (hungUp <-chan struct{}, stop func()) {
	tc := tcpUnder(rwc)
	if tc == nil {
		return nil, func() {}
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nil, func() {}
	}
	gone, exited := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		hup := false
		err := rc.Read(func(fd uintptr) bool {
			hup = peerHungUp(fd)
			return hup
		})
		if err == nil && hup {
			close(gone)
		}
	}()
	return gone, func() {
		_ = tc.SetReadDeadline(time.Unix(1, 0))
		<-exited
		_ = tc.SetReadDeadline(time.Time{})
	}
}

// tcpUnder returns the TCP connection rwc is, or wraps (TLS: NetConn), or
// nil.
func tcpUnder(rwc io.ReadWriteCloser) *net.TCPConn {
	for range 4 { // TLS over TCP is one level; never loop on a strange wrapper
		switch c := rwc.(type) {
		case *net.TCPConn:
			return c
		case interface{ NetConn() net.Conn }:
			rwc = c.NetConn()
		default:
			return nil
		}
	}
	return nil
}

// The poll(2) event bits watchHangup looks for; the values are Linux's on
// every architecture Go supports.
const (
	pollErr   = 0x8
	pollHup   = 0x10
	pollRDHup = 0x2000
)

// peerHungUp asks the kernel, without waiting and without reading, whether
// fd's peer has shut its side (POLLRDHUP), or the connection is reset or
// gone (POLLERR, POLLHUP).
func peerHungUp(fd uintptr) bool {
	pfd := struct {
		fd              int32
		events, revents int16
	}{fd: int32(fd), events: pollRDHup}
	var zero syscall.Timespec // do not wait
	for {
		n, _, e := syscall.RawSyscall6(syscall.SYS_PPOLL, uintptr(unsafe.Pointer(&pfd)), 1, uintptr(unsafe.Pointer(&zero)), 0, 0, 0)
		switch {
		case e == syscall.EINTR:
			continue
		case e != 0 || n == 0:
			return false
		}
		return pfd.revents&(pollErr|pollHup|pollRDHup) != 0
	}
}

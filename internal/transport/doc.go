// Package transport is the byte side of an AMQP connection: it reads frames
// from a stream and writes batches of encoded frames to it, so that
// internal/session, which owns the protocol, never touches a socket.
//
// A Conn is what the session holds: a FrameReader (protocol header, frames,
// the frame-max they are checked against, discarding input while closing)
// and a FrameWriter (a batch at a time, half-close), plus Close, the peer's
// addresses and TLS state, and byte counts. New builds one over any
// io.ReadWriteCloser; a test may implement Conn itself and drive a session
// with frames in memory.
//
// # What New promises
//
//   - Frames are read as amqp.FrameReader reads them (read-ahead buffer,
//     size checked before the payload, 501 frame errors as *amqp.Error).
//   - One goroutine reads (the session's reader) and one at a time writes
//     (its writer goroutine, its reader writing in place while no writer
//     runs, or the heartbeat schedule's TryWrite); Close and Stats are safe from any goroutine, and
//     Close makes a read or write in progress return.
//   - Stats' Recv is counted before Reading is cleared, so an observer that
//     sees a read's bytes sees the reader out of that read or in a later
//     one (the session's Idle, the broker's WaitIdle).
//   - A bare *net.TCPConn is an InPlaceWriter: its writes copy into the
//     kernel's buffer and return, so the session's reader may write a small
//     reply itself (basic.get) instead of waking the writer. Pipes and TLS
//     are not: their writes may wait for the peer. It is a TryWriter too
//     (Linux): TryWrite returns what the socket took without waiting, which
//     the session's heartbeat tick writes an idle connection's heartbeat
//     with.
//   - Every Conn from New is a HangupWatcher; a TCP socket, bare or under
//     TLS, can tell (Linux) that its peer hung up without reading a byte, so
//     a reader held by a resource alarm frees a publisher that gave up.
//   - Pipe's server end reports CaughtUp only once everything the client
//     end wrote was read (Broker.Dial; WaitIdle relies on it).
//   - Every Conn from New is Clocked: given the broker's clock, ReadAt
//     dates the bytes last read, which the session stamps publishes with.
//     On a PipeClock pipe the date is when the client's write began, so a
//     test that advances a fake clock after a publish returned cannot
//     date the message later, however late the reader handles it.
//
// # The Linux socket path
//
// On Linux, a TCP socket's reads and in-place writes call the kernel
// directly through syscall.RawConn (socket_linux.go), skipping the
// runtime's syscall entry, whose wake-up of the sleeping sysmon thread was
// a large share of a request/response connection's (basic.get) broker CPU
// (docs/performance.md); the poller still parks a goroutine on EAGAIN, and
// Close and deadlines behave as with net.Conn. Neither direction allocates per call.
// The writer goroutine's writes keep the ordinary path, which measured
// better for latency (docs/performance.md). Other systems read and write
// through net.Conn (socket_other.go).
package transport

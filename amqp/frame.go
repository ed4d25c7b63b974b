package amqp

import (
	"encoding/binary"
	"errors"
	"io"
	"math"
	"sync"
	"unsafe"
)

// frameHeaderSize is type (1) + channel (2) + size (4); a frame adds the end octet.
const (
	frameHeaderSize = 7
	frameOverhead   = frameHeaderSize + 1
)

// Frame is one frame as read. Payload aliases the reader's buffer and is valid until
// the next call on the FrameReader.
type Frame struct {
	Type    uint8
	Channel uint16
	Payload []byte
}

// FrameReader reads frames from a byte stream. It reads ahead into a buffer of its own
// (several small frames per Read call), so it must be the only reader of the stream.
// The buffer starts small and grows only as far as the frames need, doubling when it
// is full, so its size stays within twice the bytes actually received and within the
// maximum frame size. A FrameReader is not safe for concurrent use.
type FrameReader struct {
	r          io.Reader
	idle       IdleWaiter // see SetIdleWaiter; nil: always read with the buffer
	buf        []byte
	start, end int    // buffered, unconsumed bytes are buf[start:end]
	max        uint32 // maximum total frame size; 0 means no limit
	err        error  // sticky error of the underlying reader
	full       bool   // the last read filled all the space it was given
	// parker is idle when it can wait inside the read that found nothing
	// (ParkingReader); nextFn and parkFn are the callbacks it is given,
	// bound once so a read allocates nothing, and want the bytes fill
	// wants buffered.
	parker ParkingReader
	nextFn func() []byte
	parkFn func()
	want   int
}

// maxReadAhead is as far as a FrameReader with an IdleWaiter grows its
// buffer for input that keeps coming (a publisher under load), beyond what
// its frames need.
const maxReadAhead = 64 << 10

// IdleWaiter is a FrameReader's source that can tell that a read would
// wait, and wait for input without a buffer (SetIdleWaiter).
type IdleWaiter interface {
	// ReadNoWait is Read, except that it returns ErrWouldBlock at once
	// instead of waiting when no input is there.
	ReadNoWait(p []byte) (int, error)
	// WaitReadable waits until a read would not wait: input, the end of
	// the stream or an error is there. It may return early; the
	// FrameReader then reads, finds nothing and waits again.
	WaitReadable() error
}

// ParkingReader is an IdleWaiter that can wait inside the read that found
// no input. A read that finds nothing and then waits in a second call
// must look at the source again before it parks (a socket's poller
// forgets readiness it saw before the call began), which costs a syscall
// per wait; a ParkingReader parks in the same call and needs no second
// look.
type ParkingReader interface {
	IdleWaiter
	// ReadOrPark reads into the slice next returns, waiting for input
	// when none is there. Before it waits it calls park, which gives the
	// buffer back: that slice is not touched again, and next is called
	// for the slice to read into once input came.
	ReadOrPark(next func() []byte, park func()) (int, error)
}

// ErrWouldBlock is IdleWaiter.ReadNoWait's error when no input is there.
var ErrWouldBlock = errors.New("amqp: read would block")

// readBuffers hold the buffers that FrameReaders with an IdleWaiter give
// back while they wait, so an idle connection holds none: one pool per
// power of two from initialBufferSize to maxPooledBuffer, so a connection
// carrying large frames gets its large buffer back without growing it
// again after every wait.
var readBuffers [pooledSizes]sync.Pool

const (
	maxPooledBuffer = 1 << 20
	pooledSizes     = 9 // 4 KiB .. 1 MiB
)

// pooledSize is the pool index for a buffer of size bytes, or -1 when
// buffers of that size are not pooled.
func pooledSize(size int) int {
	for i, s := 0, initialBufferSize; s <= maxPooledBuffer; i, s = i+1, s*2 {
		if s == size {
			return i
		}
	}
	return -1
}

// getBuffer returns a buffer of size bytes, pooled when size is a pooled
// size. The pools hold a pointer to each buffer's first byte, since every
// buffer of a pool has its size: a pointer goes into an interface without
// an allocation, a slice would not.
func getBuffer(size int) []byte {
	if i := pooledSize(size); i >= 0 {
		if p, ok := readBuffers[i].Get().(*byte); ok {
			return unsafe.Slice(p, size)
		}
	}
	return make([]byte, size)
}

// putBuffer gives buf to its pool, or to the collector.
func putBuffer(buf []byte) {
	if i := pooledSize(len(buf)); i >= 0 {
		readBuffers[i].Put(unsafe.SliceData(buf))
	}
}

// SetIdleWaiter makes r read through w whenever nothing is buffered: a read
// that would wait gives the buffer back (to pools shared by all
// FrameReaders; buffers over 1 MiB to the collector) and waits with
// w.WaitReadable instead, so a reader idle between frames holds no buffer.
// w is normally r's source itself.
func (r *FrameReader) SetIdleWaiter(w IdleWaiter) {
	r.idle = w
	r.parker, _ = w.(ParkingReader)
	if r.parker != nil && r.nextFn == nil {
		r.nextFn, r.parkFn = r.readSpace, r.releaseBuffer
	}
}

// readSpace is a ParkingReader's next: the free space after the buffered
// bytes, a buffer taken again first when the reader gave its own back
// while it waited.
func (r *FrameReader) readSpace() []byte {
	if r.end == len(r.buf) {
		r.makeRoom(r.want)
	}
	return r.buf[r.end:]
}

// initialBufferSize holds the protocol header and the handshake frames of a typical
// client; it grows for bigger frames.
const initialBufferSize = 4096

// NewFrameReader returns a FrameReader on r with no frame size limit. A server should
// call SetMaxFrameSize(FrameMinSize) before the handshake (spec §4.2.3: frames before
// connection.tune-ok may not exceed frame-min-size) and the negotiated frame-max after it.
func NewFrameReader(r io.Reader) *FrameReader {
	return &FrameReader{r: r}
}

// SetMaxFrameSize sets the largest acceptable frame, counting the 8 octets of header
// and frame end, as frame-max does; 0 removes the limit.
func (r *FrameReader) SetMaxFrameSize(n uint32) { r.max = n }

// ReadProtocolHeader reads the 8-octet protocol header ("AMQP" 0 0 9 1) that opens a
// connection. It does not check it: the session decides how to answer a wrong one.
func (r *FrameReader) ReadProtocolHeader() ([8]byte, error) {
	var h [8]byte
	if err := r.fill(8); err != nil {
		return h, err
	}
	copy(h[:], r.buf[r.start:])
	r.consume(8)
	return h, nil
}

// ReadFrame reads the next frame. It does not allocate once its buffer is large enough.
// A frame whose size exceeds the limit, a type the spec does not define, a heartbeat
// off channel 0 or with a payload, and a frame end other than FrameEnd are *Error with
// code FrameError; the size and the type are checked before the payload is read.
// Errors of the underlying reader are returned as they are: io.EOF between frames,
// io.ErrUnexpectedEOF inside one.
func (r *FrameReader) ReadFrame() (Frame, error) {
	if err := r.fill(frameHeaderSize); err != nil {
		return Frame{}, err
	}
	h := r.buf[r.start:]
	typ := h[0]
	channel := binary.BigEndian.Uint16(h[1:])
	size := binary.BigEndian.Uint32(h[3:])
	switch typ {
	case FrameMethod, FrameHeader, FrameBody:
	case FrameHeartbeat:
		// Spec §4.2.7: heartbeat frames use channel 0 and carry no payload.
		if channel != 0 || size != 0 {
			return Frame{}, NewError(FrameError, 0, 0, "heartbeat frame on channel %d with %d payload octets", channel, size)
		}
	default:
		return Frame{}, NewError(FrameError, 0, 0, "unknown frame type %d", typ)
	}
	total := uint64(size) + frameOverhead
	if r.max != 0 && total > uint64(r.max) {
		return Frame{}, NewError(FrameError, 0, 0, "frame of %d octets exceeds frame-max %d", total, r.max)
	}
	if total > math.MaxInt {
		return Frame{}, NewError(FrameError, 0, 0, "frame of %d octets is too large", total)
	}
	if err := r.fill(int(total)); err != nil {
		return Frame{}, err
	}
	f := r.buf[r.start : r.start+int(total)]
	if end := f[total-1]; end != FrameEnd {
		return Frame{}, NewError(FrameError, 0, 0, "frame end octet 0x%02x, want 0xce", end)
	}
	payload := f[frameHeaderSize : total-1 : total-1]
	r.consume(int(total))
	return Frame{Type: typ, Channel: channel, Payload: payload}, nil
}

// FrameBuffered reports whether a whole frame is buffered: the next
// ReadFrame then returns it (or the error its header makes) without
// reading from the source. A reader that batches work per read finishes a
// batch when it reports false, before a ReadFrame that may wait.
func (r *FrameReader) FrameBuffered() bool {
	n := r.end - r.start
	if n < frameHeaderSize {
		return false
	}
	size := binary.BigEndian.Uint32(r.buf[r.start+3:])
	return uint64(n) >= uint64(size)+frameOverhead
}

// Buffered returns how many bytes are buffered and not yet returned by
// ReadFrame: what already arrived of the frames that follow.
func (r *FrameReader) Buffered() int { return r.end - r.start }

func (r *FrameReader) consume(n int) {
	r.start += n
	if r.start == r.end {
		r.start, r.end = 0, 0
	}
}

// fill makes at least n bytes available in buf[start:end].
func (r *FrameReader) fill(n int) error {
	noProgress := 0
	for r.end-r.start < n {
		if r.err != nil {
			if r.err == io.EOF && r.end > r.start {
				return io.ErrUnexpectedEOF
			}
			return r.err
		}
		if r.end == len(r.buf) {
			r.makeRoom(n)
		}
		var m int
		var err error
		if r.idle != nil && r.start == r.end {
			if r.full && len(r.buf) < maxReadAhead {
				// The last read filled the buffer: more was waiting.
				// Read more at once, fewer reads per byte under load;
				// the buffer goes back to its pool when the reader
				// waits.
				putBuffer(r.buf)
				r.buf = getBuffer(2 * len(r.buf))
			}
			if r.parker != nil {
				r.want = n
				m, err = r.parker.ReadOrPark(r.nextFn, r.parkFn)
			} else {
				m, err = r.idle.ReadNoWait(r.buf[r.end:])
			}
			if err == ErrWouldBlock {
				r.releaseBuffer()
				if err := r.idle.WaitReadable(); err != nil {
					r.err = err
				}
				continue
			}
		} else {
			m, err = r.r.Read(r.buf[r.end:])
		}
		if m < 0 || m > len(r.buf)-r.end {
			m, err = 0, io.ErrShortBuffer // a broken io.Reader; do not trust it
		}
		r.full = m == len(r.buf)-r.end
		r.end += m
		if err != nil {
			r.err = err
			continue
		}
		if m == 0 {
			// As bufio does: an io.Reader returning 0, nil forever would spin.
			if noProgress++; noProgress >= 100 {
				r.err = io.ErrNoProgress
			}
		} else {
			noProgress = 0
		}
	}
	return nil
}

// makeRoom frees space after buf[end] for a read towards n buffered bytes: it moves
// the unconsumed bytes to the front, and grows the buffer (doubling, capped at n) only
// if that is not enough. Growth therefore follows the bytes that actually arrived, not
// the size a frame header claims.
func (r *FrameReader) makeRoom(n int) {
	// With an IdleWaiter, a read that filled the buffer means input keeps
	// coming: double the buffer (up to maxReadAhead) instead of moving a
	// partial frame to its front, so later reads take more at once.
	readAhead := r.idle != nil && r.full && len(r.buf) > 0 && len(r.buf) < maxReadAhead
	if r.start > 0 && !readAhead {
		r.end = copy(r.buf, r.buf[r.start:r.end])
		r.start = 0
		if r.end < len(r.buf) {
			return
		}
	}
	// The buffer is full and holds fewer than n bytes, so n > len(r.buf) and the new
	// size is always larger than the old one (or it is read-ahead, doubled).
	size := min(max(2*len(r.buf), initialBufferSize), max(n, initialBufferSize))
	if readAhead {
		size = 2 * len(r.buf)
	}
	var buf []byte
	if r.idle != nil {
		// Whole powers of two, so the buffer can go back to a pool;
		// still within twice what the frame needs.
		if size <= maxPooledBuffer {
			p := initialBufferSize
			for p < size {
				p *= 2
			}
			size = p
		}
		buf = getBuffer(size)
	} else {
		buf = make([]byte, size)
	}
	old := r.buf
	r.end = copy(buf, r.buf[r.start:r.end])
	r.start = 0
	r.buf = buf
	if r.idle != nil && old != nil {
		putBuffer(old)
	}
}

// BufferSize returns the size of r's read buffer: 0 while a FrameReader
// with an IdleWaiter waits for input.
func (r *FrameReader) BufferSize() int { return len(r.buf) }

// releaseBuffer gives the empty buffer back: to readBuffers when it has
// the initial size, to the collector when a large frame grew it. Only a
// FrameReader with an IdleWaiter calls it, between frames.
func (r *FrameReader) releaseBuffer() {
	if r.buf != nil {
		putBuffer(r.buf)
	}
	r.buf, r.start, r.end = nil, 0, 0
	r.full = false // it waited: the input did not keep coming
}

// AppendFrame appends a frame with the given payload.
func AppendFrame(dst []byte, typ uint8, channel uint16, payload []byte) []byte {
	dst = append(dst, typ)
	dst = appendUint16(dst, channel)
	dst = appendUint32(dst, uint32(len(payload)))
	dst = append(dst, payload...)
	return append(dst, FrameEnd)
}

// AppendMethodFrame appends a method frame for m, encoding the arguments in place and
// patching the size afterwards: no intermediate buffer, no allocation when dst has room.
//
// Passing m through the Method interface makes it escape; hot paths that build the
// struct per call use its AppendFrame method instead, e.g.
// (&BasicDeliver{...}).AppendFrame(dst, channel), which leaves it on the stack.
func AppendMethodFrame(dst []byte, channel uint16, m Method) []byte {
	start := len(dst)
	dst = appendMethodFrameStart(dst, channel, m.ClassID(), m.MethodID())
	dst = m.AppendArgs(dst)
	return appendMethodFrameEnd(dst, start)
}

// appendMethodFrameStart appends the frame header with a placeholder size, and the ids.
func appendMethodFrameStart(dst []byte, channel, classID, methodID uint16) []byte {
	dst = append(dst, FrameMethod, uint8(channel>>8), uint8(channel), 0, 0, 0, 0)
	return append(dst, uint8(classID>>8), uint8(classID), uint8(methodID>>8), uint8(methodID))
}

// appendMethodFrameEnd patches the size of the frame that starts at dst[start] and
// appends the frame end.
func appendMethodFrameEnd(dst []byte, start int) []byte {
	binary.BigEndian.PutUint32(dst[start+3:], uint32(len(dst)-start-frameHeaderSize))
	return append(dst, FrameEnd)
}

// AppendHeaderFrame appends a content header frame (spec §4.2.6.1): class id, weight 0,
// body size and props, the raw property flags and list (Properties.Append or a
// ContentHeader's Properties, passed through unchanged).
func AppendHeaderFrame(dst []byte, channel uint16, classID uint16, bodySize uint64, props []byte) []byte {
	dst = append(dst, FrameHeader)
	dst = appendUint16(dst, channel)
	dst = appendUint32(dst, uint32(2+2+8+len(props)))
	dst = appendUint16(dst, classID)
	dst = append(dst, 0, 0) // weight, unused
	dst = appendUint64(dst, bodySize)
	dst = append(dst, props...)
	return append(dst, FrameEnd)
}

// AppendHeartbeatFrame appends a heartbeat frame.
func AppendHeartbeatFrame(dst []byte) []byte {
	return append(dst, FrameHeartbeat, 0, 0, 0, 0, 0, 0, FrameEnd)
}

// AppendBodyFrames appends body as content body frames of at most frameMax octets each
// (frame overhead included), as the negotiated frame-max requires. frameMax 0 means no
// limit; a frameMax of 8 or less is treated as FrameMinSize. An empty body appends
// nothing: the content header's body size of 0 says it all.
func AppendBodyFrames(dst []byte, channel uint16, body []byte, frameMax uint32) []byte {
	chunk := int(min(uint64(math.MaxUint32-frameOverhead), math.MaxInt))
	if frameMax != 0 {
		if frameMax <= frameOverhead {
			frameMax = FrameMinSize
		}
		chunk = min(chunk, int(frameMax)-frameOverhead)
	}
	for len(body) > 0 {
		n := min(len(body), chunk)
		dst = AppendFrame(dst, FrameBody, channel, body[:n])
		body = body[n:]
	}
	return dst
}

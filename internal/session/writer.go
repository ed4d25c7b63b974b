package session

import (
	"sync"
	"time"

	"github.com/warrenmq/broker/amqp"
)

// outbox is the writer's queue and the connection's timers, under one mutex.
// Producers (the reader goroutine, queue actors delivering messages) append
// encoded frames to buf and poke the writer; the writer swaps buf with its
// spare buffer and writes the batch with one Write. So frames batch under
// load and go out as soon as the writer is free. The writer goroutine runs
// only while there is something to write: a poke that finds frames queued
// and nobody flushing claims the flushing flag and starts it, and it exits
// when it finds buf empty, so an idle connection has no writer goroutine
// (nor its stack). A busy connection keeps its writer: it finds the next
// batch queued while it wrote the last one. One exception: the reader
// writes a basic.get reply itself when the writer is idle (flushNow); the
// flushing flag makes sure only one goroutine writes at a time, and that
// frames go out in the order they were queued. The mutex is never held
// across I/O.
//
// The bytes held for the client (buf plus the batch being written) are
// bounded by maxPending for producers that honour it: the reader stops
// reading (waitForRoom) and deliveries ask hasRoom first. Producers that
// cannot wait nor refuse (confirms, replies queued by other goroutines) are
// admitted regardless: each is small and follows from a frame the reader
// read, so the reader's pause bounds them too.
type outbox struct {
	sync.Mutex
	buf []byte
	// writing is the size of the batch the writer is writing: still held
	// for the client, so it counts against maxPending.
	writing int
	// replies and repliesWriting are the bytes of direct reply-to replies
	// in buf and in the batch being written: no queue holds them, so they
	// count in Alarms.Buffered (the memory alarm's) until written or
	// dropped (releaseRepliesLocked).
	replies, repliesWriting int64
	// flushing: a goroutine is in flush (the writer, or a reader answering
	// a basic.get in place, see flushNow) and writes until buf is empty;
	// any other flush leaves the batch to it, so writes never interleave,
	// and no writer is started meanwhile (claimWriterLocked). flushed, when
	// not nil, is closed when flushing ends (waitFlushedLocked). spare is
	// the buffer the last batch was written from, for the next.
	flushing bool
	flushed  chan struct{}
	spare    []byte
	// lastWrite is when the last batch was written (sinceStart): a
	// connection that wrote within busyWindow is busy, and flushQueued
	// leaves its next batch to the writer.
	lastWrite time.Duration
	// room, when not nil, is closed once pending falls to resumeBelow or
	// the writer stops; the reader waits on it. onRoom are the callbacks
	// hasRoom registered, run by the writer at the same moment.
	room   chan struct{}
	onRoom []func()
	// stopped: the writer is gone (write error or connection finished), so
	// frames are dropped and no timer may be armed.
	stopped bool
	// halfClose: once buf is written, shut the write side (or the whole
	// socket when it cannot half-close). Used after refusing a protocol
	// header.
	halfClose bool

	handshakeTimer *time.Timer // closes a connection not open in time
	closeTimer     *time.Timer // closes a connection whose close-ok is late

	// Heartbeat monitor (see heartbeatTick), ticked by the shared
	// schedule (heartbeat.go) while heartbeatHalf is not zero.
	hb            heartbeatEntry
	heartbeatHalf time.Duration
	lastFramesIn  uint64
	missedTicks   int
	// monitorPaused stops the missed-heartbeat count while an alarm holds
	// the reader; the sending half of heartbeatTick keeps working.
	monitorPaused bool
}

// stopTimersLocked stops c's timers and takes it out of the heartbeat
// schedule.
func (c *Conn) stopTimersLocked() {
	o := &c.out
	for _, t := range []*time.Timer{o.handshakeTimer, o.closeTimer} {
		if t != nil {
			t.Stop()
		}
	}
	if o.heartbeatHalf != 0 {
		heartbeats.remove(c)
	}
}

// admitLocked reports whether n more bytes may be queued: always, until the
// writer is gone. The bound is enforced before producing (waitForRoom,
// hasRoom), not here: a frame refused here would be a frame lost.
func (o *outbox) admitLocked(n int) bool {
	_ = n
	return !o.stopped
}

const (
	// maxPending bounds the bytes a connection holds for a client that
	// reads slower than the broker produces: one stuck client
	// costs about this much, not everything its queues hold. It is half
	// of maxSpareBuffer so that a buffer grown to the bound (append grows
	// by a quarter past it) is still kept for reuse: with a bound at
	// maxSpareBuffer every full batch was dropped and regrown from zero.
	// 512 KiB per Write is plenty to batch.
	maxPending = maxSpareBuffer / 2
	// resumeBelow is where producers resume: half the bound, so a client
	// draining slowly wakes them once per half MiB, not once per frame.
	resumeBelow = maxPending / 2
)

func (o *outbox) pendingLocked() int { return len(o.buf) + o.writing }

// hasRoom reports whether the outbox is below maxPending. When it is not,
// notify is registered and run once, on the writer's goroutine, when the
// outbox has drained to resumeBelow or the connection stopped; notify must
// not block (a queue's Kick). A direct connection always has room: its sink
// takes everything at once. Safe from any goroutine.
//
// The delivery path calls it before taking a message for a consumer, and
// treats false like exhausted credit, so a queue actor is never blocked by
// a client that stopped reading and the message stays in the queue.
func (c *Conn) hasRoom(notify func()) bool {
	c.out.Lock()
	defer c.out.Unlock()
	if c.sink != nil || c.out.stopped || c.out.pendingLocked() < maxPending {
		return true
	}
	if notify != nil {
		c.out.onRoom = append(c.out.onRoom, notify)
	}
	return false
}

// waitForRoom blocks the reader while the outbox is at maxPending, until the
// writer drains it to resumeBelow or stops. Not reading is the back-pressure
// TCP passes to the publisher; the client is not read meanwhile, so one
// that also stops reading what we write misses heartbeats and is dropped
// after two intervals, which is what a stuck client deserves.
func (c *Conn) waitForRoom() {
	c.out.Lock()
	for !c.out.stopped && c.out.pendingLocked() >= maxPending {
		if c.out.room == nil {
			c.out.room = make(chan struct{})
		}
		room := c.out.room
		c.out.Unlock()
		c.handOver() // nothing is held while the reader waits
		<-room
		c.out.Lock()
	}
	c.out.Unlock()
}

// roomLocked wakes whoever waits for room when there is some (or force,
// when the writer stops), and returns the callbacks to run once the lock is
// released.
func (o *outbox) roomLocked(force bool) []func() {
	if !force && o.pendingLocked() > resumeBelow {
		return nil
	}
	if o.room != nil {
		close(o.room)
		o.room = nil
	}
	fns := o.onRoom
	o.onRoom = nil
	return fns
}

func runAll(fns []func()) {
	for _, f := range fns {
		f()
	}
}

// poke makes sure what is queued gets written: it starts the writer
// goroutine unless one is flushing already (which writes it before it
// exits) or nothing is queued. Safe from any goroutine.
func (c *Conn) poke() {
	c.out.Lock()
	start := c.out.claimWriterLocked()
	c.out.Unlock()
	if start {
		go c.writeLoop()
	}
}

// flushQueued is poke for a queue actor that has just queued a lone
// delivery (consumer.Flush) or the confirms of a stored batch
// (confirms.Confirm). When nobody is flushing, the outbox holds
// little and the stream can write without waiting (transport.TryWriter: a TCP
// socket), the actor writes the batch itself, in the writer's turn, with
// a send that returns at once instead of starting the writer goroutine for
// it: a delivery or confirm at a low rate then wakes no goroutine of the
// client's connection and reaches it one goroutine hand-off sooner. What
// the socket does not take (the client reads slowly), and whatever was
// queued meanwhile, is left to the writer, which takes the turn over.
// Larger batches, which only build up under load, and any batch of a
// connection that wrote within busyWindow, are left to the writer (poke):
// the time it takes to start lets more deliveries join the batch, which
// then leaves in fewer, larger writes.
func (c *Conn) flushQueued() {
	if c.tryWrite == nil {
		c.poke()
		return
	}
	now := sinceStart()
	c.out.Lock()
	if !c.out.inPlaceLocked(now) {
		start := c.out.claimWriterLocked()
		c.out.Unlock()
		if start {
			go c.writeLoop()
		}
		return
	}
	c.out.flushing = true
	batch := c.out.buf
	c.out.buf = c.out.spare[:0]
	c.out.spare = nil
	c.out.writing = len(batch)
	c.out.repliesWriting, c.out.replies = c.out.replies, 0
	c.out.Unlock()

	n, err := c.tryWrite.TryWrite(batch)
	c.out.Lock()
	if err != nil {
		c.writeFailedLocked(err)
		return
	}
	c.out.writing = 0
	if n < len(batch) {
		// The rest goes first: its first bytes are on the wire. It is
		// moved to the front of its own buffer, and what was queued
		// meanwhile follows it there.
		rest := append(batch[:0], batch[n:]...)
		c.out.buf, c.out.spare = append(rest, c.out.buf...), c.out.buf[:0]
		c.out.replies += c.out.repliesWriting
	} else {
		c.out.spare = batch
		c.alarms.addBuffered(-c.out.repliesWriting)
	}
	c.out.repliesWriting = 0
	if n > 0 {
		c.wrote.Store(true)
		c.out.lastWrite = now
	}
	fns := c.out.roomLocked(false)
	more := len(c.out.buf) > 0
	if !more {
		c.out.endFlushLocked()
	}
	c.out.Unlock()
	runAll(fns)
	if more {
		go c.writeLoop()
	}
}

// busyWindow is how recently a connection must have written to count as
// busy for flushQueued: at a low rate (a delivery a millisecond) batches
// are written in place, under load (writes a few microseconds apart) the
// writer, started a little later, takes several batches in one write.
const busyWindow = 100 * time.Microsecond

// inPlaceLocked reports whether flushQueued writes what is queued itself
// at now: nobody is flushing, a little is queued, and the connection has
// not written within busyWindow.
func (o *outbox) inPlaceLocked(now time.Duration) bool {
	return !o.flushing && !o.stopped && !o.halfClose && o.writing == 0 &&
		len(o.buf) > 0 && len(o.buf) <= flushNowMax && now-o.lastWrite >= busyWindow
}

// clockOrigin is sinceStart's origin.
var clockOrigin = time.Now()

// sinceStart reads the monotonic clock: the time since the package was
// initialised.
func sinceStart() time.Duration { return time.Since(clockOrigin) }

// claimWriterLocked reports whether the caller must start the writer
// goroutine, having set flushing for it: there is something to write (or
// a half-close to do) and nobody is flushing. Claiming under the lock that
// guards buf is what keeps it to one writer at a time.
func (o *outbox) claimWriterLocked() bool {
	if o.flushing || o.stopped || (len(o.buf) == 0 && !o.halfClose) {
		return false
	}
	o.flushing = true
	return true
}

// endFlushLocked clears flushing and wakes whoever waits for it.
func (o *outbox) endFlushLocked() {
	o.flushing = false
	if o.flushed != nil {
		close(o.flushed)
		o.flushed = nil
	}
}

// waitFlushedLocked waits, with the lock released meanwhile, until no
// goroutine is flushing.
func (c *Conn) waitFlushedLocked() {
	for c.out.flushing {
		if c.out.flushed == nil {
			c.out.flushed = make(chan struct{})
		}
		flushed := c.out.flushed
		c.out.Unlock()
		<-flushed
		c.out.Lock()
	}
}

// sendMethod queues a method frame on channel ch (on a direct connection:
// hands m to the Sink). Safe from any goroutine.
func (c *Conn) sendMethod(ch uint16, m amqp.Method) {
	c.out.Lock()
	start := c.queueMethodLocked(ch, m) && c.out.claimWriterLocked()
	c.out.Unlock()
	if start {
		go c.writeLoop()
	}
}

// sendRaw queues frames encoded in advance (startFrame). Safe from any
// goroutine.
func (c *Conn) sendRaw(frames []byte) {
	c.out.Lock()
	queued := c.out.admitLocked(len(frames))
	if queued {
		c.out.buf = append(c.out.buf, frames...)
	}
	start := queued && c.out.claimWriterLocked()
	c.out.Unlock()
	if start {
		go c.writeLoop()
	}
}

// queueMethod is sendMethod without waking the writer; it reports whether
// frames were queued for it.
func (c *Conn) queueMethod(ch uint16, m amqp.Method) bool {
	c.out.Lock()
	defer c.out.Unlock()
	return c.queueMethodLocked(ch, m)
}

// queueMethodLocked is queueMethod under the outbox lock.
func (c *Conn) queueMethodLocked(ch uint16, m amqp.Method) bool {
	if !c.out.admitLocked(0) {
		return false
	}
	if c.sink != nil {
		// Under the lock, so the sink sees methods in the order the wire
		// would carry them.
		c.sink.Method(ch, m)
		return false
	}
	c.out.buf = amqp.AppendMethodFrame(c.out.buf, ch, m)
	return true
}

// sendContent queues a content method (basic.deliver, basic.get-ok,
// basic.return) with its header and body frames. props are the raw
// property flags and list as published. The body is split into frames of the
// negotiated frame-max, and all frames are appended under one lock so the
// frames of one message are never interleaved with another message's on the
// same connection (§4.2.6). Safe from any goroutine.
func (c *Conn) sendContent(ch uint16, m amqp.Method, props, body []byte) {
	c.out.Lock()
	start := c.queueContentLocked(ch, m, props, body) && c.out.claimWriterLocked()
	c.out.Unlock()
	if start {
		go c.writeLoop()
	}
}

// queueContent is sendContent without waking the writer; it reports
// whether frames were queued for it.
func (c *Conn) queueContent(ch uint16, m amqp.Method, props, body []byte) bool {
	c.out.Lock()
	defer c.out.Unlock()
	return c.queueContentLocked(ch, m, props, body)
}

// sendReply is sendContent for a direct reply-to reply, whose bytes count
// in Alarms.Buffered while the outbox holds them: no queue does.
func (c *Conn) sendReply(ch uint16, m amqp.Method, props, body []byte) {
	c.out.Lock()
	before := len(c.out.buf)
	queued := c.queueContentLocked(ch, m, props, body)
	if n := int64(len(c.out.buf) - before); queued && n > 0 {
		c.out.replies += n
		c.alarms.addBuffered(n)
	}
	start := queued && c.out.claimWriterLocked()
	c.out.Unlock()
	if start {
		go c.writeLoop()
	}
}

// releaseRepliesLocked stops counting the replies of an outbox whose
// frames are dropped (the writer stopped).
func (c *Conn) releaseRepliesLocked() {
	c.alarms.addBuffered(-c.out.replies - c.out.repliesWriting)
	c.out.replies, c.out.repliesWriting = 0, 0
}

// queueContentLocked is queueContent under the outbox lock.
func (c *Conn) queueContentLocked(ch uint16, m amqp.Method, props, body []byte) bool {
	maxPayload := int(c.frameMax.Load()) - 8 // type, channel, size, end octet
	if !c.out.admitLocked(len(body)) {
		return false
	}
	if c.sink != nil {
		c.sink.Content(ch, m, props, body)
		return false
	}
	buf := amqp.AppendMethodFrame(c.out.buf, ch, m)
	buf = amqp.AppendHeaderFrame(buf, ch, m.ClassID(), uint64(len(body)), props)
	for len(body) > 0 {
		n := min(len(body), maxPayload)
		buf = amqp.AppendFrame(buf, amqp.FrameBody, ch, body[:n])
		body = body[n:]
	}
	c.out.buf = buf
	return true
}

// writeLoop is the writer goroutine, started by whoever claimed the
// writer's turn (claimWriterLocked): it writes until the outbox is empty
// and exits. finish waits for it, so it never outlives Serve.
func (c *Conn) writeLoop() {
	_ = c.flushClaimed(false)
}

// stopWriter ends the outbox for good: it writes what is still queued on
// the calling goroutine (or waits for the writer doing so), then marks
// the outbox stopped under the same lock, so no writer starts after it
// returns. A peer that stops reading holds the write until the close
// timeout closes the socket.
func (c *Conn) stopWriter() {
	t := time.AfterFunc(c.set.closeTimeout, c.closeRWC)
	defer t.Stop()
	c.out.Lock()
	for {
		c.waitFlushedLocked()
		if !c.out.claimWriterLocked() {
			break
		}
		c.out.Unlock()
		_ = c.flushClaimed(false)
		c.out.Lock()
	}
	c.out.stopped = true
	c.out.buf = nil
	c.releaseRepliesLocked()
	c.out.Unlock()
}

// flushNow writes what is queued on the calling goroutine instead of waking
// the writer, saving a goroutine handoff on a request/response round trip
// (basic.get). The reader calls it after queueing the reply to a method the
// client waits for, queued with queueMethod or queueContent so the writer
// was not woken for it. It writes only on a stream whose writes return
// without the peer (transport.InPlaceWriter: a TCP socket) with the writer
// idle and a small batch: such a write copies into the kernel's buffer and
// returns. (A pipe write may wait for the peer's read, and a client that
// does not read would hold the reader, so those are left to the writer,
// which is poked instead.)
func (c *Conn) flushNow() {
	if c.inPlace == nil {
		c.poke()
		return
	}
	c.out.Lock()
	small := !c.out.flushing && c.out.writing == 0 && len(c.out.buf) <= flushNowMax
	c.out.Unlock()
	if !small {
		c.poke()
		return
	}
	_ = c.flush(true)
}

// flushNowMax is the largest batch flushNow writes in place.
const flushNowMax = 16 << 10

// maxSpareBuffer caps the buffer the writer keeps between batches, so one
// burst of large messages does not pin its memory for the connection's life.
const maxSpareBuffer = 1 << 20

// flush writes everything queued, one Write per batch, until the queue is
// empty. When another goroutine is flushing it returns at once: that one
// writes what was queued before it looks at the queue again. inPlace is
// the reader's flushNow: it writes through the stream's in-place path
// (transport.InPlaceWriter).
func (c *Conn) flush(inPlace bool) error {
	c.out.Lock()
	if c.out.flushing {
		c.out.Unlock()
		return nil
	}
	c.out.flushing = true
	c.out.Unlock()
	return c.flushClaimed(inPlace)
}

// flushClaimed is flush for a caller that has set flushing. It clears it
// when buf is empty, under the lock that producers claim the writer's turn
// with, so a frame queued after that starts a new writer. A failed write
// stops the outbox and closes the stream, which ends the read loop too.
func (c *Conn) flushClaimed(inPlace bool) error {
	for {
		c.out.Lock()
		batch := c.out.buf
		if len(batch) == 0 {
			halfClose := c.out.halfClose
			c.out.halfClose = false // once is enough
			if !halfClose {
				c.out.endFlushLocked()
				c.out.Unlock()
				return nil
			}
			c.out.Unlock()
			// Still flushing meanwhile: no frame may follow the FIN.
			c.shutdownWrite()
			continue
		}
		c.out.buf = c.out.spare[:0]
		c.out.spare = nil
		c.out.writing = len(batch)
		c.out.repliesWriting, c.out.replies = c.out.replies, 0
		c.out.Unlock()

		onlyHeartbeat := len(batch) == heartbeatFrameSize && batch[0] == amqp.FrameHeartbeat
		err := c.write(batch, inPlace)
		if cap(batch) > maxSpareBuffer {
			batch = nil
		}
		now := sinceStart()
		c.out.Lock()
		c.out.spare = batch
		if err != nil {
			c.writeFailedLocked(err)
			return err
		}
		c.out.lastWrite = now
		c.out.writing = 0
		c.alarms.addBuffered(-c.out.repliesWriting)
		c.out.repliesWriting = 0
		fns := c.out.roomLocked(false)
		c.out.Unlock()
		runAll(fns)
		// A batch that is a lone heartbeat does not count as traffic, so an
		// idle connection gets one every tick (half interval): that leaves
		// the client a full interval of slack for timer jitter under load.
		if !onlyHeartbeat {
			c.wrote.Store(true)
		}
	}
}

// writeFailedLocked stops the outbox after a failed write by the goroutine
// that is flushing, ends its turn, releases the lock and closes the
// stream, which ends the read loop too.
func (c *Conn) writeFailedLocked(err error) {
	c.out.stopped = true
	c.out.buf = nil
	c.out.writing = 0
	c.releaseRepliesLocked()
	fns := c.out.roomLocked(true)
	c.out.endFlushLocked()
	c.out.Unlock()
	runAll(fns)
	c.log.Debug("session: write failed", "err", err)
	c.closeRWC()
}

// write writes one batch, in place when asked and the stream can. The
// writer's own batches take the stream's ordinary path while they are
// small, a connection at a low rate (see socket_linux.go for why), and the
// in-place path once they are rawWriteMin or more, which only a
// connection under load queues between two writes: there the runtime's
// syscall entry and the sysmon wake-ups it brings cost the broker more
// than the write.
func (c *Conn) write(batch []byte, inPlace bool) error {
	if c.inPlace != nil && (inPlace || len(batch) >= rawWriteMin) {
		return c.inPlace.WriteInPlace(batch)
	}
	return c.tr.Write(batch)
}

// rawWriteMin is the batch size from which the writer writes in place:
// several deliveries of small messages, one of 512 bytes or more.
const rawWriteMin = 512

// shutdownWrite sends EOF to the peer while still reading, so the peer sees
// everything we wrote before the connection goes (a TCP socket closed with
// unread input is reset). Streams that cannot half-close are closed.
func (c *Conn) shutdownWrite() {
	if c.tr.CloseWrite() != nil {
		c.closeRWC()
	}
}

// heartbeatFrameSize is the size of an encoded heartbeat frame.
const heartbeatFrameSize = 8

// startHeartbeat starts the heartbeat monitor for the negotiated interval.
// It ticks every half interval, run by the process's one heartbeat
// schedule (heartbeat.go), not a timer of its own:
//   - if nothing but heartbeats was written since the previous tick it
//     queues a heartbeat frame, so an idle client hears from us every half
//     interval (RabbitMQ's sender checks at the same rate; amqp091-go gives
//     up after 1.5 intervals of silence);
//   - if no frame arrived for four ticks (two intervals) the peer is dead and
//     the socket is closed, as §4.2.7 allows.
func (c *Conn) startHeartbeat(interval time.Duration) {
	c.out.Lock()
	defer c.out.Unlock()
	if c.out.stopped {
		return
	}
	c.out.heartbeatHalf = interval / 2
	c.out.lastFramesIn = c.framesIn.Load()
	heartbeats.add(c, c.out.heartbeatHalf)
}

// idleBufferCap is the largest outbox buffer an idle connection keeps
// (releaseIdleBuffersLocked).
const idleBufferCap = 64

// releaseIdleBuffersLocked drops the outbox's buffers when they are empty
// and larger than idleBufferCap: a connection that goes idle (a heartbeat
// tick with nothing written since the last, or the end of the handshake)
// keeps no buffer a burst grew, up to maxSpareBuffer. The spare is left to
// a writer that is flushing: it is the writer's until the write is done.
func (o *outbox) releaseIdleBuffersLocked() {
	if !o.flushing && cap(o.spare) > idleBufferCap {
		o.spare = nil
	}
	if len(o.buf) == 0 && cap(o.buf) > idleBufferCap {
		o.buf = nil
	}
}

// missedTicksLimit is two heartbeat intervals of silence, in half-interval
// ticks.
const missedTicksLimit = 4

// heartbeatTick is one tick of the heartbeat monitor (startHeartbeat).
func (c *Conn) heartbeatTick() {
	c.out.Lock()
	if c.out.stopped {
		c.out.Unlock()
		return
	}
	if in := c.framesIn.Load(); in != c.out.lastFramesIn {
		c.out.lastFramesIn = in
		c.out.missedTicks = 0
	} else if !c.out.monitorPaused {
		c.out.missedTicks++
	}
	if c.out.missedTicks >= missedTicksLimit {
		interval := 2 * c.out.heartbeatHalf
		c.out.Unlock()
		c.log.Warn("session: client missed heartbeats, dropping connection", "interval", interval)
		c.recordMissedHeartbeats(interval)
		c.closeRWC()
		return
	}
	if c.wrote.Swap(false) || len(c.out.buf) != 0 {
		c.out.Unlock()
		return
	}
	// Idle for half an interval: give back the writer's spare buffer,
	// which a burst may have grown up to maxSpareBuffer, and send a
	// heartbeat.
	c.out.releaseIdleBuffersLocked()
	if c.tryWrite != nil && !c.out.flushing && !c.out.halfClose {
		// Write it from here, in the writer's turn: a socket with room
		// takes 8 bytes at once, so an idle connection's heartbeat wakes
		// none of its goroutines.
		c.out.flushing = true
		c.out.writing = heartbeatFrameSize
		c.out.Unlock()
		c.tryHeartbeat()
		return
	}
	c.out.buf = amqp.AppendHeartbeatFrame(c.out.buf)
	start := c.out.claimWriterLocked()
	c.out.Unlock()
	if start {
		go c.writeLoop()
	}
}

// heartbeatFrame is an encoded heartbeat frame; only read.
var heartbeatFrame = amqp.AppendHeartbeatFrame(nil)

// tryHeartbeat writes a heartbeat frame without waiting, in a writer's
// turn the caller claimed. What the socket did not take (its send buffer
// is full: the client does not read), and whatever was queued meanwhile,
// is left to the writer goroutine, which takes the turn over.
func (c *Conn) tryHeartbeat() {
	n, err := c.tryWrite.TryWrite(heartbeatFrame)
	c.out.Lock()
	c.out.writing = 0
	if err != nil {
		c.writeFailedLocked(err)
		return
	}
	if n < len(heartbeatFrame) {
		// The rest goes first: the frame's first bytes are on the wire.
		c.out.buf = append(heartbeatFrame[n:len(heartbeatFrame):len(heartbeatFrame)], c.out.buf...)
	}
	if len(c.out.buf) == 0 && !c.out.halfClose {
		c.out.endFlushLocked()
		c.out.Unlock()
		return
	}
	c.out.Unlock()
	go c.writeLoop()
}

package session

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/internal/vhost"
)

// Channel is one open channel of a Conn. Its state is owned by the
// connection's reader goroutine, except active, which delivery paths on other
// goroutines will read.
type Channel struct {
	id   uint16
	conn *Conn

	// closing: we sent channel.close and wait for close-ok; every other frame
	// on the channel is discarded (the spec's channel.close rules).
	closing bool

	// active is the channel.flow state: false asks the server to stop
	// sending content (deliveries) on this channel until the client
	// re-activates it. The delivery path must check Active before sending.
	active atomic.Bool

	asm assembly
	// propsScratch holds a content's properties from its header until its
	// first body frame (keepProps); held is what the channel counts in
	// Alarms' buffered bytes (its assembly's and its transaction's).
	propsScratch []byte
	held         int64

	// The broker side. Owned by the reader goroutine unless noted.
	lastQueue   string       // for "" in queue methods (RabbitMQ's shortcut)
	prefetch    uint16       // basic.qos global=false: the limit of new consumers
	credit      queue.Credit // basic.qos global=true; shared with queue actors
	confirm     *confirms    // non-nil in confirm mode; shared with queue actors
	tx          *txState     // non-nil in tx mode
	routeNames  []string     // scratch for routing
	routeQueues []*vhost.Queue
	// decoded holds the per-message methods, decoded in place
	// (publish.go); allocated by the first, so a channel that never
	// publishes or acks does not carry it.
	decoded *decodeScratch
	dl      deliveries // touched by queue actors, under its own lock
	// timeoutConsumers counts the consumers ever created on the channel
	// with their own x-consumer-timeout (timeout.go), so the scanner's
	// lookups cost nothing on channels without one.
	timeoutConsumers atomic.Int32
}

// assemblyState is where a channel is in reading a content method: method
// frame, then header frame, then body frames (§4.2.6).
type assemblyState uint8

const (
	expectMethod assemblyState = iota
	expectHeader
	expectBody
)

// assembly collects one content-bearing method with its content.
type assembly struct {
	state  assemblyState
	method amqp.Method // the content method (basic.publish)
	props  []byte      // raw property flags and list, copied out of the frame
	body   []byte      // what arrived; len grows to size, cap with len (growBody)
	size   uint64      // body-size from the header
	// counted is what this assembly adds to Alarms' buffered bytes: its
	// allocations while it waits for more body frames.
	counted int64
}

// propsScratchMax is the largest properties copy a channel keeps for the
// next message (keepProps): properties are tens of bytes in practice, and
// a channel never keeps more than this between messages.
const propsScratchMax = 4 << 10

// account adds n (negative: releases) to the message bytes the channel
// holds before any queue has them, and to the connections' total
// (Alarms.Buffered), which the memory alarm counts.
func (ch *Channel) account(n int64) {
	if n != 0 {
		ch.held += n
		ch.conn.alarms.addBuffered(n)
	}
}

// countAssembly makes the assembly count total bytes.
func (ch *Channel) countAssembly(total int64) {
	ch.account(total - ch.asm.counted)
	ch.asm.counted = total
}

// dropAssembly forgets the content being assembled and what it counted.
func (ch *Channel) dropAssembly() {
	ch.account(-ch.asm.counted)
	ch.asm = assembly{}
}

func newChannel(c *Conn, id uint16) *Channel {
	ch := &Channel{id: id, conn: c}
	ch.active.Store(true)
	c.trackChannel(ch)
	return ch
}

// send queues a method frame on the channel, unless the channel's close has
// begun (see deliveries.closed). Safe from any goroutine.
func (ch *Channel) send(m amqp.Method) {
	g := &ch.dl.gate
	g.Lock()
	if !g.closed {
		ch.conn.sendMethod(ch.id, m)
	}
	g.Unlock()
}

// sendQueued is send without waking the writer: it reports whether m was
// queued, for the caller to flush (flushQueued) once it has queued all it
// has to say.
func (ch *Channel) sendQueued(m amqp.Method) bool {
	g := &ch.dl.gate
	g.Lock()
	queued := !g.closed && ch.conn.queueMethod(ch.id, m)
	g.Unlock()
	return queued
}

// reply is send for an answer the client waits on: the reader writes it
// itself when it can (flushNow) instead of waking the writer.
func (ch *Channel) reply(m amqp.Method) {
	g := &ch.dl.gate
	g.Lock()
	queued := !g.closed && ch.conn.queueMethod(ch.id, m)
	g.Unlock()
	if queued {
		ch.conn.flushNow()
	}
}

// Active reports the channel.flow state. Safe from any goroutine.
func (ch *Channel) Active() bool { return ch.active.Load() }

// release frees what the channel holds once it is closed: today the content
// being assembled. (Consumers and unacked deliveries join here when the queue
// engine lands: cancel them and requeue.)
func (ch *Channel) release() {
	ch.conn.untrackChannel(ch)
	ch.dropAssembly()
	ch.propsScratch = nil
	if ch.tx != nil {
		ch.tx.discard(ch)
	}
	if ch.conn.vh != nil {
		ch.closeDeliveries(context.Background())
	}
}

// fail reports a soft error: channel.close with the error's code, text and
// the offending method's ids; then every frame on the channel is discarded
// until the client's close-ok.
func (ch *Channel) fail(e *amqp.Error) {
	// beginClose sends nothing when CloseChannel got there first.
	if ch.beginClose(e) {
		ch.conn.log.Warn("session: closing channel", "channel", ch.id, "code", e.Code, "text", e.Text)
	}
	ch.closing = true
	ch.release()
}

// handleFrame feeds one frame to the channel. Errors are *amqp.Error: hard
// ones close the connection, soft ones the channel (the caller decides).
func (ch *Channel) handleFrame(f amqp.Frame) error {
	ch.syncServerClose()
	if ch.closing {
		ch.handleWhileClosing(f)
		return nil
	}
	switch ch.asm.state {
	case expectHeader:
		return ch.handleHeader(f)
	case expectBody:
		return ch.handleBody(f)
	}
	if f.Type != amqp.FrameMethod {
		return amqp.NewError(amqp.UnexpectedFrame, 0, 0, "%s frame on channel %d where a method frame was expected", frameTypeName(f.Type), ch.id)
	}
	m, err := ch.decodeMethod(f.Payload)
	if err != nil {
		return err
	}
	if m.HasContent() {
		ch.asm = assembly{state: expectHeader, method: m}
		return nil
	}
	return ch.handle(m)
}

// handleWhileClosing follows the spec's channel.close rules once we sent it: only
// channel.close-ok ends it; a crossing channel.close gets its close-ok (and
// we keep waiting for ours); everything else, content included, is dropped.
func (ch *Channel) handleWhileClosing(f amqp.Frame) {
	if f.Type != amqp.FrameMethod {
		return
	}
	cls, mth, _, err := amqp.MethodIDs(f.Payload)
	if err != nil || cls != amqp.ClassChannel {
		return
	}
	switch mth {
	case amqp.MethodChannelCloseOk:
		ch.conn.removeChannel(ch)
	case amqp.MethodChannelClose:
		ch.conn.sendMethod(ch.id, &amqp.ChannelCloseOk{})
	}
}

func (ch *Channel) handleHeader(f amqp.Frame) error {
	m := ch.asm.method
	if f.Type != amqp.FrameHeader {
		return amqp.NewError(amqp.UnexpectedFrame, m.ClassID(), m.MethodID(), "%s frame on channel %d where the content header of %s was expected", frameTypeName(f.Type), ch.id, m.Name())
	}
	h, err := amqp.ParseContentHeader(f.Payload)
	if err != nil {
		return err
	}
	if h.ClassID != m.ClassID() {
		return amqp.NewError(amqp.UnexpectedFrame, m.ClassID(), m.MethodID(), "content header for class %d on channel %d, expected class %d", h.ClassID, ch.id, m.ClassID())
	}
	if err := ch.checkBodySize(h.BodySize); err != nil {
		return err
	}
	// Properties alias the frame buffer, which the next read overwrites; the
	// message keeps its own copy (it is stored exactly as published).
	if h.BodySize == 0 {
		ch.asm.props = append([]byte(nil), h.Properties...)
		return ch.complete()
	}
	// Nothing is reserved for the body yet: the announced size is only a
	// claim, and a header announcing 128 MiB that no body follows must cost
	// nothing. The properties wait in the channel's scratch until the
	// first body frame brings the message its own allocation (growBody).
	ch.asm.props = ch.keepProps(h.Properties)
	ch.asm.state = expectBody
	ch.asm.size = h.BodySize
	return nil
}

// keepProps copies a content's properties for the time until its first
// body frame: into the channel's scratch, reused from message to message,
// or, for the rare properties above propsScratchMax, into a copy of their
// own that counts as buffered while it waits.
func (ch *Channel) keepProps(p []byte) []byte {
	if len(p) > propsScratchMax {
		cp := append([]byte(nil), p...)
		ch.countAssembly(int64(len(cp)))
		return cp
	}
	if cap(ch.propsScratch) < len(p) {
		ch.propsScratch = make([]byte, 0, max(len(p), 256))
	}
	ch.propsScratch = append(ch.propsScratch[:0], p...)
	return ch.propsScratch
}

// growBody makes room for need bytes of body. The properties and the body
// share one allocation, as they live and die together in the stored
// record. It grows with what arrived, to twice that but never beyond the
// announced size: a body that comes in one frame (most do) gets exactly
// its size at once, a header that announces much and sends little costs
// what it sent, and a long body is copied a bounded number of times in
// all (each growth doubles), never once per frame.
func (ch *Channel) growBody(need uint64) {
	a := &ch.asm
	n, have := len(a.props), len(a.body)
	if have == 0 && need == a.size {
		// The whole body is in this frame: a small message is carved out
		// of the read's arena when more frames arrived with it (arena.go).
		if buf := ch.conn.carve(n + int(need)); buf != nil {
			copy(buf, a.props)
			a.props = buf[:n:n]
			a.body = buf[n:n]
			return
		}
	}
	buf := make([]byte, n+have, uint64(n)+min(a.size, 2*need))
	copy(buf, a.props)
	copy(buf[n:], a.body)
	a.props = buf[:n:n]
	a.body = buf[n:]
}

// checkBodySize is the sanity check on a header's body-size, done before the
// body buffer is allocated: above maxBodySize RabbitMQ answers 501
// FRAME_ERROR and so do we. The configurable message size limit (406
// PRECONDITION_FAILED, a soft error) belongs here too, with the publish path.
func (ch *Channel) checkBodySize(size uint64) error {
	m := ch.asm.method
	if size > maxBodySize {
		return amqp.NewError(amqp.FrameError, m.ClassID(), m.MethodID(), "content body size %d exceeds the maximum allowed size %d", size, maxBodySize)
	}
	if max := ch.conn.cfg.MaxMessageSize; max > 0 && size > uint64(max) {
		return amqp.NewError(amqp.PreconditionFailed, m.ClassID(), m.MethodID(), "message size %d is larger than configured max size %d", size, max)
	}
	return nil
}

func (ch *Channel) handleBody(f amqp.Frame) error {
	m := ch.asm.method
	if f.Type != amqp.FrameBody {
		// Includes a method frame before the body is complete (§4.2.6: a
		// content's frames are strictly sequential on its channel).
		return amqp.NewError(amqp.UnexpectedFrame, m.ClassID(), m.MethodID(), "%s frame on channel %d where content body of %s was expected (%d of %d bytes received)",
			frameTypeName(f.Type), ch.id, m.Name(), len(ch.asm.body), ch.asm.size)
	}
	remaining := ch.asm.size - uint64(len(ch.asm.body))
	if uint64(len(f.Payload)) > remaining {
		// RabbitMQ's command assembler: a body frame larger than what the
		// header declared is a malformed frame, 501.
		return amqp.NewError(amqp.FrameError, m.ClassID(), m.MethodID(), "content body frame of %d bytes exceeds the %d bytes remaining of %s", len(f.Payload), remaining, m.Name())
	}
	if need := uint64(len(ch.asm.body) + len(f.Payload)); need > uint64(cap(ch.asm.body)) {
		ch.growBody(need)
	}
	ch.asm.body = append(ch.asm.body, f.Payload...)
	if uint64(len(ch.asm.body)) == ch.asm.size {
		return ch.complete()
	}
	// More frames to wait for: what the content holds meanwhile counts
	// towards the memory alarm. (A body complete in its first frame is
	// routed at once and never counted, which keeps the common publish
	// free of the shared counter.)
	ch.countAssembly(int64(len(ch.asm.props) + cap(ch.asm.body)))
	return nil
}

// complete hands a fully assembled content method on and resets the
// assembly.
func (ch *Channel) complete() error {
	m, props, body := ch.asm.method, ch.asm.props, ch.asm.body
	// From here the queues (or the transaction) hold the message and
	// count it.
	ch.dropAssembly()
	if p, ok := m.(*amqp.BasicPublish); ok {
		return ch.handlePublish(p, props, body)
	}
	// basic.deliver, basic.get-ok, basic.return flow from server to client
	// only.
	return amqp.NewError(amqp.CommandInvalid, m.ClassID(), m.MethodID(), "%s is sent by the server only", m.Name())
}

// handle dispatches a method without content (or, via handlePublish, with
// content) by class.
func (ch *Channel) handle(m amqp.Method) error {
	switch m.ClassID() {
	case amqp.ClassChannel:
		return ch.handleChannelMethod(m)
	case amqp.ClassExchange, amqp.ClassQueue, amqp.ClassBasic, amqp.ClassTx, amqp.ClassConfirm:
		return ch.handleBrokerMethod(m)
	case amqp.ClassConnection:
		return amqp.NewError(amqp.CommandInvalid, m.ClassID(), m.MethodID(), "%s on channel %d: connection methods belong on channel 0", m.Name(), ch.id)
	}
	return amqp.NewError(amqp.CommandInvalid, m.ClassID(), m.MethodID(), "%s is not valid on a channel", m.Name())
}

func (ch *Channel) handleChannelMethod(m amqp.Method) error {
	switch m := m.(type) {
	case *amqp.ChannelOpen:
		return amqp.NewError(amqp.ChannelError, m.ClassID(), m.MethodID(), "second channel.open on channel %d", ch.id)
	case *amqp.ChannelFlow:
		if !m.Active && ch.conn.vh != nil {
			// RabbitMQ refuses to be paused by a client the same way.
			return amqp.NewError(amqp.NotImplemented, m.ClassID(), m.MethodID(), "active=false")
		}
		ch.active.Store(m.Active)
		ch.conn.sendMethod(ch.id, &amqp.ChannelFlowOk{Active: m.Active})
		return nil
	case *amqp.ChannelClose:
		if !ch.acceptClientClose() {
			// Our channel.close (CloseChannel) crossed the client's:
			// answer it and wait for the client's close-ok to ours.
			ch.closing = true
			ch.conn.sendMethod(ch.id, &amqp.ChannelCloseOk{})
			return nil
		}
		// Release first (unsettled deliveries requeued, a transaction's
		// buffered publishes dropped), then close-ok: a client that sees
		// close-ok and asks again (a basic.get on another channel, the
		// management API's next get) finds the requeues already queued
		// ahead of it.
		ch.conn.removeChannel(ch)
		ch.conn.sendMethod(ch.id, &amqp.ChannelCloseOk{})
		return nil
	case *amqp.ChannelCloseOk:
		return amqp.NewError(amqp.CommandInvalid, m.ClassID(), m.MethodID(), "channel.close-ok on channel %d, which is not closing", ch.id)
	case *amqp.ChannelFlowOk:
		return amqp.NewError(amqp.CommandInvalid, m.ClassID(), m.MethodID(), "channel.flow-ok on channel %d, but the server never sends channel.flow", ch.id)
	}
	return amqp.NewError(amqp.CommandInvalid, m.ClassID(), m.MethodID(), "%s is sent by the server only", m.Name())
}

// handleBrokerMethod is where the exchange, queue, basic, tx and confirm
// classes enter the broker. Until the queue engine lands every one of them
// is answered honestly with 540 NOT_IMPLEMENTED (a hard error in the spec,
// so the connection closes).
func (ch *Channel) handleBrokerMethod(m amqp.Method) error {
	if ch.conn.vh == nil {
		return notImplemented(m)
	}
	defer ch.noteState(m)
	ctx := context.Background()
	var err error
	switch m.ClassID() {
	case amqp.ClassExchange:
		err = ch.handleExchange(ctx, m)
	case amqp.ClassQueue:
		err = ch.handleQueue(ctx, m)
	case amqp.ClassBasic:
		err = ch.handleBasic(ctx, m)
	case amqp.ClassTx:
		err = ch.handleTx(ctx, m)
	case amqp.ClassConfirm:
		err = ch.handleConfirm(m)
	}
	// Errors from below carry no method ids; the method at hand caused them.
	// (Only on errors: errors.As's target would cost an allocation per
	// method.)
	if err != nil {
		var ae *amqp.Error
		if errors.As(err, &ae) && ae.ClassID == 0 && ae.MethodID == 0 {
			ae.ClassID, ae.MethodID = m.ClassID(), m.MethodID()
		}
	}
	return err
}

func notImplemented(m amqp.Method) error {
	return amqp.NewError(amqp.NotImplemented, m.ClassID(), m.MethodID(), "%s is not implemented yet", m.Name())
}

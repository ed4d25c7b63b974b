package session

import (
	"context"

	"github.com/warrenmq/broker/amqp"
)

// This file lets the broker close a channel of a live connection from
// another goroutine: the unacked scanner's consumer timeout closes the
// owning channel with 406 PRECONDITION_FAILED, as RabbitMQ does.
//
// Channel state belongs to the reader goroutine (or, on a direct
// connection, to whoever holds the Handle mutex), so the close is split:
// under the channel's delivery lock CloseChannel marks the close begun and
// queues channel.close as the channel's last frame (every other send on the
// channel checks the same flag under the same lock); it then cancels the
// consumers and requeues what the channel held, as a client-side close
// would. The reader notices the begun close at the channel's next frame
// (syncServerClose) and from there follows the usual closing rules: it
// drops everything until the client's close-ok.

// CloseChannel closes channel id with a channel.close carrying code and
// text, from any goroutine. It reports false when the channel is not open
// or its close has already begun. Safe to call concurrently with
// everything else on the connection.
func (c *Conn) CloseChannel(id uint16, code uint16, text string) bool {
	e := amqp.NewError(code, 0, 0, "%s", text)
	if c.sink != nil {
		// A direct connection: the Handle mutex plays the reader.
		c.direct.mu.Lock()
		defer c.direct.mu.Unlock()
		ch := c.channels[id]
		if ch == nil || ch.closing || ch.closeBegun() {
			return false
		}
		ch.fail(e)
		return true
	}
	ch := c.openChannelByID(id)
	if ch == nil || !ch.markClosed() {
		return false
	}
	c.log.Warn("session: closing channel", "channel", id, "code", e.Code, "text", e.Text)
	// The reader keeps handling the client's other channels meanwhile, so
	// the requeue is queued before channel.close goes out: a client that
	// reacts to the close (a basic.get on another channel, say) reaches the
	// queue after its returned messages.
	if c.vh != nil {
		ch.closeDeliveries(context.Background())
	}
	ch.sendClose(e)
	return true
}

// openChannelByID finds an open channel through the tracker's registry,
// which other goroutines may read.
func (c *Conn) openChannelByID(id uint16) *Channel {
	t := c.tracker()
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.channels[id]; s != nil {
		return s.ch
	}
	return nil
}

// beginClose starts a server-side close: it queues channel.close for e as
// the channel's last frame and stops every other send on the channel. It
// reports false when the close had begun already (we sent channel.close,
// or accepted the client's), and then sends nothing.
func (ch *Channel) beginClose(e *amqp.Error) bool {
	if !ch.markClosed() {
		return false
	}
	ch.sendClose(e)
	return true
}

// markClosed stops every send on the channel but the close itself, and
// reports false when a close had begun already.
func (ch *Channel) markClosed() bool { return ch.closeGate(true) }

// sendClose queues channel.close for e; after markClosed it is the
// channel's last frame.
func (ch *Channel) sendClose(e *amqp.Error) {
	ch.conn.sendMethod(ch.id, &amqp.ChannelClose{
		ReplyCode: e.Code,
		ReplyText: e.Text,
		ClassId:   e.ClassID,
		MethodId:  e.MethodID,
	})
}

// acceptClientClose marks the close begun for the client's channel.close.
// It reports false when our own channel.close went out first: the two
// closes crossed.
func (ch *Channel) acceptClientClose() bool { return ch.closeGate(false) }

// closeGate closes the delivery gate once; byServer records that the
// close is ours. It reports false when a close had begun already.
func (ch *Channel) closeGate(byServer bool) bool {
	d := &ch.dl
	d.Lock()
	defer d.Unlock()
	d.gate.Lock()
	defer d.gate.Unlock()
	if d.closed {
		return false
	}
	d.closed = true
	d.gate.closed = true
	if byServer {
		d.serverClosed.Store(true)
	}
	return true
}

func (ch *Channel) closeBegun() bool {
	d := &ch.dl
	d.Lock()
	defer d.Unlock()
	return d.closed
}

// syncServerClose runs on the reader before each frame of the channel:
// when CloseChannel began a close from another goroutine, the channel
// enters the closing state the reader owns.
func (ch *Channel) syncServerClose() {
	if !ch.closing && ch.dl.serverClosed.Load() {
		ch.closing = true
		ch.dropAssembly()
	}
}

package session

import (
	"context"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/events"
	"github.com/warrenmq/broker/internal/queue"
)

// This file serves the broker's consumer timeout beyond the broker-wide
// value: a consumer's own x-consumer-timeout (a basic.consume argument,
// RabbitMQ 3.12 and later), and RabbitMQ 4.3's answer for quorum queues,
// which cancels the consumer instead of closing its channel. Both are
// called by the unacked scanner's goroutine, so they take the channel's
// delivery lock, as CloseChannel does (admin.go).

// consumerTimeoutArg reads x-consumer-timeout from basic.consume's
// arguments: milliseconds as an integer of any width. Any other value is
// ignored, as RabbitMQ ignores it (rabbitmq-server#9914).
func consumerTimeoutArg(args amqp.Table) time.Duration {
	n, ok := queue.IntArg(args["x-consumer-timeout"])
	if !ok || n <= 0 {
		return 0
	}
	return time.Duration(n) * time.Millisecond
}

// channelByID finds channel id for a caller on another goroutine, and a
// release func to call when done (a direct connection's Handle mutex
// plays the reader and is held until then).
func (c *Conn) channelByID(id uint16) (*Channel, func()) {
	if c.sink != nil {
		c.direct.mu.Lock()
		if ch := c.channels[id]; ch != nil && !ch.closing {
			return ch, c.direct.mu.Unlock
		}
		c.direct.mu.Unlock()
		return nil, func() {}
	}
	return c.openChannelByID(id), func() {}
}

// heldLocked finds the unacknowledged delivery of the message at offset
// of queue on the channel (the unacked index names deliveries so), and its
// tag. It walks the channel's deliveries: callers first check that the
// answer matters (timeoutConsumers).
func (d *deliveries) heldLocked(queueName string, offset uint64) (uint64, pending, bool) {
	for tag, p := range d.unacked.All() {
		if p.ref.Offset == offset && p.q.Def.Name == queueName {
			return tag, p, true
		}
	}
	return 0, pending{}, false
}

// ConsumerTimeout returns the x-consumer-timeout of the consumer on
// channel id that holds the message at offset of queue, and false when it
// has none (no such delivery, a basic.get, or no argument). Safe from any
// goroutine; it costs one atomic load while no consumer of the channel
// has the argument.
func (c *Conn) ConsumerTimeout(id uint16, queueName string, offset uint64) (time.Duration, bool) {
	ch, release := c.channelByID(id)
	defer release()
	if ch == nil || ch.timeoutConsumers.Load() == 0 {
		return 0, false
	}
	d := &ch.dl
	d.Lock()
	defer d.Unlock()
	_, p, ok := d.heldLocked(queueName, offset)
	if !ok || p.cons == nil || p.cons.timeout <= 0 {
		return 0, false
	}
	return p.cons.timeout, true
}

// CancelTimedOut ends the consumer on channel id that holds the message
// at offset of queue, after its consumer timeout, as RabbitMQ 4.3 quorum queues do for a
// client that announced consumer_cancel_notify: the client gets
// basic.cancel, and the consumer's unacknowledged deliveries go back to
// their queue as returned, not failed, deliveries (queue.Return). It
// reports false, doing nothing, when the client did not announce the
// capability or no consumer holds it (a basic.get's delivery): the caller
// closes the channel then. Safe from any goroutine.
func (c *Conn) CancelTimedOut(id uint16, queueName string, offset uint64) (consumerTag string, ok bool) {
	if !c.cancelNotify {
		return "", false
	}
	ch, release := c.channelByID(id)
	defer release()
	if ch == nil {
		return "", false
	}
	d := &ch.dl
	d.Lock()
	_, p, held := d.heldLocked(queueName, offset)
	if !held || p.cons == nil || p.cons.gone || d.closed {
		d.Unlock()
		return "", false
	}
	cons := p.cons
	cons.gone = true
	delete(d.consumers, cons.qc.Tag)
	var tags []uint64
	for t, p := range d.unacked.All() {
		if p.cons == cons {
			tags = append(tags, t)
		}
	}
	back := make([]pending, 0, len(tags))
	for _, t := range tags {
		p, _ := d.unacked.Take(t)
		back = append(back, p)
	}
	d.Unlock()
	ctx := context.Background()
	ch.emitConsumer(events.ConsumerDeleted, cons.qc.Tag, cons.q.Def.Name, events.ReasonCancel)
	left, err := cons.q.Cancel(ctx, cons.qc.Owner, cons.qc.Tag)
	if err == nil {
		ch.conn.vh.ConsumerGone(ctx, cons.q, left)
	}
	// The returns are queued before basic.cancel goes out, so a client
	// that reacts to the cancel (a basic.get) finds the messages back.
	ch.apply(back, queue.Return)
	d.Lock()
	ch.sendLocked(&amqp.BasicCancel{ConsumerTag: cons.qc.Tag, NoWait: true})
	d.Unlock()
	return cons.qc.Tag, true
}

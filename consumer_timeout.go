package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/unacked"
)

// consumerTimeout is the consumer timeout of delivery e (0: none), with
// RabbitMQ's precedence (3.12 and later): the consumer's x-consumer-timeout
// argument, else the lesser of its queue's x-consumer-timeout argument and
// its policy's consumer-timeout, else Options.ConsumerTimeout (or
// SetConsumerTimeout's). Under the 4.3 profile classic queues have none:
// RabbitMQ 4.3 moved the timeout into the queue types and classic queues
// do not implement it. The scanner calls it for every unacknowledged
// delivery of a pass (scan.mu held).
func (b *Broker) consumerTimeout(e unacked.Entry) time.Duration {
	global := max(b.scan.Timeout(), 0)
	if e.Broker != b.nodeID || e.Incarnation != b.incarnation {
		return global // another broker's: deliveryTimedOut leaves it alone
	}
	vh, ok := b.lookupVHost(e.VHost)
	if !ok {
		return global
	}
	q, err := vh.Queue(e.Connection, e.Queue)
	if err != nil {
		return global
	}
	if q.Args["x-queue-type"] != "quorum" && !b.opts.profile().ClassicConsumerTimeout {
		return 0
	}
	if c := b.scan.Conn(e.Connection); c != nil {
		if t, ok := c.ConsumerTimeout(e.Channel, e.Queue, e.Offset); ok {
			return t
		}
	}
	// The lesser of the queue's argument and its policy's consumer-timeout
	// (RabbitMQ's res_min for the key).
	ms := int64(-1)
	if n, ok := queue.IntArg(q.Args["x-consumer-timeout"]); ok && n > 0 {
		ms = n
	}
	if n, ok := q.Policy().ConsumerTimeout(); ok && n > 0 && (ms < 0 || n < ms) {
		ms = n
	}
	if ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return global
}

// deliveryTimedOut ends the consumer of e, which outlived its consumer
// timeout. Under the 4.3 profile a quorum queue's consumer is cancelled
// with basic.cancel when its client announced consumer_cancel_notify, and
// its deliveries return to the queue; otherwise the channel is closed
// with 406 PRECONDITION_FAILED in RabbitMQ's words, which requeues what
// it held. The entry is read again first: the scan saw a snapshot, and a
// delivery settled since must not cost its channel.
func (b *Broker) deliveryTimedOut(ctx context.Context, x unacked.Index, e unacked.Entry) {
	if e.Broker != b.nodeID || e.Incarnation != b.incarnation {
		// Another broker's (shared mode): connection ids are unique per
		// broker only, so the connection named is not one of ours.
		return
	}
	cur, err := x.Get(ctx, e.Key)
	if err != nil || cur.State != unacked.Delivered || cur.Connection != e.Connection ||
		cur.Channel != e.Channel || cur.DeliveredAt != e.DeliveredAt {
		return
	}
	c := b.scan.Conn(e.Connection)
	if c == nil {
		return // gone: the next pass requeues it as orphaned
	}
	timeout := b.consumerTimeout(e)
	if b.opts.profile().QuorumConsumerTimeoutCancel && b.isQuorum(e) {
		if tag, ok := c.CancelTimedOut(e.Channel, e.Queue, e.Offset); ok {
			b.log.Warn("broker: consumer timeout, consumer cancelled", "conn", e.Connection, "channel", e.Channel, "consumer", tag, "queue", e.Queue, "timeout", timeout)
			return
		}
	}
	if c.CloseChannel(e.Channel, amqp.PreconditionFailed, consumerTimeoutText(e.Channel, timeout)) {
		b.log.Warn("broker: consumer timeout", "conn", e.Connection, "channel", e.Channel, "queue", e.Queue, "timeout", timeout)
	}
}

// isQuorum reports whether e's queue is a quorum queue.
func (b *Broker) isQuorum(e unacked.Entry) bool {
	vh, ok := b.lookupVHost(e.VHost)
	if !ok {
		return false
	}
	q, err := vh.Queue(e.Connection, e.Queue)
	return err == nil && q.Args["x-queue-type"] == "quorum"
}

// forceConsumerTimeout closes channel ch of the connection with the given
// id (ConnectionInfo.ID) now, exactly as the consumer timeout does when a
// delivery outlives Options.ConsumerTimeout: channel.close 406
// PRECONDITION_FAILED with RabbitMQ's text, and every delivery the channel
// held goes back to its queue (redelivered). Tests reach it through
// brokertest's Lab (testhook.ForceConsumerTimeout) to see a consumer
// survive the timeout without waiting for it. It returns ErrNotFound
// (wrapped) when no such connection or open channel exists.
func (b *Broker) forceConsumerTimeout(id string, ch uint16) error {
	for _, c := range b.sortedConns() {
		if c.ID() != id {
			continue
		}
		if !c.CloseChannel(ch, amqp.PreconditionFailed, consumerTimeoutText(ch, b.scan.Timeout())) {
			return fmt.Errorf("%w: channel %d of connection %q", ErrNotFound, ch, id)
		}
		return nil
	}
	return fmt.Errorf("%w: connection %q", ErrNotFound, id)
}

// consumerTimeoutText is the channel.close text of a consumer timeout, in
// RabbitMQ's words (rabbit_channel:handle_consumer_timed_out, 3.8.17 to
// 4.x), which clients' error handlers match whole.
func consumerTimeoutText(ch uint16, timeout time.Duration) string {
	return fmt.Sprintf("delivery acknowledgement on channel %d timed out. Timeout value used: %d ms. "+
		"This timeout value can be configured, see consumers doc guide to learn more", ch, timeout.Milliseconds())
}

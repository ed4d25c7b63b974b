package scan

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/internal/vhost"
	"github.com/warrenmq/broker/unacked"
)

// Timeouts decides each delivery's consumer timeout and ends a consumer
// that outlived it: Config.TimeoutFor and Config.TimedOut of a broker's
// scanner. Set Scanner to the scanner before it starts.
type Timeouts struct {
	Scanner *Scanner
	// Node and Incarnation name this run of this broker: only its own
	// deliveries are judged.
	Node        string
	Incarnation uint64
	// VHost finds an open vhost.
	VHost func(name string) (*vhost.VHost, bool)
	// ClassicTimeout: classic queues have a consumer timeout (not under
	// RabbitMQ 4.3's profile); QuorumCancel: a quorum queue's timed-out
	// consumer is cancelled rather than its channel closed (4.3).
	ClassicTimeout, QuorumCancel bool
	Log                          *slog.Logger
}

// For is the consumer timeout of delivery e (0: none), with
// RabbitMQ's precedence (3.12 and later): the consumer's x-consumer-timeout
// argument, else the lesser of its queue's x-consumer-timeout argument and
// its policy's consumer-timeout, else the scanner's broker-wide one
// (Options.ConsumerTimeout, or SetConsumerTimeout's). Under the 4.3 profile classic queues have none:
// RabbitMQ 4.3 moved the timeout into the queue types and classic queues
// do not implement it. The scanner calls it for every unacknowledged
// delivery of a pass (s.mu held).
func (t *Timeouts) For(e unacked.Entry) time.Duration {
	global := max(t.Scanner.Timeout(), 0)
	if e.Broker != t.Node || e.Incarnation != t.Incarnation {
		return global // another broker's: TimedOut leaves it alone
	}
	vh, ok := t.VHost(e.VHost)
	if !ok {
		return global
	}
	q, err := vh.Queue(e.Connection, e.Queue)
	if err != nil {
		return global
	}
	if q.Args["x-queue-type"] != "quorum" && !t.ClassicTimeout {
		return 0
	}
	if c := t.Scanner.Conn(e.Connection); c != nil {
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

// TimedOut ends the consumer of e, which outlived its consumer
// timeout. Under the 4.3 profile a quorum queue's consumer is cancelled
// with basic.cancel when its client announced consumer_cancel_notify, and
// its deliveries return to the queue; otherwise the channel is closed
// with 406 PRECONDITION_FAILED in RabbitMQ's words, which requeues what
// it held. The entry is read again first: the scan saw a snapshot, and a
// delivery settled since must not cost its channel.
func (t *Timeouts) TimedOut(ctx context.Context, x unacked.Index, e unacked.Entry) {
	if e.Broker != t.Node || e.Incarnation != t.Incarnation {
		// Another broker's (shared mode): connection ids are unique per
		// broker only, so the connection named is not one of ours.
		return
	}
	cur, err := x.Get(ctx, e.Key)
	if err != nil || cur.State != unacked.Delivered || cur.Connection != e.Connection ||
		cur.Channel != e.Channel || cur.DeliveredAt != e.DeliveredAt {
		return
	}
	c := t.Scanner.Conn(e.Connection)
	if c == nil {
		return // gone: the next pass requeues it as orphaned
	}
	timeout := t.For(e)
	if t.QuorumCancel && t.isQuorum(e) {
		if tag, ok := c.CancelTimedOut(e.Channel, e.Queue, e.Offset); ok {
			t.Log.Warn("broker: consumer timeout, consumer cancelled", "conn", e.Connection, "channel", e.Channel, "consumer", tag, "queue", e.Queue, "timeout", timeout)
			return
		}
	}
	if c.CloseChannel(e.Channel, amqp.PreconditionFailed, TimeoutText(e.Channel, timeout)) {
		t.Log.Warn("broker: consumer timeout", "conn", e.Connection, "channel", e.Channel, "queue", e.Queue, "timeout", timeout)
	}
}

// isQuorum reports whether e's queue is a quorum queue.
func (t *Timeouts) isQuorum(e unacked.Entry) bool {
	vh, ok := t.VHost(e.VHost)
	if !ok {
		return false
	}
	q, err := vh.Queue(e.Connection, e.Queue)
	return err == nil && q.Args["x-queue-type"] == "quorum"
}

// TimeoutText is the channel.close text of a consumer timeout, in
// RabbitMQ's words (rabbit_channel:handle_consumer_timed_out, 3.8.17 to
// 4.x), which clients' error handlers match whole.
func TimeoutText(ch uint16, timeout time.Duration) string {
	return fmt.Sprintf("delivery acknowledgement on channel %d timed out. Timeout value used: %d ms. "+
		"This timeout value can be configured, see consumers doc guide to learn more", ch, timeout.Milliseconds())
}

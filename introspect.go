package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/amqpconv"
	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/internal/session"
	"github.com/warrenmq/broker/internal/snapshot"
	"github.com/warrenmq/broker/internal/vhost"
)

// ErrNotFound is returned (wrapped) by the introspection calls when the
// named vhost, queue or connection does not exist. Check it with errors.Is.
var ErrNotFound = errors.New("broker: not found")

// MessageCounters count message events since the broker started, the
// totals RabbitMQ reports as message_stats (and Prometheus as *_total).
// They only grow.
type MessageCounters struct {
	// Published counts basic.publish received; ReturnedUnroutable and
	// DroppedUnroutable the ones no queue took (returned to a mandatory
	// publisher, or dropped). Confirmed counts publishes answered to
	// confirm-mode publishers.
	Published, ReturnedUnroutable, DroppedUnroutable, Confirmed uint64
	// Enqueued counts messages queues took: a publish routed to three
	// queues counts three.
	Enqueued uint64
	// Delivered counts deliveries to consumers (DeliveredNoAck those of
	// no-ack consumers), Got basic.get answers (GotNoAck with no-ack), and
	// Redelivered the deliveries and gets among those with
	// redelivered=true. Acked counts acknowledged deliveries.
	Delivered, DeliveredNoAck, Got, GotNoAck, Redelivered, Acked uint64
	// DeadLettered counts messages that died (expired, rejected, over a
	// length or delivery limit) in a queue with a dead-letter exchange.
	DeadLettered uint64
}

// messageCountersOf converts a queue's counters to the public type.
func messageCountersOf(c queue.CounterValues) MessageCounters {
	return MessageCounters{
		Enqueued: c.Publish, Delivered: c.Deliver, DeliveredNoAck: c.DeliverNoAck,
		Got: c.Get, GotNoAck: c.GetNoAck, Redelivered: c.Redeliver, Acked: c.Ack,
		DeadLettered: c.DeadLettered,
	}
}

// QueueStats describe one queue.
type QueueStats struct {
	VHost, Name                    string
	Durable, Exclusive, AutoDelete bool
	// Owner is the connection that owns an exclusive queue.
	Owner     string
	Arguments amqp091.Table
	Ready     uint64 // messages waiting for delivery
	Unacked   uint64 // delivered, not yet settled
	Consumers int
	// Memory estimates what the queue holds in memory (messages cached
	// ahead of the cursor, requeued and outstanding ones), in bytes.
	Memory uint64
	// Counters count the queue's message events since it was declared (or
	// since the broker started, for a queue recovered from disk). Published,
	// Confirmed and the unroutable counts are broker-wide and zero here.
	Counters MessageCounters
	// Stream describes a stream's log and its consumers' offsets; nil for
	// other queues.
	Stream *StreamStats
}

// Stats is a snapshot of the broker.
type Stats struct {
	Connections int // open connections, handshake or not
	Channels    int
	Consumers   int
	Exchanges   int // exchanges, the default and predeclared ones included (as RabbitMQ counts)
	Queues      int
	// Ready and Unacked add up every queue's counts.
	Ready, Unacked uint64
	// Totals count message events since the broker started, deleted
	// queues' included.
	Totals MessageCounters
	// ConnectionsOpened/Closed and ChannelsOpened/Closed count since start.
	ConnectionsOpened, ConnectionsClosed uint64
	ChannelsOpened, ChannelsClosed       uint64
	// QueueDetails describes every queue, sorted by vhost and name.
	QueueDetails []QueueStats
}

// Stats returns a snapshot of the broker: connection, channel and queue
// counts, message counters and every queue's state. Each queue's numbers
// are exact at the moment its actor answered; the snapshot as a whole is
// not one instant while clients are active (call WaitIdle first for that).
// It asks every queue's actor, so it starts the goroutine of every idle
// one (about 5 µs each): the management API and the Prometheus metrics
// read the sampled counts instead (docs/management.md). A queue whose
// actor has not answered when ctx ends is left out, as a deleted one is.
func (b *Broker) Stats(ctx context.Context) Stats { return b.stats(ctx, exactDetails) }

// statsDetail says what stats tells of each queue and how it learns it.
type statsDetail int

const (
	// noDetails sums each queue's counts as its last step left them
	// (queue.Counts) and leaves QueueDetails empty.
	noDetails statsDetail = iota
	// sampledDetails fills QueueDetails from what each queue published
	// (snapshot.SampledUsage): no idle queue's actor is started.
	sampledDetails
	// exactDetails asks every queue's actor (Stats).
	exactDetails
)

// stats is Stats, with each queue's details as d says. Actors asked
// answer within ctx: a queue that does not answer before ctx ends is left
// out, as a deleted one is. With noDetails or sampledDetails no idle
// queue's actor starts, so the overview or a metrics scrape of 100,000
// idle queues starts none.
func (b *Broker) stats(ctx context.Context, d statsDetail) Stats {
	var s Stats
	for _, c := range b.sortedConns() {
		s.Connections++
		for _, ch := range c.Channels() {
			s.Channels++
			s.Consumers += len(ch.Consumers)
		}
	}
	for _, vh := range b.sortedVHosts() {
		s.Exchanges += len(vh.Exchanges())
		if d == noDetails {
			for _, q := range vh.Queues() {
				c := q.Counts()
				s.Queues++
				s.Ready += c.Ready
				s.Unacked += c.Unacked
			}
			continue
		}
		for _, q := range vh.SortedQueues() {
			qs, ok := queueStatsOf(ctx, q, d == exactDetails)
			if !ok {
				continue // deleted meanwhile
			}
			s.Queues++
			s.Ready += qs.Ready
			s.Unacked += qs.Unacked
			s.QueueDetails = append(s.QueueDetails, qs)
		}
	}
	s.Totals = b.totals()
	sc := &b.counters.session
	s.ConnectionsOpened, s.ConnectionsClosed = sc.ConnectionsOpened.Load(), sc.ConnectionsClosed.Load()
	s.ChannelsOpened, s.ChannelsClosed = sc.ChannelsOpened.Load(), sc.ChannelsClosed.Load()
	return s
}

// totals reads the broker-wide counters.
func (b *Broker) totals() MessageCounters {
	t := messageCountersOf(b.counters.queues.Load())
	sc := &b.counters.session
	t.Published = sc.Publish.Load()
	t.ReturnedUnroutable = sc.ReturnUnroutable.Load()
	t.DroppedUnroutable = sc.DropUnroutable.Load()
	t.Confirmed = sc.Confirm.Load()
	return t
}

// queueStatsOf describes q, asking its actor when exact is set and
// otherwise reading what it published (snapshot.SampledUsage); false when q is
// gone or did not answer.
func queueStatsOf(ctx context.Context, q *vhost.Queue, exact bool) (QueueStats, bool) {
	u, ok := snapshot.Usage(ctx, q, exact)
	if !ok {
		return QueueStats{}, false
	}
	return QueueStats{
		VHost: q.Def.VHost, Name: q.Def.Name,
		Durable: q.Def.Durable, Exclusive: q.Def.Exclusive, AutoDelete: q.Def.AutoDelete,
		Owner:     q.Def.Owner,
		Arguments: amqpconv.FromTable(q.Args),
		Ready:     u.Ready, Unacked: u.Unacked, Consumers: u.Consumers,
		Memory:   u.Memory,
		Counters: messageCountersOf(q.Counters()),
		Stream:   streamStatsOf(ctx, q),
	}, true
}

// sortedConns returns the open connections, sorted by id.
func (b *Broker) sortedConns() []*session.Conn { return b.conns.Sorted() }

// sortedVHosts returns the vhosts, sorted by name.
func (b *Broker) sortedVHosts() []*vhost.VHost {
	return b.vhosts.List()
}

// findQueue finds a queue for PeekQueue and Unacked, whoever owns it.
func (b *Broker) findQueue(vhostName, name string) (*vhost.VHost, *vhost.Queue, error) {
	vh, ok := b.lookupVHost(vhostName)
	if !ok {
		return nil, nil, fmt.Errorf("%w: vhost %q", ErrNotFound, vhostName)
	}
	q, ok := vh.LookupQueue(name)
	if !ok {
		return nil, nil, fmt.Errorf("%w: queue %q in vhost %q", ErrNotFound, name, vh.Name())
	}
	return vh, q, nil
}

// QueuedMessage is a ready message as PeekQueue shows it.
type QueuedMessage struct {
	Exchange, RoutingKey string
	// Redelivered is what the message's next delivery will say, and
	// DeliveryCount how often it was delivered before (requeued messages
	// keep their count).
	Redelivered   bool
	DeliveryCount uint32
	// Publishing holds the properties and body as published. Properties a
	// publisher did not set are zero.
	Publishing amqp091.Publishing
}

// PeekQueue returns up to n ready messages of a queue in the order they
// will be delivered, without consuming them: nothing is delivered,
// counted, or marked redelivered. Messages out for delivery (unacked) are
// not ready and are not shown; see Unacked. vhost "" is the default vhost.
//
// PeekQueue honours ctx like WaitIdle: an ended ctx returns its error
// (wrapped; check it with errors.Is) instead of waiting on a busy queue,
// and it bounds the queue's reads from its store.
func (b *Broker) PeekQueue(ctx context.Context, vhostName, name string, n int) ([]QueuedMessage, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("broker: peek %q: %w", name, err)
	}
	_, q, err := b.findQueue(vhostName, name)
	if err != nil {
		return nil, err
	}
	msgs, err := snapshot.Peek(ctx, q, n)
	if err != nil {
		return nil, err
	}
	out := make([]QueuedMessage, len(msgs))
	for i, m := range msgs {
		out[i] = QueuedMessage(m)
	}
	return out, nil
}

// UnackedDelivery is one delivery a client holds without having settled
// it, and the message it holds.
type UnackedDelivery struct {
	// Connection is the holder's connection id (as in Connections and
	// CloseConnection), Channel its channel number, DeliveryTag the tag the
	// client got and ConsumerTag the consumer ("" for basic.get).
	Connection  string
	Channel     uint16
	DeliveryTag uint64
	ConsumerTag string
	// DeliveryCount counts deliveries of the message, this one included
	// (1 on a first delivery). Redelivered is the flag this delivery
	// carried: the message was delivered before (requeued by a nack, a
	// reject, a recover or its holder's close).
	DeliveryCount uint32
	Redelivered   bool
	// DeliveredAt is when the queue handed this delivery out (the broker's
	// Options.Clock); time.Since(DeliveredAt) is how long it has been
	// held. It is zero when the queue's unacked index has no entry for it.
	DeliveredAt          time.Time
	Exchange, RoutingKey string
	// MessageID is the message's message-id property ("" when the
	// publisher set none), the same as Publishing.MessageId.
	MessageID string
	// Publishing holds the message's properties as published, decoded as
	// PeekQueue's are. Its Body is filled only by UnackedWithBodies; for
	// Unacked it is nil and BodySize tells its length.
	Publishing amqp091.Publishing
	BodySize   int
}

// Unacked lists a queue's deliveries that wait for an ack, nack or
// reject, sorted by connection, channel and delivery tag, with each
// message's id and properties but not its body (see UnackedWithBodies).
// A delivery being handed out while Unacked runs may be missing: call
// WaitIdle first for an exact list. vhost "" is the default vhost.
//
// Unacked honours ctx like WaitIdle: an ended ctx returns its error
// (wrapped; check it with errors.Is) instead of waiting on a busy queue.
func (b *Broker) Unacked(ctx context.Context, vhostName, queueName string) ([]UnackedDelivery, error) {
	return b.listUnacked(ctx, vhostName, queueName, false)
}

// UnackedWithBodies is Unacked with each message's body in
// Publishing.Body (a copy the caller owns). Bodies can be large: Unacked
// is the cheaper call when the properties say enough.
func (b *Broker) UnackedWithBodies(ctx context.Context, vhostName, queueName string) ([]UnackedDelivery, error) {
	return b.listUnacked(ctx, vhostName, queueName, true)
}

// listUnacked is Unacked and UnackedWithBodies (snapshot.Unacked).
func (b *Broker) listUnacked(ctx context.Context, vhostName, queueName string, bodies bool) ([]UnackedDelivery, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("broker: unacked %q: %w", queueName, err)
	}
	_, q, err := b.findQueue(vhostName, queueName)
	if err != nil {
		return nil, err
	}
	ds, err := snapshot.Unacked(ctx, q, b.sortedConns(), bodies)
	if err != nil {
		return nil, err
	}
	var out []UnackedDelivery
	for _, d := range ds {
		out = append(out, UnackedDelivery(d))
	}
	return out, nil
}

// ConnectionInfo describes an open connection.
type ConnectionInfo struct {
	// ID names the connection in logs, Unacked and CloseConnection:
	// "peer -> local#n" for sockets, "pipe#n" for Dial, "direct#n" for a
	// direct Channel.
	ID string
	// Direct: an in-process Channel (RabbitMQ's type "direct"), without a
	// socket, so without byte counts.
	Direct bool
	// State is "starting", "tuning", "opening", "running", "blocking" (an
	// alarm is on; the connection has not published since), "blocked" (an
	// alarm holds its reader) or "closing", as RabbitMQ names them.
	State string
	// User and VHost are set once the handshake finished.
	User, VHost      string
	ClientProperties amqp091.Table
	Channels         int
	ConnectedAt      time.Time
	// RecvOct and SendOct count the bytes read and written.
	RecvOct, SendOct uint64
}

// Connections lists the open connections, sorted by id.
func (b *Broker) Connections() []ConnectionInfo {
	cs := b.sortedConns()
	out := make([]ConnectionInfo, len(cs))
	for i, c := range cs {
		in := c.Info()
		out[i] = ConnectionInfo{
			ID: in.ID, Direct: in.Direct, State: in.State, User: in.User, VHost: in.VHost,
			ClientProperties: amqpconv.FromTable(in.ClientProperties),
			Channels:         in.Channels, ConnectedAt: in.ConnectedAt,
			RecvOct: in.RecvOct, SendOct: in.SendOct,
		}
	}
	return out
}

// CloseConnection closes the connection with the given id the way the
// server closes one: connection.close with code and text (RabbitMQ uses
// 320 CONNECTION_FORCED for an operator's close), then the socket once
// the client answers or the close timeout passes. It returns at once; the
// client sees the close asynchronously. code must be one of the
// connection-level reply codes (320, 402, 501-506, 530, 540, 541).
func (b *Broker) CloseConnection(id string, code uint16, text string) error {
	if !isConnectionCode(code) {
		return fmt.Errorf("broker: close connection: %d is not a connection-level reply code", code)
	}
	for _, c := range b.sortedConns() {
		if c.ID() == id {
			c.Shutdown(code, text)
			return nil
		}
	}
	return fmt.Errorf("%w: connection %q", ErrNotFound, id)
}

// isConnectionCode reports whether code closes a connection (AMQP 0-9-1's
// hard errors, plus 320 CONNECTION_FORCED).
func isConnectionCode(code uint16) bool {
	switch code {
	case amqp.ConnectionForced, amqp.InvalidPath, amqp.FrameError, amqp.SyntaxError,
		amqp.CommandInvalid, amqp.ChannelError, amqp.UnexpectedFrame, amqp.ResourceError,
		amqp.NotAllowed, amqp.NotImplemented, amqp.InternalError:
		return true
	}
	return false
}

// WaitIdle blocks until the broker has no work in hand, or ctx ends (it
// then returns ctx's error). "No work in hand" holds when WaitIdle sees,
// twice in a row with no byte moving on any connection in between:
//
//   - every connection's reader waiting for input, having handled every
//     frame it read; on a Dial connection also every byte the client had
//     written (so a client call that returned before WaitIdle, such as a
//     publish without confirm, is covered). On a TCP connection, bytes
//     still in the network are the client's, not the broker's: wait for a
//     reply (a confirm, declare-ok) to cover those;
//   - every connection's writer done writing what was queued (deliveries,
//     confirms, replies): the client has the bytes;
//   - every queue actor with an empty mailbox and inbox, every publish
//     stored and confirmed, and every ready message delivered that its
//     consumers' prefetch allows. A queue waiting to retry after a store
//     error is not idle;
//   - no queue's head message due to expire by the broker's clock (its
//     TTL reached; a TTL of 0 once the step that stored it is over),
//     every expired one dead-lettered or dropped, and the TTL timer of
//     the next one armed, so a fake clock advanced after WaitIdle fires it
//     on time;
//   - no message being dead-lettered (expired, rejected, over a length
//     or delivery limit) whose copy a target has yet to store;
//   - every message an x-delayed-message exchange accepted stored by the
//     delayed service (DelayedCount counts it), and every held message
//     due by the broker's clock routed, stored by its queues and deleted
//     from DelayedCount.
//
// A deduplicating exchange's routing is covered by the queues' check.
// Only the head of a queue is checked for expiry, as RabbitMQ's classic
// queues do: a message behind one with a longer TTL waits for it.
//
// What the client does with what it received (an ack it has not sent yet)
// is the client's work. WaitIdle polls internally with a short backoff;
// the point is that tests need not: publish, WaitIdle, then look with
// Stats, PeekQueue or Unacked instead of sleeping.
func (b *Broker) WaitIdle(ctx context.Context) error {
	return snapshot.Idler{Conns: b.sortedConns, VHosts: b.sortedVHosts, Busy: func() bool {
		d := b.plugins.delayed
		return d != nil && !d.Idle()
	}}.WaitIdle(ctx)
}

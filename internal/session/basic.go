package session

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/events"
	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/internal/vhost"
	"github.com/warrenmq/broker/unacked"
)

// deliveries is the part of a channel that queue actors touch: delivery
// tags, the unacked table, consumers and the channel-wide prefetch. Actors
// deliver from their own goroutines, so it has its own lock; the lock is
// never held while waiting on a queue actor.
type deliveries struct {
	sync.Mutex
	// closed: the channel's close has begun (we sent channel.close, or took
	// the client's). From then on nothing but the close handshake goes out
	// on the channel: no delivery, confirm or reply. amqp091-go, for one,
	// closes the whole connection over a method on a channel it closed.
	// It is set together with gate.closed, under both locks.
	closed bool
	// gate orders the channel's other sends (replies, confirms) with its
	// close. It is a lock of its own because confirms are sent from queue
	// actors while consume holds the delivery lock across a call into a
	// queue; lock order: delivery lock, then gate.
	gate struct {
		sync.Mutex
		closed bool
	}
	// serverClosed: beginClose sent channel.close. An atomic, so the reader
	// checks it on every frame without a lock (syncServerClose).
	serverClosed atomic.Bool
	// released: consumers were cancelled and unacked deliveries requeued
	// (closeDeliveries ran).
	released  bool
	nextTag   uint64
	unacked   unacked.Table[pending]
	consumers map[string]*consumer
	// reply is the channel's direct reply-to consumer (replyto.go).
	reply   *replyConsumer
	deliver amqp.BasicDeliver // scratch, so a delivery allocates nothing here
	getOk   *amqp.BasicGetOk  // the same for basic.get, allocated by the first
}

// pending is one unacked delivery: which queue, which delivery, and the
// consumer whose prefetch it counts against (nil for basic.get).
type pending struct {
	q    *vhost.Queue
	ref  queue.Ref
	cons *consumer
}

// consumer is one basic.consume on a channel; it is the queue's Receiver.
type consumer struct {
	ch     *Channel
	q      *vhost.Queue
	qc     queue.Consumer
	credit queue.Credit
	// gone: removed from the channel's consumers (cancelled, channel
	// closing). Under the delivery lock; Deliver checks it instead of
	// looking the tag up, which a reused tag would fool anyway.
	gone bool
	// started: consume-ok is out. Until then Deliver holds messages in
	// early (under the delivery lock), because consume-ok must precede the
	// first delivery but consume cannot hold the delivery lock while it
	// waits for the queue: the queue may be delivering to this channel.
	started bool
	early   []queue.Message
	// waitingRoom: HasRoom found the connection's outbox full and left
	// roomNotify with the writer, which kicks the queue once it drained.
	waitingRoom atomic.Bool
	roomNotify  func()
	// timeout is the consumer's x-consumer-timeout (timeout.go); 0: the
	// queue's or the broker's applies.
	timeout time.Duration
	// batch counts the deliveries since the queue's last Flush; only the
	// queue's goroutine touches it (Deliver, Flush).
	batch int
}

// HasRoom implements queue.Roomer: a consumer takes deliveries only while
// its connection's outbox is under its bound, so a client that stops
// reading costs the broker a bounded buffer, not every message of the
// queue. Runs on the queue's goroutine.
func (c *consumer) HasRoom(*queue.Consumer) bool {
	if c.ch.conn.cfg.Drain.On() {
		return false // no new deliveries while draining (drain.go)
	}
	if c.waitingRoom.Load() {
		return c.ch.conn.hasRoom(nil) // the writer already holds roomNotify
	}
	c.waitingRoom.Store(true)
	if c.ch.conn.hasRoom(c.roomNotify) {
		c.waitingRoom.Store(false)
		return true
	}
	return false
}

// Deliver runs on the queue's goroutine: it numbers the delivery, records
// it as unacked and queues the frames, all under the channel's delivery
// lock so tags go out in order.
func (c *consumer) Deliver(qc *queue.Consumer, m queue.Message) bool {
	ch := c.ch
	d := &ch.dl
	d.Lock()
	defer d.Unlock()
	if d.closed {
		return false
	}
	if c.gone {
		return false // cancelled meanwhile
	}
	if !c.started {
		c.early = append(c.early, m)
		return true
	}
	c.deliverLocked(m)
	c.batch++
	return true
}

// Flush implements queue.Flusher: the queue's batch of deliveries to c is
// queued, so the writer is woken once for all of it; a batch of one
// delivery, a queue at a low rate, the queue's goroutine writes itself
// when it can without waiting (flushQueued).
func (c *consumer) Flush() {
	one := c.batch == 1
	c.batch = 0
	if one {
		c.ch.conn.flushQueued()
		return
	}
	c.ch.conn.poke()
}

// deliverLocked numbers one delivery, records it as unacked and queues its
// frames without waking the writer: the queue calls Flush after its batch,
// and the early deliveries of handleConsume are flushed by it. The caller
// holds the delivery lock.
func (c *consumer) deliverLocked(m queue.Message) {
	ch, d, qc := c.ch, &c.ch.dl, &c.qc
	d.nextTag++
	tag := d.nextTag
	if !qc.NoAck {
		_ = d.unacked.Add(tag, pending{q: c.q, ref: m.Ref, cons: c})
	}
	d.deliver = amqp.BasicDeliver{
		ConsumerTag: qc.Tag,
		DeliveryTag: tag,
		Redelivered: m.Redelivered,
		Exchange:    m.Exchange,
		RoutingKey:  m.RoutingKey,
	}
	ch.conn.queueContent(ch.id, &d.deliver, m.Properties, m.Body)
}

// Cancelled runs on the queue's goroutine when the queue was deleted: the
// consumer is gone, and a client that asked for consumer_cancel_notify is
// told with a server-sent basic.cancel.
func (c *consumer) Cancelled(qc *queue.Consumer) {
	ch := c.ch
	d := &ch.dl
	d.Lock()
	defer d.Unlock()
	if c.gone {
		return
	}
	c.gone = true
	delete(d.consumers, qc.Tag)
	ch.emitConsumer(events.ConsumerDeleted, qc.Tag, c.q.Def.Name, events.ReasonQueueDeleted)
	if ch.conn.cancelNotify {
		ch.sendLocked(&amqp.BasicCancel{ConsumerTag: qc.Tag, NoWait: true})
	}
}

// sendLocked is send for a caller that holds the delivery lock: closed
// already tells, the gate is not needed.
func (ch *Channel) sendLocked(m amqp.Method) {
	if !ch.dl.closed {
		ch.conn.sendMethod(ch.id, m)
	}
}

// handleBasic implements the basic class but basic.publish (handlePublish).
func (ch *Channel) handleBasic(ctx context.Context, m amqp.Method) error {
	switch m := m.(type) {
	case *amqp.BasicQos:
		return ch.qos(m)
	case *amqp.BasicConsume:
		return ch.consume(ctx, m)
	case *amqp.BasicCancel:
		ch.cancel(ctx, m.ConsumerTag)
		if !m.NoWait {
			ch.send(&amqp.BasicCancelOk{ConsumerTag: m.ConsumerTag})
		}
		return nil
	case *amqp.BasicGet:
		return ch.get(ctx, m)
	case *amqp.BasicAck:
		return ch.settle(m.DeliveryTag, m.Multiple, queue.Ack)
	case *amqp.BasicReject:
		mode := queue.Reject
		if m.Requeue {
			mode = queue.Requeue
		}
		return ch.settle(m.DeliveryTag, false, mode)
	case *amqp.BasicNack:
		mode := queue.Reject
		if m.Requeue {
			// A return, not a failed delivery: RabbitMQ 4.3 quorum
			// queues do not count it (queue.Return).
			mode = queue.Return
		}
		return ch.settle(m.DeliveryTag, m.Multiple, mode)
	case *amqp.BasicRecover:
		if !m.Requeue {
			// RabbitMQ does not implement redelivery to the same consumer.
			return amqp.NewError(amqp.NotImplemented, m.ClassID(), m.MethodID(), "requeue=false")
		}
		ch.requeueAll()
		ch.send(&amqp.BasicRecoverOk{})
		return nil
	case *amqp.BasicRecoverAsync:
		if !m.Requeue {
			return amqp.NewError(amqp.NotImplemented, m.ClassID(), m.MethodID(), "requeue=false")
		}
		ch.requeueAll()
		return nil
	}
	return serverOnly(m)
}

func (ch *Channel) qos(m *amqp.BasicQos) error {
	if m.PrefetchSize != 0 {
		return amqp.NewError(amqp.NotImplemented, m.ClassID(), m.MethodID(), "prefetch_size!=0 (%d)", m.PrefetchSize)
	}
	// RabbitMQ's reading of global: false limits each consumer created
	// afterwards, true limits the channel as a whole. From 4.3 global QoS
	// is a deprecated feature denied by default: the request is answered
	// qos-ok and applies per consumer.
	if m.Global && !ch.conn.set.profile.GlobalQoSPerConsumer {
		ch.credit.SetLimit(m.PrefetchCount)
		ch.kickConsumers()
	} else {
		ch.prefetch = m.PrefetchCount
	}
	ch.send(&amqp.BasicQosOk{})
	return nil
}

// kickConsumers wakes the queues of every consumer on the channel, after
// credit was freed or a limit raised.
func (ch *Channel) kickConsumers() {
	d := &ch.dl
	d.Lock()
	qs := make([]*vhost.Queue, 0, len(d.consumers))
	for _, c := range d.consumers {
		qs = append(qs, c.q)
	}
	d.Unlock()
	for _, q := range qs {
		q.Kick()
	}
}

// consumerPriority reads x-priority from basic.consume's arguments: an
// integer of any width (RabbitMQ refuses other types with 406).
func consumerPriority(m *amqp.BasicConsume) (int32, error) {
	v, ok := m.Arguments["x-priority"]
	if !ok {
		return 0, nil
	}
	n, ok := queue.IntArg(v)
	if !ok {
		return 0, amqp.NewError(amqp.PreconditionFailed, m.ClassID(), m.MethodID(), "invalid arg 'x-priority': unacceptable type")
	}
	if n < -1<<31 || n > 1<<31-1 {
		return 0, amqp.NewError(amqp.PreconditionFailed, m.ClassID(), m.MethodID(), "invalid arg 'x-priority': %d out of range", n)
	}
	return int32(n), nil
}

func (ch *Channel) consume(ctx context.Context, m *amqp.BasicConsume) error {
	if m.Queue == vhost.ReplyQueue {
		return ch.consumeReply(m)
	}
	name, err := ch.queueName(m.Queue)
	if err != nil {
		return err
	}
	if err := ch.conn.check(permRead, "queue", name, m); err != nil {
		return err
	}
	q, err := ch.conn.vh.Queue(ch.conn.id, name)
	if err != nil {
		return err
	}
	if err := ch.conn.vh.CheckConsumeArgs(q, m.Arguments); err != nil {
		return err // before the queue type's own checks, as in RabbitMQ
	}
	if ch.credit.Limit() > 0 && q.Args["x-queue-type"] == "quorum" {
		// rabbit_quorum_queue:consume refuses a channel with a global
		// prefetch limit (global_qos_not_supported_for_queue_type).
		return amqp.NewError(amqp.NotImplemented, m.ClassID(), m.MethodID(), "queue '%s' in vhost '%s' does not support global qos", name, ch.conn.vh.Name())
	}
	tag := m.ConsumerTag
	if tag == "" {
		tag = vhost.GenerateName("amq.ctag-")
	}
	priority, err := consumerPriority(m)
	if err != nil {
		return err
	}
	var stream *queue.StreamConsume
	if q.IsStream() {
		if stream, err = ch.streamConsume(q, m); err != nil {
			return err
		}
	}
	d := &ch.dl
	d.Lock()
	if _, dup := d.consumers[tag]; dup {
		d.Unlock()
		return amqp.NewError(amqp.NotAllowed, m.ClassID(), m.MethodID(), "attempt to reuse consumer tag '%s'", tag)
	}
	c := &consumer{ch: ch, q: q, timeout: consumerTimeoutArg(m.Arguments)}
	if c.timeout > 0 {
		ch.timeoutConsumers.Add(1) // never taken back: a hint, see ConsumerTimeout
	}
	c.roomNotify = func() {
		c.waitingRoom.Store(false)
		q.Kick()
	}
	c.credit.SetLimit(ch.prefetch)
	c.qc = queue.Consumer{
		Tag:           tag,
		Owner:         ch.owner(),
		NoAck:         m.NoAck,
		Exclusive:     m.Exclusive,
		Priority:      priority,
		Credit:        &c.credit,
		ChannelCredit: &ch.credit,
		Receiver:      c,
		Stream:        stream,
	}
	if d.consumers == nil {
		d.consumers = make(map[string]*consumer) // made on first use: most channels only publish
	}
	d.consumers[tag] = c
	d.Unlock()
	// Not under the delivery lock: the queue may be delivering to another
	// consumer of this channel right now. Deliveries to c wait in c.early
	// until consume-ok is out.
	err = q.Consume(ctx, &c.qc)
	d.Lock()
	if err != nil {
		if d.consumers[tag] == c {
			delete(d.consumers, tag)
		}
		c.gone = true
		d.Unlock()
		switch {
		case errors.Is(err, queue.ErrExclusiveConsumer), errors.Is(err, queue.ErrConsumersExist):
			return amqp.NewError(amqp.AccessRefused, m.ClassID(), m.MethodID(), "queue '%s' in vhost '%s' in exclusive use", name, ch.conn.vh.Name())
		case !errors.Is(err, queue.ErrDeleted):
			// A stream consumer's start is read from the store (its
			// tracked offset, a timestamp): the store failed.
			return amqp.NewError(amqp.InternalError, m.ClassID(), m.MethodID(), "queue '%s' in vhost '%s': %v", name, ch.conn.vh.Name(), err)
		default:
			return queueGone(name, ch.conn.vh.Name())
		}
	}
	if !m.NoWait {
		ch.sendLocked(&amqp.BasicConsumeOk{ConsumerTag: tag})
	}
	c.started = true
	early := c.early
	c.early = nil
	var back []pending
	for _, em := range early {
		if d.closed || c.gone {
			// The channel closed or the consumer went meanwhile: the
			// messages go back, as a delivery refused by a closing channel.
			if !c.qc.NoAck {
				back = append(back, pending{q: q, ref: em.Ref, cons: c})
			}
			continue
		}
		c.deliverLocked(em)
	}
	d.Unlock()
	if len(early) > 0 {
		ch.conn.poke() // deliverLocked leaves the waking to Flush
	}
	ch.apply(back, queue.Requeue)
	ch.emitConsumer(events.ConsumerCreated, tag, name, "")
	return nil
}

// cancel removes a consumer. Its unacked messages stay unacked (basic.cancel
// requeues nothing); an auto-delete queue goes with its last consumer.
func (ch *Channel) cancel(ctx context.Context, tag string) {
	d := &ch.dl
	d.Lock()
	c, ok := d.consumers[tag]
	delete(d.consumers, tag)
	if ok {
		c.gone = true
	}
	d.Unlock()
	if !ok {
		ch.cancelReply(tag, false)
		return // RabbitMQ answers cancel-ok for an unknown tag too
	}
	ch.emitConsumer(events.ConsumerDeleted, tag, c.q.Def.Name, events.ReasonCancel)
	left, err := c.q.Cancel(ctx, c.qc.Owner, tag)
	if err == nil {
		ch.conn.vh.ConsumerGone(ctx, c.q, left)
	}
}

func (ch *Channel) get(ctx context.Context, m *amqp.BasicGet) error {
	name, err := ch.queueName(m.Queue)
	if err != nil {
		return err
	}
	if err := ch.conn.checkCached(&ch.conn.getCache, permRead, "queue", name, m); err != nil {
		return err
	}
	q, err := ch.conn.vh.Queue(ch.conn.id, name)
	if err != nil {
		return err
	}
	if q.IsStream() {
		return streamRefusal(m, q, ch.conn.vh.Name())
	}
	if ch.conn.cfg.Drain.On() {
		// Nothing new leaves a queue while draining (drain.go).
		ch.reply(&amqp.BasicGetEmpty{})
		return nil
	}
	msg, ready, ok, err := q.Get(ctx, ch.owner(), m.NoAck)
	if err != nil {
		if errors.Is(err, queue.ErrDeleted) {
			return queueGone(name, ch.conn.vh.Name())
		}
		// The store failed; the message stays in the queue.
		return amqp.NewError(amqp.InternalError, m.ClassID(), m.MethodID(), "queue '%s' in vhost '%s': %v", name, ch.conn.vh.Name(), err)
	}
	if !ok {
		ch.reply(&amqp.BasicGetEmpty{})
		return nil
	}
	d := &ch.dl
	d.Lock()
	if d.closed {
		// CloseChannel closed the channel meanwhile: the message must not
		// follow channel.close, so it goes back.
		d.Unlock()
		if !m.NoAck {
			_ = q.Settle(queue.Requeue, msg.Ref)
			q.Kick()
		}
		return nil
	}
	d.nextTag++
	tag := d.nextTag
	if !m.NoAck {
		_ = d.unacked.Add(tag, pending{q: q, ref: msg.Ref})
	}
	if d.getOk == nil {
		d.getOk = new(amqp.BasicGetOk)
	}
	*d.getOk = amqp.BasicGetOk{
		DeliveryTag:  tag,
		Redelivered:  msg.Redelivered,
		Exchange:     msg.Exchange,
		RoutingKey:   msg.RoutingKey,
		MessageCount: clamp32(ready),
	}
	queued := ch.conn.queueContent(ch.id, d.getOk, msg.Properties, msg.Body)
	d.Unlock()
	if queued {
		ch.conn.flushNow() // the client waits for it: answer without a handoff
	}
	return nil
}

// settle implements basic.ack, basic.nack and basic.reject: it takes the
// deliveries out of the unacked table, frees their prefetch credit and
// hands them to their queues in one batch per queue.
func (ch *Channel) settle(tag uint64, multiple bool, mode queue.Outcome) error {
	if ch.tx != nil {
		return ch.tx.settle(ch, tag, multiple, mode)
	}
	if !multiple {
		// The common case, one basic.ack per message: no slices.
		d := &ch.dl
		d.Lock()
		p, ok := d.unacked.Take(tag)
		d.Unlock()
		if !ok {
			return unknownTag(tag)
		}
		ch.applyOne(p, mode)
		return nil
	}
	ps, err := ch.takeUnacked(tag, multiple)
	if err != nil {
		return err
	}
	ch.apply(ps, mode)
	return nil
}

// applyOne is apply for a single delivery.
func (ch *Channel) applyOne(p pending, mode queue.Outcome) {
	// A deleted queue has nothing left to settle: the errors are moot.
	if mode == queue.Ack && p.cons == nil {
		// A basic.get's ack: the client's next get usually follows, and
		// settling in place leaves the actor asleep for it (Queue.AckGot).
		_ = p.q.AckGot(p.ref)
	} else {
		_ = p.q.Settle(mode, p.ref)
	}
	// Credit is freed after the settle is queued, so a queue that sees the
	// credit sees the requeued message too and serves it first.
	if ch.releaseCredit(p) {
		p.q.Kick()
		if ch.credit.Limit() > 0 {
			ch.kickConsumers()
		}
	}
}

// releaseCredit frees the prefetch credit a delivery to a consumer holds, and
// reports whether it did. The settle that follows wakes the delivery's own
// queue; other queues of the channel wait on the channel-wide credit only
// (kickConsumers).
func (ch *Channel) releaseCredit(p pending) bool {
	if p.cons == nil {
		return false
	}
	p.cons.qc.Credit.Release(1)
	ch.credit.Release(1)
	return true
}

// takeUnacked removes the deliveries a settle names: tag alone, or with
// multiple everything up to tag (all of them for tag 0, even none). A tag
// that is not unacked is a channel error, 406 PRECONDITION_FAILED, with or
// without multiple, as in RabbitMQ 3.x/4.x (rabbit_channel:collect_acks).
func (ch *Channel) takeUnacked(tag uint64, multiple bool) ([]pending, error) {
	d := &ch.dl
	d.Lock()
	defer d.Unlock()
	var ps []pending
	switch {
	case multiple && tag == 0:
		ps = d.takeAll()
	case multiple:
		// RabbitMQ's collect_acks walks the unacked deliveries up to tag
		// and fails if tag itself is not among them, settling nothing:
		// a multiple settle of a tag never delivered (or already settled)
		// is 406 even when older deliveries are outstanding.
		if _, ok := d.unacked.Get(tag); !ok {
			return nil, unknownTag(tag)
		}
		d.unacked.TakeUpTo(tag, func(_ uint64, p pending) { ps = append(ps, p) })
	default:
		p, ok := d.unacked.Take(tag)
		if !ok {
			return nil, unknownTag(tag)
		}
		ps = []pending{p}
	}
	return ps, nil
}

func unknownTag(tag uint64) error {
	return amqp.NewError(amqp.PreconditionFailed, 0, 0, "unknown delivery tag %d", tag)
}

// apply sends settled deliveries to their queues and frees their credit.
func (ch *Channel) apply(ps []pending, mode queue.Outcome) {
	if len(ps) == 0 {
		return
	}
	// Settle copies refs: a small settle builds them on the stack.
	var buf [16]queue.Ref
	// Most settles touch one queue; group without a map for that case.
	for len(ps) > 0 {
		q := ps[0].q
		refs := buf[:0]
		rest := ps[:0]
		freed := false
		for _, p := range ps {
			if p.q != q {
				rest = append(rest, p)
				continue
			}
			refs = append(refs, p.ref)
		}
		_ = q.Settle(mode, refs...) // a deleted queue has nothing left to settle
		// Credit is freed after the settle is queued, so a queue that sees
		// the credit sees the requeued messages too and serves them first.
		for _, p := range ps {
			if p.q == q {
				freed = ch.releaseCredit(p) || freed
			}
		}
		if freed {
			q.Kick()
			if ch.credit.Limit() > 0 {
				ch.kickConsumers()
			}
		}
		ps = rest
	}
}

// requeueAll returns every unacked delivery of the channel to its queue:
// basic.recover with requeue.
func (ch *Channel) requeueAll() {
	d := &ch.dl
	d.Lock()
	ps := d.takeAll()
	d.Unlock()
	ch.apply(ps, queue.Requeue)
}

// takeAll empties the unacked table.
func (d *deliveries) takeAll() []pending {
	ps := make([]pending, 0, d.unacked.Len())
	d.unacked.TakeAll(func(_ uint64, p pending) { ps = append(ps, p) })
	return ps
}

// closeDeliveries stops deliveries, cancels the consumers and requeues
// what the channel still holds: the channel-close caller of the requeue
// primitive. The lock is released before the queues are called, so an
// actor blocked in Deliver sees closed and backs off.
func (ch *Channel) closeDeliveries(ctx context.Context) {
	d := &ch.dl
	d.Lock()
	if d.released {
		d.Unlock()
		return
	}
	d.released = true
	d.closed = true
	d.gate.Lock()
	d.gate.closed = true
	d.gate.Unlock()
	cs := make([]*consumer, 0, len(d.consumers))
	for _, c := range d.consumers {
		c.gone = true
		cs = append(cs, c)
	}
	clear(d.consumers)
	d.Unlock()
	ch.cancelReply("", true)
	for _, c := range cs {
		ch.emitConsumer(events.ConsumerDeleted, c.qc.Tag, c.q.Def.Name, events.ReasonChannelClosed)
		left, err := c.q.Cancel(ctx, c.qc.Owner, c.qc.Tag)
		if err == nil {
			ch.conn.vh.ConsumerGone(ctx, c.q, left)
		}
	}
	d.Lock()
	ps := d.takeAll()
	d.Unlock()
	ch.apply(ps, queue.Requeue)
}

func (ch *Channel) owner() queue.Owner {
	return queue.Owner{Connection: ch.conn.id, Channel: ch.id}
}

// record builds the stored form of a published message.
func record(m *amqp.BasicPublish, props, body []byte, sum amqp.PropertySummary) queue.Record {
	return queue.Record{
		Exchange:   m.Exchange,
		RoutingKey: m.RoutingKey,
		Properties: props,
		Body:       body,
		Persistent: sum.DeliveryMode == 2,
		Priority:   sum.Priority,
		// Any x-death in them is the client's (RabbitMQ 4.x ignores it
		// when it dead-letters the message).
		ClientHeaders: sum.HasHeaders,
	}
}

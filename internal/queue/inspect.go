package queue

import (
	"cmp"
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"
)

// This file is the queue's read-only side for operators and tests: message
// counters (lock-free, readable from any goroutine) and a few questions the
// actor answers about the state it owns (Peek, Outstanding, Usage, Idle).
// None of them changes what a consumer sees, and each honours its caller's
// context (inspect).

// Counters count a queue's message events since it started, the numbers
// RabbitMQ reports as a queue's message_stats. They only grow. Each field is
// an atomic, so any goroutine may read them while the actor adds to them.
type Counters struct {
	// Publish counts messages handed to the queue (basic.publish routed
	// here, a transaction's publish at commit).
	Publish atomic.Uint64
	// Deliver and DeliverNoAck count deliveries to consumers that
	// acknowledge and to no-ack consumers; Get and GetNoAck the same for
	// basic.get.
	Deliver      atomic.Uint64
	DeliverNoAck atomic.Uint64
	Get          atomic.Uint64
	GetNoAck     atomic.Uint64
	// Redeliver counts deliveries and gets of messages delivered before
	// (redelivered=true); they are counted in Deliver or Get as well.
	Redeliver atomic.Uint64
	// Ack counts deliveries the clients acknowledged (basic.ack, one per
	// delivery even with multiple=true).
	Ack atomic.Uint64
	// DeadLettered counts messages that died, by reason (deadletter.go).
	DeadLettered DeadLetterCounts
}

// CounterValues is a snapshot of Counters.
type CounterValues struct {
	Publish, Deliver, DeliverNoAck, Get, GetNoAck, Redeliver, Ack uint64
	// DeadLettered counts the messages that died with a dead-letter
	// exchange to go to, whatever the reason.
	DeadLettered uint64
}

// Load reads every counter. The fields are read one by one, so under load
// the snapshot is not one instant; each value on its own is exact.
func (c *Counters) Load() CounterValues {
	return CounterValues{
		Publish:      c.Publish.Load(),
		Deliver:      c.Deliver.Load(),
		DeliverNoAck: c.DeliverNoAck.Load(),
		Get:          c.Get.Load(),
		GetNoAck:     c.GetNoAck.Load(),
		Redeliver:    c.Redeliver.Load(),
		Ack:          c.Ack.Load(),
		DeadLettered: c.DeadLettered.withDLX(),
	}
}

// Counters returns the queue's counters since it started.
func (q *Queue) Counters() CounterValues { return q.counters.Load() }

// countOp counts an op as the actor takes it: publishes and acks are
// counted when they reach the queue, which is where RabbitMQ counts them.
func (q *Queue) countOp(o *op) {
	switch o.kind {
	case opPublish:
		q.addCount(func(c *Counters) { c.Publish.Add(1) })
	case opAck:
		n := uint64(len(o.refs))
		if o.one {
			n = 1 // a single settle carries its ref outside refs
		}
		q.addCount(func(c *Counters) { c.Ack.Add(n) })
	}
}

// countDelivery counts one message handed out, to a consumer (get false)
// or to basic.get.
func (q *Queue) countDelivery(get, noAck, redelivered bool) {
	q.addCount(func(c *Counters) {
		switch {
		case get && noAck:
			c.GetNoAck.Add(1)
		case get:
			c.Get.Add(1)
		case noAck:
			c.DeliverNoAck.Add(1)
		default:
			c.Deliver.Add(1)
		}
		if redelivered {
			c.Redeliver.Add(1)
		}
	})
}

// addCount applies add to the queue's counters and to the broker-wide
// totals, when the broker gave some (Config.Totals).
func (q *Queue) addCount(add func(*Counters)) {
	add(&q.counters)
	if q.cfg.Totals != nil {
		add(q.cfg.Totals)
	}
}

// inspect runs fn on the actor goroutine, holding the state token
// (owner.go), after every op sent before it, and waits for it. fn may
// read everything the actor owns; it must not change what consumers see.
//
// inspect honours ctx: an already ended ctx returns its error without
// sending anything, and ctx ends the wait for room in a full mailbox and
// for the actor's answer. When the caller has given up by the time the
// actor reaches the op, fn is skipped. After an error the caller must not
// read what fn writes: the actor may still be running it.
func (q *Queue) inspect(ctx context.Context, fn func(ctx context.Context)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o := op{kind: opInspect, inspect: func(actor context.Context) {
		if ctx.Err() != nil {
			return // nobody waits for the answer any more
		}
		fn(actor)
	}}
	if q.queued.Load() < maxMailbox {
		_, err := q.call(ctx, o)
		return err
	}
	// The mailbox is full (publishers are being held back) and its wait
	// for room knows no context: wait from a goroutine, which goes once
	// the actor's next step makes room or the queue stops.
	errc := make(chan error, 1)
	go func() {
		_, err := q.call(ctx, o)
		errc <- err
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ReadyMessage is a ready message as Peek shows it.
type ReadyMessage struct {
	storage.Record
	// Redelivered is what the next delivery of the message will say.
	Redelivered bool
	// Deliveries counts the deliveries of the message so far (0 for a
	// message never delivered; a requeued one keeps its count).
	Deliveries uint32
}

// Peek returns up to n ready messages in the order the queue will deliver
// them (requeued messages first, in their original positions, then the
// rest from the cursor), without claiming them: nothing is delivered,
// counted or written. A message out for delivery is not ready and is not
// shown. Bodies and properties are shared with the store: read-only.
func (q *Queue) Peek(ctx context.Context, n int) ([]ReadyMessage, error) {
	if n <= 0 {
		return nil, nil
	}
	var out []ReadyMessage
	var rerr error
	err := q.inspect(ctx, func(context.Context) {
		// The reads are the caller's: its ctx bounds them, and peek
		// leaves the actor's state as it was when they stop early.
		out, rerr = q.peek(ctx, n)
	})
	if err != nil {
		return nil, err
	}
	return out, rerr
}

func (q *Queue) peek(ctx context.Context, n int) ([]ReadyMessage, error) {
	return q.kind.peek(ctx, n)
}

// peekMessages is peek for a classic or quorum queue (messages).
func (q *Queue) peekMessages(ctx context.Context, n int) ([]ReadyMessage, error) {
	out := make([]ReadyMessage, 0, min(uint64(n), q.ready()))
	for _, off := range q.returned {
		if len(out) == n {
			return out, nil
		}
		w := q.waiting[off]
		if w.lazy {
			// Another broker's requeue, not read yet: read it, leaving
			// the actor's state as it is.
			recs, err := q.cfg.Stores.Shards.Read(ctx, q.cfg.Shard, off, 1)
			if err != nil {
				return out, err
			}
			if len(recs) == 0 || recs[0].Offset != off {
				continue // settled meanwhile
			}
			w.rec = recs[0]
		}
		out = append(out, ReadyMessage{Record: w.rec, Redelivered: w.count > 0, Deliveries: w.count})
	}
	for _, r := range q.pending {
		if len(out) == n {
			return out, nil
		}
		out = append(out, ReadyMessage{Record: r})
	}
	if len(out) == n || uint64(len(q.pending)) >= q.fromCursor {
		return out, nil
	}
	from := q.cursor
	if len(q.pending) > 0 {
		from = q.pending[len(q.pending)-1].Offset + 1
	}
	// Read without touching pending: Peek must leave the actor as it was.
	for len(out) < n {
		recs, err := q.cfg.Stores.Shards.Read(ctx, q.cfg.Shard, from, n-len(out))
		if err != nil {
			return out, err
		}
		if len(recs) == 0 {
			break
		}
		for _, r := range recs {
			out = append(out, ReadyMessage{Record: r})
		}
		from = recs[len(recs)-1].Offset + 1
	}
	return out, nil
}

// Outstanding is one delivery that is out and not yet settled.
type Outstanding struct {
	Offset uint64
	// Claim is the Ref.Claim the delivery was handed out with; with Offset
	// it matches the Ref a channel keeps under its delivery tag.
	Claim uint64
	Owner Owner
	// ConsumerTag is "" for a basic.get.
	ConsumerTag string
	// DeliveryCount counts deliveries of the message, this one included;
	// Redelivered is the flag this delivery carried (the message was
	// delivered before).
	DeliveryCount uint32
	Redelivered   bool
	// DeliveredAt is when this delivery claimed the message, as the
	// unacked index recorded it (the queue's clock). It is zero when the
	// index holds no entry for this very delivery.
	DeliveredAt time.Time
	Exchange    string
	RoutingKey  string
	// Properties are the message's encoded properties as published, and
	// Body its body when Outstanding was asked for bodies (nil otherwise).
	// Both are copies the caller owns.
	Properties []byte
	Body       []byte
	BodySize   int
}

// Outstanding lists the deliveries that wait for a settle (no-ack
// deliveries are settled at once and never listed), in offset order, with
// their bodies when bodies is set. The records come from the actor's own
// deliveries; the delivery times from the unacked index, read with ctx.
func (q *Queue) Outstanding(ctx context.Context, bodies bool) ([]Outstanding, error) {
	var out []Outstanding
	var rerr error
	err := q.inspect(ctx, func(context.Context) {
		out = make([]Outstanding, 0, len(q.out))
		for off, d := range q.out {
			o := Outstanding{
				Offset: off, Claim: d.claim, Owner: d.owner,
				DeliveryCount: d.count, Redelivered: d.count > 1,
				Exchange: d.rec.Exchange, RoutingKey: d.rec.RoutingKey,
				// Copied here: the record is shared with the store, and
				// the caller reads it after the actor has moved on.
				Properties: slices.Clone(d.rec.Properties),
				BodySize:   len(d.rec.Body),
			}
			if bodies {
				o.Body = slices.Clone(d.rec.Body)
			}
			if d.consumer != nil {
				o.ConsumerTag = d.consumer.Tag
			}
			out = append(out, o)
		}
		slices.SortFunc(out, func(a, b Outstanding) int { return cmp.Compare(a.Offset, b.Offset) })
		rerr = q.deliveredAt(ctx, out)
	})
	if err != nil {
		return nil, err
	}
	return out, rerr
}

// deliveredAt fills in DeliveredAt from the unacked index: one scan of the
// queue's entries, both in offset order. An entry counts only if it is
// this delivery's (delivered, same holder, same count): a requeued
// message's entry, or another broker's, says nothing about this one.
func (q *Queue) deliveredAt(ctx context.Context, out []Outstanding) error {
	if len(out) == 0 {
		return nil
	}
	i := 0
	return q.cfg.Stores.Index.Queue(ctx, q.cfg.VHost, q.cfg.Name, func(e unacked.Entry) bool {
		for i < len(out) && out[i].Offset < e.Offset {
			i++
		}
		if i == len(out) {
			return false
		}
		o := &out[i]
		if o.Offset == e.Offset && e.State == unacked.Delivered && e.DeliveryCount == o.DeliveryCount &&
			e.Connection == o.Owner.Connection && e.Channel == o.Owner.Channel {
			o.DeliveredAt = time.Unix(0, e.DeliveredAt)
		}
		return true
	})
}

// Usage is what the actor holds in memory for a queue, an estimate of the
// "memory" RabbitMQ reports per queue.
type Usage struct {
	Stats
	// Memory estimates the bytes the actor keeps: records cached ahead of
	// the cursor, requeued and outstanding messages (bodies, properties
	// and bookkeeping). Messages only in the store are not counted.
	Memory uint64
}

// Usage returns the queue's counts and an estimate of its memory.
func (q *Queue) Usage(ctx context.Context) (Usage, error) {
	var u Usage
	err := q.inspect(ctx, func(context.Context) {
		u.Stats = q.stats()
		u.Memory = q.memory()
	})
	if err != nil {
		return Usage{}, err // the actor may still be writing u
	}
	return u, nil
}

// memory is Usage's estimate; its holder calls it. It walks every record
// held, so it runs on demand and when the actor goes idle (trim), never
// per step.
func (q *Queue) memory() uint64 {
	const recordOverhead = 160 // storage.Record plus map and slice slots
	size := func(r *storage.Record) uint64 {
		return uint64(len(r.Body)+len(r.Properties)+len(r.Exchange)+len(r.RoutingKey)) + recordOverhead
	}
	m := uint64(1024) // the actor's own structs and mailbox slots in use
	for i := range q.pending {
		m += size(&q.pending[i])
	}
	for _, w := range q.waiting {
		m += size(&w.rec)
	}
	for _, d := range q.out {
		m += size(&d.rec)
	}
	return m
}

// Idle waits until the actor has handled every op sent before the call,
// stored and confirmed every publish, delivered every ready message its
// consumers' credit allows, dead-lettered (or dropped) the head messages
// whose TTL has passed by the queue's clock and armed the TTL timer for
// the next head. It reports false while work is left that a later step
// will do: the actor waits to retry after a store error, an op posted to
// the inbox (a timer that fired, a dead-lettered copy, a target's answer)
// is not handled yet, a message being dead-lettered waits for its
// targets to store the copy, or the head's TTL has passed since (on the
// real clock, in the instant since the check above; its timer is due).
func (q *Queue) Idle(ctx context.Context) (bool, error) {
	idle := false
	err := q.inspect(ctx, func(ctx context.Context) {
		q.flushPublishes(ctx)
		q.dispatch(ctx)
		// What the step does after dispatch, done before answering: were
		// the timer armed after the answer, a test that advances a fake
		// clock right after could move it first, and the timer would be
		// registered from the moved clock and fire late.
		q.afterDispatch(ctx)
		idle = q.retryC == nil && q.inboxLen.Load() == 0 && len(q.feat.leaving) == 0 &&
			!(q.feat.ttl && q.headExpired(ctx, 0))
	})
	if err != nil {
		return false, err // the actor may still be writing idle
	}
	return idle, nil
}

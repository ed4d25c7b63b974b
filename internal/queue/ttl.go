package queue

import (
	"context"
	"time"

	"github.com/warrenmq/broker/storage"
)

// Message TTL (x-message-ttl, the expiration property): stamping a
// publish with its deadline, expiring the head, and the TTL timer.

// TTL is a publish's per-message TTL (the expiration property, parsed by
// the caller with ParseExpiration), passed to Publish. It is a value with
// a Set flag rather than a second publish method so that every publish
// takes the one door; the zero value, NoTTL, is a message without one.
type TTL struct {
	D   time.Duration
	Set bool
}

// NoTTL is the TTL of a message without an expiration property.
var NoTTL TTL

// stamp sets a publish's EnqueuedAt and ExpiresAt. The age counts from
// o.at, when the queue accepted the publish (Publish, on the publisher's
// goroutine), not from when the actor gets round to it: a test that
// publishes and then advances a fake clock by the TTL sees the message
// expire without waiting for the queue in between. A TTL of 0 counts from
// this actor step instead, so that the message reaches a consumer that
// can take it in this step (RabbitMQ: "expired unless it can be delivered
// immediately") and expires otherwise.
func (q *Queue) stamp(o *op) {
	if o.at == 0 {
		o.at = q.cfg.Clock.Now().UnixNano() // dead-letter copies, posted by the actors
	}
	o.rec.EnqueuedAt = o.at
	o.rec.ExpiresAt = 0
	ttl, has := o.ttl.D, o.ttl.Set
	if a := q.cfg.Features.Args; a.HasMessageTTL && (!has || a.MessageTTL < ttl) {
		ttl, has = a.MessageTTL, true
	}
	if !has {
		return
	}
	if ttl <= 0 {
		now := q.cfg.Clock.Now().UnixNano()
		o.rec.EnqueuedAt, o.rec.ExpiresAt = now, now
		return
	}
	o.rec.ExpiresAt = o.at + int64(ttl)
}

// expired reports whether r's TTL has passed. A message expires once its
// age reaches its TTL, as in RabbitMQ (rabbit_amqqueue_process's
// drop_expired_msgs, 3.x and 4.x: Now >= Expiry). A TTL of 0 (ExpiresAt
// == EnqueuedAt) is the exception: it expires only after the actor step
// that stored it, which sees the same time, so a consumer that can take
// it in that step gets it.
func expired(r *storage.Record, now int64) bool {
	if r.ExpiresAt == 0 {
		return false
	}
	return r.ExpiresAt < now || r.ExpiresAt == now && r.ExpiresAt != r.EnqueuedAt
}

// headExpired reports whether the message dispatch would take next (pos
// records into pending) has expired.
func (q *Queue) headExpired(ctx context.Context, pos int) bool {
	now := q.cfg.Clock.Now().UnixNano()
	if q.loadHead(ctx) != nil {
		return false
	}
	if len(q.returned) > 0 {
		w := q.waiting[q.returned[0]]
		return expired(&w.rec, now)
	}
	if q.fill(ctx, pos+1) != nil || pos >= len(q.pending) {
		return false
	}
	return expired(&q.pending[pos], now)
}

// expireHead dead-letters (reason expired) the expired messages at the
// head of the queue and arms the TTL timer for the new head. Like
// RabbitMQ's classic queues, only the head is checked: a message behind
// one with a longer TTL waits for it (every message is checked again when
// it is taken for delivery).
func (q *Queue) expireHead(ctx context.Context) {
	if !q.feat.ttl {
		return
	}
	now := q.cfg.Clock.Now().UnixNano()
	q.removeHead(ctx, ReasonExpired, func(r *storage.Record, _ int, _ int64) bool {
		return expired(r, now)
	})
	q.armTTL(ctx)
}

// armTTL arms the timer for the head's expiry.
func (q *Queue) armTTL(ctx context.Context) {
	var at, enq int64
	if q.loadHead(ctx) != nil {
		return // the retry comes back here
	}
	if len(q.returned) > 0 {
		r := q.waiting[q.returned[0]].rec
		at, enq = r.ExpiresAt, r.EnqueuedAt
	} else if q.fill(ctx, 1) == nil && len(q.pending) > 0 {
		at, enq = q.pending[0].ExpiresAt, q.pending[0].EnqueuedAt
	}
	if at == 0 || at == q.feat.ttlAt && q.feat.ttlTimer != nil {
		return
	}
	if q.feat.ttlTimer != nil {
		q.feat.ttlTimer.Stop()
	}
	q.feat.ttlAt = at
	// At the deadline; one nanosecond past it for a TTL of 0, whose expiry
	// is strict (see expired).
	d := time.Duration(at - q.cfg.Clock.Now().UnixNano())
	if at == enq {
		d++
	}
	if d <= 0 {
		// Already due (the clock moved while the actor worked): a fake
		// clock would hold a due timer until its next Advance.
		q.feat.ttlTimer = nil
		q.post(op{kind: opTimer})
		return
	}
	q.feat.ttlTimer = q.cfg.Clock.AfterFunc(d, func() { q.post(op{kind: opTimer}) })
}

// afterDispatch runs once per actor step after delivery.
func (q *Queue) afterDispatch(ctx context.Context) {
	if q.feat.ttl {
		if q.ready() == 0 && !q.feat.ttlArg && len(q.publishes) == 0 {
			q.feat.ttl = false // nothing left that could expire
			return
		}
		q.expireHead(ctx)
	}
}

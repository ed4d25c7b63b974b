package queue

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"
)

// ErrRejected is the error a Confirmer hears for a publish that a full
// queue refused (x-overflow reject-publish or reject-publish-dlx): the
// channel answers basic.nack.
var ErrRejected = errors.New("queue: rejected: queue is full")

// errStopped is the answer for a dead-lettered copy posted to a queue that
// stopped for shutdown: the source keeps the message.
var errStopped = errors.New("queue: stopped")

// DeadLetterRouter finds the queues a dead-lettered copy published to
// exchange with routing key key and raw properties props reaches. It runs
// on the source queue's actor, so it must not wait on any queue; a missing
// exchange yields no queue (the copy is dropped, as in RabbitMQ).
type DeadLetterRouter func(exchange, key string, props []byte) []*Queue

// DeadLetterHolder takes a dead-lettered copy that its exchange holds
// rather than routes (an x-delayed-message exchange and an x-delay header:
// the plugin's exchange type delays whatever it is asked to route, dead
// letters too). It returns nil when the exchange routes the copy now;
// otherwise a start that hands the copy over and calls c.Confirm with seq
// 1 once it is stored or could not be. It runs on the source queue's
// actor and must not wait on any queue.
type DeadLetterHolder func(rec storage.Record) (start func(c Confirmer))

// Features are a queue's x-arguments and its hooks into the vhost.
type Features struct {
	Args Args
	// DeadLetter routes dead-lettered copies; nil drops them.
	DeadLetter DeadLetterRouter
	// HoldDeadLetter, when set, is asked first whether the dead-letter
	// exchange holds a copy instead of routing it.
	HoldDeadLetter DeadLetterHolder
	// Expired is called, on a timer's goroutine (never the actor's), when
	// the queue may have been unused for Args.Expires. The callee confirms
	// with Unused and deletes the queue.
	Expired func()
	// Group is the set of queues dead-lettering connects (the vhost's),
	// stopped together by StopAll; nil gives the queue a group of its own.
	Group *Group
	// CountFailedOnly counts only failed deliveries (Requeue, not Return)
	// towards the delivery limit and x-delivery-count, and adds
	// x-acquired-count (all earlier deliveries) to redeliveries, as
	// RabbitMQ 4.3 quorum queues do. The vhost sets it from its profile.
	CountFailedOnly bool
	// QuorumPriorities is how a quorum queue orders by message priority
	// (priority.go); the vhost sets it from its profile.
	QuorumPriorities QuorumPriorities
	// IgnoreClientDeaths does not interpret an x-death header a client
	// published (Record.ClientHeaders) when the message is dead-lettered,
	// as RabbitMQ 4.x; false counts it, as 3.13.3 and later 3.13 releases.
	// The vhost sets it from its profile.
	IgnoreClientDeaths bool
	// Admit, when set, is asked on the actor's goroutine about each
	// publish just before its batch is appended; false drops it, and its
	// publisher is confirmed (a deduplicating queue's duplicate).
	Admit func(rec *storage.Record) bool
}

// featureState is the actor's bookkeeping for the features. A queue that
// uses none of them pays a few predictable branches per batch.
type featureState struct {
	ttlArg      bool  // x-message-ttl: every message may expire
	prioritized bool  // some consumer has a non-zero x-priority
	ttl         bool  // some ready message may carry ExpiresAt
	limited     bool  // x-max-length or x-max-length-bytes
	bytes       bool  // x-max-length-bytes: readyBytes is kept
	readyBytes  int64 // body bytes of ready messages (when bytes)
	ttlTimer    clock.Timer
	ttlAt       int64 // deadline ttlTimer is armed for
	dequeues    uint8 // takes modulo 3, for TwoLevelPriorities (priority.go)
	// held are the returned messages delayed retry holds, by due time,
	// with their timer (delayed.go).
	held      []heldMsg
	heldTimer clock.Timer
	heldAt    int64
	// leaving holds messages being dead-lettered: neither ready nor out,
	// their records and index entries kept until every target stored the
	// copy.
	leaving map[uint64]storage.Record
	// x-expires
	lastUsed     time.Time
	expiresTimer clock.Timer
}

func (q *Queue) initFeatures() {
	a := &q.cfg.Features.Args
	f := &q.feat
	f.ttlArg = a.HasMessageTTL
	// Records recovered from an earlier run may carry a per-message
	// expiry; afterDispatch clears the flag once the queue is empty.
	f.ttl = a.HasMessageTTL || q.ready() > 0
	f.limited = a.MaxLength >= 0 || a.MaxLengthBytes >= 0
	f.bytes = a.MaxLengthBytes >= 0
	if f.bytes {
		q.countReadyBytes(context.Background())
	}
	if a.Expires > 0 {
		q.used()
	}
}

// countReadyBytes sums the bodies of the ready messages (recovery).
func (q *Queue) countReadyBytes(ctx context.Context) {
	var n int64
	q.loadWaiting(ctx) // others' requeued messages (shared): their size is in the shard
	for _, w := range q.waiting {
		n += int64(len(w.rec.Body))
	}
	_ = q.eachRecord(ctx, q.cursor, ^uint64(0), func(batch []storage.Record) error {
		for i := range batch {
			n += int64(len(batch[i].Body))
		}
		return nil
	})
	q.feat.readyBytes = n
}

func (q *Queue) stopFeatures() {
	q.stopHeld()
	if t := q.feat.ttlTimer; t != nil {
		t.Stop()
	}
	if t := q.feat.expiresTimer; t != nil {
		t.Stop()
	}
	if q.stream != nil && q.stream.ageTimer != nil {
		q.stream.ageTimer.Stop()
	}
}

// tookReady and becameReady keep the byte count of ready messages.
func (q *Queue) tookReady(r *storage.Record) {
	if q.feat.bytes {
		q.feat.readyBytes -= int64(len(r.Body))
	}
}

func (q *Queue) becameReady(r *storage.Record) {
	if q.feat.bytes {
		q.feat.readyBytes += int64(len(r.Body))
	}
}

// postResult is what became of a post.
type postResult uint8

const (
	posted      postResult = iota
	postDeleted            // the queue was deleted: nothing will take o
	postStopped            // the queue stopped (shutdown): its data stays
)

// post hands o to the actor without ever blocking: the path other actors
// and timers use, so an actor never waits on another actor. Each op
// posted counts in the queue's Group until the step that handles it ends
// (endStep). It reports whether the queue took o, or why not.
func (q *Queue) post(o op) postResult {
	q.inbox.Lock()
	if q.inbox.closed {
		r := postStopped
		if q.inbox.deleted {
			r = postDeleted
		}
		q.inbox.Unlock()
		return r
	}
	q.group.add(1)
	q.inbox.ops = append(q.inbox.ops, o)
	q.inboxLen.Add(1)
	q.inbox.Unlock()
	q.Kick()
	return posted
}

// takeInbox takes the ops posted so far; the step that handles them gives
// their count back to the group when it ends.
func (q *Queue) takeInbox() []op {
	q.inbox.Lock()
	ops := q.inbox.ops
	q.inbox.ops = nil
	q.inboxLen.Store(0)
	q.inbox.Unlock()
	q.stepOps += len(ops)
	return ops
}

func (q *Queue) drainInbox(ctx context.Context) {
	for _, o := range q.takeInbox() {
		q.handle(ctx, o)
		if q.deleted {
			q.closeInbox(ctx)
			return
		}
	}
}

// closeInbox refuses further posts and answers what is left: publishes are
// stored unless the queue was deleted (then they are dropped and confirmed,
// as for a queue deleted under a publisher); the rest is moot.
func (q *Queue) closeInbox(ctx context.Context) {
	q.inbox.Lock()
	q.inbox.closed = true
	q.inbox.deleted = q.deleted
	q.inbox.Unlock()
	for _, o := range q.takeInbox() {
		if o.kind != opPublish {
			continue
		}
		if !q.deleted {
			q.handle(ctx, o)
		} else if o.conf != nil {
			o.conf.Confirm([]uint64{o.seq}, nil)
		}
	}
}

// PublishTTL is Publish of a message with a per-message TTL (the
// expiration property, parsed by the caller); the queue's x-message-ttl
// wins when it is lower.
func (q *Queue) PublishTTL(rec storage.Record, ttl time.Duration, conf Confirmer, seq uint64) error {
	return q.send(op{kind: opPublish, rec: rec, conf: conf, seq: seq, ttl: ttl, hasTTL: true, at: q.acceptedAt(&rec)})
}

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
	ttl, has := o.ttl, o.hasTTL
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

// removeHead removes ready messages from the head while take(rec, n,
// bytes) holds, n and bytes counting those already removed, and
// dead-letters them with reason (or drops them without a DLX). Messages
// from the cursor are claimed first (index entry Returned, then the
// cursor), so until their copies are stored a crash returns them.
func (q *Queue) removeHead(ctx context.Context, reason string, take func(r *storage.Record, n int, bytes int64) bool) {
	var owned []storage.Record
	var counts []uint32 // the returned messages' delivery counts, for hold
	var bytes int64
	for len(q.returned) > 0 {
		if q.loadHead(ctx) != nil || len(q.returned) == 0 {
			break
		}
		w := q.waiting[q.returned[0]]
		if !take(&w.rec, len(owned), bytes) {
			break
		}
		delete(q.waiting, q.returned[0])
		q.returned = q.returned[1:]
		q.tookReady(&w.rec)
		owned = append(owned, w.rec)
		counts = append(counts, w.count)
		bytes += int64(len(w.rec.Body))
	}
	if len(owned) > 0 && !q.claimer.hold(ctx, owned, counts) {
		return
	}
	for len(q.returned) == 0 {
		k := 0
		for {
			if err := q.fill(ctx, k+1); err != nil || k >= len(q.pending) || k >= maxBatch {
				break
			}
			if !take(&q.pending[k], len(owned)+k, bytes) {
				break
			}
			bytes += int64(len(q.pending[k].Body))
			k++
		}
		if k == 0 {
			break
		}
		now := q.cfg.Clock.Now().UnixNano()
		entries := make([]unacked.Entry, k)
		for i := range k {
			entries[i] = q.entry(q.pending[i].Offset, Owner{}, now, 0)
			entries[i].State = q.claimer.heldState()
		}
		if err := q.claimer.commit(ctx, claimWrite{entries: entries, move: true, to: q.pending[k-1].Offset + 1, n: k}); err != nil {
			if errors.Is(err, errLostClaim) {
				q.claimer.lost(ctx, false) // another broker took the head: its turn
				break
			}
			q.cfg.Logger.Error("dead-letter claim failed", "queue", q.cfg.Name, "err", err)
			q.scheduleRetry()
			break
		}
		for i := range k {
			q.tookReady(&q.pending[i])
		}
		owned = append(owned, q.pending[:k]...)
		q.pending = q.pending[k:]
		if k < maxBatch {
			break
		}
	}
	if len(owned) > 0 {
		q.deadLetter(ctx, owned, reason)
	}
}

// deadLetter sends copies of owned messages (records this actor owns, each
// with an index entry) to the dead-letter targets, or drops them. A
// message stays in leaving until every target stored its copy.
func (q *Queue) deadLetter(ctx context.Context, recs []storage.Record, reason string) {
	q.countDeadLettered(reason, len(recs))
	q.emitDied(reason, recs)
	var drop []uint64
	now := q.cfg.Clock.Now()
	for _, r := range recs {
		targets, copyRec, hold := q.route(r, reason, now)
		if hold != nil {
			q.setLeaving(r.Offset, r)
			dl := &deadLettering{src: q, offset: r.Offset}
			dl.left.Store(1)
			hold(dl)
			continue
		}
		if len(targets) == 0 {
			drop = append(drop, r.Offset)
			continue
		}
		q.setLeaving(r.Offset, r)
		dl := &deadLettering{src: q, offset: r.Offset}
		dl.left.Store(int32(len(targets)))
		for _, t := range targets {
			switch t.post(op{kind: opPublish, rec: copyRec, conf: dl, seq: 1}) {
			case postDeleted:
				dl.Confirm([]uint64{1}, nil) // deleted meanwhile: RabbitMQ drops
			case postStopped:
				// Stopped for shutdown, its data intact: the copy was not
				// stored, so the message must stay here.
				dl.Confirm([]uint64{1}, errStopped)
			}
		}
	}
	if len(drop) > 0 {
		q.deleteOwned(ctx, drop)
	}
}

// route builds the dead-lettered copy of r and finds its target queues,
// leaving out those that would close an automatic cycle, or, when the
// dead-letter exchange holds the copy (HoldDeadLetter), returns the hold
// to start instead.
func (q *Queue) route(r storage.Record, reason string, now time.Time) ([]*Queue, storage.Record, func(Confirmer)) {
	a := q.cfg.Features.Args
	if !a.HasDLX || q.cfg.Features.DeadLetter == nil {
		return nil, storage.Record{}, nil
	}
	raw := r.Properties
	if len(raw) == 0 {
		raw = (&amqp.Properties{}).Append(nil) // a direct publish may carry none
	}
	props, err := DeadLetterProperties(raw, Death{
		Queue: q.cfg.Name, Reason: reason, Exchange: r.Exchange,
		RoutingKeys: []string{r.RoutingKey}, Time: now, DropCC: a.HasDLXKey,
		IgnoreClientDeaths: r.ClientHeaders && q.cfg.Features.IgnoreClientDeaths,
	})
	if err != nil {
		q.cfg.Logger.Error("dead-letter: bad properties", "queue", q.cfg.Name, "err", err)
		return nil, storage.Record{}, nil
	}
	key := r.RoutingKey
	if a.HasDLXKey {
		key = a.DeadLetterKey
	}
	copyRec := storage.Record{
		Exchange: a.DeadLetterExch, RoutingKey: key, Properties: props, Body: r.Body,
		Persistent: r.Persistent, Priority: r.Priority,
	}
	if h := q.cfg.Features.HoldDeadLetter; h != nil {
		if hold := h(copyRec); hold != nil {
			return nil, copyRec, hold
		}
	}
	targets := q.cfg.Features.DeadLetter(a.DeadLetterExch, key, props)
	kept := targets[:0]
	for _, t := range targets {
		if !IsDeadLetterCycle(props, reason, t.cfg.Name) {
			kept = append(kept, t)
		}
	}
	return kept, copyRec, nil
}

// deleteOwned deletes records this actor owns and their index entries:
// the record first, as settle does.
func (q *Queue) deleteOwned(ctx context.Context, offsets []uint64) {
	keys := make([]unacked.Key, len(offsets))
	for i, off := range offsets {
		keys[i] = q.indexKey(off)
	}
	if err := q.cfg.Stores.Shards.DeleteByOffsets(ctx, q.cfg.Shard, offsets); err != nil {
		// Left in place: the entry makes it come back as returned at the
		// next start (a duplicate, never a loss).
		q.cfg.Logger.Error("dead-letter delete failed", "queue", q.cfg.Name, "err", err)
		return
	}
	if err := q.cfg.Stores.Index.Delete(ctx, keys); err != nil {
		q.later().keys = append(q.later().keys, keys...)
		q.scheduleRetry()
	}
}

// deadLettered runs when every target answered for the copy of offset.
func (q *Queue) deadLettered(ctx context.Context, offset uint64, failed bool) {
	r, ok := q.unsetLeaving(offset)
	if !ok {
		return
	}
	if failed {
		// A target could not store it: the message is ready again.
		q.claimer.unhold(ctx, r)
		return
	}
	q.deleteOwned(ctx, []uint64{offset})
}

// deadLettering is the Confirmer of one dead-lettered copy: it counts the
// targets and tells the source when all of them answered.
type deadLettering struct {
	src    *Queue // nil for reject-publish-dlx: nothing to delete
	offset uint64
	left   atomic.Int32
	failed atomic.Bool
}

func (d *deadLettering) Confirm(seqs []uint64, err error) {
	// A target that refused the copy because it is full drops it, as
	// RabbitMQ's at-most-once dead-lettering does; a store error keeps it.
	if err != nil && !errors.Is(err, ErrRejected) && !errors.Is(err, ErrDeleted) {
		d.failed.Store(true)
	}
	if d.left.Add(-int32(len(seqs))) == 0 && d.src != nil {
		d.src.post(op{kind: opDeadLettered, seq: d.offset, failed: d.failed.Load()})
	}
}

// reject settles deliveries without requeue: dead-lettered with reason
// rejected when the queue has a DLX, else discarded.
func (q *Queue) reject(ctx context.Context, refs []Ref) {
	if !q.cfg.Features.Args.HasDLX {
		q.countDeadLettered(ReasonRejected, q.countLive(refs))
		q.emitRejected(refs)
		q.settle(ctx, refs)
		return
	}
	ds := q.live(refs)
	recs := make([]storage.Record, len(ds))
	for i, d := range ds {
		recs[i] = d.rec
	}
	q.recycle(ds)
	q.deadLetter(ctx, recs, ReasonRejected)
}

// overDeliveryLimit dead-letters (reason delivery_limit) the deliveries
// being requeued that were delivered more often than x-delivery-limit and
// returns the others.
func (q *Queue) overDeliveryLimit(ctx context.Context, ds []*delivery) []*delivery {
	limit := q.cfg.Features.Args.DeliveryLimit
	var over []storage.Record
	var overDs []*delivery
	kept := ds[:0]
	for _, d := range ds {
		n := d.count
		if q.cfg.Features.CountFailedOnly {
			n = d.failed
		}
		if int64(n) > limit {
			over = append(over, d.rec)
			overDs = append(overDs, d)
			continue
		}
		kept = append(kept, d)
	}
	if len(over) > 0 {
		q.recycle(overDs)
		q.deadLetter(ctx, over, ReasonDeliveryLimit)
	}
	return kept
}

// withDeliveryCounts returns props with x-delivery-count set to failed,
// the failed deliveries, and x-acquired-count to acquired, every earlier
// delivery, as RabbitMQ 4.3 quorum queues add them to a redelivery.
func withDeliveryCounts(raw []byte, failed, acquired uint32) []byte {
	return amqp.SetHeaders(raw, amqp.Table{"x-delivery-count": int64(failed), "x-acquired-count": int64(acquired)})
}

// withDeliveryCount returns props with the x-delivery-count header set to
// n, the number of earlier deliveries, as quorum queues add it.
func withDeliveryCount(raw []byte, n uint32) []byte {
	return amqp.SetHeaders(raw, amqp.Table{"x-delivery-count": int64(n)})
}

// applyLimits refuses publishes a full queue cannot take under
// reject-publish and reject-publish-dlx: they are confirmed with
// ErrRejected (basic.nack) and, with -dlx, dead-lettered (reason maxlen).
// Drop-head queues take everything and drop from the head afterwards.
func (q *Queue) applyLimits(ctx context.Context) {
	a := q.cfg.Features.Args
	if a.Overflow == DropHead {
		return
	}
	n, bytes := q.ready(), q.feat.readyBytes
	kept := 0
	now := q.cfg.Clock.Now()
	for i := range q.publishes {
		r := q.publishes[i]
		full := a.MaxLength >= 0 && n >= uint64(a.MaxLength) ||
			a.MaxLengthBytes >= 0 && bytes+int64(len(r.Body)) > a.MaxLengthBytes
		if !full {
			q.publishes[kept], q.confirms[kept] = r, q.confirms[i]
			kept++
			n++
			bytes += int64(len(r.Body))
			continue
		}
		if c := q.confirms[i]; c.conf != nil {
			c.conf.Confirm([]uint64{c.seq}, ErrRejected)
		}
		if a.Overflow == RejectPublishDLX {
			q.countDeadLettered(ReasonMaxLen, 1)
			q.emitDied(ReasonMaxLen, q.publishes[i:i+1])
			targets, copyRec, hold := q.route(r, ReasonMaxLen, now)
			if hold != nil {
				dl := &deadLettering{}
				dl.left.Store(1)
				hold(dl)
			} else if len(targets) > 0 {
				dl := &deadLettering{}
				dl.left.Store(int32(len(targets)))
				for _, t := range targets {
					t.post(op{kind: opPublish, rec: copyRec, conf: dl, seq: 1})
				}
			}
		}
	}
	clear(q.publishes[kept:])
	q.publishes = q.publishes[:kept]
	clear(q.confirms[kept:])
	q.confirms = q.confirms[:kept]
}

// dropOverflow drops (dead-letters, reason maxlen) the oldest ready
// messages of a drop-head queue over its limits.
func (q *Queue) dropOverflow(ctx context.Context) {
	a := q.cfg.Features.Args
	if a.Overflow != DropHead {
		return
	}
	over := func(n int, bytes int64) bool {
		return a.MaxLength >= 0 && q.ready()-uint64(n) > uint64(a.MaxLength) ||
			a.MaxLengthBytes >= 0 && q.feat.readyBytes-bytes > a.MaxLengthBytes
	}
	if !over(0, 0) {
		return
	}
	q.removeHead(ctx, ReasonMaxLen, func(r *storage.Record, n int, bytes int64) bool {
		return over(n, bytes)
	})
}

// used records that the queue was used now (x-expires) and re-arms the
// expiry timer while it has no consumer.
func (q *Queue) used() {
	exp := q.cfg.Features.Args.Expires
	if exp <= 0 {
		return
	}
	q.feat.lastUsed = q.cfg.Clock.Now()
	if q.feat.expiresTimer != nil {
		q.feat.expiresTimer.Stop()
		q.feat.expiresTimer = nil
	}
	if q.consumers.len() > 0 || q.cfg.Features.Expired == nil {
		return
	}
	q.feat.expiresTimer = q.cfg.Clock.AfterFunc(exp, q.cfg.Features.Expired)
}

func (q *Queue) unused() bool {
	exp := q.cfg.Features.Args.Expires
	return exp > 0 && q.consumers.len() == 0 && !q.cfg.Clock.Now().Before(q.feat.lastUsed.Add(exp))
}

// Touch tells the queue it was used (a redeclaration), for x-expires.
func (q *Queue) Touch() { q.post(op{kind: opTouch}) }

// Unused reports whether the queue has had no consumer and no use for its
// x-expires period; the vhost deletes it then.
func (q *Queue) Unused(ctx context.Context) bool {
	r, err := q.call(ctx, op{kind: opUnused})
	return err == nil && r.ok
}

// addConsumerSorted adds c after every consumer of its priority or
// higher, so consumers stay ordered by priority, highest first, and by
// arrival within a priority (single active consumer: the first one).
func (q *Queue) addConsumerSorted(c *Consumer) {
	c.room, _ = c.Receiver.(Roomer)
	if c.Priority != 0 {
		q.feat.prioritized = true
	}
	q.consumers.add(c)
}

// acquireConsumer returns the next consumer that has credit, with one unit
// of it taken, or nil. Without consumer priorities it is plain
// round-robin; with them the highest priority with credit wins and its
// consumers take turns (the one served moves behind its peers). With
// single active consumer only the first registered consumer is served.
func (q *Queue) acquireConsumer() *Consumer {
	if q.cfg.Features.Args.SingleActive {
		if c := q.consumers.first(); c != nil && c.acquire() {
			return c
		}
		return nil
	}
	if !q.feat.prioritized {
		return q.consumers.roundRobin((*Consumer).acquire)
	}
	return q.consumers.byPriority((*Consumer).acquire)
}

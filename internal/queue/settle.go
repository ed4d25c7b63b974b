package queue

import (
	"context"
	"slices"

	"github.com/warrenmq/broker/unacked"
)

// Settling: acks and rejects delete a delivery's record and entry,
// requeues return it in place (requeue, the one requeue primitive).

// Outcome is how a delivery is settled.
type Outcome uint8

const (
	// Ack deletes the message (basic.ack): its record, then its index
	// entry.
	Ack Outcome = iota
	// Reject discards it (basic.reject or basic.nack without requeue):
	// it is dead-lettered with reason rejected when the queue has a
	// dead-letter exchange, else deleted as Ack deletes it.
	Reject
	// Requeue returns it in place (nack and reject with requeue,
	// basic.recover, channel or connection close): the single requeue
	// primitive. The message keeps its position and comes back
	// redelivered.
	Requeue
	// Return is Requeue for a return that is not a failed delivery
	// (basic.nack with requeue, basic.recover). It differs only for a
	// queue that counts failed deliveries (Features.CountFailedOnly,
	// RabbitMQ 4.3 quorum queues): it does not count towards the
	// delivery limit or x-delivery-count.
	Return
)

// opKinds maps an Outcome to the op the actor handles.
var opKinds = [...]opKind{Ack: opAck, Reject: opReject, Requeue: opRequeue, Return: opRequeue}

// Settle settles the deliveries refs name with outcome how. It waits only
// while the mailbox is full (back-pressure), never for the settle itself,
// and fails only with ErrDeleted: a deleted queue has nothing left to
// settle. A Ref that is stale (its delivery was settled or requeued
// meanwhile) is ignored: the first settle of a delivery wins. refs is not
// kept, and one Ref (basic.ack without multiple, the common case) is sent
// without allocating.
func (q *Queue) Settle(how Outcome, refs ...Ref) error {
	o := op{kind: opKinds[how], released: how == Return}
	switch len(refs) {
	case 0:
		return nil
	case 1:
		o.ref, o.one = [1]Ref{refs[0]}, true
	default:
		o.refs = slices.Clone(refs)
	}
	return q.send(o)
}

// AckGot is Settle(Ack, r) for the delivery of a basic.get, whose client
// is about to wait on the queue again (the next get): when the actor is
// idle it settles in place, on the calling goroutine (actor.go,
// "Ownership"), so, as for Get, the caller must hold no lock a Deliver
// could need.
func (q *Queue) AckGot(r Ref) error {
	o := op{kind: opAck, ref: [1]Ref{r}, one: true}
	if _, done := q.inline(o); done {
		return nil
	}
	return q.send(o)
}

// RequeueEntries returns the deliveries named by index entries whose owner
// is gone: the scanner's call into the same primitive. An entry whose
// delivery is no longer out with that owner is ignored.
func (q *Queue) RequeueEntries(entries []unacked.Entry) error {
	return q.send(op{kind: opRequeueEntries, entries: entries})
}

// live returns the deliveries refs still name, removing them from out.
// The slice is the actor's scratch, valid until the next call.
func (q *Queue) live(refs []Ref) []*delivery {
	ds := q.scratch.live[:0]
	defer func() { q.scratch.live = ds[:0] }()
	for _, r := range refs {
		d, ok := q.out[r.Offset]
		if !ok || d.claim != r.Claim {
			continue // settled or requeued already: the first settle won
		}
		delete(q.out, r.Offset)
		ds = append(ds, d)
	}
	return ds
}

// settle deletes delivered messages: records and index entries in one
// write when the shard store can (settleDeleter), else the record first,
// then the index entry, so a crash in between leaves an entry without a
// record (dropped at recovery), never a record nobody will deliver.
func (q *Queue) settle(ctx context.Context, refs []Ref) {
	ds := q.live(refs)
	if len(ds) == 0 {
		return
	}
	offsets, keys := q.scratch.offsets[:0], q.scratch.keys[:0]
	once := 0 // keys[:once] are the entries put once
	for _, d := range ds {
		offsets = append(offsets, d.rec.Offset)
		keys = append(keys, q.indexKey(d.rec.Offset))
		if d.once {
			keys[once], keys[len(keys)-1] = keys[len(keys)-1], keys[once]
			once++
		}
	}
	defer func() { q.scratch.offsets, q.scratch.keys = offsets[:0], keys[:0] }()
	if x, ok := q.cfg.Stores.Shards.(settleDeleter); ok {
		done, err := x.DeleteSettled(ctx, q.cfg.Shard, offsets, q.cfg.Stores.Index, keys, once)
		if err != nil {
			// Neither write is known to have happened: the deliveries
			// stay out, owned by the queue, and the whole settle is
			// redone (both deletes are idempotent).
			q.cfg.Logger.Error("ack failed", "queue", q.cfg.Name, "err", err)
			q.retryLater(&q.later().settle, ds)
			return
		}
		if done {
			q.recycle(ds)
			return
		}
	}
	if err := q.cfg.Stores.Shards.DeleteByOffsets(ctx, q.cfg.Shard, offsets); err != nil {
		// The client has settled these: they stay out, owned by the
		// queue, until the delete succeeds.
		q.cfg.Logger.Error("ack failed", "queue", q.cfg.Name, "err", err)
		q.retryLater(&q.later().settle, ds)
		return
	}
	q.recycle(ds)
	if err := q.deleteEntries(ctx, keys, once); err != nil {
		// A Delivered entry must not outlive its message: the scanner
		// would time it out and close a channel that did nothing wrong.
		q.cfg.Logger.Error("ack index delete failed", "queue", q.cfg.Name, "err", err)
		q.later().keys = append(q.later().keys, keys...) // a copy: keys is scratch
		q.scheduleRetry()
	}
}

// settleDeleter is implemented by a shard store that deletes settled
// records and their index entries in one write (storage/pebble's Store,
// when the index is an Index on the same DB): one commit per batch of
// acks instead of two. It returns false, having done nothing, for an
// index it cannot write with its records; the first once keys are
// entries written once, as entryDeleter takes them.
type settleDeleter interface {
	DeleteSettled(ctx context.Context, shard string, offsets []uint64, index unacked.Index, keys []unacked.Key, once int) (bool, error)
}

// entryDeleter is implemented by an index that deletes an entry written
// once, and never rewritten since it was last deleted, more cheaply than
// any other (storage/pebble's Index: a SingleDelete, which vanishes with
// the entry in the flush that meets them both). The first once keys are
// such entries; the index may delete them as it deletes any other.
type entryDeleter interface {
	DeletePutOnce(ctx context.Context, keys []unacked.Key, once int) error
}

// deleteEntries deletes the index entries of settled deliveries, the
// first once of which were written once (delivery.once).
func (q *Queue) deleteEntries(ctx context.Context, keys []unacked.Key, once int) error {
	if x, ok := q.cfg.Stores.Index.(entryDeleter); ok && once > 0 {
		return x.DeletePutOnce(ctx, keys, once)
	}
	return q.cfg.Stores.Index.Delete(ctx, keys)
}

// maxFreeDeliveries bounds the recycled deliveries kept for reuse.
const maxFreeDeliveries = 4096

// newDelivery returns a zeroed delivery for out.
func (q *Queue) newDelivery() *delivery {
	if n := len(q.freeDeliveries); n > 0 {
		d := q.freeDeliveries[n-1]
		q.freeDeliveries = q.freeDeliveries[:n-1]
		return d
	}
	if len(q.deliverySlab) == 0 {
		q.deliverySlab = make([]delivery, 64)
	}
	d := &q.deliverySlab[0]
	q.deliverySlab = q.deliverySlab[1:]
	return d
}

// recycle recycles deliveries taken out of out for good.
func (q *Queue) recycle(ds []*delivery) {
	for _, d := range ds {
		*d = delivery{} // drop the message
		if len(q.freeDeliveries) < maxFreeDeliveries {
			q.freeDeliveries = append(q.freeDeliveries, d)
		}
	}
}

// retryLater puts ds back after the store write that settles or requeues
// them failed, so no message is lost or settled twice: they are out again,
// owned by the queue, and their refs wait on retry (undone.settle or
// undone.requeue) for the retry timer.
func (q *Queue) retryLater(retry *[]Ref, ds []*delivery) {
	for _, d := range ds {
		q.setOut(d.rec.Offset, d)
		*retry = append(*retry, Ref{Offset: d.rec.Offset, Claim: d.claim})
	}
	q.scheduleRetry()
}

// requeue is the one requeue primitive: each live delivery's index entry
// flips to Returned in one write and its offset joins the returned set, so
// the message goes back to its original position.
func (q *Queue) requeue(ctx context.Context, refs []Ref) {
	q.requeueAs(ctx, refs, true)
}

// requeueAs is requeue, telling whether the deliveries failed (a reject,
// a channel or connection lost) or were only returned (a nack): a quorum
// queue that counts failed deliveries only counts the first kind (the
// kind decides, quorum.go).
func (q *Queue) requeueAs(ctx context.Context, refs []Ref, failed bool) {
	ds := q.live(refs)
	q.msgKind.requeued(ds, failed)
	if q.cfg.Features.Args.DeliveryLimit >= 0 {
		ds = q.overDeliveryLimit(ctx, ds)
	}
	if len(ds) == 0 {
		return
	}
	now := q.cfg.Clock.Now().UnixNano()
	entries := q.scratch.entries[:0]
	for _, d := range ds {
		e := q.entry(d.rec.Offset, d.owner, now, d.count)
		e.State, e.Failed = unacked.Returned, d.failed
		// A delayed retry's hold is written with the entry, so that it
		// outlives a restart (delayed.go).
		if delay := q.retryDelay(waiting{failed: d.failed}, failed); delay > 0 {
			e.HeldUntil = q.heldUntil(delay)
		}
		entries = append(entries, e)
	}
	defer func() { clear(entries); q.scratch.entries = entries[:0] }()
	if err := q.cfg.Stores.Index.Put(ctx, entries); err != nil {
		// Nobody holds these any more: they stay out, owned by the queue,
		// until the index write succeeds.
		q.cfg.Logger.Error("requeue failed", "queue", q.cfg.Name, "err", err)
		q.retryLater(&q.later().requeue, ds)
		return
	}
	for i, d := range ds {
		w := waiting{rec: d.rec, count: d.count, failed: d.failed}
		if at := entries[i].HeldUntil; at != 0 {
			q.holdAt(w, at) // delayed retry (delayed.go)
			continue
		}
		q.setWaiting(d.rec.Offset, w)
		q.insertReturned(d.rec.Offset)
		q.becameReady(&d.rec)
	}
	q.recycle(ds)
}

func insertSorted(s []uint64, v uint64) []uint64 {
	i, found := slices.BinarySearch(s, v)
	if found {
		return s
	}
	return slices.Insert(s, i, v)
}

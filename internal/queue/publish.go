package queue

import (
	"context"
	"fmt"
	"unsafe"

	"github.com/warrenmq/broker/storage"
)

// Publishing: publishes gathered per mailbox drain, stored in one Append
// (or handed to a committer goroutine when the batch must sync), then
// made ready and confirmed (stored).

// Publish enqueues rec. When conf is non-nil, conf.Confirm(seq, err) runs once
// the record is stored (synced first when it is persistent and the store is
// durable). Publish blocks while the mailbox is full: that is back-pressure.
//
// The message's age counts from rec.EnqueuedAt when the caller set it (the
// session, with when the publish's bytes arrived), else from now. ttl is
// the message's own TTL (the expiration property; NoTTL when it has none);
// the queue's x-message-ttl wins when it is lower (stamp).
func (q *Queue) Publish(rec storage.Record, ttl TTL, conf Confirmer, seq uint64) error {
	return q.send(op{kind: opPublish, rec: rec, conf: conf, seq: seq, ttl: ttl, at: q.acceptedAt(&rec)})
}

// Publishing is one message of PublishBatch: Publish's arguments.
type Publishing struct {
	Rec  storage.Record
	TTL  TTL
	Conf Confirmer
	Seq  uint64
}

// PublishBatch enqueues the messages of ps in their order, as that many
// Publish calls would, but with one hand-off: the mailbox is locked once
// and the actor kicked at most once for the batch. It blocks while the
// mailbox is full, as Publish does, and may take it past its bound by
// the batch it adds (the caller bounds its batches). It fails, with
// nothing enqueued, only when the queue is being deleted or stopped:
// then none of ps is confirmed, and the caller answers them. The caller
// may reuse ps once it returns.
func (q *Queue) PublishBatch(ps []Publishing) error {
	if len(ps) == 0 {
		return nil
	}
	if q.closing.Load() {
		return ErrDeleted
	}
	q.queued.Add(int64(len(ps)))
	var now int64 // one reading for the batch, which arrived at once
	first, ok := q.mbox.putEach(len(ps), func(i int, o *op) {
		p := &ps[i]
		at := p.Rec.EnqueuedAt
		if at == 0 {
			if now == 0 {
				now = q.cfg.Clock.Now().UnixNano()
			}
			at = now
		}
		*o = op{kind: opPublish, rec: p.Rec, conf: p.Conf, seq: p.Seq, ttl: p.TTL, at: at}
	})
	if !ok {
		q.queued.Add(-int64(len(ps)))
		return ErrDeleted
	}
	if first {
		q.Kick()
	}
	return nil
}

// acceptedAt is when a publish was accepted: rec.EnqueuedAt when set, else
// now.
func (q *Queue) acceptedAt(rec *storage.Record) int64 {
	if rec.EnqueuedAt != 0 {
		return rec.EnqueuedAt
	}
	return q.cfg.Clock.Now().UnixNano()
}

type confirm struct {
	conf Confirmer
	seq  uint64
}

// commitResult is a committer's outcome: the batch it appended and the
// Append error.
type commitResult struct {
	recs     []storage.Record
	confirms []confirm
	err      error
}

// flushPublishes stores the gathered publishes and confirms them before it
// returns, after the commit in flight if there is one: what the actor does
// next sees every publish that came before it.
func (q *Queue) flushPublishes(ctx context.Context) {
	q.awaitCommit(ctx)
	if !q.preparePublishes(ctx) {
		return
	}
	_, err := q.cfg.Stores.Shards.Append(ctx, q.cfg.Shard, q.publishes)
	q.stored(ctx, q.publishes, q.confirms, err)
	clear(q.publishes) // drop references to bodies
	q.publishes = q.publishes[:0]
	clear(q.confirms)
	q.confirms = q.confirms[:0]
}

// startCommit stores the gathered publishes without waiting when the
// batch holds a persistent record and the store syncs (it implements
// storage.Syncer): a committer goroutine appends it while the actor goes
// on delivering and settling, and finishCommit confirms it once the sync
// has landed. The records become ready only then, so nothing is delivered
// before it is durable, and the claim order (index entries, then cursor)
// only ever covers stored records. Other batches (transient, in-memory
// stores, queues with length limits, which count the ready messages at
// append time) are stored at once by flushPublishes. With a commit in
// flight it does nothing: the batch grows until that commit returns.
func (q *Queue) startCommit(ctx context.Context) {
	if q.committing || len(q.publishes) == 0 {
		return
	}
	if _, syncs := q.cfg.Stores.Shards.(storage.Syncer); !syncs || q.feat.limited || !anyPersistent(q.publishes) {
		q.flushPublishes(ctx)
		return
	}
	if !q.preparePublishes(ctx) {
		return
	}
	recs, confirms := q.publishes, q.confirms
	q.publishes, q.confirms = q.scratch.spare.recs[:0], q.scratch.spare.confirms[:0]
	q.scratch.spare.recs, q.scratch.spare.confirms = nil, nil
	q.committing = true
	if q.commitDone == nil {
		q.commitDone = make(chan commitResult, 1) // trim lets it go
	}
	shards, shard, done := q.cfg.Stores.Shards, q.cfg.Shard, q.commitDone
	go func() {
		_, err := shards.Append(ctx, shard, recs)
		done <- commitResult{recs: recs, confirms: confirms, err: err}
	}()
}

// awaitCommit waits for the commit in flight, if any, and finishes it.
func (q *Queue) awaitCommit(ctx context.Context) {
	if q.committing {
		q.finishCommit(ctx, <-q.commitDone)
	}
}

// finishCommit applies a committer's outcome as flushPublishes applies an
// Append's, and keeps its slices for the next batch.
func (q *Queue) finishCommit(ctx context.Context, r commitResult) {
	q.own.mustHold()
	q.committing = false
	q.stored(ctx, r.recs, r.confirms, r.err)
	clear(r.recs)
	clear(r.confirms)
	if cap(r.recs) <= maxBatch { // a backlog's larger slices are let go
		q.scratch.spare.recs, q.scratch.spare.confirms = r.recs[:0], r.confirms[:0]
	}
}

// maxPendingSpare bounds the array emptyPending keeps: enough for the
// batches of a queue whose consumers keep up (appendPending makes twice
// what a full batch needs), little for a queue that goes quiet (trim lets
// it go).
const maxPendingSpare = 2 * maxBatch

// appendPending appends recs to pending. Claims take records from the
// front of pending, so its backing array (pendingArr) empties from the
// front while appends fill it at the back: when the back is full, the live
// records move to the front of the same array when they fit, instead of
// append allocating a new array for every window of records.
func (q *Queue) appendPending(recs []storage.Record) {
	if need := len(q.pending) + len(recs); need > cap(q.pending) {
		arr := q.pendingArr
		if cap(arr) < need {
			// Small at first: an idle queue holding a message or two
			// keeps this array.
			arr = make([]storage.Record, max(2*need, 4))
		}
		k := copy(arr, q.pending) // memmove: q.pending may be within arr
		clear(arr[k:])            // consumed and moved-from records: let the bodies go
		q.pendingArr = arr
		q.pending = arr[:k]
	}
	q.pending = append(q.pending, recs...)
}

// emptyPending empties pending once its records are all claimed. A small
// backing array is kept (cleared: the bodies go) for the next batch, so a
// queue whose consumers keep up does not allocate one per batch; a larger
// one is let go.
func (q *Queue) emptyPending() {
	q.pending = nil
	if cap(q.pendingArr) > maxPendingSpare {
		q.pendingArr = nil
		return
	}
	clear(q.pendingArr)
	q.pending = q.pendingArr[:0]
}

// pendingFits reports whether pending may grow by recs: at most
// maxPending records and about maxPendingBytes, counting each record as
// the average of recs (its body, properties and the Record itself), so
// that a backlog of small messages stays in memory and one of large
// messages is read back from the shard. An empty pending takes any
// batch: its records are in memory already, and a consumer that keeps up
// then never reads one back.
func (q *Queue) pendingFits(recs []storage.Record) bool {
	if len(q.pending) == 0 {
		return true
	}
	n := len(q.pending) + len(recs)
	if n > maxPending {
		return false
	}
	size := len(recs) * int(unsafe.Sizeof(storage.Record{}))
	for i := range recs {
		size += len(recs[i].Body) + len(recs[i].Properties)
	}
	return n*(size/max(len(recs), 1)) <= maxPendingBytes
}

func anyPersistent(recs []storage.Record) bool {
	for i := range recs {
		if recs[i].Persistent {
			return true
		}
	}
	return false
}

// preparePublishes applies the length limits to the gathered publishes
// (exec stamped them); it reports whether any are left to store.
func (q *Queue) preparePublishes(ctx context.Context) bool {
	if len(q.publishes) == 0 {
		return false
	}
	if q.feat.limited {
		q.applyLimits(ctx)
	}
	if admit := q.cfg.Features.Admit; admit != nil {
		q.admitPublishes(admit)
	}
	return len(q.publishes) > 0
}

// admitPublishes drops the publishes Features.Admit refuses (a
// deduplicating queue's duplicates), confirming them: a refused message
// is not an error. It runs just before the Append, so every admitted
// record is appended.
func (q *Queue) admitPublishes(admit func(*storage.Record) bool) {
	n := 0
	for i := range q.publishes {
		if !admit(&q.publishes[i]) {
			if c := q.confirms[i]; c.conf != nil {
				c.conf.Confirm([]uint64{c.seq}, nil)
			}
			continue
		}
		q.publishes[n], q.confirms[n] = q.publishes[i], q.confirms[i]
		n++
	}
	clear(q.publishes[n:])
	clear(q.confirms[n:])
	q.publishes, q.confirms = q.publishes[:n], q.confirms[:n]
}

// stored makes an appended batch ready and confirms it (err nil), or
// nacks it and recounts the ready messages (err set). The caller clears
// recs and confirms afterwards.
func (q *Queue) stored(ctx context.Context, recs []storage.Record, confirms []confirm, err error) {
	if err == nil {
		q.claimer.appended(recs)
		if q.feat.bytes {
			for i := range recs {
				q.feat.readyBytes += int64(len(recs[i].Body))
			}
		}
		if q.feat.ttlArg {
			q.feat.ttl = true
		}
		for i := 0; !q.feat.ttl && i < len(recs); i++ {
			q.feat.ttl = recs[i].ExpiresAt != 0
		}
	} else {
		err = fmt.Errorf("queue: store %s: %w", q.cfg.Name, err)
		q.cfg.Logger.Error("append failed", "queue", q.cfg.Name, "err", err)
		// The records may be stored all the same (storage: a failed Append
		// may or may not have stored them); the publishers hear nack (or,
		// when the store says it cannot tell, nothing: see
		// storage.ErrOutcomeUnknown), and the ready count is taken from
		// the shard again, after they heard: recounting reads the store,
		// which may wait as long as the failure lasts.
	}
	// One Confirm call per run of publishes from the same confirmer.
	for i := 0; i < len(confirms); {
		c := confirms[i]
		j := i + 1
		for j < len(confirms) && confirms[j].conf == c.conf {
			j++
		}
		if c.conf != nil {
			q.scratch.seqs = q.scratch.seqs[:0]
			for _, x := range confirms[i:j] {
				q.scratch.seqs = append(q.scratch.seqs, x.seq)
			}
			c.conf.Confirm(q.scratch.seqs, err)
		}
		i = j
	}
	if err != nil {
		q.countReady(ctx)
	}
	if err == nil && q.feat.limited {
		q.dropOverflow(ctx)
	}
}

// countReady takes the count of records at and after the cursor from the
// shard, after an Append whose outcome is unknown.
func (q *Queue) countReady(ctx context.Context) {
	var n uint64
	err := q.eachRecord(ctx, q.cursor, ^uint64(0), func(batch []storage.Record) error {
		n += uint64(len(batch))
		return nil
	})
	if err != nil {
		q.recount = true
		q.scheduleRetry()
		return
	}
	q.recount = false
	q.claimer.counted(n)
	q.emptyPending()
}

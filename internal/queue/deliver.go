package queue

import (
	"context"
	"errors"
	"slices"

	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"
)

// Claiming and delivering: dispatch picks ready messages for consumers
// with credit, claim commits them in the design's order of writes (index
// entries, then the cursor), deliver hands them out; get does the same
// for one basic.get.

// Consume registers c. It fails with ErrExclusiveConsumer or
// ErrConsumersExist as basic.consume's exclusive flag requires.
func (q *Queue) Consume(ctx context.Context, c *Consumer) error {
	_, err := q.call(ctx, op{kind: opConsume, consumer: c})
	return err
}

// Cancel removes the consumer with tag held by owner and returns the number
// of consumers left. No Deliver for it runs after Cancel returns. Messages
// it holds stay unacked: basic.cancel requeues nothing.
func (q *Queue) Cancel(ctx context.Context, owner Owner, tag string) (int, error) {
	r, err := q.call(ctx, op{kind: opCancel, owner: owner, tag: tag})
	return r.stats.Consumers, err
}

// Get claims one message for basic.get. ok is false when the queue has no
// ready message. ready is the count left after the claim (get-ok's
// message-count). With noAck the message is settled at once. When the actor
// sleeps, Get takes the state token from it and runs on the caller's
// goroutine (inline, owner.go), deliveries to consumers included, so the
// caller must hold no lock a Deliver could need.
func (q *Queue) Get(ctx context.Context, owner Owner, noAck bool) (m Message, ready uint64, ok bool, err error) {
	o := op{kind: opGet, owner: owner, noAck: noAck}
	if r, done := q.inline(o); done {
		return r.msg, r.stats.Ready, r.ok, r.err
	}
	r, err := q.call(ctx, o)
	return r.msg, r.stats.Ready, r.ok, err
}

func (q *Queue) addConsumer(c *Consumer) error {
	if q.consumers.exclusive > 0 {
		return ErrExclusiveConsumer
	}
	if c.Exclusive && q.consumers.len() > 0 {
		return ErrConsumersExist
	}
	q.addConsumerSorted(c)
	return nil
}

func (q *Queue) removeConsumer(owner Owner, tag string) {
	q.consumers.remove(owner, tag)
}

func (c *Consumer) acquire() bool {
	if c.room != nil && !c.room.HasRoom(c) {
		return false
	}
	if c.NoAck {
		return true // prefetch does not apply to no-ack consumers
	}
	if c.Credit != nil && !c.Credit.Acquire() {
		return false
	}
	if c.ChannelCredit != nil && !c.ChannelCredit.Acquire() {
		if c.Credit != nil {
			c.Credit.Release(1)
		}
		return false
	}
	return true
}

func (c *Consumer) release() {
	if c.NoAck {
		return
	}
	if c.Credit != nil {
		c.Credit.Release(1)
	}
	if c.ChannelCredit != nil {
		c.ChannelCredit.Release(1)
	}
}

// assignment is one message picked for one consumer (or a get).
type assignment struct {
	consumer *Consumer
	rec      storage.Record
	count    uint32 // deliveries before this one
	failed   uint32 // failed deliveries before this one (quorum.go)
	returned bool   // from the returned set, else from the cursor
}

// fill makes sure pending holds at least n records if the shard has them.
func (q *Queue) fill(ctx context.Context, n int) error {
	if len(q.pending) >= n || uint64(len(q.pending)) >= q.fromCursor {
		return nil
	}
	from := q.cursor
	if len(q.pending) > 0 {
		from = q.pending[len(q.pending)-1].Offset + 1
	}
	want := max(n-len(q.pending), maxBatch)
	recs, err := q.cfg.Stores.Shards.Read(ctx, q.cfg.Shard, from, want)
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		// The counts said there were more records than the shard has:
		// trust the shard. (A shared queue's tail only grows: a claim or
		// a ChangeCursor settles its count, and counted keeps the tail.)
		q.claimer.counted(uint64(len(q.pending)))
	}
	q.appendPending(recs)
	return nil
}

// take picks the next ready message: the lowest returned offset first, then
// the next record at the cursor.
func (q *Queue) take(ctx context.Context, pos int) (assignment, bool, error) {
	if err := q.loadHead(ctx); err != nil {
		return assignment{}, false, err
	}
	if len(q.returned) > 0 {
		i := q.nextReturned()
		off := q.returned[i]
		if i == 0 {
			q.returned = q.returned[1:]
		} else {
			q.returned = slices.Delete(q.returned, i, i+1)
		}
		w := q.waiting[off]
		delete(q.waiting, off)
		return assignment{rec: w.rec, count: w.count, failed: w.failed, returned: true}, true, nil
	}
	if err := q.fill(ctx, pos+1); err != nil {
		return assignment{}, false, err
	}
	if pos >= len(q.pending) {
		return assignment{}, false, nil
	}
	return assignment{rec: q.pending[pos]}, true, nil
}

// putBack undoes take for the assignments of a claim that failed.
func (q *Queue) putBack(batch []assignment) {
	for i := range batch {
		q.becameReady(&batch[i].rec)
	}
	for _, a := range batch {
		if a.returned {
			q.setWaiting(a.rec.Offset, waiting{rec: a.rec, count: a.count, failed: a.failed})
			q.insertReturned(a.rec.Offset)
		}
		if a.consumer != nil {
			a.consumer.release()
		}
	}
}

func (q *Queue) dispatch(ctx context.Context) {
	defer q.flushReceivers() // whatever a return left unflushed
	q.kind.dispatch(ctx)
}

// dispatchMessages is dispatch for a classic or quorum queue (messages).
func (q *Queue) dispatchMessages(ctx context.Context) {
	q.promote(ctx)
	batch := q.scratch.batch[:0]
	defer func() { q.scratch.batch = batch[:0] }()
	lost := 0 // claims lost to other brokers (shared mode)
	for q.ready() > 0 && q.consumers.len() > 0 && q.requeuing.Load() == 0 {
		if q.feat.ttl {
			q.expireHead(ctx)
			if q.ready() == 0 {
				break
			}
		}
		clear(batch) // assignments hold bodies: let the last batch's go
		batch = batch[:0]
		avail := min(q.ready(), maxBatch)
		fromCursor := 0 // records taken from the head of pending
		for uint64(len(batch)) < avail {
			if q.feat.ttl && q.headExpired(ctx, fromCursor) {
				break // expireHead takes it once this batch is claimed
			}
			c := q.acquireConsumer()
			if c == nil {
				break // nobody has credit
			}
			if q.requeuing.Load() > 0 {
				// The credit may be one a requeue freed: handle the
				// requeue first (see requeuing).
				c.release()
				break
			}
			a, ok, err := q.take(ctx, fromCursor)
			if err != nil || !ok {
				c.release()
				if err != nil {
					q.failed(err, batch)
					clear(batch)
					return
				}
				break
			}
			if !a.returned {
				fromCursor++
			}
			q.tookReady(&a.rec)
			a.consumer = c
			batch = append(batch, a)
		}
		if len(batch) == 0 {
			return
		}
		if err := q.claim(ctx, batch, fromCursor); err != nil {
			if errors.Is(err, errLostClaim) {
				// Another broker got there first: give the batch (and
				// its credit) back, catch up with the store, try again,
				// or, after many losses in a row, at the retry.
				q.putBack(batch)
				q.claimer.lost(ctx, hasReturned(batch))
				if lost++; lost < maxLostClaims {
					continue
				}
				q.scheduleRetry()
				clear(batch)
				return
			}
			q.failed(err, batch)
			clear(batch)
			return
		}
		for _, a := range batch {
			q.deliver(ctx, a)
		}
		q.flushReceivers()
	}
	clear(batch)
}

// failed logs a store error, undoes the batch and schedules a retry.
func (q *Queue) failed(err error, batch []assignment) {
	q.cfg.Logger.Error("delivery failed", "queue", q.cfg.Name, "err", err)
	q.putBack(batch)
	q.scheduleRetry()
}

// claim commits a batch of assignments to the stores in the order the
// design requires: index entries first, then the cursor CAS, then the
// deletes of no-ack deliveries. fromCursor records at the head of pending
// are consumed by the batch.
func (q *Queue) claim(ctx context.Context, batch []assignment, fromCursor int) error {
	s := q.cfg.Stores
	now := q.cfg.Clock.Now().UnixNano()
	entries, drop, dropKeys := q.scratch.entries[:0], q.scratch.offsets[:0], q.scratch.keys[:0]
	taken, takenNoAck := q.scratch.taken[:0], q.scratch.takenNoAck[:0]
	defer func() {
		clear(entries) // entries hold strings: let them go
		clear(taken)
		clear(takenNoAck)
		q.scratch.entries, q.scratch.offsets, q.scratch.keys = entries[:0], drop[:0], dropKeys[:0]
		q.scratch.taken, q.scratch.takenNoAck = taken[:0], takenNoAck[:0]
	}()
	for i := range batch {
		a := &batch[i]
		owner := a.consumer.Owner
		if a.returned {
			// Taken from the returned set: a shared queue's claim takes
			// it from the pool (claimWrite.taken).
			taken = append(taken, q.indexKey(a.rec.Offset))
		}
		if a.consumer.NoAck {
			drop = append(drop, a.rec.Offset)
			if a.returned {
				e := q.entry(a.rec.Offset, owner, now, a.count+1)
				e.Failed = a.failed
				takenNoAck = append(takenNoAck, e)
				dropKeys = append(dropKeys, q.indexKey(a.rec.Offset))
			}
			continue
		}
		e := q.entry(a.rec.Offset, owner, now, a.count+1)
		e.Failed = a.failed // kept across a restart (4.3: recover.go)
		entries = append(entries, e)
	}
	w := claimWrite{entries: entries, taken: taken, takenNoAck: takenNoAck, move: fromCursor > 0, n: fromCursor}
	if fromCursor > 0 {
		w.to = q.pending[fromCursor-1].Offset + 1
	}
	if err := q.claimer.commit(ctx, w); err != nil {
		return err
	}
	if fromCursor == len(q.pending) {
		q.emptyPending()
	} else {
		q.pending = q.pending[fromCursor:]
	}
	if len(drop) > 0 {
		if err := s.Shards.DeleteByOffsets(ctx, q.cfg.Shard, drop); err != nil {
			// The messages are delivered (at most once, as no-ack
			// promises); a record left behind is deleted at recovery.
			q.cfg.Logger.Error("delete failed", "queue", q.cfg.Name, "err", err)
		}
	}
	if len(dropKeys) > 0 {
		if err := s.Index.Delete(ctx, dropKeys); err != nil {
			q.cfg.Logger.Error("index delete failed", "queue", q.cfg.Name, "err", err)
		}
	}
	return nil
}

func (q *Queue) indexKey(offset uint64) unacked.Key {
	return unacked.Key{VHost: q.cfg.VHost, Queue: q.cfg.Name, Offset: offset}
}

func (q *Queue) entry(offset uint64, owner Owner, now int64, count uint32) unacked.Entry {
	return unacked.Entry{
		Key:           q.indexKey(offset),
		Connection:    owner.Connection,
		Channel:       owner.Channel,
		Broker:        q.cfg.Broker,
		Incarnation:   q.cfg.Incarnation,
		DeliveredAt:   now,
		DeliveryCount: count,
		State:         unacked.Delivered,
	}
}

func (q *Queue) deliver(ctx context.Context, a assignment) {
	c := a.consumer
	m := q.handOut(a, c.Owner, c.NoAck, c)
	if c.Receiver.Deliver(c, m) {
		q.noteFlush(c)
		q.countDelivery(false, c.NoAck, m.Redelivered)
		return
	}
	// The channel is closing: take the message back and drop the consumer.
	c.release()
	q.removeConsumer(c.Owner, c.Tag)
	if !c.NoAck {
		q.requeueAs(ctx, []Ref{m.Ref}, false) // never reached the consumer
	}
}

// handOut turns the claimed assignment a into the message handed to
// owner under a new claim number and, unless noAck, records it as
// outstanding until it is settled; c is the consumer it goes to, nil for
// a basic.get.
func (q *Queue) handOut(a assignment, owner Owner, noAck bool, c *Consumer) Message {
	q.claims++
	m := Message{
		Record:        a.rec,
		Redelivered:   a.count > 0,
		DeliveryCount: a.count + 1,
		Ref:           Ref{Offset: a.rec.Offset, Claim: q.claims},
	}
	if a.count > 0 {
		m.Properties = q.msgKind.redelivery(a.rec.Properties, a.failed, a.count)
	}
	if !noAck {
		d := q.newDelivery()
		*d = delivery{rec: a.rec, claim: q.claims, owner: owner, count: a.count + 1, failed: a.failed, consumer: c,
			once: !a.returned && !q.cfg.Shared}
		q.setOut(a.rec.Offset, d)
	}
	return m
}

func (q *Queue) get(ctx context.Context, owner Owner, noAck bool) (Message, bool, error) {
	var a assignment
	for lost := 0; ; lost++ {
		if q.feat.ttl {
			q.expireHead(ctx)
		}
		q.promote(ctx)
		if q.ready() == 0 {
			return Message{}, false, nil
		}
		var ok bool
		var err error
		a, ok, err = q.take(ctx, 0)
		if err != nil || !ok {
			return Message{}, false, err
		}
		q.tookReady(&a.rec)
		a.consumer = &Consumer{Owner: owner, NoAck: noAck}
		n := 0
		if !a.returned {
			n = 1
		}
		err = q.claim(ctx, []assignment{a}, n)
		if err == nil {
			break
		}
		q.putBack([]assignment{a})
		if !errors.Is(err, errLostClaim) {
			return Message{}, false, err
		}
		// Another broker claimed it first: catch up and take the next.
		q.claimer.lost(ctx, a.returned)
		if lost >= maxLostClaims {
			return Message{}, false, nil // get-empty: the others took them
		}
	}
	m := q.handOut(a, owner, noAck, nil)
	q.countDelivery(true, noAck, m.Redelivered)
	return m, true, nil
}

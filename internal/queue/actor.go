package queue

import (
	"context"
	"sync"
	"time"

	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/unacked"
)

// The actor: its ops, the mailbox loop (run), and what follows every
// batch of ops (afterOps). Calls reach it through send and call.

type opKind uint8

const (
	opPublish opKind = iota
	opConsume
	opCancel
	opGet
	opAck
	opReject
	opRequeue
	opRequeueEntries
	opPurge
	opStats
	opDelete
	opInspect
	opTimer        // a TTL or x-expires timer fired (ttl.go, expires.go)
	opDeadLettered // every target stored a dead-lettered copy
	opTouch        // the queue was redeclared: it is in use
	opUnused       // is the queue unused for x-expires?
	opRetention    // a stream's x-max-age timer fired (stream.go)
)

type op struct {
	kind     opKind
	rec      storage.Record
	conf     Confirmer
	seq      uint64
	consumer *Consumer
	tag      string
	owner    Owner
	noAck    bool
	refs     []Ref
	ref      [1]Ref // a single settle, sent without a slice (see settleOne)
	one      bool
	entries  []unacked.Entry
	inspect  func(context.Context) // opInspect: runs on the actor (inspect.go)
	ttl      TTL                   // opPublish: the message's own TTL
	at       int64                 // opPublish: when the queue accepted it (Unix ns; 0: when the actor takes it)
	failed   bool                  // opDeadLettered: some target failed to store the copy
	released bool                  // opRequeue: returned, not a failed delivery (Return)
	reply    chan reply
}

type reply struct {
	msg   Message
	ok    bool
	n     uint64
	stats Stats
	err   error
}

// send posts o to the actor, or fails when the actor is stopping: every
// op the mailbox took is handled or answered (drainMailbox), so no
// publish is left without its confirm.
func (q *Queue) send(o op) error { return q.sendOp(o, true) }

// sendOp is send; wait false sends without waiting for room in a full
// mailbox, for a sender that must not wait on the actor (SetArgs).
func (q *Queue) sendOp(o op, wait bool) error {
	if q.closing.Load() {
		return ErrDeleted
	}
	requeue := o.kind == opRequeue || o.kind == opRequeueEntries
	if requeue {
		q.requeuing.Add(1) // before the send, so before the caller frees credit
	}
	q.queued.Add(1)
	first, ok := q.mbox.put(&o, wait)
	if !ok {
		q.queued.Add(-1)
		if requeue {
			q.requeuing.Add(-1)
		}
		return ErrDeleted
	}
	if first {
		q.Kick()
	}
	return nil
}

// inline runs o on the calling goroutine instead of the actor's, when the
// actor sleeps and nothing is queued ahead of o: a basic.get round trip
// then costs no thread wake-up for the hop to the actor and back, which on
// a small machine is most of its price (docs/performance.md). The caller
// takes the state token from the sleeping actor (owner.go) and is the
// state's one owner until it gives it back; an empty mailbox and inbox
// under it mean every op sent before o has been handled, so o sees what
// it would have seen in the mailbox. Shared queues keep the mailbox
// (inPlace is false): their answers wait on observed changes.
func (q *Queue) inline(o op) (reply, bool) {
	if !q.inPlace || !q.own.tryAcquire() {
		return reply{}, false
	}
	defer q.own.release()
	q.prepare()
	// A batch being committed is the actor's to finish: it waits for the
	// outcome on commitDone too, and had it taken it while we hold the
	// token, neither of us would go on.
	if q.queued.Load() != 0 || q.inboxLen.Load() != 0 || q.closing.Load() || q.deleted || q.committing {
		return reply{}, false
	}
	q.own.inPlace++
	ctx := context.Background()
	retrying := q.retryC != nil
	r := q.exec(ctx, o)
	q.afterOps(ctx)
	q.publishCounts()
	if !retrying && q.retryC != nil || q.committing {
		// A store error scheduled a retry, or a commit started: the
		// actor, asleep in a select that predates them or not running,
		// must wake to wait on it.
		q.Kick()
	} else {
		// The actor's idle timer lets go of what this op left (trim).
		q.wake()
	}
	return r, true
}

// call posts o and waits for the actor's reply.
func (q *Queue) call(ctx context.Context, o op) (reply, error) {
	o.reply = make(chan reply, 1)
	if err := q.send(o); err != nil {
		return reply{}, err
	}
	select {
	case r := <-o.reply:
		return r, r.err
	case <-q.done:
		// The actor may have answered just before it stopped.
		select {
		case r := <-o.reply:
			return r, r.err
		default:
			return reply{}, ErrDeleted
		}
	case <-ctx.Done():
		return reply{}, ctx.Err()
	}
}

// idleAfter is how long the actor goroutine waits with nothing to do
// before it exits: it goes between idleAfter and twice that after its
// last step. A queue that is sent work more often than that keeps its
// goroutine (a busy queue starts none per message); one that goes quiet
// gives back its stack, which a step through the stores' read paths may
// have grown to tens of KiB. A variable for the tests; Start copies it.
var idleAfter = 500 * time.Millisecond

// wake starts the actor goroutine unless one exists. The goroutine
// started waits for a Kick, an op or its idle timer like one that has run
// all along.
func (q *Queue) wake() {
	if !q.running.Load() && q.running.CompareAndSwap(false, true) {
		go q.run()
	}
}

// run is the actor goroutine: it exists while the queue has work, and a
// little longer (idleAfter). Each step takes the state token, handles
// what woke it and what followed (afterOps), and gives the token back.
// It exits when a whole idle period passed with no step (its own or one a
// caller ran in place), no commit in flight and no retry armed: park
// decides, so a Kick racing with the exit is never lost. The stop path
// (StopAll, or a delete) keeps the token and running for good.
func (q *Queue) run() {
	q.enterActor()
	ctx := context.Background()
	idle := newIdleTimer(q.idleAfter)
	defer freeIdleTimer(idle)
	// The channels a step may arm are state (an in-place op may schedule
	// a retry, a step starts a commit), so the select waits on copies
	// taken with the token.
	q.acquire()
	retryC, commitC := q.retryC, q.commitDone
	mark := q.own.steps + q.own.inPlace
	q.own.release()
	for {
		select {
		case <-q.kick:
			// A send into an empty mailbox kicks, and so does a channel
			// that freed credit: either way everything waiting is taken,
			// so publishes go to the store in one batch and deliveries in
			// one claim.
			q.acquire()
			if h := q.halting.Load(); h != nil {
				q.stopActor(ctx, h) // holding the token for good
				return
			}
			q.handleMailbox(ctx)
		case r := <-commitC:
			q.acquire()
			q.finishCommit(ctx, r)
		case <-retryC:
			q.acquire()
			q.retryC = nil
			q.redo(ctx)
		case <-idle.C:
			q.acquire()
			if n := q.own.steps + q.own.inPlace; n != mark || q.committing || q.retryC != nil || q.halting.Load() != nil {
				mark = n
				q.own.release()
				idle.Reset(q.idleAfter)
				continue
			}
			q.trim()
			if q.park() {
				return
			}
			// A Kick came in while it parked: this goroutine serves it.
			if h := q.halting.Load(); h != nil {
				q.stopActor(ctx, h)
				return
			}
			q.handleMailbox(ctx)
			idle.Reset(q.idleAfter)
		}
		if q.inboxLen.Load() > 0 && !q.deleted {
			q.drainInbox(ctx)
		}
		if q.deleted {
			// Holding the token for good: nothing runs in place any more.
			q.final(ctx)
			return
		}
		q.claimer.catchUp(ctx)
		q.afterOps(ctx)
		q.endStep()
		q.publishCounts()
		q.own.steps++
		retryC, commitC = q.retryC, q.commitDone
		q.own.release()
	}
}

// park is the idle actor's exit, called holding the token: it clears
// running, gives the token up, and then looks for a Kick that came in
// meanwhile. It reports whether the goroutine exits; false means the Kick
// is this goroutine's to serve and it holds the token again. A Kick sends
// its signal before it looks at running, and park clears running before
// it looks for the signal, so one of them sees the other: a wake-up is
// never lost, and when a Kick started another goroutine meanwhile, that
// one gets the signal and this one exits.
func (q *Queue) park() bool {
	q.actors.Add(-1)
	q.running.Store(false)
	q.own.release()
	select {
	case <-q.kick:
	default:
		return true
	}
	if !q.running.CompareAndSwap(false, true) {
		// Another goroutine was started: hand it the wake-up.
		select {
		case q.kick <- struct{}{}:
		default:
		}
		return true
	}
	q.enterActor()
	q.acquire()
	return false
}

// enterActor counts the goroutine in as the actor; a second one at once
// is a bug in the start and exit protocol (wake, park).
func (q *Queue) enterActor() {
	if q.actors.Add(1) != 1 {
		panic("queue: two actor goroutines at once")
	}
}

// stopActor is the actor's last step on StopAll: quiesce, then drain;
// the token and running stay taken for good.
func (q *Queue) stopActor(ctx context.Context, h *halt) {
	q.quiesce(ctx, h)
	q.final(ctx)
}

// final is the actor's end, stopped or deleted: drain, then done.
func (q *Queue) final(ctx context.Context) {
	q.drain(ctx)
	if q.retry != nil {
		q.retry.Stop()
	}
	close(q.done)
}

// acquire takes the state token for a step and makes the state ready for
// one: trim may have let go of the maps.
func (q *Queue) acquire() {
	q.own.acquire()
	q.prepare()
}

// prepare takes what trim let go of and a step may use.
func (q *Queue) prepare() {
	if q.scratch == nil {
		q.scratch = scratches.Get().(*scratch)
	}
}

// scratches and idleTimers are shared by every queue's actor: an actor
// started again takes them instead of allocating its own, and an idle
// queue holds neither.
var (
	scratches  = sync.Pool{New: func() any { return new(scratch) }}
	idleTimers sync.Pool
)

// freeScratch clears s, so the pool keeps no message or consumer alive,
// and puts it back; the slices keep their capacity for the next actor.
func freeScratch(s *scratch) {
	clear(s.batch[:cap(s.batch)])
	clear(s.entries[:cap(s.entries)])
	clear(s.keys[:cap(s.keys)])
	clear(s.live[:cap(s.live)])
	clear(s.taken[:cap(s.taken)])
	clear(s.takenNoAck[:cap(s.takenNoAck)])
	clear(s.flush[:cap(s.flush)])
	clear(s.spare.recs[:cap(s.spare.recs)])
	clear(s.spare.confirms[:cap(s.spare.confirms)])
	s.batch, s.entries, s.offsets, s.keys, s.live = s.batch[:0], s.entries[:0], s.offsets[:0], s.keys[:0], s.live[:0]
	s.taken, s.takenNoAck, s.flush = s.taken[:0], s.takenNoAck[:0], s.flush[:0]
	s.spare.recs, s.spare.confirms, s.seqs = s.spare.recs[:0], s.spare.confirms[:0], s.seqs[:0]
	scratches.Put(s)
}

func newIdleTimer(d time.Duration) *time.Timer {
	if t, ok := idleTimers.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

// freeIdleTimer stops t and puts it back. A stopped timer's channel
// holds nothing (Go 1.23 timers), so the next Reset starts clean.
func freeIdleTimer(t *time.Timer) {
	t.Stop()
	idleTimers.Put(t)
}

// setOut and setWaiting write to the maps, made on the first write since
// trim let them go: a queue woken for a call that delivers nothing makes
// neither.
func (q *Queue) setOut(off uint64, d *delivery) {
	if q.out == nil {
		q.out = make(map[uint64]*delivery)
	}
	q.out[off] = d
}

func (q *Queue) setWaiting(off uint64, w waiting) {
	if q.waiting == nil {
		q.waiting = make(map[uint64]waiting)
	}
	q.waiting[off] = w
}

// trim lets go of what an idle queue holds only for traffic: empty maps
// (a map keeps the room it grew to), the record cache ahead of the cursor
// (read again from the shard when needed), the delivery slab when nothing
// is out, and the scratch and batch slices. What is state stays: the
// returned set, the deliveries out, the consumers, the features'
// bookkeeping. It runs when the goroutine exits idle, and at Start, and
// leaves the queue's memory estimate for Sampled.
func (q *Queue) trim() {
	q.own.mustHold()
	if len(q.out) == 0 {
		q.out = nil
		q.deliverySlab, q.freeDeliveries = nil, nil
	}
	if len(q.waiting) == 0 {
		q.waiting = nil
	}
	q.kind.trim()
	if !q.committing { // always so when idle; trim runs then and at Start
		q.commitDone = nil
		if q.scratch != nil {
			freeScratch(q.scratch)
			q.scratch = nil
		}
	}
	if len(q.publishes) == 0 {
		q.publishes, q.confirms = nil, nil
	}
	if len(q.acks) == 0 {
		q.acks = nil
	}
	if q.consumers.len() == 0 {
		q.consumers = consumerSet{}
	}
	// What an idle queue holds is fixed until its next step: Sampled
	// reads it from here.
	q.counts.memory.Store(q.memory())
}

// handleMailbox handles every op waiting in the mailbox. After a delete
// the rest are answered as drainMailbox answers them.
func (q *Queue) handleMailbox(ctx context.Context) {
	chunks := q.mbox.take(false)
	for c := chunks; c != nil; c = c.next {
		for i := range c.n {
			switch o := &c.ops[i]; {
			case q.deleted:
				q.refuse(ctx, o)
			case o.kind == opPublish && !q.kind.handles(opPublish):
				// The op most often sent, gathered in place: no copy of
				// it on the way (exec takes one).
				q.countOp(o)
				q.gather(ctx, o)
			default:
				q.handle(ctx, *o)
			}
			q.queued.Add(-1)
		}
	}
	freeChunks(chunks)
}

// afterOps is what follows every batch of ops, on the actor or inline:
// gathered acks settled, a commit started, deliveries made.
func (q *Queue) afterOps(ctx context.Context) {
	q.own.mustHold()
	q.flushAcks(ctx)
	q.startCommit(ctx)
	q.dispatch(ctx)
	q.afterDispatch(ctx)
}

// drain is the actor's last step: the mailbox is drained (if quiesce did
// not already), the inbox closed (publishes in it are stored, or dropped
// after a delete) and the last publishes stored. Leaving messages still
// waiting for a target's answer stay in the store as they are.
func (q *Queue) drain(ctx context.Context) {
	q.drainMailbox(ctx)
	q.flushAcks(ctx)
	q.closeInbox(ctx)
	q.flushPublishes(ctx)
	q.kind.drain(ctx)
	q.endStep()
	q.dropLeaving()
	q.release()
}

// release lets go of everything the stopped actor held in memory. A
// stopped queue may stay reachable for a while (a channel keeps the Queue
// of its unacked deliveries until they are settled or the channel
// closes), and should cost no more than its struct meanwhile.
func (q *Queue) release() {
	q.pending, q.pendingArr, q.returned = nil, nil, nil
	q.waiting, q.out = nil, nil
	q.publishes, q.confirms, q.acks = nil, nil, nil
	q.scratch = nil
	q.deliverySlab, q.freeDeliveries = nil, nil
	q.undone = nil
	q.consumers.reset()
	q.kind.release()
}

// flushAcks settles the acks gathered by handle, in one settle.
func (q *Queue) flushAcks(ctx context.Context) {
	if len(q.acks) == 0 {
		return
	}
	q.settle(ctx, q.acks)
	q.acks = q.acks[:0]
}

// gather adds a publish to the batch the step stores (startCommit),
// starting the store once the batch is full.
func (q *Queue) gather(ctx context.Context, o *op) {
	q.stamp(o)
	q.publishes = append(q.publishes, o.rec)
	q.confirms = append(q.confirms, confirm{conf: o.conf, seq: o.seq})
	if len(q.publishes) >= maxBatch {
		if q.committing && len(q.publishes) >= maxBacklog {
			q.awaitCommit(ctx)
		}
		q.startCommit(ctx)
	}
}

// handle executes o and answers its caller, if one waits.
func (q *Queue) handle(ctx context.Context, o op) {
	r := q.exec(ctx, o)
	if o.reply != nil {
		o.reply <- r
	}
}

// exec executes o and returns its answer.
func (q *Queue) exec(ctx context.Context, o op) reply {
	q.own.mustHold()
	// A single settle's ref moves to a local array: assigned into o it
	// would go to the heap with o (o.rec is appended to publishes).
	var one [1]Ref
	refs := o.refs
	if o.one {
		one = o.ref
		refs = one[:]
	}
	q.countOp(&o)
	if q.kind.handles(o.kind) {
		return q.kind.exec(ctx, o)
	}
	if o.kind == opPublish {
		q.gather(ctx, &o)
		return reply{}
	}
	if o.kind == opAck {
		// Acks are gathered and settled with one record delete and one
		// index delete per mailbox drain (flushAcks). They need not wait
		// for the publishes before them: a delivered message was stored
		// before it went out, and acking it changes no ready count.
		q.acks = append(q.acks, refs...)
		if len(q.acks) >= maxBatch {
			q.flushAcks(ctx)
		}
		return reply{}
	}
	// Everything else sees the acks and publishes that came before it: the
	// first settle of a delivery wins, so an ack must not be overtaken.
	q.flushAcks(ctx)
	q.flushPublishes(ctx)
	// Answers (Stats, Get, Purge) reflect every change other brokers
	// made that was observed so far.
	q.claimer.catchUp(ctx)
	var r reply
	switch o.kind {
	case opConsume:
		r.err = q.addConsumer(o.consumer)
		q.used()
	case opCancel:
		q.removeConsumer(o.owner, o.tag)
		r.stats.Consumers = q.consumers.len()
		q.used()
	case opGet:
		q.used()
		r.msg, r.ok, r.err = q.get(ctx, o.owner, o.noAck)
		r.stats = q.stats()
	case opAck:
		q.settle(ctx, refs)
	case opReject:
		q.reject(ctx, refs)
	case opRequeue:
		q.requeueAs(ctx, refs, !o.released)
		q.requeuing.Add(-1)
	case opRequeueEntries:
		defer q.requeuing.Add(-1)
		var refs []Ref
		var foreign []unacked.Entry
		for _, e := range o.entries {
			d, ok := q.out[e.Offset]
			if ok && d.owner == (Owner{Connection: e.Connection, Channel: e.Channel}) {
				refs = append(refs, Ref{Offset: e.Offset, Claim: d.claim})
			} else if !ok {
				foreign = append(foreign, e)
			}
		}
		q.requeue(ctx, refs)
		if len(foreign) > 0 {
			q.claimer.requeueForeign(ctx, foreign)
		}
	case opPurge:
		r.n, r.err = q.claimer.purge(ctx)
	case opStats:
		r.stats = q.stats()
	case opDelete:
		r.n, r.err = q.deleteAll(ctx)
	case opInspect:
		o.inspect(ctx)
	case opTimer:
		q.releaseHeld(ctx)
		q.expireHead(ctx)
	case opDeadLettered:
		q.deadLettered(ctx, o.seq, o.failed)
	case opTouch:
		q.used()
	case opUnused:
		r.ok = q.unused()
	}
	return r
}

// scheduleRetry arms the retry timer unless it is armed: the actor then
// redoes what store errors left undone and tries to deliver again.
func (q *Queue) scheduleRetry() {
	if q.retryC != nil {
		return
	}
	if q.retry == nil {
		q.retry = time.NewTimer(retryAfter)
	} else {
		q.retry.Reset(retryAfter)
	}
	q.retryC = q.retry.C
}

// settles reports whether ops of kind settle deliveries.
func (q *Queue) settles(kind opKind) bool {
	return kind == opAck || kind == opReject || kind == opRequeue || kind == opRequeueEntries
}

// redo retries the work store errors left undone. Each step that fails
// again puts its work back and re-arms the timer.
func (q *Queue) redo(ctx context.Context) {
	q.own.mustHold()
	w := q.undone
	q.undone = nil // what fails again is put back, in a new one
	if w != nil && len(w.settle) > 0 {
		q.settle(ctx, w.settle)
	}
	if w != nil && len(w.keys) > 0 {
		if err := q.cfg.Stores.Index.Delete(ctx, w.keys); err != nil {
			q.cfg.Logger.Error("index delete failed again", "queue", q.cfg.Name, "err", err)
			q.later().keys = append(q.later().keys, w.keys...)
			q.scheduleRetry()
		}
	}
	if w != nil && len(w.requeue) > 0 {
		q.requeue(ctx, w.requeue)
	}
	if q.recount {
		q.countReady(ctx)
	}
}

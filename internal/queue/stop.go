package queue

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/warrenmq/broker/storage"
)

// Group is the set of queues dead-lettering can connect: one vhost's. It
// counts the work in flight between them — ops posted to an inbox and not
// yet handled (a dead-lettered copy, a target's answer), and messages a
// source holds in leaving — so StopAll can let every dead-lettering the
// queues accepted finish before any of them stops. The count only rises
// inside a step that holds some of it (an op being handled, or a
// message leaving), so once the mailboxes are closed and it reaches zero,
// it stays there. A nil Group in Features gives a queue a group of its
// own.
type Group struct {
	n    atomic.Int64
	zero chan struct{} // signalled when n reaches zero; nil: waiters poll
}

// NewGroup returns an empty Group.
func NewGroup() *Group { return &Group{zero: make(chan struct{}, 1)} }

func (g *Group) add(d int64) {
	if g.n.Add(d) == 0 {
		select {
		case g.zero <- struct{}{}:
		default:
		}
	}
}

// waitZero waits until the count is zero or the deadline passes.
func (g *Group) waitZero(deadline <-chan time.Time) bool {
	// The signal has one slot and many possible waiters: the tick bounds
	// how long a waiter that missed it sleeps.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for g.n.Load() != 0 {
		select {
		case <-g.zero:
		case <-tick.C:
		case <-deadline:
			return g.n.Load() == 0
		}
	}
	return true
}

// stopGrace bounds how long a stop waits for dead-letterings in flight.
// Each is a store write in the target and two deletes in the source, so
// it is milliseconds; the bound only keeps a broken store from holding up
// shutdown. What it abandons stays in the source (see StopAll).
const stopGrace = 10 * time.Second

// Stop stops the actor without touching the stores (broker shutdown), and
// waits for it. It is StopAll of q alone: q finishes the dead-letterings
// it started (its targets keep running) before it stops. It is safe to
// call more than once and after Delete.
func (q *Queue) Stop() { StopAll([]*Queue{q}) }

// StopAll stops the actors of qs in three steps, so that a graceful stop
// finishes every operation the queues accepted and leaves nothing half
// done:
//
//  1. every queue refuses new calls and handles what its mailbox holds
//     (publishes stored, acks and rejects settled: a reject may start a
//     dead-lettering);
//  2. the queues go on serving their inboxes, where dead-lettered copies
//     and the targets' answers travel, until their Group counts nothing in
//     flight: every copy stored and every source deleted (at most
//     stopGrace);
//  3. every inbox closes and the actors exit.
//
// Whatever step 2 abandons keeps the design's order of writes: a copy
// posted to a queue that already stopped is refused, and its source puts
// the message back (it stays there, redelivered at the next start); a
// source that stops before a target's answer keeps its record and entry,
// so after a restart the message is in both queues, the source's copy
// redelivered. Nothing is deleted at a source before its copy is stored.
func StopAll(qs []*Queue) {
	hs := make([]*halt, len(qs))
	for i, q := range qs {
		q.stopOnce.Do(func() {
			q.halting.Store(&halt{quiet: make(chan struct{}), finish: make(chan struct{})})
		})
		hs[i] = q.halting.Load()
		q.Kick() // the actor's next step stops it; an idle queue's starts one
	}
	for i, q := range qs {
		// A deleted queue's actor ended without quiescing.
		select {
		case <-hs[i].quiet:
		case <-q.done:
		}
	}
	deadline := time.NewTimer(stopGrace)
	defer deadline.Stop()
	if len(qs) == 1 {
		// Alone, q waits for its own dead-letterings only: the rest of its
		// group keeps running and may never be idle.
		qs[0].leavingN.waitZero(deadline.C)
	} else {
		seen := make(map[*Group]bool)
		for _, q := range qs {
			if g := q.group; !seen[g] {
				seen[g] = true
				g.waitZero(deadline.C)
			}
		}
	}
	for _, h := range hs {
		h.finishOnce.Do(func() { close(h.finish) })
	}
	for _, q := range qs {
		<-q.done
	}
}

// halt is what StopAll and the stopping actor say to each other, made
// when StopAll starts so that a queue that is never stopped pays no
// channels for it: quiet is closed when the actor has drained its
// mailbox, finish when the stopper lets it close its inbox and exit.
type halt struct {
	quiet      chan struct{}
	finish     chan struct{}
	finishOnce sync.Once
}

// quiesce is step 1 and 2 of StopAll on the actor, holding work for good:
// the mailbox is closed and drained, then the inbox is served until the
// stopper says finish.
func (q *Queue) quiesce(ctx context.Context, h *halt) {
	q.drainMailbox(ctx)
	q.flushAcks(ctx)
	q.flushPublishes(ctx)
	close(h.quiet)
	// The Kick that brought the actor here may have been a post's: the
	// inbox is served first, then at every Kick.
	for {
		if q.inboxLen.Load() > 0 && !q.deleted {
			q.drainInbox(ctx)
		}
		q.flushAcks(ctx)
		q.flushPublishes(ctx)
		q.endStep()
		select {
		case <-q.kick:
		case <-h.finish:
			return
		}
	}
}

// drainMailbox closes the mailbox and answers every op it took: publishes
// are stored (or, after a delete, confirmed as dropped, as RabbitMQ does
// for a queue deleted under a publisher), settles are applied, calls get
// ErrDeleted. A send after it fails with ErrDeleted, so no publish is left
// without its confirm.
func (q *Queue) drainMailbox(ctx context.Context) {
	q.closing.Store(true)
	q.stopFeatures()
	chunks := q.mbox.take(true)
	for c := chunks; c != nil; c = c.next {
		for i := range c.n {
			q.refuse(ctx, &c.ops[i])
			q.queued.Add(-1)
		}
	}
	freeChunks(chunks)
}

// refuse answers an op that reached a stopping or deleted queue.
func (q *Queue) refuse(ctx context.Context, o *op) {
	switch {
	case o.kind == opPublish && !q.deleted:
		q.handle(ctx, *o)
	case q.settles(o.kind) && !q.deleted:
		// An ack that reached the queue before shutdown is kept:
		// otherwise its message would come back after a restart.
		q.handle(ctx, *o)
	case o.kind == opPublish:
		if o.conf != nil {
			o.conf.Confirm([]uint64{o.seq}, nil)
		}
	case o.reply != nil:
		o.reply <- reply{err: ErrDeleted}
	}
}

// endStep gives back to the group the inbox ops the step just finished
// handled. It runs after everything the step did (dispatch and expiry
// included), so work those ops started is counted before they stop being.
func (q *Queue) endStep() {
	if n := q.stepOps; n > 0 {
		q.stepOps = 0
		q.group.add(-int64(n))
	}
}

// setLeaving and unsetLeaving keep the leaving map and its counts (the
// queue's own and its group's) together.
func (q *Queue) setLeaving(off uint64, r storage.Record) {
	if q.feat.leaving == nil {
		q.feat.leaving = make(map[uint64]storage.Record)
	}
	q.feat.leaving[off] = r
	q.leavingN.add(1)
	q.group.add(1)
}

func (q *Queue) unsetLeaving(off uint64) (storage.Record, bool) {
	r, ok := q.feat.leaving[off]
	if ok {
		delete(q.feat.leaving, off)
		q.leavingN.add(-1)
		q.group.add(-1)
	}
	return r, ok
}

// dropLeaving forgets every leaving message (the queue was deleted, or it
// stops with them abandoned: their records and entries stay in the store).
func (q *Queue) dropLeaving() {
	if n := int64(len(q.feat.leaving)); n > 0 {
		q.leavingN.add(-n)
		q.group.add(-n)
	}
	q.feat.leaving = nil
}

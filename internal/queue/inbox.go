package queue

import "context"

// The inbox: ops posted to the actor by other goroutines (post), taken
// and run by the actor, and answered when the queue stops.

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

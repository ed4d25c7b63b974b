package queue

import "context"

// SetArgs replaces the settings the queue runs with, live: the vhost calls
// it when a policy that applies to the queue is set, changed or deleted
// (internal/policy computes a from the declared arguments and the
// policies). Queue type, x-max-priority and single active consumer are
// fixed at declare; a must carry them unchanged.
//
// The change is an op like any other, so it takes effect between two
// steps of the actor and never costs a publish or a delivery anything:
// the features read their settings from the actor's state, as before. A
// new message TTL stamps the messages published from now on (a message
// keeps the deadline it was published with, as in RabbitMQ); a lowered
// length limit drops or dead-letters the excess at once (drop-head), a
// new dead-letter exchange takes the next dead-lettered message, and a
// new x-expires period restarts the expiry timer.
//
// The op goes to the mailbox, behind the publishes sent before it and
// ahead of those sent after SetArgs returned, so a policy set before a
// publish applies to it: an op posted to the inbox instead runs after the
// mailbox's ops of the same step, and on a loaded machine the first
// publish after a policy change escaped it. It does not wait for room in
// a full mailbox, as a post does not: the vhost calls it holding its
// topology lock. A queue that is stopping drops it (the next start reads
// the policies again).
func (q *Queue) SetArgs(a Args) {
	_ = q.sendOp(op{kind: opInspect, inspect: func(ctx context.Context) { q.applyArgs(ctx, a) }}, false)
}

// applyArgs is SetArgs on the actor.
func (q *Queue) applyArgs(ctx context.Context, a Args) {
	q.kind.applyArgs(ctx, a)
}

// applyMessageArgs is applyArgs for a classic or quorum queue (messages).
func (q *Queue) applyMessageArgs(ctx context.Context, a Args) {
	old := q.cfg.Features.Args
	a.Quorum, a.MaxPriority, a.SingleActive = old.Quorum, old.MaxPriority, old.SingleActive
	if a == old {
		return
	}
	q.cfg.Features.Args = a
	f := &q.feat
	f.ttlArg = a.HasMessageTTL
	if a.HasMessageTTL {
		f.ttl = true
	}
	wasBytes := f.bytes
	f.limited = a.MaxLength >= 0 || a.MaxLengthBytes >= 0
	f.bytes = a.MaxLengthBytes >= 0
	if f.bytes && !wasBytes {
		// readyBytes was not kept: count it once, with no append in
		// flight so that nothing is counted twice.
		if q.committing {
			q.awaitCommit(ctx)
		}
		q.countReadyBytes(ctx)
	}
	if a.Expires != old.Expires {
		if a.Expires > 0 {
			q.used()
		} else if t := f.expiresTimer; t != nil {
			t.Stop()
			f.expiresTimer = nil
		}
	}
	if f.limited {
		q.dropOverflow(ctx)
	}
}

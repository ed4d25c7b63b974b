package queue

import (
	"context"

	"github.com/warrenmq/broker/meta"
)

// kind is what a queue's kind decides in the actor, chosen once at Start
// as the claiming strategy is (claimer.go): a classic queue (classic.go)
// or a quorum queue (quorum.go), both message kinds (messageKind: messages
// are claimed, settled, requeued and dead-lettered), or a stream
// (*streamState, stream*.go: a log each consumer reads at its own
// offset). The actor asks its kind at each point where they differ and
// never tests which kind it has. Methods run on the actor, but for
// observe, which runs on any goroutine; the kind is never replaced, so
// reading it needs no lock.
type kind interface {
	// handles reports whether the kind runs ops of kind k its own way
	// (exec); the actor runs the others. It is asked for every op, so it
	// must be cheap.
	handles(k opKind) bool
	// exec runs o, one of the ops handles reports.
	exec(ctx context.Context, o op) reply
	// dispatch delivers what the consumers can take.
	dispatch(ctx context.Context)
	// peek returns up to n ready messages without taking them.
	peek(ctx context.Context, n int) ([]ReadyMessage, error)
	// stats are the queue's counts.
	stats() Stats
	// applyArgs takes new settings (SetArgs).
	applyArgs(ctx context.Context, a Args)
	// observe takes one change another broker applied to the shared
	// store (Observe); the queue is not closing.
	observe(c meta.Change)
	// trim lets go of what an idle queue need not keep in memory.
	trim()
	// drain is the kind's part of the actor's last step.
	drain(ctx context.Context)
	// stopTimers stops the kind's own timers (stopFeatures).
	stopTimers()
	// release lets go of the kind's state once the actor stopped.
	release()
}

// messages is what the message kinds share: their state is the actor's
// own (queue.go): the pending read-ahead, the returned and waiting
// messages, the deliveries out. classic and quorum embed it.
type messages struct{ q *Queue }

// handles is false: the actor's ops are a message queue's.
func (messages) handles(opKind) bool { return false }

// exec is never asked for (handles is false); an op that reaches it is
// refused rather than run half.
func (messages) exec(context.Context, op) reply { return reply{err: ErrNotSupported} }

func (m messages) dispatch(ctx context.Context) { m.q.dispatchMessages(ctx) }

func (m messages) peek(ctx context.Context, n int) ([]ReadyMessage, error) {
	return m.q.peekMessages(ctx, n)
}

func (m messages) stats() Stats { return m.q.messageStats() }

func (m messages) applyArgs(ctx context.Context, a Args) { m.q.applyMessageArgs(ctx, a) }

func (m messages) observe(c meta.Change) { m.q.observeShared(c) }

// trim drops the read-ahead, which the next step reads again.
func (m messages) trim() { m.q.pending, m.q.pendingArr = nil, nil }

// drain has nothing of its own: the actor's drain stored the publishes
// and the settles.
func (messages) drain(context.Context) {}

// stopTimers has none of its own: the TTL, expiry and delayed-retry
// timers are the features' (stopFeatures).
func (messages) stopTimers() {}

// release has nothing of its own: the actor's release dropped the
// message state.
func (messages) release() {}

// messageKind is a message kind, classic or quorum: what the message code
// on the actor (deliver.go, settle.go, limits.go, recover.go, priority.go)
// asks where RabbitMQ's classic and quorum queues differ.
type messageKind interface {
	kind
	// byPriority reports whether the returned set is ordered by message
	// priority; fixed at Start (Queue.byPriority keeps the answer).
	byPriority() bool
	// cmpReturned orders two offsets of the returned set, in serving
	// order (asked only when byPriority).
	cmpReturned(a, b uint64) int
	// nextReturned returns the index in the returned set of the message
	// to serve next (asked only when byPriority).
	nextReturned() int
	// requeued is told that deliveries ds go back to the queue, failed
	// (a reject, a channel or connection lost) or only returned (a nack).
	requeued(ds []*delivery, failed bool)
	// lostAtStop returns the failed count of a recovered message that
	// was out when the queue last stopped, failed before.
	lostAtStop(failed uint32) uint32
	// limitCount is the count x-delivery-limit compares for d.
	limitCount(d *delivery) uint32
	// redelivery returns the properties a redelivery carries: props as
	// published, after count deliveries, failed of them failed. Plain
	// values, so that the message handed out stays on the stack.
	redelivery(props []byte, failed, count uint32) []byte
}

// newMessageKind returns the message kind of q's arguments and profile:
// quorum for x-queue-type quorum, else classic. A stream is given a
// classic one too, which its own kind keeps from being asked: it runs
// every op that would reach the message code.
func newMessageKind(q *Queue) messageKind {
	f := &q.cfg.Features
	if f.Args.Quorum {
		return &quorum{messages: messages{q: q}, failedOnly: f.CountFailedOnly,
			priorities: f.QuorumPriorities, maxPriority: f.Args.MaxPriority}
	}
	return classic{messages: messages{q: q}, maxPriority: f.Args.MaxPriority}
}

// cmpLevels orders two priority levels, highest first.
func cmpLevels(a, b uint8) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

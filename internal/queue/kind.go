package queue

import (
	"context"

	"github.com/warrenmq/broker/meta"
)

// kind is what a queue's kind decides in the actor, chosen once at Start
// as the claiming strategy is (claimer.go): messages, for classic and
// quorum queues (messages are claimed, settled, requeued and
// dead-lettered; a quorum queue differs only by its arguments and the
// profile's Features), or a stream (*streamState, stream*.go: a log each
// consumer reads at its own offset). The actor asks its kind at each
// point where they differ and never tests which kind it has. Methods run
// on the actor, but for observe, which runs on any goroutine; the kind is
// never replaced, so reading it needs no lock.
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

// messages is the kind of classic and quorum queues. Its state is the
// actor's own (queue.go): the pending read-ahead, the returned and
// waiting messages, the deliveries out.
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

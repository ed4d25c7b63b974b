package queue

import (
	"context"
	"slices"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/queueargs"
)

// Delayed retry (RabbitMQ 4.3 quorum queues, x-delayed-retry-type, -min
// and -max): a returned message is held, neither ready nor
// unacknowledged, for min(min × delivery count, max) before it is ready
// again, the delivery count being the failed deliveries (at least 1). The
// hold is the actor's, and its end is written in the message's Returned
// index entry (HeldUntil), with the failed count (Failed), as RabbitMQ
// 4.3 keeps both in the quorum queue's log: after a restart the message
// is held until the same time and its counts go on (recover.go). In
// shared mode another broker that takes the message over serves it at
// once.

// RetryKind says which returns delayed retry holds (queueargs.RetryKind).
type RetryKind = queueargs.RetryKind

const (
	RetryDisabled = queueargs.RetryDisabled
	RetryAll      = queueargs.RetryAll
	RetryFailed   = queueargs.RetryFailed
	RetryReturned = queueargs.RetryReturned
)

// DelayedRetry is a queue's x-delayed-retry-* arguments.
type DelayedRetry = queueargs.DelayedRetry

// ParseDelayedRetry reads x-delayed-retry-type, -min and -max
// (queueargs.ParseDelayedRetry).
func ParseDelayedRetry(t amqp.Table) (DelayedRetry, error) { return queueargs.ParseDelayedRetry(t) }

// heldMsg is a returned message delayed until at (Unix nanoseconds).
type heldMsg struct {
	w  waiting
	at int64
}

// retryDelay is how long a message returned as w (failed or not) is held.
func (q *Queue) retryDelay(w waiting, failed bool) time.Duration {
	r := q.cfg.Features.Args.DelayedRetry
	switch r.Kind {
	case RetryDisabled:
		return 0
	case RetryFailed:
		if !failed {
			return 0
		}
	case RetryReturned:
		if failed {
			return 0
		}
	}
	d := r.Min * time.Duration(max(w.failed, 1))
	if r.Max > 0 {
		d = min(d, r.Max)
	}
	return d
}

// hold keeps w out of the ready messages for d.
func (q *Queue) hold(w waiting, d time.Duration) {
	q.holdAt(w, q.heldUntil(d))
}

// heldUntil is when a hold of d that starts now ends (Unix nanoseconds).
func (q *Queue) heldUntil(d time.Duration) int64 {
	return q.cfg.Clock.Now().Add(d).UnixNano()
}

// holdAt keeps w out of the ready messages until at (Unix nanoseconds).
func (q *Queue) holdAt(w waiting, at int64) {
	i, _ := slices.BinarySearchFunc(q.feat.held, at, func(h heldMsg, at int64) int {
		return cmpInt64(h.at, at+1) // after the ones due at the same time
	})
	q.feat.held = slices.Insert(q.feat.held, i, heldMsg{w: w, at: at})
	q.armHeld()
}

func cmpInt64(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// armHeld arms the timer for the first held message.
func (q *Queue) armHeld() {
	if len(q.feat.held) == 0 {
		return
	}
	at := q.feat.held[0].at
	if q.feat.heldTimer != nil {
		if at == q.feat.heldAt {
			return
		}
		q.feat.heldTimer.Stop()
	}
	q.feat.heldAt = at
	d := time.Duration(at-q.cfg.Clock.Now().UnixNano()) + 1
	q.feat.heldTimer = q.cfg.Clock.AfterFunc(max(d, 1), func() { q.post(op{kind: opTimer}) })
}

// releaseHeld makes the held messages that are due ready again (on
// opTimer).
func (q *Queue) releaseHeld(context.Context) {
	if len(q.feat.held) == 0 {
		return
	}
	now := q.cfg.Clock.Now().UnixNano()
	n := 0
	for n < len(q.feat.held) && q.feat.held[n].at <= now {
		w := q.feat.held[n].w
		q.setWaiting(w.rec.Offset, w)
		q.insertReturned(w.rec.Offset)
		q.becameReady(&w.rec)
		n++
	}
	q.feat.held = slices.Delete(q.feat.held, 0, n)
	if n > 0 || q.feat.heldAt <= now {
		q.feat.heldTimer = nil
		q.feat.heldAt = 0
	}
	q.armHeld()
}

// stopHeld stops the held messages' timer.
func (q *Queue) stopHeld() {
	if q.feat.heldTimer != nil {
		q.feat.heldTimer.Stop()
	}
}

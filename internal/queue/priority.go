package queue

import (
	"context"
	"errors"
	"slices"

	"github.com/warrenmq/broker/unacked"
)

// Message priorities (x-max-priority).
//
// The shard stays one offset-ordered log with one shared cursor, so
// priority queues keep the design's claims and recovery. What changes is
// the order of the returned set: a priority queue claims every published
// record at once into that set (an index entry in state Returned, never
// delivered, so redelivered stays false), and serves the set by priority,
// highest first, then by offset. A requeued message goes back to its place
// in its priority level. After a restart the index entries rebuild the same
// set. The cost — one index write per message — is paid only by queues
// declared with x-max-priority; others take the plain offset path.

// prioritized reports whether the queue orders by message priority: the
// kind's answer at Start (classic.go, quorum.go).
func (q *Queue) prioritized() bool { return q.byPriority }

// cmpReturned orders the returned set, in the kind's serving order.
func (q *Queue) cmpReturned(a, b uint64) int { return q.msgKind.cmpReturned(a, b) }

func cmpOffset(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// nextReturned returns the index in the returned set of the message to
// serve next: the head, unless the kind orders by priority and says
// otherwise (a two-level quorum queue, quorum.go).
func (q *Queue) nextReturned() int {
	if !q.byPriority {
		return 0
	}
	return q.msgKind.nextReturned()
}

// insertReturned adds offset, whose waiting entry is already set, to the
// returned set in serving order.
func (q *Queue) insertReturned(offset uint64) {
	if !q.prioritized() {
		q.returned = insertSorted(q.returned, offset)
		return
	}
	i, found := slices.BinarySearchFunc(q.returned, offset, q.cmpReturned)
	if !found {
		q.returned = slices.Insert(q.returned, i, offset)
	}
}

// promote claims every record at the cursor into the returned set, in
// batches: index entries in state Returned first, then the cursor CAS, as
// for any claim. It runs before a priority queue delivers, so the set
// holds every ready message and its head is the highest priority.
func (q *Queue) promote(ctx context.Context) {
	if !q.prioritized() {
		return
	}
	now := q.cfg.Clock.Now().UnixNano()
	lost := 0
	for q.fromCursor > 0 {
		if err := q.fill(ctx, maxBatch); err != nil {
			q.cfg.Logger.Error("priority claim failed", "queue", q.cfg.Name, "err", err)
			q.scheduleRetry()
			return
		}
		n := min(len(q.pending), maxBatch)
		if n == 0 {
			return
		}
		recs := q.pending[:n]
		entries := make([]unacked.Entry, n)
		for i, r := range recs {
			e := q.entry(r.Offset, Owner{}, now, 0)
			e.State = unacked.Returned
			entries[i] = e
		}
		if err := q.claimer.commit(ctx, claimWrite{entries: entries, move: true, to: recs[n-1].Offset + 1, n: n}); err != nil {
			if errors.Is(err, errLostClaim) && lost < maxLostClaims {
				lost++ // another broker promoted them: catch up
				q.claimer.lost(ctx, false)
				continue
			}
			q.cfg.Logger.Error("priority claim failed", "queue", q.cfg.Name, "err", err)
			q.scheduleRetry()
			return
		}
		for _, r := range recs {
			q.setWaiting(r.Offset, waiting{rec: r})
			q.insertReturned(r.Offset)
		}
		q.pending = q.pending[n:]
		if len(q.pending) == 0 {
			q.emptyPending()
		}
	}
}

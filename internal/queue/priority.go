package queue

import (
	"context"
	"errors"
	"slices"
	"sort"

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

// QuorumPriorities is how a quorum queue orders messages by priority
// (Features.QuorumPriorities), which differs by RabbitMQ version.
type QuorumPriorities uint8

const (
	// NoQuorumPriorities: priorities are ignored (RabbitMQ 3.13).
	NoQuorumPriorities QuorumPriorities = iota
	// TwoLevelPriorities: priority 5 and above is high, the rest (none
	// included) normal; every third message is the older of the two
	// levels' heads, the others high when there is one, so high messages
	// get about two turns for each normal one (RabbitMQ 4.0 to 4.2,
	// rabbit_fifo_q).
	TwoLevelPriorities
	// StrictPriorities: levels 0 to 31, higher first, above 31 counted as
	// 31, without x-max-priority (RabbitMQ 4.3).
	StrictPriorities
)

// maxStrictPriority is the highest level of StrictPriorities.
const maxStrictPriority = 31

// prioritized reports whether the queue orders by message priority.
func (q *Queue) prioritized() bool {
	return q.cfg.Features.Args.MaxPriority > 0 || q.cfg.Features.QuorumPriorities != NoQuorumPriorities
}

// priorityOf returns a waiting message's priority, capped at the queue's
// maximum as RabbitMQ does; for a two-level quorum queue 1 (high) or 0.
func (q *Queue) priorityOf(offset uint64) uint8 {
	p := q.waiting[offset].rec.Priority
	switch q.cfg.Features.QuorumPriorities {
	case TwoLevelPriorities:
		if p > 4 {
			return 1
		}
		return 0
	case StrictPriorities:
		return min(p, maxStrictPriority)
	}
	return min(p, q.cfg.Features.Args.MaxPriority)
}

// cmpReturned orders the returned set: highest priority first, then lowest
// offset; for a queue without priorities, by offset alone. A quorum queue
// with priorities serves the messages returned by consumers first, by
// offset, whatever their priority, as rabbit_fifo serves its returns
// before its messages (4.3 documents that returns lose their priority).
func (q *Queue) cmpReturned(a, b uint64) int {
	if q.cfg.Features.QuorumPriorities != NoQuorumPriorities {
		if ra, rb := q.waiting[a].count > 0, q.waiting[b].count > 0; ra != rb {
			if ra {
				return -1
			}
			return 1
		} else if ra {
			return cmpOffset(a, b)
		}
	}
	if q.prioritized() {
		if pa, pb := q.priorityOf(a), q.priorityOf(b); pa != pb {
			if pa > pb {
				return -1
			}
			return 1
		}
	}
	return cmpOffset(a, b)
}

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
// serve next: the head, except for a two-level quorum queue on every
// third take, which serves the older of the high and normal heads
// (rabbit_fifo_q's next/1 with its weight of 2).
func (q *Queue) nextReturned() int {
	if q.cfg.Features.QuorumPriorities != TwoLevelPriorities {
		return 0
	}
	head := q.returned[0]
	if q.waiting[head].count > 0 {
		return 0 // a return: rabbit_fifo serves those apart, uncounted
	}
	turn := q.feat.dequeues == 2
	q.feat.dequeues = (q.feat.dequeues + 1) % 3
	if !turn || q.priorityOf(head) == 0 {
		return 0
	}
	// The set is returns, then high, then normal: find the normal head.
	j := sort.Search(len(q.returned), func(i int) bool {
		off := q.returned[i]
		return q.waiting[off].count == 0 && q.priorityOf(off) == 0
	})
	if j == len(q.returned) || q.returned[j] > head {
		return 0
	}
	return j
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

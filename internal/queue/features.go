package queue

import (
	"context"
	"time"

	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/storage"
)

// Features are a queue's x-arguments and its hooks into the vhost.
type Features struct {
	Args Args
	// DeadLetter routes dead-lettered copies; nil drops them.
	DeadLetter DeadLetterRouter
	// HoldDeadLetter, when set, is asked first whether the dead-letter
	// exchange holds a copy instead of routing it.
	HoldDeadLetter DeadLetterHolder
	// Expired is called, on a timer's goroutine (never the actor's), when
	// the queue may have been unused for Args.Expires. The callee confirms
	// with Unused and deletes the queue.
	Expired func()
	// Group is the set of queues dead-lettering connects (the vhost's),
	// stopped together by StopAll; nil gives the queue a group of its own.
	Group *Group
	// CountFailedOnly makes a quorum queue count only failed deliveries
	// (Requeue, not Return) towards the delivery limit and
	// x-delivery-count, and add x-acquired-count (all earlier
	// deliveries) to redeliveries, as RabbitMQ 4.3 quorum queues do. The
	// vhost sets it from its profile; other kinds ignore it (quorum.go).
	CountFailedOnly bool
	// QuorumPriorities is how a quorum queue orders by message priority
	// (quorum.go); the vhost sets it from its profile, other kinds
	// ignore it.
	QuorumPriorities QuorumPriorities
	// IgnoreClientDeaths does not interpret an x-death header a client
	// published (Record.ClientHeaders) when the message is dead-lettered,
	// as RabbitMQ 4.x; false counts it, as 3.13.3 and later 3.13 releases.
	// The vhost sets it from its profile.
	IgnoreClientDeaths bool
	// Admit, when set, is asked on the actor's goroutine about each
	// publish just before its batch is appended; false drops it, and its
	// publisher is confirmed (a deduplicating queue's duplicate).
	Admit func(rec *storage.Record) bool
}

// featureState is the actor's bookkeeping for the features. A queue that
// uses none of them pays a few predictable branches per batch.
type featureState struct {
	ttlArg      bool  // x-message-ttl: every message may expire
	prioritized bool  // some consumer has a non-zero x-priority
	ttl         bool  // some ready message may carry ExpiresAt
	limited     bool  // x-max-length or x-max-length-bytes
	bytes       bool  // x-max-length-bytes: readyBytes is kept
	readyBytes  int64 // body bytes of ready messages (when bytes)
	ttlTimer    clock.Timer
	ttlAt       int64 // deadline ttlTimer is armed for
	// held are the returned messages delayed retry holds, by due time,
	// with their timer (delayed.go).
	held      []heldMsg
	heldTimer clock.Timer
	heldAt    int64
	// leaving holds messages being dead-lettered: neither ready nor out,
	// their records and index entries kept until every target stored the
	// copy.
	leaving map[uint64]storage.Record
	// x-expires
	lastUsed     time.Time
	expiresTimer clock.Timer
}

func (q *Queue) initFeatures() {
	a := &q.cfg.Features.Args
	f := &q.feat
	f.ttlArg = a.HasMessageTTL
	// Records recovered from an earlier run may carry a per-message
	// expiry; afterDispatch clears the flag once the queue is empty.
	f.ttl = a.HasMessageTTL || q.ready() > 0
	f.limited = a.MaxLength >= 0 || a.MaxLengthBytes >= 0
	f.bytes = a.MaxLengthBytes >= 0
	if f.bytes {
		q.countReadyBytes(context.Background())
	}
	if a.Expires > 0 {
		q.used()
	}
}

func (q *Queue) stopFeatures() {
	q.stopHeld()
	if t := q.feat.ttlTimer; t != nil {
		t.Stop()
	}
	if t := q.feat.expiresTimer; t != nil {
		t.Stop()
	}
	q.kind.stopTimers()
}

// addConsumerSorted adds c after every consumer of its priority or
// higher, so consumers stay ordered by priority, highest first, and by
// arrival within a priority (single active consumer: the first one).
func (q *Queue) addConsumerSorted(c *Consumer) {
	c.room, _ = c.Receiver.(Roomer)
	if c.Priority != 0 {
		q.feat.prioritized = true
	}
	q.consumers.add(c)
}

// acquireConsumer returns the next consumer that has credit, with one unit
// of it taken, or nil. Without consumer priorities it is plain
// round-robin; with them the highest priority with credit wins and its
// consumers take turns (the one served moves behind its peers). With
// single active consumer only the first registered consumer is served.
func (q *Queue) acquireConsumer() *Consumer {
	if q.cfg.Features.Args.SingleActive {
		if c := q.consumers.first(); c != nil && c.acquire() {
			return c
		}
		return nil
	}
	if !q.feat.prioritized {
		return q.consumers.roundRobin((*Consumer).acquire)
	}
	return q.consumers.byPriority((*Consumer).acquire)
}

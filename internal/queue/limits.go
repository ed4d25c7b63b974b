package queue

import (
	"context"
	"errors"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/storage"
)

// Limits: x-max-length and x-max-length-bytes with their overflow modes
// (the ready byte count they need), and x-delivery-limit.

// ErrRejected is the error a Confirmer hears for a publish that a full
// queue refused (x-overflow reject-publish or reject-publish-dlx): the
// channel answers basic.nack.
var ErrRejected = errors.New("queue: rejected: queue is full")

// countReadyBytes sums the bodies of the ready messages (recovery).
func (q *Queue) countReadyBytes(ctx context.Context) {
	var n int64
	q.loadWaiting(ctx) // others' requeued messages (shared): their size is in the shard
	for _, w := range q.waiting {
		n += int64(len(w.rec.Body))
	}
	_ = q.eachRecord(ctx, q.cursor, ^uint64(0), func(batch []storage.Record) error {
		for i := range batch {
			n += int64(len(batch[i].Body))
		}
		return nil
	})
	q.feat.readyBytes = n
}

// tookReady and becameReady keep the byte count of ready messages.
func (q *Queue) tookReady(r *storage.Record) {
	if q.feat.bytes {
		q.feat.readyBytes -= int64(len(r.Body))
	}
}

func (q *Queue) becameReady(r *storage.Record) {
	if q.feat.bytes {
		q.feat.readyBytes += int64(len(r.Body))
	}
}

// overDeliveryLimit dead-letters (reason delivery_limit) the deliveries
// being requeued that were delivered more often than x-delivery-limit and
// returns the others.
func (q *Queue) overDeliveryLimit(ctx context.Context, ds []*delivery) []*delivery {
	limit := q.cfg.Features.Args.DeliveryLimit
	var over []storage.Record
	var overDs []*delivery
	kept := ds[:0]
	for _, d := range ds {
		if int64(q.msgKind.limitCount(d)) > limit {
			over = append(over, d.rec)
			overDs = append(overDs, d)
			continue
		}
		kept = append(kept, d)
	}
	if len(over) > 0 {
		q.recycle(overDs)
		q.deadLetter(ctx, over, ReasonDeliveryLimit)
	}
	return kept
}

// withDeliveryCounts returns props with x-delivery-count set to failed,
// the failed deliveries, and x-acquired-count to acquired, every earlier
// delivery, as RabbitMQ 4.3 quorum queues add them to a redelivery.
func withDeliveryCounts(raw []byte, failed, acquired uint32) []byte {
	return amqp.SetHeaders(raw, amqp.Table{"x-delivery-count": int64(failed), "x-acquired-count": int64(acquired)})
}

// withDeliveryCount returns props with the x-delivery-count header set to
// n, the number of earlier deliveries, as quorum queues add it.
func withDeliveryCount(raw []byte, n uint32) []byte {
	return amqp.SetHeaders(raw, amqp.Table{"x-delivery-count": int64(n)})
}

// applyLimits refuses publishes a full queue cannot take under
// reject-publish and reject-publish-dlx: they are confirmed with
// ErrRejected (basic.nack) and, with -dlx, dead-lettered (reason maxlen).
// Drop-head queues take everything and drop from the head afterwards.
func (q *Queue) applyLimits(ctx context.Context) {
	a := q.cfg.Features.Args
	if a.Overflow == DropHead {
		return
	}
	n, bytes := q.ready(), q.feat.readyBytes
	kept := 0
	now := q.cfg.Clock.Now()
	for i := range q.publishes {
		r := q.publishes[i]
		full := a.MaxLength >= 0 && n >= uint64(a.MaxLength) ||
			a.MaxLengthBytes >= 0 && bytes+int64(len(r.Body)) > a.MaxLengthBytes
		if !full {
			q.publishes[kept], q.confirms[kept] = r, q.confirms[i]
			kept++
			n++
			bytes += int64(len(r.Body))
			continue
		}
		if c := q.confirms[i]; c.conf != nil {
			c.conf.Confirm([]uint64{c.seq}, ErrRejected)
		}
		if a.Overflow == RejectPublishDLX {
			q.countDeadLettered(ReasonMaxLen, 1)
			q.emitDied(ReasonMaxLen, q.publishes[i:i+1])
			targets, copyRec, hold := q.route(r, ReasonMaxLen, now)
			if hold != nil {
				dl := &deadLettering{}
				dl.left.Store(1)
				hold(dl)
			} else if len(targets) > 0 {
				dl := &deadLettering{}
				dl.left.Store(int32(len(targets)))
				for _, t := range targets {
					t.post(op{kind: opPublish, rec: copyRec, conf: dl, seq: 1})
				}
			}
		}
	}
	clear(q.publishes[kept:])
	q.publishes = q.publishes[:kept]
	clear(q.confirms[kept:])
	q.confirms = q.confirms[:kept]
}

// dropOverflow drops (dead-letters, reason maxlen) the oldest ready
// messages of a drop-head queue over its limits.
func (q *Queue) dropOverflow(ctx context.Context) {
	a := q.cfg.Features.Args
	if a.Overflow != DropHead {
		return
	}
	over := func(n int, bytes int64) bool {
		return a.MaxLength >= 0 && q.ready()-uint64(n) > uint64(a.MaxLength) ||
			a.MaxLengthBytes >= 0 && q.feat.readyBytes-bytes > a.MaxLengthBytes
	}
	if !over(0, 0) {
		return
	}
	q.removeHead(ctx, ReasonMaxLen, func(r *storage.Record, n int, bytes int64) bool {
		return over(n, bytes)
	})
}

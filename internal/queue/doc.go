// Package queue is the queue runtime: one actor goroutine per queue that
// owns the queue's ready cursor, its consumers and its unsettled
// deliveries, and talks to the three stores (storage.ShardStore for the
// messages, meta.Cursors for the shared cursor, unacked.Index for claimed
// messages) in batches.
//
// # Concurrency
//
// Start recovers a queue and starts its actor. Every exported method of
// Queue is safe from any goroutine: it posts an op to the actor's mailbox
// (a full mailbox blocks the caller: that is the publishers'
// back-pressure) and, for calls with a result, waits for the reply. The
// actor calls back into Receiver.Deliver, Receiver.Cancelled and
// Confirmer.Confirm on its own goroutine; those must not wait on the
// queue. Credit is shared between the actor (Acquire) and the channel that
// settles (Release) and is lock-free.
//
// # What it promises
//
//   - Claims follow the design's order of writes: index entries first
//     (Index.Put), then the cursor (CompareAndSwapOffset), then, for no-ack
//     deliveries, the deletes. A batch of consumer deliveries is one claim;
//     a basic.get is one. A crash anywhere leaves duplicates, never a loss.
//   - Settling an ack deletes the record, then the index entry.
//     Reject without requeue discards the same way (dead-lettering lands
//     with issue 6).
//   - Requeue is in place and idempotent: the entry flips to Returned in one
//     write and the offset joins the returned set, which is served, in
//     offset order, before the cursor, with redelivered=true. A Ref names
//     one delivery; settling with a stale Ref (the message was requeued or
//     settled meanwhile) does nothing, so whoever settles first owns the
//     message. Every requeue path (nack, reject, recover, channel and
//     connection close, the scanner's RequeueEntries) goes through it.
//   - A publish is confirmed once its record is stored; one Confirm call
//     carries every sequence number of one store batch. A failed Append
//     confirms with the error (basic.nack) and the ready count is taken
//     from the shard again, since the records may have been stored.
//   - Store errors never lose work: a failed claim is undone and retried;
//     an ack, an index delete or a requeue that failed stays with the
//     actor and is redone every retryAfter until it succeeds.
//   - Stop stops the actor without touching the stores, after applying the
//     publishes, acks and requeues already in its mailbox. Delete removes
//     the queue's records, index entries and shard.
//   - Start returns what an earlier run left in place: every index entry
//     below the cursor becomes Returned (redelivered=true), entries at or
//     beyond it never committed and are dropped, records below the cursor
//     without an entry (no-ack deliveries whose delete was lost) are
//     deleted, and DropTransient removes non-persistent records (RabbitMQ's
//     durable queues drop transient messages at restart).
//
// # Cost
//
// The steady state allocates nothing per message in the actor: deliveries
// come from slabs with a free list, claims and settles use scratch slices,
// and AckOne/RejectOne/RequeueOne settle one delivery without a slice.
package queue

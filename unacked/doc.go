// Package unacked keeps track of claimed messages that are not settled yet:
// the in-memory Table of one channel, the persistent Index (the design
// card's UnackIndex) with MemoryIndex, and the crash-recovery Scanner. The
// durable Index is storage/pebble's Index, beside the other Pebble backends
// on the node's shared DB.
//
// # Two records of one delivery
//
// A channel's Table maps a delivery tag to a Ref (queue, offset, consumer):
// it answers basic.ack/nack/reject. The Index maps (vhost, queue, offset) to
// an Entry (connection, channel, tag, broker, incarnation, time, delivery
// count, state): it survives the channel, the connection and, with
// storage/pebble's Index, the process.
//
// # Order of writes
//
// Index entry before cursor commit. A queue claims offsets by writing their
// Delivered entries to the Index first and only then moving its cursor with
// meta.Cursors.CompareAndSwapOffset. A crash in between leaves entries for
// offsets the cursor does not cover yet, which recovery treats as returned:
// a message may be delivered twice, never lost. storage/pebble's Index writes with
// pebble.NoSync: on the node's shared Pebble DB its entries go into the same
// WAL as the cursor write that follows, and a crash replays a prefix of the
// WAL, so the cursor is never recovered without the entries before it. It
// commits through storage/pebble's Commit, so a commit Pebble fails for
// good (a refused WAL write) is an error wrapping storage/pebble.ErrFailed,
// not a panic.
//
// Settling deletes the index entry (and the shard record); a missing entry is
// ignored, so settling twice is harmless.
//
// # In-place requeue
//
// Requeue never copies a message. Its entry flips from Delivered (out at
// connection, channel, tag) to Returned in one Put, and the queue serves
// returned offsets, in offset order, before its cursor: the message goes
// back to its original position with redelivered=true, the entry keeps the
// delivery count that x-delivery-limit needs across restarts, and on start
// every entry of a queue is simply Returned. Whoever changes an entry first
// owns the message; a second requeue or a late ack of it does nothing.
//
// # Optional interfaces
//
// Index is what every index offers. One interface is optional, found by
// type assertion, and listed in code as Capabilities (broker.New,
// indextest.Run and Wrap go by that list):
//
//	interface  what it offers                               without it                          MemoryIndex pebble raft
//	Claimer    the index entry and the cursor move of a     broker.New refuses it in shared           -        -    yes
//	           claim in one atomic write                    mode (meta.ChangeFeed)
//
// A wrapper written by embedding Index hides it: broker.New refuses such
// an index (Hidden names it); Wrap(wrapper, inner) keeps it.
//
// # What each type promises
//
//   - Table: one channel's unacked deliveries by tag. Not safe for
//     concurrent use: the channel goroutine owns it. Add, Take and TakeUpTo
//     are O(1) amortized per entry (Take is O(log n) only when tags have
//     gaps), and memory stays proportional to the live entries.
//   - MemoryIndex and storage/pebble's Index: Index implementations, safe for
//     concurrent use. Put is all or none and rejects an Entry whose State is
//     neither Delivered nor Returned. Queue visits a queue in offset order;
//     Scan visits every queue in no promised order. Both iterate over a
//     snapshot, so fn may call the index (a requeue inside a scan is fine)
//     and does not see its own writes.
//   - Scanner: one pass at a time, on the meta leader only. It hands orphaned
//     Delivered entries to the broker's requeue primitive in batches and
//     reports each delivery that outlived DeliveryTimeout once. ScanOnce and
//     Run may be called from any goroutine; passes never overlap.
package unacked

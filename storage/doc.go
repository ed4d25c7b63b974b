// Package storage defines where queue messages live: ShardStore, an
// offset-addressed log per queue ("shard"), and Record, one message in it.
//
// A queue is a shard. The queue runtime appends published messages at the
// tail, reads them from its cursor, and deletes them one by one as they are
// acknowledged, in any order. Offsets are assigned by the store, consecutive
// within one Append and increasing across Appends, and never reused for the
// life of the shard, so a cursor or an unacked-index entry that names an
// offset can never come to mean a different message. DeleteShard ends that
// life: the next Append starts again at 0.
//
// Backends:
//
//   - storage/memory keeps records in memory. It is the store of non-durable
//     queues and of the in-memory broker; it shares the caller's byte slices
//     instead of copying them.
//   - storage/pebble keeps records in a Pebble database shared with the
//     metadata store and the unacked index. It is the store of durable
//     queues; a batch holding a persistent record is fsynced before Append
//     returns.
//   - storage/storagetest is the conformance suite every backend passes,
//     including third-party ones.
//
// # Optional interfaces
//
// ShardStore is what every backend offers. These are optional, found by
// type assertion, and listed in code as Capabilities (broker.New,
// storagetest.Run and Wrap go by that list):
//
//	interface         what it offers                          without it                                memory pebble raft
//	MemoryReporter    the message bytes held in the Go heap,  the store's bytes do not count against     yes     -      -
//	                  counted against the memory alarm        the memory alarm
//	Syncer            make every earlier write durable        each publish batch with a persistent        -     yes    yes
//	                                                          message is made durable in its Append
//	TransientDropper  delete a shard's non-persistent         a durable queue reads its shard at start    -     yes     -
//	                  records without reading them            to find them
//	Purger            delete every record from an offset on   queue.purge reads the records first         -     yes     -
//	                  without reading them
//
// storagetest.Run checks every one unless the test says the store does
// not offer it (storagetest.Without), so a backend that loses one by
// accident fails. A wrapper written by embedding ShardStore hides the
// optional interfaces of the store it wraps: broker.New refuses it
// (Hidden names them); Wrap(wrapper, inner) keeps them, as
// examples/countingstore does.
//
// # Contract details the interface comments leave open
//
// Both backends here, and the conformance suite, settle these points:
//
//   - A shard name is any string: empty, with NUL bytes or not valid UTF-8
//     alike. Names that are prefixes of one another are different shards.
//   - Read with max < 1 returns no records and no error; so does Read of a
//     shard that never existed. An empty result may be nil.
//   - "Nothing at or after from" is an empty Read result, never an error.
//   - A zero-length Properties or Body may come back as nil or as an empty
//     slice; the broker never tells them apart. (Both backends here in fact
//     preserve the difference.)
//   - Records returned by Read must be treated as read-only: a backend may
//     share their Properties and Body with its own copy (storage/memory
//     does). Strings are immutable anyway.
//   - Every method checks its context on entry and returns an error wrapping
//     ctx.Err() without doing anything when it is done. Once a write has
//     started it runs to completion: a write is never left half done.
//   - An Append that returned an error may or may not have stored its
//     records (Pebble applies a batch before it learns that its WAL write
//     failed); either way no offset is ever given to two records, though a
//     failed Append may leave a gap. A store that knows a failed write may
//     have happened says so with an error matching ErrOutcomeUnknown; the
//     broker nacks a publish only after an error that does not.
//
// # Concurrency
//
// A ShardStore is safe for concurrent use by many goroutines, also on the
// same shard, although the broker sends every call for one shard from that
// queue's actor.
package storage

// Package memory is the in-memory storage.ShardStore: the store of
// non-durable queues and of the in-memory broker (broker.Options with no
// DataDir), and the reference backend of storage/storagetest.
//
// # Durability
//
// None. Records live in process memory and vanish with the Store; the
// Persistent flag is kept on the record but changes nothing. Store does not
// implement storage.Syncer, because it cannot make anything durable.
//
// # Ownership: Append takes the bytes, Read shares them
//
// This store is on the hot path of every non-durable queue, so it copies no
// message bytes:
//
//   - Append keeps the Properties and Body slices it is given. The caller
//     hands them over: it must not modify them after Append returns.
//   - Read returns records whose Properties and Body are those same slices.
//     Callers must not modify them either. This is the one way memory differs
//     from the "does not alias store memory" wording on storage.ShardStore:
//     the store never writes to those bytes after Append, so sharing them is
//     safe as long as readers keep them read-only, which the broker does (it
//     only ever writes them to a socket).
//
// The Record structs themselves are copied both ways, so a caller may reuse
// its recs slice after Append, and may modify the Record values (not the bytes
// they point to) that Read returns. A nil Properties or Body comes back nil,
// an empty one comes back empty.
//
// # Concurrency
//
// Store is safe for concurrent use. Each shard has its own mutex, held only
// while records are copied in or out, so queues never contend with each
// other; the shard map is a sync.Map, read without locking.
//
// # Memory
//
// A shard is a deque of fixed chunks of slots, indexed by offset. Deleting a
// record zeroes its slot at once, so the store never holds a deleted
// message's bytes; a chunk goes back to a shared pool as soon as every record
// in it is deleted, and an emptied shard holds no chunk at all. Append, Read
// and DeleteByOffsets are O(1) per record and copy no more than the Record
// structs.
//
// MemoryBytes (storage.MemoryReporter) reports the Properties and Body
// bytes of the live records, kept in an atomic counter as records come and
// go: the broker's memory alarm reads it as "message data held in memory".
package memory

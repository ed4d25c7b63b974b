// Package pebble is the durable storage.ShardStore and the durable
// unacked.Index, kept in one Pebble database: the stores of durable queues,
// and the broker's default when it has a data directory.
//
//	db, err := pebble.Open(dir)        // shared with meta/local
//	if err != nil { ... }
//	defer db.Close()
//	shards := pebble.New(db)
//	defer shards.Close()               // before db.Close
//	index := pebble.NewIndex(db)
//
// # Durability
//
// Append commits its batch, records and shard state together, with
// pebble.Sync when any record is Persistent, so a persistent message is on
// disk before Append returns (and before the publisher confirm). Every other
// write (transient records, deletes, DeleteShard) is committed with
// pebble.NoSync: it is in the write-ahead log at once and reaches disk with
// the next synced write by any user of the DB, or at Close. Pebble keeps WAL
// order, so a crash drops a suffix of unsynced writes and never one write
// while keeping a later one; that is what lets the broker order its writes
// ("index entry before cursor commit") without an fsync per write. Sync
// (storage.Syncer) forces everything written so far to disk. A DB opened
// WithSyncPacer spaces its fsyncs out while many persistent records wait
// for them (SyncPacer), so one fsync covers more of them; Append still
// returns only after the fsync that covers its batch.
//
// After a crash, the offsets of records lost with the unsynced tail of the
// WAL are assigned again: the shard state went with them, and so did every
// later write that could name those offsets (cursor, unacked index entry),
// because the WAL drops only suffixes.
//
// Transient records survive a clean restart: dropping them, as RabbitMQ does,
// is the queue runtime's decision, not the store's.
//
// # Key layout and values
//
// Store's keys start with 's', Index's with 'u' (meta/local uses other
// first bytes of the same DB):
//
//	's' uvarint(len(shard)) shard 'r' offset(8, big-endian)  -> record
//	's' uvarint(len(shard)) shard 'm'                         -> shard state
//	's' uvarint(len(shard)) shard 'l' chunk(8, big-endian)    -> live page
//	's' uvarint(len(shard)) shard 't' chunk(8, big-endian)    -> transient page
//	'u' uvarint(len(vhost)) vhost uvarint(len(queue)) queue offset(8) -> unacked entry
//
// Record and unacked-entry values are internal/codec's versioned encodings,
// the same bytes a cluster member (meta/raft) stores under the same keys;
// the shard state holds the next offset, rewritten in the same
// batch as every Append (and written by the migration of an old shard),
// so offsets survive deleting every record and reopening; a page is 128 bytes of bits. DeleteShard is one range deletion, state included, so offsets
// restart at 0.
//
// # Live offsets
//
// Each shard keeps in memory the set of its live offsets (liveSet: a bit
// per offset in 1024-offset chunks, chunks with no live offset dropped),
// and the set of those whose record is not Persistent. Both are mirrored
// on disk, chunk by chunk, as pages ('l' and 't' keys) written in the
// batch that changes them, so opening a shard reads its pages, about 1/8
// byte a message, and never its records: a queue holding ten million
// messages is ready as soon as Pebble is. DeleteByOffsets consults the
// live set instead of reading: it writes a SingleDelete for each live
// offset (every record key is set once, so the tombstone and the record
// vanish together when they meet in a flush) and ignores the others, so
// acking twice is harmless and Count, the size of the set, is exact.
// DropTransient (storage.TransientDropper) deletes the transient set's
// records without reading one. A shard written before pages existed
// (state version 1 or 2) is read once when first used and its pages
// written.
//
// DeleteSettled is DeleteByOffsets and the Index's DeletePutOnce in one
// batch, for a queue whose Index is on the same DB (the broker's durable
// stores): a batch of acks is one commit, and a record and its index
// entry are deleted together or not at all. A delete batch carries the
// changed pages but not the shard state, which a delete leaves as the
// last Append wrote it.
//
// PurgeFrom (storage.Purger) deletes every live offset from the cursor on
// the same way, reading nothing: up to 256 with a SingleDelete each, more
// with one range deletion up to the next offset, instead of reading the
// records to learn their offsets (docs/performance.md, "Purge", has the
// figures).
//
// When deletes move the first live offset rangeEvery (16 chunks) past the
// last range deletion, the batch also range-deletes the dead head below
// it, so Pebble can drop a drained queue's data by range. Once such
// deletions cover 64 MiB of sstables (Pebble's estimate, from metadata)
// the store starts a memtable flush: until the deletions leave the
// memtable no compaction can drop what they cover, and a queue drained
// and left idle would keep its space until other writes filled it.
// Pebble picks compactions by level size, though, not by what a range
// deletion covers: after 500,000 messages of 1 KiB were drained, about
// 100 MiB of sstables under the deletions stayed. So when a delete leaves
// a shard empty and sstables still hold 16 MiB or more of its
// range-deleted records, the store compacts that key range, on a
// goroutine of its own that runs while there is such a range to compact
// (Store.Close stops it). A queue drained in step with its publishes
// never gets its records out of the memtable and costs no compaction.
//
// A data directory's footprint follows what went through it, up to a
// ceiling. Fresh, it is a 2 MiB reserve file, an empty write-ahead log
// (allocated 1 MiB ahead of its writes, not at Pebble's 110% of the
// configured memtable) and a few small files: about 3 MiB, and about
// 6 MiB after 1,700 small persistent messages. Pebble's memtables start
// at 256 KiB and double, each new one, up to the configured size; the
// reserve follows them (DiskReserve) and the write-ahead logs are as long
// as what their memtables held. With memtables of 64 MiB (the default
// until it became 16 MiB), once they reached their size (after about
// 128 MiB written since opening), what was kept when every queue is empty
// was the 128 MiB reserve and four logs, the live one and the three Pebble
// keeps for reuse, up to about 62 MiB each: 375 MiB after 500,000 messages
// of 1 KiB were written and drained (TestDrainDiskProbe; 409 MiB when
// every log was preallocated to 70 MiB). The ceiling follows the memtable
// size (DefaultMemTableSize, or broker.Options.Storage.Memory) in
// proportion, at the price of more flushes and compactions
// while writing.
//
// A nil Properties or Body reads back nil, an empty one reads back empty.
// Read decodes into fresh memory, one allocation per record.
//
// # Concurrency
//
// Store is safe for concurrent use. Each shard has its own mutex, held by
// the writes of that shard until their batch is in the write-ahead log
// (state must be written in offset order); reads, FirstOffset and Count do
// not take it. A persistent Append lets it go before it waits for its
// fsync (Pebble's ApplyNoSyncWait), so the acks of a queue whose
// publishes are syncing are not held up by the disk: they land after the
// Append in the log, and a crash that loses it loses them too. Different
// shards never wait for one another, and concurrent synced commits share
// fsyncs. Like any committed write, a record is visible to Read as soon
// as it is in the log, before its fsync; Append returns, and the queue
// confirms and delivers it, only after.
//
// Close the Store before its DB: Close stops the compaction of drained
// shards (one Pebble already runs ends in Pebble's background).
//
// Store caches per shard the next offset, the live offsets and the first
// of them, which lets reads skip the tombstones acks leave at the head of a
// queue. The cache assumes this Store is the only writer of the
// 's' keys in its DB.
//
// # A full disk
//
// Pebble treats a refused write-ahead-log or MANIFEST write as fatal: a
// failed WAL rotation panics with Pebble's locks in a state no recover can
// repair, and a failed commit or MANIFEST write calls Logger.Fatalf. So a
// full disk must never refuse Pebble such a write. Open with
// WithDiskReserve keeps a reserve file (ReserveFile; by default four
// times what the memtables hold plus 1 MiB, up to twice the memtable
// size: DiskReserve says why) in the directory and wraps the file
// system: the first WAL, MANIFEST, OPTIONS or marker write refused with
// ENOSPC deletes the reserve, calls DiskReserve.OnFull and is retried in
// the space that frees (Pebble's vfs.OnDiskFull, made for CockroachDB's
// ballast). The reserve grows with the memtables through
// DiskReserve.Resize, which the broker's disk monitor and a GuardedBy
// store call, and Restore. A failed sstable write (a flush or compaction) spends no reserve: Pebble drops
// the output and retries. A Store made with GuardedBy refuses, with
// ErrDiskFull, an Append whose batch would not fit twice (WAL and flush)
// beside DiskReserve.Headroom, so a large batch of publishes is nacked
// rather than fatal. The broker raises its disk alarm from OnFull and
// restores the reserve when space is back (see the broker's alarms.go).
//
// Commit (used by this package's Store and Index and by meta/local) turns
// the panic of Logger.Fatalf on the commit path back into an error
// wrapping ErrFailed; after it the DB accepts no synced write and must be
// reopened.
//
// Open sizes the memtable to the file system: DefaultMemTableSize, halved
// down to 1 MiB until it is at most 1/16 of it, since each WAL grows to
// about the memtable's size and a flush needs as much again.
//
// # Opening and logging
//
// Open locks the directory first. A directory that cannot be created or
// written, and one another process (or another Open in this process) has
// open, fail with errors that say so; the latter wrap ErrLocked. Pebble's
// messages go to WithLogger's logger with component=pebble: its routine
// chatter at DEBUG, its errors at ERROR, a flush or compaction refused for
// want of space at WARN (at most once a minute), write stalls and a slow
// disk at WARN.
//
// # Errors
//
// Errors from Pebble are wrapped with %w, so errors.Is and errors.As see
// through them; undecodable data is reported as ErrCorrupt. When a commit
// fails the shard's cached state is dropped and reloaded on next use,
// because a batch whose fsync failed may still have been applied.
package pebble

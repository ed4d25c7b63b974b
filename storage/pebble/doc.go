// Package pebble is the durable storage.ShardStore, kept in a Pebble
// database: the store of durable queues, and the broker's default when it
// has a data directory.
//
//	db, err := pebble.Open(dir)        // shared with meta/local and the unacked index
//	if err != nil { ... }
//	defer db.Close()
//	shards := pebble.New(db)
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
// (storage.Syncer) forces everything written so far to disk.
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
// Every key starts with 's' (meta/local and the unacked index use other
// first bytes of the same DB):
//
//	's' uvarint(len(shard)) shard 'r' offset(8, big-endian)  -> record
//	's' uvarint(len(shard)) shard 'm'                         -> shard state
//
// A record value is a compact binary encoding with a version byte first (see
// codec.go); the shard state holds the next offset, rewritten in the same
// batch as every Append, so offsets survive deleting every record and
// reopening. DeleteShard is one range deletion, state included, so offsets
// restart at 0.
//
// # Live offsets
//
// Each shard keeps in memory the set of its live offsets (liveSet: a bit
// per offset in 1024-offset chunks, chunks with no live offset dropped),
// built by one scan of the shard's record keys the first time the shard is
// used after opening. DeleteByOffsets consults it instead of reading: it
// writes a SingleDelete for each live offset (every record key is set once,
// so the tombstone and the record vanish together when they meet in a flush)
// and ignores the others, so acking twice is harmless and Count, the size of
// the set, is exact without a persisted count.
//
// A nil Properties or Body reads back nil, an empty one reads back empty.
// Read decodes into fresh memory, one allocation per record.
//
// # Concurrency
//
// Store is safe for concurrent use. Each shard has its own mutex, held by
// the writes of that shard across their commit (so a persistent Append
// holds it through the fsync: state must be written in offset order); reads,
// FirstOffset and Count do not take it. Different shards never wait for one
// another, and their concurrent synced commits share fsyncs.
//
// Store caches per shard the next offset, the live offsets and the first
// of them, which lets reads skip the tombstones acks leave at the head of a
// queue. The cache assumes this Store is the only writer of the
// 's' keys in its DB.
//
// # Errors
//
// Errors from Pebble are wrapped with %w, so errors.Is and errors.As see
// through them; undecodable data is reported as ErrCorrupt. When a commit
// fails the shard's cached state is dropped and reloaded on next use,
// because a batch whose fsync failed may still have been applied.
package pebble

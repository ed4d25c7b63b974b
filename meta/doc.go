// Package meta defines the broker's metadata store: topology (exchanges,
// queues, bindings), accounts (vhosts, users, permissions), the per-queue
// shared read cursors and leadership, plus vhost metadata, vhost limits and
// topic permissions. It is the design card's MetaStore.
//
// Implementations:
//
//   - meta/memory: in memory, the default when broker.Options has no Meta.
//   - meta/local: on the node's Pebble DB, shared with the storage and
//     unacked stores, under keys that start with 'm'.
//   - meta/raft: replicated by a Raft group, every member holding all of
//     it (a Node is the Store); package cluster runs a broker on it.
//   - meta/metatest: the conformance suite every implementation passes.
//
// Optional interfaces, found by type assertion: ChangeFeed (a store other
// brokers write too) and Replicated (a store replicated by a consensus
// group reports its member's role, term, indexes and peers' progress, for
// the management API and metrics) and Records (the broker's own keyed
// records with conditional updates: delayed messages, deduplication
// caches, shared by every broker); meta/raft implements all three.
//
// # What every Store promises
//
//   - Safe for concurrent use by many goroutines.
//   - Put replaces the entity with the same key; Delete of a missing entity is
//     not an error; Get of a missing one returns an error that matches
//     ErrNotFound under errors.Is.
//   - Values never alias: a Put copies what it keeps (Arguments,
//     PasswordHash, Tags of users and vhosts), and every Get/List returns
//     fresh copies.
//   - Lists return every entity of the vhost (or every one, for accounts) in
//     no promised order.
//   - A Durable Put, and every vhost, user and permission Put, is durable
//     before it returns. Stores never drop non-durable entities by
//     themselves: deleting them at start is the broker's job.
//   - Names are stored exactly as given. Mapping vhost "" to "/" and
//     checking AMQP's 255-byte short-string limit is the broker's job too.
//   - A cursor that was never set, or whose queue was deleted, reads 0.
//     CompareAndSwapOffset is linearizable per queue: of many concurrent
//     swaps from the same old value exactly one succeeds.
//
// # Cursors and the order of writes
//
// Claiming messages writes the unacked index entries first and then moves
// the cursor with CompareAndSwapOffset ("index entry before cursor commit",
// see package unacked). On the shared Pebble DB both writes go through one
// WAL, so meta/local writes cursors without an fsync: after a crash the WAL
// replays a prefix, and a cursor never survives without the index entries
// written before it.
package meta

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
// # Written once
//
// Every entity but the cursors is Typed's: its key (the shared layout of
// meta/internal/metakey), its record (EncodeRecord, EncodePolicyRecord),
// its checks and its list order are written once here, as one noun in
// typed.go. A backend implements KV (get, prefix scan, atomic batch) and
// the cursors, and embeds a *Typed made by NewTyped on its KV; so every
// backend keeps the same bytes under the same keys, and a new kind of
// entity is a noun and its methods in this package (and a key kind in
// metakey), not a copy per backend. A backend's change feed (meta/raft's)
// reads the keys its KV is written.
//
// # Optional interfaces
//
// Store is what every store offers: cursors, topology, accounts (vhost
// limits and topic permissions included) and policies. These are
// optional, found by type assertion, and listed in code as Capabilities
// (broker.New, metatest.Run and Wrap go by that list):
//
//	interface    what it offers                             without it                                 memory local raft
//	ChangeFeed   other brokers write the store too: the     the broker is the store's only writer        -     -    yes
//	             broker follows them (shared mode)
//	Records      the broker's own keyed records with        in shared mode, durable delayed messages     -     -    yes
//	             conditional updates (delayed messages,     stay in the accepting broker's memory
//	             dedup caches), shared by every broker      (lost with it), dedup caches are per
//	                                                        broker, dedup queues are not enforced
//	Replicated   the consensus member's role, term,         no replication status in the management     -     -    yes
//	             indexes and peers' progress                API and metrics
//	Syncer       Sync after writes made under DeferSync     a bulk change (definitions import) waits     -    yes    -
//	                                                        for each durable write
//
// A wrapper written by embedding Store forwards Store's methods only and
// hides the optional interfaces of the store it wraps: broker.New refuses
// such a store (Hidden names what is hidden) and metatest.Run fails it.
// Wrap(wrapper, inner) returns the wrapper with inner's optional
// interfaces that the wrapper does not implement itself:
//
//	type logging struct{ meta.Store }
//	func (l logging) PutQueue(ctx context.Context, q meta.Queue) error { ...; return l.Store.PutQueue(ctx, q) }
//	store := meta.Wrap(logging{inner}, inner) // keeps inner's ChangeFeed, Records, ...
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
//   - Lists return every entity of the vhost (or every one, for accounts)
//     in no promised order. (Typed sorts them by their key fields, so
//     meta/memory, meta/local and meta/raft answer alike.)
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

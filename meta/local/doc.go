// Package local is the durable single-node meta.Store. It lives in the node's
// Pebble DB, which it shares with storage/pebble and the unacked Pebble index;
// every key it writes starts with the byte 'm'. It does not own the DB: the
// caller opens it before New and closes it after the last call.
//
// # Durability
//
// A Put of a Durable exchange, queue or binding, and every vhost, user and
// permission write, is synced (pebble.Sync) before it returns. Non-durable
// topology is written with pebble.NoSync: the broker deletes it at start
// anyway, and the store never does. A Delete is synced when the entity it
// removes was durable. Under a context from meta.DeferSync every write is
// NoSync, and Sync (one empty synced WAL record) puts all of them on disk
// at once: a bulk change such as a definitions import pays one fsync.
//
// Cursors are written with pebble.NoSync. That is safe because the claim
// protocol writes the unacked index entries first, into the same DB and so
// the same WAL: a crash replays a prefix of the WAL, so a recovered cursor is
// never ahead of the index entries that make its claimed messages
// recoverable ("index entry before cursor commit", see package unacked).
//
// # Concurrency
//
// A Store is safe for concurrent use. Each queue's cursor has its own mutex
// and an in-memory copy of its value, loaded on first use, so a
// CompareAndSwapOffset is a compare in memory plus one NoSync write, and
// swaps on different queues do not wait for each other. All cursor writes go
// through the Store, so the cached value stays the truth; two Stores on one
// DB would break that and are not supported.
//
// # Key layout
//
// The keys are meta/internal/metakey's, shared with meta/raft's state
// machine. Strings inside keys are length-prefixed (uvarint) where another
// field follows, so a vhost can never be mistaken for a prefix of another
// vhost, and listing a vhost's entities is one prefix scan:
//
//	m !                                   format version (uvarint)
//	m v name                              vhost      (JSON meta.VHost)
//	m u name                              user       (JSON meta.User)
//	m p lp(user) vhost                    permission (JSON meta.Permission)
//	m e lp(vhost) name                    exchange   (JSON meta.Exchange)
//	m q lp(vhost) name                    queue      (JSON meta.Queue)
//	m c lp(vhost) name                    cursor     (8 bytes, big-endian)
//	m b lp(vhost) lp(source) lp(kind) lp(destination) lp(routing key) arguments
//	                                      binding    (JSON meta.Binding)
//
// JSON is fine for topology: it changes rarely and is read once at start.
// The entities are meta.Typed's (their keys, records, checks and list
// order are written once in package meta, for every store); this package
// is the meta.KV they live on, and the cursors.
//
// Every write commits through storage/pebble's Commit: when Pebble fails
// a commit for good (a refused WAL write; its Logger.Fatalf panics in a
// DB from storage/pebble.Open) the write returns an error wrapping
// storage/pebble.ErrFailed instead of panicking the process.
package local

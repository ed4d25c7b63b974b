// Package codec is Warren's one on-disk encoding of messages and unacked
// entries: the versioned record value that storage/pebble writes, the
// versioned unacked-entry key and value that storage/pebble's Index writes, and the
// same bytes a cluster member's state machine (meta/raft) keeps under the
// same keys. A single node and a cluster member therefore store a message
// and an unacked entry identically, and a change to either encoding is one
// change here, under a new version byte.
//
// The package is internal on purpose. Its encodings are the broker's own
// data-directory layout, not a contract for stores a program plugs in: a
// storage.ShardStore or unacked.Index written outside this module keeps its data
// however it likes and is checked by storagetest / indextest, not by byte
// layout. Keeping the layout internal lets it change (with a version byte
// and a release note) without an API promise.
//
// Every decoder checks each length against what is left before slicing or
// allocating, never panics on arbitrary input (see the fuzz targets), and
// refuses overlong varints, so every value has exactly one encoding. Every
// decoding error wraps ErrCorrupt. Successor bounds the prefix scans of
// every Pebble-backed store (metadata, shards, the unacked index).
package codec

// Package stores picks and opens the broker's three stores (metadata,
// message shards, unacked index) for durable queues and topology, and the
// in-memory set for transient queues.
//
// It promises: a store given in the broker's Options is used as given and
// never closed here; otherwise one Pebble DB under the data directory holds
// all three under their own key prefixes, so its single WAL orders their
// writes without an fsync each; without a data directory the stores are in
// memory. The DB carries a disk reserve whose OnFull the broker's disk
// alarm receives, and Set.Reclaim gives back the space of deleted data
// while the disk is short of it.
//
// Before anything is opened, CheckShared, CheckDurable and CheckWrapped
// refuse the given stores that would not keep the promises above: shared
// mode's set incomplete, an in-memory store beside a data directory, a
// wrapper that hides an optional interface of the store it embeds.
package stores

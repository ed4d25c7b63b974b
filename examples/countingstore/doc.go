// Package countingstore is an example of a third-party storage backend: a
// storage.ShardStore that wraps another one and counts its operations.
//
// It shows the two things a backend author does:
//
//   - run the conformance suite against it (countingstore_test.go calls
//     storagetest.Run with an in-memory and a Pebble inner store, the
//     latter with reopen, so the restart checks run too); metatest does the
//     same for a meta.Store;
//   - plug it into a broker through Options.Storage.Shards, which holds the
//     messages of durable queues (non-durable queues always stay in
//     memory); see Example.
//
// A wrapper must not change what the broker may rely on: Wrap's store
// implements each optional interface (storage.Capabilities) exactly when
// the wrapped store does, counting Sync itself and handing the others to
// storage.Wrap. Counts are atomics, safe to read while the broker runs; the store
// is as safe for concurrent use as the store it wraps.
package countingstore

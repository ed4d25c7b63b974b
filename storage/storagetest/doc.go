// Package storagetest is the conformance suite for storage.ShardStore
// backends. Every backend in this module passes it, and a third-party backend
// proves it can stand in for them by passing it too:
//
//	func TestConformance(t *testing.T) {
//		storagetest.Run(t, func(t *testing.T) (storage.ShardStore, func() storage.ShardStore) {
//			s := mystore.New()
//			t.Cleanup(func() { s.Close() })
//			return s, nil // nil: the store does not persist
//		})
//	}
//
// A persistent backend also returns a reopen function, which closes the
// store and opens a new one over the same data, as a broker restart does;
// Run then checks what must survive it. See the example for storage/pebble's
// opener, and Run for the exact rules.
//
// # What the suite checks
//
// The promises written on storage.ShardStore and in the storage package
// comment: offsets consecutive within a shard and independent between shards
// (including names that are prefixes of one another); reads in offset order
// that skip deleted offsets and honour max; deletes in any order, duplicate
// and repeated deletes harmless; FirstOffset and Count on empty, full and
// emptied shards; DeleteShard restarting offsets at 0; offsets never reused
// after every record is deleted, also across a reopen; every Record field
// round-tripping byte for byte (a zero-length Properties or Body may come
// back nil or empty); the caller's recs slice and the returned Records not
// aliasing the store's bookkeeping; concurrent appends to different shards
// and to one shard, and appends racing deletes and reads (run with -race);
// a done context honoured by every method, with nothing written. Every
// optional interface in storage.Capabilities is checked as well: the store
// must implement exactly those the test does not list in Without (a
// wrapper that embeds storage.ShardStore loses them: use storage.Wrap),
// and each one it offers (Syncer, Purger, MemoryReporter,
// TransientDropper) is exercised.
//
// Benchmark runs the standard benchmarks (Append, Read, DeleteByOffsets at
// batch sizes 1 and 64) so backends can be compared on equal terms.
//
// # Concurrency
//
// Run and Benchmark must be called from the test's own goroutine. The open
// and reopen functions are called only from the test goroutine, so they may
// use t freely (require, t.TempDir, t.Cleanup). The suite's own goroutines
// never call t.Fatal: they hand errors back to the test goroutine.
package storagetest

package storagetest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/storage"
	"github.com/warrenmq/broker/storage/memory"
	"github.com/warrenmq/broker/storage/pebble"
)

// openPebble is what a persistent backend writes for Run: open an empty
// store in a fresh directory, and say how to reopen it on the same data.
// Whatever is open when the subtest ends is closed by t.Cleanup.
func openPebble(t *testing.T) (storage.ShardStore, func() storage.ShardStore) {
	dir := t.TempDir()
	db, err := pebble.Open(dir)
	require.NoError(t, err)
	t.Cleanup(func() {
		if db != nil {
			require.NoError(t, db.Close())
		}
	})
	reopen := func() storage.ShardStore {
		require.NoError(t, db.Close())
		db = nil
		db, err = pebble.Open(dir)
		require.NoError(t, err)
		return pebble.New(db)
	}
	return pebble.New(db), reopen
}

// openMemory is what a store that does not persist writes: a nil reopen
// makes Run skip the restart checks.
func openMemory(*testing.T) (storage.ShardStore, func() storage.ShardStore) {
	return memory.New(), nil
}

// A backend's test file passes Run its opener from a Test function:
//
//	func TestConformance(t *testing.T) {
//		storagetest.Run(t, openPebble, storagetest.Without("storage.MemoryReporter"))
//	}
//	func TestMemory(t *testing.T) {
//		storagetest.Run(t, openMemory,
//			storagetest.Without("storage.Syncer", "storage.TransientDropper", "storage.Purger"))
//	}
//
// Without lists the optional interfaces (storage.Capabilities) the store
// does not offer; Run fails a store that lacks one it does not list.
//
// and may add a benchmark the same way:
//
//	func BenchmarkStore(b *testing.B) {
//		storagetest.Benchmark(b, func(b *testing.B) storage.ShardStore { ... })
//	}
func Example() {}

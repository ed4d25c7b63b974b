// Package indextest is the conformance suite every unacked.Index passes:
// unacked.MemoryIndex, storage/pebble's Index and any index a program plugs in
// through broker.Options.
//
//	func TestIndex(t *testing.T) {
//		indextest.Run(t, func(t *testing.T) unacked.Index { return unacked.NewMemoryIndex() },
//			indextest.Without("unacked.Claimer"))
//	}
//
// Run checks put, replace, get, delete, all-or-none batches, per-queue
// offset order, scans, early stops, queue isolation (including names that
// are prefixes of each other), re-entrant callbacks, canceled contexts and
// concurrent use, and the optional unacked.Claimer unless the test says
// Without("unacked.Claimer"): an index that lacks a capability it does not
// declare fails (a wrapper that embeds unacked.Index: use unacked.Wrap). Bench measures Put and Delete of a batch of 64.
//
// open must return a fresh, empty index each time it is called; it may
// register cleanup with t.Cleanup.
package indextest

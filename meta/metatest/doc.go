// Package metatest is the conformance suite every meta.Store passes:
// meta/memory, meta/local and meta/raft, and any store a program plugs in
// through broker.Options.Storage.Meta.
//
//	func TestConformance(t *testing.T) {
//		metatest.Run(t, func(t *testing.T) meta.Store { return memory.New() },
//			metatest.Without("meta.ChangeFeed", "meta.Records", "meta.Replicated", "meta.Syncer"))
//	}
//
// Run checks CRUD and listing of every entity, vhost isolation,
// meta.ErrNotFound, replace-on-Put, copy semantics, validation, canceled
// contexts and the cursor's compare-and-swap, including many goroutines
// racing to increment one cursor, and policies (RunPolicies). It checks
// every optional interface in meta.Capabilities too: the store must
// implement exactly those the test does not list in Without, so a store
// that loses one (a wrapper that embeds meta.Store: use meta.Wrap) fails,
// and each one it offers is exercised. RunPersistence checks what survives a
// reopen. Bench measures CompareAndSwapOffset.
//
// open must return a fresh, empty store each time it is called; it may
// register cleanup with t.Cleanup.
package metatest

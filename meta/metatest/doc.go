// Package metatest is the conformance suite every meta.Store passes:
// meta/memory, meta/local and meta/raft, and any store a program plugs in
// through broker.Options.Meta.
//
//	func TestConformance(t *testing.T) {
//		metatest.Run(t, func(t *testing.T) meta.Store { return memory.New() })
//	}
//
// Run checks CRUD and listing of every entity, vhost isolation,
// meta.ErrNotFound, replace-on-Put, copy semantics, validation, canceled
// contexts and the cursor's compare-and-swap, including many goroutines
// racing to increment one cursor. RunPersistence checks what survives a
// reopen. Bench measures CompareAndSwapOffset.
//
// open must return a fresh, empty store each time it is called; it may
// register cleanup with t.Cleanup.
package metatest

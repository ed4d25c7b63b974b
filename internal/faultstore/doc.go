// Package faultstore wraps the broker's three pluggable stores —
// storage.ShardStore, meta.Store and unacked.Index — so that tests can make
// a chosen call fail, or "crash" the process at a chosen call, and then
// check that the queue engine loses nothing.
//
// One Injector is shared by the wrappers of a test, so a rule can name any
// call of any store and a crash stops all three at once, as a dying process
// would:
//
//	in := faultstore.New()
//	shards := faultstore.WrapShards(memory.New(), in)
//	cursors := faultstore.WrapMeta(metamemory.New(), in)
//	index := faultstore.WrapIndex(unacked.NewMemoryIndex(), in)
//	in.CrashAt(faultstore.On(faultstore.CompareAndSwapOffset))
//	// ... run the engine until <-in.Crashed() ...
//	// "Reopen": start a new actor on the unwrapped stores.
//
// Fail makes matching calls return an error without doing anything (the
// store is untouched), the way a write that never reached the disk fails.
// CrashAt makes the matching call and every later call on every wrapper fail
// with ErrCrashed without doing anything: the state of the inner stores is
// what a process killed just before that call leaves behind, given stores
// that keep what they acknowledged.
//
// Crash crashes the stores now rather than at a matching call (releasing
// every call a Block rule holds, to fail): brokertest's Lab kills a broker
// this way and starts the next one on the inner stores.
//
// Block holds the first matching call until the test releases it, to line
// work up behind a store call.
//
// Every call, failed or not, is appended to a trace (Trace), so a test can
// also assert the order of writes ("index entry before cursor commit").
//
// The wrappers and the Injector are safe for concurrent use. Matchers run
// under the Injector's lock and must not call it.
package faultstore

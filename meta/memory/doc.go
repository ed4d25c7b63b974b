// Package memory is the in-memory meta.Store, the broker's default when
// broker.Options has no Meta. Nothing survives the process.
//
// A Store is safe for concurrent use. Its entities are meta.Typed's, kept
// as their records in an ordered map behind one RWMutex (they change
// rarely); each queue's cursor is an atomic word, so
// CompareAndSwapOffset on different queues never contends and on one queue
// costs a single hardware compare-and-swap. IsLeader is always true.
//
// Every value is kept as its record, the bytes meta/local and meta/raft
// store, so a value reads the same from every store, and callers may keep
// or mutate what they pass and get. Lists are sorted by name, as
// meta.Typed sorts them.
//
//	s := memory.New()
//	_ = s.PutQueue(ctx, meta.Queue{VHost: "/", Name: "jobs", Durable: true})
//	ok, _ := s.CompareAndSwapOffset(ctx, meta.QueueKey{VHost: "/", Name: "jobs"}, 0, 64)
package memory

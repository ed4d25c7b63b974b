// Package memory is the in-memory meta.Store, the broker's default when
// broker.Options has no Meta. Nothing survives the process.
//
// A Store is safe for concurrent use. Topology and accounts sit behind one
// RWMutex (they change rarely); each queue's cursor is an atomic word, so
// CompareAndSwapOffset on different queues never contends and on one queue
// costs a single hardware compare-and-swap. IsLeader is always true.
//
// Every value handed in is copied and every value handed out is a fresh copy,
// so callers may keep or mutate what they pass and get. Lists are sorted by
// name, which the meta contract does not promise but makes output stable.
//
//	s := memory.New()
//	_ = s.PutQueue(ctx, meta.Queue{VHost: "/", Name: "jobs", Durable: true})
//	ok, _ := s.CompareAndSwapOffset(ctx, meta.QueueKey{VHost: "/", Name: "jobs"}, 0, 64)
package memory

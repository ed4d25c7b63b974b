package meta

import "context"

// KV is the ordered byte store under a Store: all that meta/memory,
// meta/local and meta/raft each implement for the entities Typed keeps.
// Keys follow the shared key layout (meta/internal/metakey), values are
// the records EncodeRecord and EncodePolicyRecord write, so every backend
// stores the same bytes under the same keys.
type KV interface {
	// Get returns the value under key, or an error matching ErrNotFound.
	// The caller may keep the value but must not modify it: a KV may hand
	// out the slice it holds (meta/memory does).
	Get(ctx context.Context, key []byte) ([]byte, error)
	// Scan calls fn with each key that starts with prefix, and its value,
	// in key order, until fn returns an error, which Scan returns. key
	// and value are valid only during the call, and fn must not call the
	// KV.
	Scan(ctx context.Context, prefix []byte, fn func(key, value []byte) error) error
	// Write applies b atomically: all of it or, with an error, possibly
	// none. The KV may keep the keys and values of b's records, which the
	// caller does not change afterwards, but not b.Set and b.Delete
	// themselves: the caller reuses them once Write returns.
	Write(ctx context.Context, b Batch) error
}

// Batch is one atomic write to a KV: the records of Set, then the
// deletion of the keys of Delete (a missing one is no error).
type Batch struct {
	Set    []Record
	Delete [][]byte
	// Durable asks for the batch on disk before Write returns, unless ctx
	// came from DeferSync. A KV that makes every batch durable (through
	// a raft log) or keeps nothing on disk ignores it.
	Durable bool
}

// SyncsOnRequest is implemented by a KV that puts a batch on disk only
// when it is Durable (meta/local's). Typed then reads an exchange, queue
// or binding before it deletes it, so that only the deletion of a
// durable one waits for the disk; other KVs are spared that read.
type SyncsOnRequest interface {
	KV
	// SyncsOnRequest only marks the KV; it does nothing.
	SyncsOnRequest()
}

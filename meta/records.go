package meta

import "context"

// Records is implemented by a shared store (meta/raft) that also keeps
// the broker's own keyed records, outside topology: the delayed messages of
// x-delayed-message exchanges and the deduplication caches, which every
// broker sharing the store must see and change atomically. Optional: found
// by type assertion. Keys are opaque to the store; each user keeps to its
// own first byte.
type Records interface {
	// UpdateRecords applies u atomically, in the same order on every
	// replica: it writes nothing and reports false when one of u's
	// conditions does not hold. It returns once u is durable as the
	// store's writes are (for meta/raft: committed by a quorum and
	// applied on this replica). An error leaves the outcome unknown.
	UpdateRecords(ctx context.Context, u RecordUpdate) (applied bool, err error)
	// ScanRecords calls fn with each record whose key starts with
	// prefix, from the first key at or after start (nil: the first), in
	// key order, until fn returns false. It reads this replica as it
	// is, without a round to the others: it sees this broker's writes
	// once they returned, and others' once applied here. k and v are
	// valid only during the call.
	ScanRecords(prefix, start []byte, fn func(k, v []byte) bool) error
}

// RecordUpdate is one atomic change of records: the conditions, then the
// writes, which happen only if every condition holds.
type RecordUpdate struct {
	// Present keys must exist.
	Present [][]byte
	// Match: each record's value must equal Value exactly; a nil Value
	// means the key must not exist.
	Match []Record
	// Set writes records; Delete removes keys (a missing one is no
	// error); Add adds Delta to the 8-byte big-endian counter under Key
	// (a missing counter is 0; one that reaches 0 is deleted). They
	// apply in that order.
	Set    []Record
	Delete [][]byte
	Add    []Counter
}

// Record is one key and value.
type Record struct {
	Key, Value []byte
}

// Counter is an increment of a counter record.
type Counter struct {
	Key   []byte
	Delta int64
}

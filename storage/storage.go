package storage

import (
	"context"
	"errors"
)

// ErrOutcomeUnknown is matched (errors.Is) by a write error after which the
// store cannot tell whether the write happened: a replicated store whose
// leader changed while the write was in flight, for instance. The broker
// never answers such a publish with basic.nack, which promises the message
// was not stored; it withholds the confirm and closes the connection (see
// internal/session). A store that can tell returns a plain error instead.
var ErrOutcomeUnknown = errors.New("storage: outcome unknown")

// Record is one message in a queue shard. The queue runtime writes it once and
// never rewrites it: requeue happens in place (see unacked), so delivery state
// lives in the unacked index, not here.
type Record struct {
	// Offset is assigned by Append; ignored on input.
	Offset uint64
	// Exchange and RoutingKey are those the message was published with.
	Exchange   string
	RoutingKey string
	// Properties holds the content-header property flags and property list
	// exactly as the publisher sent them (AMQP 0-9-1 §4.2.6.1), so every one of
	// the 14 properties and the headers table pass through untouched.
	Properties []byte
	Body       []byte
	// Persistent is delivery-mode 2. A batch holding a persistent record is
	// synced before Append returns.
	Persistent bool
	// Priority is the message priority property (0 when absent).
	Priority uint8
	// EnqueuedAt is when the queue accepted the message, in Unix nanoseconds.
	EnqueuedAt int64
	// ExpiresAt is when the message expires, in Unix nanoseconds; 0 never.
	ExpiresAt int64
	// ClientHeaders marks a record stored as a client published it, with
	// headers: an x-death header among them is the publisher's, not one
	// the broker wrote when it dead-lettered the message, and RabbitMQ 4.x
	// ignores it when it dead-letters the message (internal/queue's
	// DeadLetterProperties). A dead-lettered copy has it false, and so do
	// records stored before it existed: their x-death counts as the
	// broker's.
	ClientHeaders bool
}

// ShardStore is an offset-addressed log per queue ("shard"). It carries only
// what the queue runtime calls. Implementations must be safe for concurrent
// use by many goroutines, also on one shard (the runtime calls a shard from
// its queue actor, but a backend may not rely on that).
type ShardStore interface {
	// Append stores recs at the tail of shard with consecutive offsets starting
	// at first, and sets recs[i].Offset. Offsets are never reused, not even
	// after every record was deleted and the store reopened. When any record is
	// Persistent, Append returns only once the whole batch is durable.
	Append(ctx context.Context, shard string, recs []Record) (first uint64, err error)
	// Read returns up to max live records with Offset >= from, in offset order,
	// skipping deleted offsets. It returns an empty slice, not an error, when
	// there is none. Callers must treat the returned Properties and Body as
	// read-only: an in-memory store may share them with its own records.
	Read(ctx context.Context, shard string, from uint64, max int) ([]Record, error)
	// DeleteByOffsets removes the given offsets, in any order. Offsets that do
	// not exist (already deleted) are ignored, so acking twice is harmless.
	DeleteByOffsets(ctx context.Context, shard string, offsets []uint64) error
	// FirstOffset returns the lowest live offset, or, when the shard is empty,
	// the offset the next Append will assign.
	FirstOffset(ctx context.Context, shard string) (uint64, error)
	// Count returns the number of live records.
	Count(ctx context.Context, shard string) (uint64, error)
	// DeleteShard removes every record of shard and its offset counter.
	DeleteShard(ctx context.Context, shard string) error
}

// MemoryReporter is implemented by stores that hold message data in the Go
// heap. MemoryBytes returns the Properties and Body bytes of every live
// record the store keeps in memory right now (not its index, its free
// capacity or what it keeps on disk); the broker adds it up, for every
// store that implements it, against its memory alarm's watermark
// (broker.Options.MemoryHighWatermark). It is polled often, from its own
// goroutine, so it must be cheap and safe for concurrent use. It is
// optional: found by type assertion.
type MemoryReporter interface {
	MemoryBytes() int64
}

// Syncer is implemented by stores that can make every earlier write durable
// on demand. It is optional: found by type assertion.
type Syncer interface {
	Sync(ctx context.Context) error
}

// TransientDropper is implemented by stores that can delete a shard's
// non-Persistent records without reading every record (the queue runtime
// drops them when a durable queue starts, as RabbitMQ does). It returns
// how many it deleted. It is optional: found by type assertion; without
// it the runtime reads the shard to find them.
type TransientDropper interface {
	DropTransient(ctx context.Context, shard string) (int, error)
}

// Purger is implemented by stores that can delete every record of a
// shard from an offset on without reading them (the queue runtime
// purges a queue's ready messages, those at and after its cursor, this
// way). PurgeFrom returns how many records it deleted and end, one past
// the highest offset it deleted (from when it deleted none). It is
// optional: found by type assertion; without it the runtime reads the
// records to learn their offsets.
type Purger interface {
	PurgeFrom(ctx context.Context, shard string, from uint64) (n, end uint64, err error)
}

package unacked

import (
	"context"
	"errors"
)

// ErrNotFound is returned by Get when no entry exists for the key.
var ErrNotFound = errors.New("unacked: not found")

// State is what happened to a claimed message.
type State uint8

const (
	// Delivered: the message is out at (Connection, Channel, DeliveryTag).
	Delivered State = 1
	// Returned: the message was requeued in place and waits to be delivered
	// again (with redelivered=true).
	Returned State = 2
)

// Key names one claimed message: its queue and offset in the queue's shard.
type Key struct {
	VHost  string
	Queue  string
	Offset uint64
}

// Entry is the persistent record of a claimed, unsettled message.
type Entry struct {
	Key
	Connection  string // broker-unique connection id
	Channel     uint16
	DeliveryTag uint64
	Broker      string // node id of the broker that delivered it
	Incarnation uint64 // that broker's incarnation (start counter)
	DeliveredAt int64  // Unix nanoseconds
	// DeliveryCount counts deliveries so far, this one included.
	DeliveryCount uint32
	State         State
	// Failed counts the failed deliveries so far (rejects and lost
	// channels, not this one), for queues that count only those (RabbitMQ
	// 4.3 quorum queues keep the count in their log, so it survives a
	// restart). 0 elsewhere.
	Failed uint32
	// HeldUntil is when a Returned message held by delayed retry becomes
	// ready (Unix nanoseconds; 0: not held).
	HeldUntil int64
}

// Index is the design card's UnackIndex: one entry per claimed offset, written
// before the cursor moves past it and deleted when the message is settled.
// Implementations are safe for concurrent use.
type Index interface {
	// Put inserts or replaces entries, all or none.
	Put(ctx context.Context, entries []Entry) error
	Get(ctx context.Context, k Key) (Entry, error)
	// Delete removes entries; missing keys are ignored.
	Delete(ctx context.Context, keys []Key) error
	// Queue calls fn for each entry of one queue in offset order until fn
	// returns false.
	Queue(ctx context.Context, vhost, queue string, fn func(Entry) bool) error
	// Scan calls fn for every entry until fn returns false.
	Scan(ctx context.Context, fn func(Entry) bool) error
	// DeleteQueue removes every entry of one queue.
	DeleteQueue(ctx context.Context, vhost, queue string) error
}

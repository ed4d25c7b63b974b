package queueargs

import "time"

// Overflow is what a full queue (x-max-length, x-max-length-bytes) does.
type Overflow uint8

const (
	// DropHead drops (dead-letters with reason maxlen) the oldest ready
	// messages: RabbitMQ's default.
	DropHead Overflow = iota
	// RejectPublish refuses new messages: publishers in confirm mode get
	// basic.nack.
	RejectPublish
	// RejectPublishDLX refuses new messages and dead-letters them.
	RejectPublishDLX
)

// parseOverflow reads a checked x-overflow or overflow value.
func parseOverflow(s string) Overflow {
	switch s {
	case "reject-publish":
		return RejectPublish
	case "reject-publish-dlx":
		return RejectPublishDLX
	}
	return DropHead
}

// Args are a queue's x-arguments, parsed and checked. The zero value is a
// plain classic queue.
type Args struct {
	MessageTTL     time.Duration // x-message-ttl; valid when HasMessageTTL
	HasMessageTTL  bool
	Expires        time.Duration // x-expires; 0 = never
	DeadLetterExch string        // x-dead-letter-exchange; valid when HasDLX
	HasDLX         bool
	DeadLetterKey  string // x-dead-letter-routing-key; valid when HasDLXKey
	HasDLXKey      bool
	MaxLength      int64 // x-max-length; -1 = unlimited
	MaxLengthBytes int64 // x-max-length-bytes; -1 = unlimited
	Overflow       Overflow
	HasOverflow    bool  // x-overflow was given (policies: see internal/policy)
	MaxPriority    uint8 // x-max-priority; 0 = not a priority queue
	DeliveryLimit  int64 // x-delivery-limit; -1 = unlimited
	// HasDeliveryLimit: x-delivery-limit was given (a negative one too),
	// so a profile's default limit does not apply (the vhost sets it).
	HasDeliveryLimit bool
	Quorum           bool // x-queue-type quorum
	SingleActive     bool // x-single-active-consumer
	// DelayedRetry is x-delayed-retry-* (ParseDelayedRetry), which only
	// 4.3 quorum queues read: the vhost sets it, Parse does not.
	DelayedRetry DelayedRetry
	// Stream is x-queue-type stream: the queue is a log read by each
	// consumer at its own offset; StreamArgs holds its retention, and
	// none of the classic features above apply.
	Stream bool
	StreamArgs
}

// Kind is the queue kind a's x-queue-type declares.
func (a *Args) Kind() Kind {
	switch {
	case a.Stream:
		return Stream
	case a.Quorum:
		return Quorum
	}
	return Classic
}

// StreamArgs are a stream's retention settings (x-queue-type stream).
type StreamArgs struct {
	// MaxBytes is x-max-length-bytes: the stream's size past which whole
	// segments are removed from its head; -1 means unlimited.
	MaxBytes int64
	// MaxAge is x-max-age: segments whose newest message is older are
	// removed from the head; 0 means unlimited.
	MaxAge time.Duration
	// SegmentBytes is x-stream-max-segment-size-bytes: a segment closes
	// once it holds this many bytes (DefaultSegmentBytes when not given).
	SegmentBytes int64
}

const (
	// DefaultSegmentBytes is RabbitMQ's default
	// x-stream-max-segment-size-bytes (500 MB).
	DefaultSegmentBytes = 500_000_000
	// MaxSegmentBytes is the largest x-stream-max-segment-size-bytes
	// RabbitMQ accepts (?MAX_STREAM_MAX_SEGMENT_SIZE, 3 GB).
	MaxSegmentBytes = 3_000_000_000
)

// MaxExpiry is the largest TTL or queue expiry RabbitMQ accepts, in
// milliseconds, for x-message-ttl, x-expires and the expiration property
// alike (rabbit_misc:check_expiry, RabbitMQ 3.x and 4.x: Erlang's timer
// limit, 2^32-1 ms, about 49.7 days). Larger values are refused with 406
// rather than clamped, as RabbitMQ does; below it no deadline computed
// from a real clock can overflow.
const MaxExpiry = 1<<32 - 1

// RetryKind says which returns delayed retry holds.
type RetryKind uint8

const (
	RetryDisabled RetryKind = iota // none (the default)
	RetryAll                       // every return
	RetryFailed                    // failed deliveries: reject, channel or connection lost
	RetryReturned                  // the others: basic.nack, basic.recover is failed
)

// DelayedRetry is a queue's x-delayed-retry-* arguments.
type DelayedRetry struct {
	Kind RetryKind
	Min  time.Duration
	Max  time.Duration // 0: no cap
}

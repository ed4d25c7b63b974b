package queue

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/warrenmq/broker/amqp"
)

// Stream arguments, at queue.declare and basic.consume, checked the way
// RabbitMQ 4.x checks them (rabbit_amqqueue's declare_args and
// check_arguments_key, rabbit_stream_queue's declare, consume and
// parse_offset_arg).

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

// streamTypeName is how RabbitMQ names the stream type in its refusals.
const streamTypeName = "rabbit_stream_queue"

// streamRefusedArgs are the queue arguments RabbitMQ knows for some queue
// type but not for streams (rabbit_queue_type:arguments(queue_arguments)
// minus rabbit_stream_queue's): declaring a stream with one is refused.
var streamRefusedArgs = []string{
	"x-expires", "x-message-ttl", "x-dead-letter-exchange", "x-dead-letter-routing-key",
	"x-max-length", "x-max-in-memory-length", "x-max-in-memory-bytes", "x-max-priority",
	"x-overflow", "x-queue-mode", "x-single-active-consumer", "x-queue-master-locator",
	"x-queue-version", "x-delivery-limit", "x-dead-letter-strategy",
	"x-quorum-initial-group-size", "x-quorum-target-group-size",
}

// leaderLocators are the x-queue-leader-locator values RabbitMQ 4.x
// accepts (rabbit_queue_location:queue_leader_locators, the last two its
// older names).
var leaderLocators = []string{"client-local", "balanced", "random", "least-leaders"}

// parseStreamArgs checks a stream's arguments: first the values of those
// streams take, then the arguments of other queue types, as RabbitMQ's
// check_declare_arguments does.
func parseStreamArgs(t amqp.Table, a Args) (Args, error) {
	a.Stream = true
	a.StreamArgs = StreamArgs{MaxBytes: -1, SegmentBytes: DefaultSegmentBytes}
	if v, ok := t["x-max-length-bytes"]; ok {
		n, err := nonNegative("x-max-length-bytes", v)
		if err != nil {
			return a, err
		}
		a.MaxBytes = n
	}
	if v, ok := t["x-max-age"]; ok {
		s, ok := v.(string)
		if !ok {
			return a, argErr("x-max-age", "unacceptable type %s", typeName(v))
		}
		d, err := ParseMaxAge(s)
		if err != nil {
			return a, argErr("x-max-age", "invalid_max_age")
		}
		a.MaxAge = d
	}
	if v, ok := t["x-stream-max-segment-size-bytes"]; ok {
		n, err := nonNegative("x-stream-max-segment-size-bytes", v)
		if err != nil {
			return a, err
		}
		if n > MaxSegmentBytes {
			return a, &ArgError{Arg: "x-stream-max-segment-size-bytes", Code: amqp.PreconditionFailed,
				Text: "Exceeded max value for x-stream-max-segment-size-bytes"}
		}
		if n > 0 {
			a.SegmentBytes = n
		}
	}
	if v, ok := t["x-stream-filter-size-bytes"]; ok {
		n, ok := IntArg(v)
		if !ok || n < 16 || n > 255 {
			return a, &ArgError{Arg: "x-stream-filter-size-bytes", Code: amqp.PreconditionFailed,
				Text: "Invalid value for  x-stream-filter-size-bytes"}
		}
	}
	if v, ok := t["x-initial-cluster-size"]; ok {
		// Warren serves every stream on every node, so the value changes
		// nothing, but it is checked as RabbitMQ checks it
		// (check_initial_cluster_size_arg: a positive integer).
		n, err := nonNegative("x-initial-cluster-size", v)
		if err != nil {
			return a, err
		}
		if n == 0 {
			return a, argErr("x-initial-cluster-size", "value %d is zero", n)
		}
	}
	if v, ok := t["x-queue-leader-locator"]; ok {
		s, ok := v.(string)
		if !ok {
			return a, argErr("x-queue-leader-locator", "unacceptable type %s", typeName(v))
		}
		if !slices.Contains(leaderLocators, s) {
			return a, argErr("x-queue-leader-locator", "invalid_queue_locator_arg")
		}
	}
	for _, k := range streamRefusedArgs {
		if _, ok := t[k]; ok {
			return a, &ArgError{Arg: k, Code: amqp.PreconditionFailed, Reason: "of queue type " + streamTypeName,
				Text: fmt.Sprintf("invalid arg '%s' for {queue} of queue type %s", k, streamTypeName)}
		}
	}
	return a, nil
}

// ParseMaxAge reads a RabbitMQ age: a positive integer of any number of
// ASCII digits and one unit of Y (365 days), M (30 days), D, h, m or s, as
// rabbit_amqqueue:check_max_age reads x-max-age, the max-age policy key
// and an x-stream-offset interval (RabbitMQ 3.10 to 4.x). RabbitMQ's
// integers have no bound, so "300Y" or twenty digits are accepted there;
// here an age past what a time.Duration holds (about 292 years) is that
// maximum, which outlasts every message a clock can date.
func ParseMaxAge(s string) (time.Duration, error) {
	if len(s) < 2 {
		return 0, fmt.Errorf("invalid max age %q", s)
	}
	var unit time.Duration
	switch s[len(s)-1] {
	case 'Y':
		unit = 365 * 24 * time.Hour
	case 'M':
		unit = 30 * 24 * time.Hour
	case 'D':
		unit = 24 * time.Hour
	case 'h':
		unit = time.Hour
	case 'm':
		unit = time.Minute
	case 's':
		unit = time.Second
	default:
		return 0, fmt.Errorf("invalid max age %q", s)
	}
	digits := s[:len(s)-1]
	for _, c := range []byte(digits) {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("invalid max age %q", s)
		}
	}
	// Only digits: the one error left is a value past uint64.
	n, err := strconv.ParseUint(digits, 10, 64)
	if err == nil && n == 0 {
		return 0, fmt.Errorf("invalid max age %q", s)
	}
	const most = time.Duration(math.MaxInt64)
	if err != nil || n > uint64(most/unit) {
		return most, nil
	}
	return time.Duration(n) * unit, nil
}

// OffsetKind is where a stream consumer starts (x-stream-offset).
type OffsetKind uint8

const (
	// OffsetNext starts after the last message: only new ones (the
	// default without x-stream-offset, as in RabbitMQ).
	OffsetNext OffsetKind = iota
	// OffsetFirst starts at the first message the stream holds.
	OffsetFirst
	// OffsetLast starts at the last message (see docs/streams.md: Warren
	// has no chunks, so "the start of the last chunk" is the last
	// message).
	OffsetLast
	// OffsetAt starts at an offset (clamped to what the stream holds).
	OffsetAt
	// OffsetTime starts at the first message stored at or after a time:
	// Ago before basic.consume (an interval), else Timestamp.
	OffsetTime
)

// StreamConsume is a stream consumer's basic.consume arguments.
type StreamConsume struct {
	Kind   OffsetKind
	Offset uint64 // OffsetAt
	// Timestamp is an x-stream-offset timestamp (OffsetTime, Ago 0), in
	// seconds as AMQP carries it: unsigned, so a time before 1970 sent
	// by a client (amqp091-go writes uint64(t.Unix())) is read, as
	// RabbitMQ reads it, as one far in the future.
	Timestamp uint64
	// Ago is an interval string's age (OffsetTime): the start is that
	// long before the broker's clock reads at basic.consume.
	Ago time.Duration
	// Filters are x-stream-filter's values; nil means no filtering.
	Filters []string
	// MatchUnfiltered is x-stream-match-unfiltered: messages published
	// without x-stream-filter-value reach a filtering consumer too.
	MatchUnfiltered bool
	// Track is LavinMQ's server-side offset tracking (x-stream-offset
	// null, or x-stream-automatic-offset-tracking true): the broker keeps
	// the consumer tag's offset past its last ack, and a consumer with
	// the same tag resumes there (stream_track.go). The channel clears it
	// for a consumer without a tag of its own.
	Track bool
}

// ParseStreamConsume reads a stream consumer's arguments as RabbitMQ
// 4.x's parse_offset_arg and filter_spec do: x-stream-offset is "first",
// "last", "next", an interval ("1h": now minus it), a timestamp (seconds)
// or an integer offset; other types and strings are refused with 406.
// Where a time offset starts is resolved at basic.consume (startTime).
func ParseStreamConsume(t amqp.Table) (StreamConsume, error) {
	var sc StreamConsume
	if v, ok := t["x-stream-offset"]; ok {
		switch x := v.(type) {
		case nil:
			// LavinMQ: null starts at first and tracks the offset.
			sc.Kind, sc.Track = OffsetFirst, true
		case string:
			switch x {
			case "first":
				sc.Kind = OffsetFirst
			case "last":
				sc.Kind = OffsetLast
			case "next":
				sc.Kind = OffsetNext
			default:
				d, err := ParseMaxAge(x)
				if err != nil {
					return sc, argErr("x-stream-offset", "invalid_max_age")
				}
				sc.Kind, sc.Ago = OffsetTime, d
			}
		case time.Time:
			// As it was on the wire, whatever door it came through.
			sc.Kind, sc.Timestamp = OffsetTime, uint64(x.Unix())
		default:
			n, ok := IntArg(v)
			if !ok || n < 0 {
				return sc, argErr("x-stream-offset", "invalid offset %v", v)
			}
			sc.Kind, sc.Offset = OffsetAt, uint64(n)
		}
	}
	switch f := t["x-stream-filter"].(type) {
	case string:
		sc.Filters = []string{f}
	case []any:
		sc.Filters = []string{}
		for _, e := range f {
			if s, ok := e.(string); ok {
				sc.Filters = append(sc.Filters, s)
			}
		}
	}
	if b, ok := t["x-stream-match-unfiltered"].(bool); ok && sc.Filters != nil {
		sc.MatchUnfiltered = b
	}
	switch v := t["x-stream-automatic-offset-tracking"].(type) {
	case bool:
		sc.Track = sc.Track || v
	case string:
		sc.Track = sc.Track || v == "true"
	}
	return sc, nil
}

// startTime is where an OffsetTime consumer starts, in Unix nanoseconds
// on a clock that reads now: RabbitMQ's arithmetic (milliseconds in
// integers without bound) done in int64 without wrapping. An interval
// reaching before the earliest time int64 holds starts there, before
// every message; a timestamp past 2262 starts at the latest, after every
// message. Nanoseconds keep RabbitMQ's comparisons exact: a message
// stamped t (ns) is at or after a timestamp of s seconds exactly when its
// millisecond stamp is at or after s*1000.
func (sc *StreamConsume) startTime(now int64) int64 {
	if sc.Ago > 0 {
		return addClamped(now, -int64(sc.Ago))
	}
	if sc.Timestamp > math.MaxInt64/uint64(time.Second) {
		return math.MaxInt64
	}
	return int64(sc.Timestamp) * int64(time.Second)
}

package queue

import (
	"math"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/queueargs"
)

// Stream arguments at basic.consume, checked the way RabbitMQ 4.x checks
// them (rabbit_stream_queue's consume and parse_offset_arg); those at
// queue.declare are internal/queueargs' (its table's stream rows).

// StreamArgs are a stream's retention settings (queueargs.StreamArgs).
type StreamArgs = queueargs.StreamArgs

const (
	DefaultSegmentBytes = queueargs.DefaultSegmentBytes
	MaxSegmentBytes     = queueargs.MaxSegmentBytes
)

// ParseMaxAge reads a RabbitMQ age (queueargs.ParseMaxAge).
func ParseMaxAge(s string) (time.Duration, error) { return queueargs.ParseMaxAge(s) }

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

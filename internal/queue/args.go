package queue

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/warrenmq/broker/amqp"
)

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
	// 4.3 quorum queues read: the vhost sets it, ParseArgs does not.
	DelayedRetry DelayedRetry
	// Stream is x-queue-type stream: the queue is a log read by each
	// consumer at its own offset (stream.go); StreamArgs holds its
	// retention, and none of the classic features above apply.
	Stream bool
	StreamArgs
}

// ArgError is a queue argument RabbitMQ would refuse. The channel answers
// with 406 PRECONDITION_FAILED (540 for a stream queue) naming it.
type ArgError struct {
	Arg    string
	Reason string
	Code   uint16
	// Text, when set, is the whole reply text, "{queue}" standing for
	// "queue 'name' in vhost 'vhost'": RabbitMQ words a few refusals
	// without the "invalid arg" prefix.
	Text string
}

func (e *ArgError) Error() string {
	return fmt.Sprintf("invalid arg '%s': %s", e.Arg, e.Reason)
}

func argErr(arg, format string, a ...any) *ArgError {
	return &ArgError{Arg: arg, Reason: fmt.Sprintf(format, a...), Code: amqp.PreconditionFailed}
}

// ParseArgs checks a queue's arguments the way RabbitMQ 3.13 does at
// queue.declare: known x-arguments must have the right type and range;
// unknown ones are kept but ignored.
func ParseArgs(t amqp.Table) (Args, error) {
	a := Args{MaxLength: -1, MaxLengthBytes: -1, DeliveryLimit: -1}
	if v, ok := t["x-queue-type"]; ok {
		s, ok := v.(string)
		if !ok {
			return a, argErr("x-queue-type", "unacceptable type %s", typeName(v))
		}
		switch s {
		case "classic":
		case "quorum":
			a.Quorum = true
		case "stream":
			return parseStreamArgs(t, a)
		default:
			return a, argErr("x-queue-type", "unknown queue type '%s'", s)
		}
	}
	if v, ok := t["x-message-ttl"]; ok {
		n, err := expiry("x-message-ttl", v)
		if err != nil {
			return a, err
		}
		a.MessageTTL, a.HasMessageTTL = time.Duration(n)*time.Millisecond, true
	}
	if v, ok := t["x-expires"]; ok {
		n, err := expiry("x-expires", v)
		if err != nil {
			return a, err
		}
		if n == 0 {
			return a, argErr("x-expires", "value 0 must be positive")
		}
		a.Expires = time.Duration(n) * time.Millisecond
	}
	if v, ok := t["x-dead-letter-exchange"]; ok {
		s, ok := v.(string)
		if !ok {
			return a, argErr("x-dead-letter-exchange", "unacceptable type %s", typeName(v))
		}
		a.DeadLetterExch, a.HasDLX = s, true
	}
	if v, ok := t["x-dead-letter-routing-key"]; ok {
		s, ok := v.(string)
		if !ok {
			return a, argErr("x-dead-letter-routing-key", "unacceptable type %s", typeName(v))
		}
		if !a.HasDLX {
			return a, argErr("x-dead-letter-routing-key", "routing key given but no x-dead-letter-exchange defined")
		}
		a.DeadLetterKey, a.HasDLXKey = s, true
	}
	for _, lim := range []struct {
		arg string
		dst *int64
	}{{"x-max-length", &a.MaxLength}, {"x-max-length-bytes", &a.MaxLengthBytes}, {"x-delivery-limit", &a.DeliveryLimit}} {
		if v, ok := t[lim.arg]; ok {
			n, err := nonNegative(lim.arg, v)
			if err != nil {
				return a, err
			}
			*lim.dst = n
		}
	}
	if v, ok := t["x-overflow"]; ok {
		s, ok := v.(string)
		if !ok {
			return a, argErr("x-overflow", "unacceptable type %s", typeName(v))
		}
		switch s {
		case "drop-head":
			a.Overflow = DropHead
		case "reject-publish":
			a.Overflow = RejectPublish
		case "reject-publish-dlx":
			a.Overflow = RejectPublishDLX
		default:
			return a, argErr("x-overflow", "unknown overflow mode '%s'", s)
		}
		a.HasOverflow = true
	}
	if v, ok := t["x-max-priority"]; ok {
		n, err := nonNegative("x-max-priority", v)
		if err != nil {
			return a, err
		}
		if n > 255 {
			return a, argErr("x-max-priority", "value %d is above the maximum 255", n)
		}
		a.MaxPriority = uint8(n)
	}
	if v, ok := t["x-single-active-consumer"]; ok {
		b, ok := v.(bool)
		if !ok {
			return a, argErr("x-single-active-consumer", "unacceptable type %s", typeName(v))
		}
		a.SingleActive = b
	}
	if v, ok := t["x-queue-mode"]; ok {
		s, ok := v.(string)
		if !ok || (s != "default" && s != "lazy") {
			return a, argErr("x-queue-mode", "unknown queue mode '%v'", v)
		}
	}
	return a, nil
}

// nonNegative reads an integer argument of any AMQP integer type.
func nonNegative(arg string, v any) (int64, error) {
	n, ok := IntArg(v)
	if !ok {
		return 0, argErr(arg, "unacceptable type %s", typeName(v))
	}
	if n < 0 {
		return 0, argErr(arg, "value %d is negative", n)
	}
	return n, nil
}

// MaxExpiry is the largest TTL or queue expiry RabbitMQ accepts, in
// milliseconds, for x-message-ttl, x-expires and the expiration property
// alike (rabbit_misc:check_expiry, RabbitMQ 3.x and 4.x: Erlang's timer
// limit, 2^32-1 ms, about 49.7 days). Larger values are refused with 406
// rather than clamped, as RabbitMQ does; below it no deadline computed
// from a real clock can overflow.
const MaxExpiry = 1<<32 - 1

// expiry reads a TTL or expiry argument in milliseconds: a non-negative
// integer no larger than MaxExpiry.
func expiry(arg string, v any) (int64, error) {
	n, err := nonNegative(arg, v)
	if err != nil {
		return 0, err
	}
	if n > MaxExpiry {
		return 0, argErr(arg, "value %d is above the maximum %d", n, MaxExpiry)
	}
	return n, nil
}

func typeName(v any) string {
	switch v.(type) {
	case string:
		return "longstr"
	case bool:
		return "bool"
	case float32, float64:
		return "float"
	case amqp.Table:
		return "table"
	case []any:
		return "array"
	case nil:
		return "void"
	}
	return fmt.Sprintf("%T", v)
}

// ParseExpiration reads the expiration property: a non-negative integer of
// milliseconds no larger than MaxExpiry, as RabbitMQ requires
// (rabbit_basic:parse_expiration; the channel closes with 406 otherwise).
// "" means none.
func ParseExpiration(s string) (time.Duration, bool, error) {
	if s == "" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil && errors.Is(err, strconv.ErrRange) && s[0] != '-':
		return 0, false, fmt.Errorf("invalid expiration '%s': value above the maximum %d", s, MaxExpiry)
	case err != nil:
		return 0, false, fmt.Errorf("invalid expiration '%s': not an integer", s)
	case n < 0:
		return 0, false, fmt.Errorf("invalid expiration '%s': value negative", s)
	case n > MaxExpiry:
		return 0, false, fmt.Errorf("invalid expiration '%s': value above the maximum %d", s, MaxExpiry)
	}
	return time.Duration(n) * time.Millisecond, true, nil
}

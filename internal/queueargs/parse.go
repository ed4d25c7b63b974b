package queueargs

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/warrenmq/broker/amqp"
)

// Error is a queue argument RabbitMQ would refuse. The channel answers
// with 406 PRECONDITION_FAILED (540 for a stream queue) naming it.
type Error struct {
	Arg    string
	Reason string
	Code   uint16
	// Text, when set, is the whole reply text, "{queue}" standing for
	// "queue 'name' in vhost 'vhost'": RabbitMQ words a few refusals
	// without the "invalid arg" prefix.
	Text string
}

func (e *Error) Error() string {
	return fmt.Sprintf("invalid arg '%s': %s", e.Arg, e.Reason)
}

// Refuse is an Error for arg with the reason format.
func Refuse(arg, format string, a ...any) *Error {
	return &Error{Arg: arg, Reason: fmt.Sprintf(format, a...), Code: amqp.PreconditionFailed}
}

// streamTypeName is how RabbitMQ names the stream type in its refusals.
const streamTypeName = "rabbit_stream_queue"

// Parse checks a queue's arguments against the table the way RabbitMQ
// 3.13 and 4.x do at queue.declare: x-queue-type first, then every
// argument its kind takes must have the right type and range; a stream
// then refuses the arguments only other kinds take (rabbit_amqqueue's
// check_arguments_key). Unknown arguments are kept but ignored, as are
// those whose kinds the profile decides (ProfileKinds).
func Parse(t amqp.Table) (Args, error) {
	a := Args{MaxLength: -1, MaxLengthBytes: -1, DeliveryLimit: -1}
	if v, ok := t["x-queue-type"]; ok {
		s, err := check(byName["x-queue-type"], v)
		if err != nil {
			return a, err
		}
		switch s {
		case "quorum":
			a.Quorum = true
		case "stream":
			a.Stream = true
			a.StreamArgs = StreamArgs{MaxBytes: -1, SegmentBytes: DefaultSegmentBytes}
		}
	}
	kind := a.Kind()
	for i := range table {
		r := &table[i]
		if r.Name == "" || r.Name == "x-queue-type" || r.Kinds&kind == 0 || r.ProfileKinds || r.Value.Type == Unchecked {
			continue
		}
		v, ok := t[r.Name]
		if !ok {
			continue
		}
		x, err := check(r, v)
		if err != nil {
			return a, err
		}
		if r.set != nil {
			if err := r.set(&a, x); err != nil {
				return a, err
			}
		}
	}
	if kind != Stream {
		return a, nil
	}
	for i := range table {
		r := &table[i]
		if r.Name == "" || r.Kinds&Stream != 0 || r.Kinds == 0 || r.ProfileKinds {
			continue
		}
		if _, ok := t[r.Name]; ok {
			return a, &Error{Arg: r.Name, Code: amqp.PreconditionFailed, Reason: "of queue type " + streamTypeName,
				Text: fmt.Sprintf("invalid arg '%s' for {queue} of queue type %s", r.Name, streamTypeName)}
		}
	}
	return a, nil
}

// ParseDelayedRetry reads x-delayed-retry-type ("disabled", "all",
// "failed" or "returned"), x-delayed-retry-min and x-delayed-retry-max
// (milliseconds); min is required unless the type is disabled.
func ParseDelayedRetry(t amqp.Table) (DelayedRetry, error) {
	var r DelayedRetry
	if v, ok := t["x-delayed-retry-type"]; ok {
		s, err := check(byName["x-delayed-retry-type"], v)
		if err != nil {
			return r, err
		}
		switch s {
		case "all":
			r.Kind = RetryAll
		case "failed":
			r.Kind = RetryFailed
		case "returned":
			r.Kind = RetryReturned
		}
	}
	for _, a := range []struct {
		arg string
		dst *time.Duration
	}{{"x-delayed-retry-min", &r.Min}, {"x-delayed-retry-max", &r.Max}} {
		if v, ok := t[a.arg]; ok {
			n, err := check(byName[a.arg], v)
			if err != nil {
				return r, err
			}
			*a.dst = time.Duration(n.(int64)) * time.Millisecond
		}
	}
	if _, ok := t["x-delayed-retry-min"]; !ok && r.Kind != RetryDisabled {
		return r, Refuse("x-delayed-retry-min", "%s", fmt.Sprintf("required with x-delayed-retry-type '%v'", t["x-delayed-retry-type"]))
	}
	return r, nil
}

// check reads a declare value v of row r by r.Value, refusing it in
// r.Refusal's words: a string, bool, int64 or time.Duration.
func check(r *Arg, v any) (any, *Error) {
	x, err := checkValue(r, v)
	if err != nil && r.Refusal.Whole != "" {
		return nil, &Error{Arg: r.Name, Code: amqp.PreconditionFailed, Text: r.Refusal.Whole}
	}
	return x, err
}

func checkValue(r *Arg, v any) (any, *Error) {
	wrongType := func() *Error {
		if r.Refusal.Type != "" {
			return Refuse(r.Name, r.Refusal.Type, v)
		}
		return Refuse(r.Name, "unacceptable type %s", typeName(v))
	}
	unknown := func() *Error {
		if strings.Contains(r.Refusal.Unknown, "%") {
			return Refuse(r.Name, r.Refusal.Unknown, v)
		}
		return Refuse(r.Name, "%s", r.Refusal.Unknown)
	}
	switch r.Value.Type {
	case String:
		s, ok := v.(string)
		if !ok {
			return nil, wrongType()
		}
		return s, nil
	case Bool:
		b, ok := v.(bool)
		if !ok {
			return nil, wrongType()
		}
		return b, nil
	case Enum:
		s, ok := v.(string)
		if !ok {
			return nil, wrongType()
		}
		if !slices.Contains(r.Value.Enum, s) {
			return nil, unknown()
		}
		return s, nil
	case Age:
		s, ok := v.(string)
		if !ok {
			return nil, wrongType()
		}
		d, err := ParseMaxAge(s)
		if err != nil {
			return nil, unknown()
		}
		return d, nil
	case Int:
		n, ok := IntArg(v)
		switch {
		case !ok:
			return nil, wrongType()
		case n < 0 && r.Value.Min >= 0:
			return nil, Refuse(r.Name, "value %d is negative", n)
		case n < r.Value.Min:
			return nil, Refuse(r.Name, r.Refusal.BelowMin, n)
		case n > r.Value.Max && r.Refusal.Above != "":
			return nil, &Error{Arg: r.Name, Code: amqp.PreconditionFailed, Text: r.Refusal.Above}
		case n > r.Value.Max:
			return nil, Refuse(r.Name, "value %d is above the maximum %d", n, r.Value.Max)
		}
		return n, nil
	}
	return v, nil
}

// IntArg reads an integer argument of any AMQP integer type.
func IntArg(v any) (int64, bool) {
	switch n := v.(type) {
	case int8:
		return int64(n), true
	case uint8:
		return int64(n), true
	case int16:
		return int64(n), true
	case uint16:
		return int64(n), true
	case int32:
		return int64(n), true
	case uint32:
		return int64(n), true
	case int64:
		return n, true
	case int:
		return int64(n), true
	}
	return 0, false
}

// typeName names v's field type as RabbitMQ's "unacceptable type"
// refusals do.
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

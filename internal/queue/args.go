package queue

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/queueargs"
)

// The queue's arguments are parsed and checked by internal/queueargs, the
// one table of queue arguments; these names keep the queue's callers
// reading as before.

// Overflow is what a full queue (x-max-length, x-max-length-bytes) does.
type Overflow = queueargs.Overflow

const (
	DropHead         = queueargs.DropHead
	RejectPublish    = queueargs.RejectPublish
	RejectPublishDLX = queueargs.RejectPublishDLX
)

// Args are a queue's x-arguments, parsed and checked (queueargs.Args).
type Args = queueargs.Args

// ArgError is a queue argument RabbitMQ would refuse (queueargs.Error).
type ArgError = queueargs.Error

func argErr(arg, format string, a ...any) *ArgError { return queueargs.Refuse(arg, format, a...) }

// ParseArgs checks a queue's arguments the way RabbitMQ 3.13 and 4.x do
// at queue.declare (queueargs.Parse).
func ParseArgs(t amqp.Table) (Args, error) { return queueargs.Parse(t) }

// MaxExpiry is the largest TTL or queue expiry RabbitMQ accepts, in
// milliseconds (queueargs.MaxExpiry).
const MaxExpiry = queueargs.MaxExpiry

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

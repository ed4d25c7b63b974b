package routing

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Check them with errors.Is; the broker maps each to an AMQP
// reply code (noted on each).
var (
	// ErrDefaultExchange: the operation is not permitted on the default
	// exchange "" (binding to or from it, deleting it, declaring it).
	// RabbitMQ answers 403 ACCESS_REFUSED.
	ErrDefaultExchange = errors.New("routing: operation not permitted on the default exchange")
	// ErrExchangeNotFound: a named exchange does not exist (404 NOT_FOUND).
	ErrExchangeNotFound = errors.New("routing: exchange not found")
	// ErrQueueNotFound: a named queue does not exist (404 NOT_FOUND).
	ErrQueueNotFound = errors.New("routing: queue not found")
	// ErrUnknownKind: the exchange type is not one of direct, fanout, topic,
	// headers. The broker decides the reply code (RabbitMQ 3.x+ uses 406
	// PRECONDITION_FAILED in rabbit_exchange:check_type; older ones 503).
	ErrUnknownKind = errors.New("routing: unknown exchange kind")
	// ErrInvalidBinding: the binding arguments are not valid for the source
	// exchange's kind, e.g. a bad x-match (406 PRECONDITION_FAILED, as
	// RabbitMQ's binding_invalid).
	ErrInvalidBinding = errors.New("routing: invalid binding")
)

// Kind is an exchange type.
type Kind uint8

// The exchange kinds of AMQP 0-9-1 (§3.1.3). The zero Kind is invalid so an
// Exchange literal that forgets its Kind is refused rather than silently
// becoming a direct exchange.
const (
	Direct Kind = iota + 1
	Fanout
	Topic
	Headers
)

// ParseKind maps the exchange.declare type field ("direct", "fanout",
// "topic", "headers") to a Kind. Anything else, including plugin types such
// as "x-consistent-hash", is ErrUnknownKind.
func ParseKind(s string) (Kind, error) {
	switch s {
	case "direct":
		return Direct, nil
	case "fanout":
		return Fanout, nil
	case "topic":
		return Topic, nil
	case "headers":
		return Headers, nil
	}
	return 0, fmt.Errorf("%w: %q", ErrUnknownKind, s)
}

// String returns the AMQP name of the kind ("direct", ...), or "Kind(n)" for
// an invalid value.
func (k Kind) String() string {
	switch k {
	case Direct:
		return "direct"
	case Fanout:
		return "fanout"
	case Topic:
		return "topic"
	case Headers:
		return "headers"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

func (k Kind) valid() bool { return k >= Direct && k <= Headers }

// IsReserved reports whether name starts with "amq.", the prefix AMQP
// 0-9-1 reserves for predeclared exchanges (§3.1.3.1; RabbitMQ refuses a
// non-passive exchange.declare or queue.declare of such a name with 403
// ACCESS_REFUSED). The table itself does not enforce it: DeclareDefaults
// needs the names, and the broker decides when a client may use them.
func IsReserved(name string) bool { return strings.HasPrefix(name, "amq.") }

// Predeclared lists the exchanges every vhost starts with, besides the
// default exchange "": AMQP 0-9-1's amq.direct, amq.fanout, amq.topic,
// amq.headers and amq.match (a headers exchange, §3.1.3.1). RabbitMQ's
// amq.rabbitmq.trace belongs to its firehose tracer and is not included.
func Predeclared() []Exchange {
	return []Exchange{
		{Name: "amq.direct", Kind: Direct},
		{Name: "amq.fanout", Kind: Fanout},
		{Name: "amq.topic", Kind: Topic},
		{Name: "amq.headers", Kind: Headers},
		{Name: "amq.match", Kind: Headers},
	}
}

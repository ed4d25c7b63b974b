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
	// ErrInvalidArgument: an exchange argument is not valid for its kind,
	// e.g. both hash-header and hash-property on a consistent-hash
	// exchange (406 PRECONDITION_FAILED, as RabbitMQ's validate).
	ErrInvalidArgument = errors.New("routing: invalid exchange argument")
)

// Kind is an exchange type.
type Kind uint8

// The exchange kinds of AMQP 0-9-1 (§3.1.3), the two hashing kinds
// RabbitMQ adds (hash.go) and its local random one (local_random.go). The zero Kind is invalid so an Exchange literal
// that forgets its Kind is refused rather than silently becoming a direct
// exchange.
const (
	Direct Kind = iota + 1
	Fanout
	Topic
	Headers
	// ConsistentHash is "x-consistent-hash" (RabbitMQ's bundled
	// rabbitmq_consistent_hash_exchange plugin): binding keys are weights,
	// and each message goes to one binding picked by jump consistent
	// hashing of its routing key, or of Exchange.HashOn.
	ConsistentHash
	// ModulusHash is "x-modulus-hash" (in RabbitMQ's core from 4.3):
	// binding keys are ignored, and each message goes to binding
	// hash(routing keys) mod the number of bindings.
	ModulusHash
	// LocalRandom is "x-local-random" (in RabbitMQ's core from 4.0,
	// local_random.go): bindings have the empty key and name a queue,
	// and each message goes to one of the bound queues at random,
	// whatever its routing key.
	LocalRandom
)

// ParseKind maps the exchange.declare type field ("direct", "fanout",
// "topic", "headers", "x-consistent-hash", "x-modulus-hash",
// "x-local-random") to a Kind.
// Anything else is ErrUnknownKind; the types that wrap a kind
// (x-delayed-message, x-message-deduplication) are ResolveType's.
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
	case "x-consistent-hash":
		return ConsistentHash, nil
	case "x-modulus-hash":
		return ModulusHash, nil
	case "x-local-random":
		return LocalRandom, nil
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
	case ConsistentHash:
		return "x-consistent-hash"
	case ModulusHash:
		return "x-modulus-hash"
	case LocalRandom:
		return "x-local-random"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

func (k Kind) valid() bool { return k >= Direct && k <= LocalRandom }

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

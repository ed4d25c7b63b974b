package broker

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/events"
	"github.com/warrenmq/broker/routing"
)

// EventKind says what an Event reports. Its String is the event's name in
// the routing-key style of RabbitMQ's event exchange plugin
// (rabbitmq_event_exchange, names as in RabbitMQ 4.2's documentation):
// connection.created, connection.closed, consumer.created,
// consumer.deleted, binding.created and binding.deleted are RabbitMQ's; the plugin has no message events, so
// message.returned, message.dead_lettered and message.expired follow the
// same style.
type EventKind uint8

// The event kinds. docs/events.md lists the fields each one sets.
const (
	// ConnectionCreated: a client connection finished its handshake
	// (connection.open-ok sent), or a direct Channel was opened.
	ConnectionCreated EventKind = iota + 1
	// ConnectionClosed: a connection that was created has ended and
	// released its channels, consumers and exclusive queues. Code and
	// Reason are the connection.close that ended it (either side's); Code
	// 0 means it ended without one, and Reason then says why (missed
	// heartbeats, or the socket's error when the client hung up).
	ConnectionClosed
	// ConsumerCreated: basic.consume succeeded (consume-ok sent).
	ConsumerCreated
	// ConsumerDeleted: a consumer ended. Reason is "basic.cancel" (the
	// client cancelled it), "channel closed" (its channel or connection
	// closed) or "queue deleted" (the server cancelled it, with
	// basic.cancel to clients that asked for consumer_cancel_notify).
	ConsumerDeleted
	// MessageReturned: a mandatory publish reached no queue and was
	// returned with basic.return (Code 312, Reason "NO_ROUTE").
	MessageReturned
	// MessageDeadLettered: a message died in its queue: Reason is
	// "rejected" (basic.reject or basic.nack without requeue), "maxlen"
	// (x-max-length or x-max-length-bytes overflow) or "delivery_limit"
	// (x-delivery-limit). Its copy was published to DeadLetterExchange,
	// or, Discarded, the queue has no dead-letter exchange and the message
	// was dropped: RabbitMQ counts both as dead-lettered (its
	// dead_letter_strategy "at_most_once" and "disabled"), and so do the
	// broker's metrics (rabbitmq_global_messages_dead_lettered_*): each
	// message counted there is one event.
	MessageDeadLettered
	// MessageExpired: a message's TTL (x-message-ttl or the expiration
	// property) ran out in its queue; Reason is "expired". As with
	// MessageDeadLettered its copy went to DeadLetterExchange, or it was
	// Discarded (no dead-letter exchange: simply dropped).
	MessageExpired
	// BindingCreated: a binding was added (queue.bind, exchange.bind, or,
	// in a cluster, one added on another member that this one now routes
	// by): Exchange is its source, Destination
	// and DestinationKind ("queue" or "exchange") its destination,
	// RoutingKey and Arguments its key and arguments (RabbitMQ 3.10's
	// binding_created, rabbit_binding's info keys). Not reported for the
	// bindings a broker finds in its store when it starts.
	BindingCreated
	// BindingDeleted: a binding was removed: unbound, or with its source
	// or destination deleted (RabbitMQ's binding_deleted); the fields of
	// BindingCreated.
	BindingDeleted
)

// eventKinds maps the sources' kinds to the public ones.
var eventKinds = [events.NumKinds]EventKind{
	events.ConnectionCreated:   ConnectionCreated,
	events.ConnectionClosed:    ConnectionClosed,
	events.ConsumerCreated:     ConsumerCreated,
	events.ConsumerDeleted:     ConsumerDeleted,
	events.MessageReturned:     MessageReturned,
	events.MessageDeadLettered: MessageDeadLettered,
	events.MessageExpired:      MessageExpired,
	events.BindingCreated:      BindingCreated,
	events.BindingDeleted:      BindingDeleted,
}

// sourceKind returns the sources' kind for k, 0 for an unknown one.
func sourceKind(k EventKind) events.Kind {
	for i, pk := range eventKinds {
		if pk == k && k != 0 {
			return events.Kind(i)
		}
	}
	return 0
}

var eventKindNames = [...]string{
	ConnectionCreated:   "connection.created",
	ConnectionClosed:    "connection.closed",
	ConsumerCreated:     "consumer.created",
	ConsumerDeleted:     "consumer.deleted",
	MessageReturned:     "message.returned",
	MessageDeadLettered: "message.dead_lettered",
	MessageExpired:      "message.expired",
	BindingCreated:      "binding.created",
	BindingDeleted:      "binding.deleted",
}

// String returns the kind's name, e.g. "connection.created".
func (k EventKind) String() string {
	if int(k) < len(eventKindNames) && eventKindNames[k] != "" {
		return eventKindNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is something that happened in the broker, for a program that
// observes it (Broker.Events). Fields that do not apply to the Kind are
// zero; no event carries a message body.
type Event struct {
	Kind EventKind
	// Time is when the broker reported it, on Options.Clock.
	Time time.Time
	// Missed counts the events this subscription lost just before this
	// one because its buffer was full.
	Missed uint64

	VHost string
	// Connection is the connection's ID, as in ConnectionInfo and
	// CloseConnection; set for connection and consumer events and
	// returns, empty for the queue's events (dead-lettered, expired).
	Connection string
	// ConnectionName is the client's connection_name property, if any.
	ConnectionName string
	User           string
	// Peer is the client's address: "pipe" for Dial, "" for a direct
	// Channel.
	Peer string
	// Direct: the connection is a direct Channel (b.Channel).
	Direct  bool
	Channel uint16

	ConsumerTag string
	Queue       string
	// Exchange and RoutingKey are what the message was published with.
	Exchange   string
	RoutingKey string
	MessageID  string

	// Code and Reason: the close code and text of ConnectionClosed, the
	// reply code and text of MessageReturned, the reason of
	// ConsumerDeleted, MessageDeadLettered and MessageExpired.
	Code   uint16
	Reason string
	// DeadLetterExchange is the exchange a dead-lettered or expired
	// message's copy was published to ("" is the default exchange) unless
	// Discarded: its queue had no dead-letter exchange, and the message
	// was dropped.
	DeadLetterExchange string
	Discarded          bool

	// Destination, DestinationKind ("queue" or "exchange") and Arguments
	// are a binding's (BindingCreated, BindingDeleted); its source is
	// Exchange and its key RoutingKey.
	Destination     string
	DestinationKind string
	Arguments       amqp.Table
}

// DefaultEventBuffer is the buffer of Events when it is given 0.
const DefaultEventBuffer = 256

// Events returns a channel of the broker's events of the given kinds (none:
// every kind) until ctx ends or the broker closes; then the channel is
// closed. Like etcd's Watch, the subscription is its context: cancel ctx
// to stop, and drain the channel or let it go.
//
// Delivering an event never waits for the program: the channel holds
// buffer events (DefaultEventBuffer when buffer is 0 or less), and an event
// that finds it full is dropped for this subscriber only. The next event
// it receives counts the drops in Missed, so a program knows it lost
// some. Several subscribers may be active; each gets every event of its
// kinds. A queue's events arrive in order, and so do a connection's,
// except ConsumerDeleted for a deleted queue, which the queue reports;
// events from different queues and connections may interleave in any
// order.
//
// With no subscriber for a kind the broker pays one atomic load where such
// an event would be. docs/events.md lists the fields of each kind.
func (b *Broker) Events(ctx context.Context, buffer int, kinds ...EventKind) <-chan Event {
	if buffer <= 0 {
		buffer = DefaultEventBuffer
	}
	mask := events.All
	if len(kinds) > 0 {
		src := make([]events.Kind, 0, len(kinds))
		for _, k := range kinds {
			if sk := sourceKind(k); sk != 0 {
				src = append(src, sk)
			}
		}
		mask = events.MaskOf(src...)
		if len(src) == 0 {
			mask = 0 // only unknown kinds: nothing will match
		}
	}
	return events.Subscribe(ctx, b.events, buffer, mask, publicEvent)
}

// publicEvent converts a source's event.
func publicEvent(e events.Event, at time.Time, dropped uint64) Event {
	return Event{
		Kind:               eventKinds[e.Kind],
		Time:               at,
		Missed:             dropped,
		VHost:              e.VHost,
		Connection:         e.Connection,
		ConnectionName:     e.Name,
		User:               e.User,
		Peer:               e.Peer,
		Direct:             e.Direct,
		Channel:            e.Channel,
		ConsumerTag:        e.ConsumerTag,
		Queue:              e.Queue,
		Exchange:           e.Exchange,
		RoutingKey:         e.RoutingKey,
		MessageID:          e.MessageID,
		Code:               e.Code,
		Reason:             e.Reason,
		DeadLetterExchange: e.DeadLetterExchange,
		Discarded:          e.Discarded,
		Destination:        e.Destination,
		DestinationKind:    destinationKind(e),
		Arguments:          e.Arguments,
	}
}

// bindingEvents is vhost.Config.Bindings for vhost: binding.created and
// binding.deleted into the hub, built only when someone listens.
func (b *Broker) bindingEvents(vhost string) func(routing.Binding, bool) {
	return func(bd routing.Binding, created bool) {
		kind := events.BindingDeleted
		if created {
			kind = events.BindingCreated
		}
		if !b.events.On(kind) {
			return
		}
		b.events.Emit(events.Event{Kind: kind, VHost: vhost, Exchange: bd.Source, RoutingKey: bd.Key,
			Destination: bd.Destination.Name, DestinationExchange: bd.Destination.Exchange, Arguments: amqp.Table(maps.Clone(bd.Args))})
	}
}

func destinationKind(e events.Event) string {
	switch {
	case e.Kind != events.BindingCreated && e.Kind != events.BindingDeleted:
		return ""
	case e.DestinationExchange:
		return "exchange"
	default:
		return "queue"
	}
}

package vhost

import (
	"maps"
	"strings"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/compat"
	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/internal/queueargs"
	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/routing"
)

// profile returns the RabbitMQ version profile the vhost copies.
func (v *VHost) profile() compat.Profile { return v.cfg.Profile.OrDefault() }

// parseQueueArgs parses a queue's x-arguments (queue.ParseArgs) under the
// vhost's profile: from 4.0 a negative x-delivery-limit means unlimited;
// from 4.3 a quorum queue reads x-delayed-retry-*. Declared and stored
// queues both go through it. The profile's default delivery limit is not
// taken here but after the policies (effectiveArgs): it applies only when
// neither the argument nor a policy sets one.
func (v *VHost) parseQueueArgs(t amqp.Table) (queue.Args, error) {
	p := v.profile()
	_, given := t["x-delivery-limit"]
	unlimited := false
	if n, ok := queue.IntArg(t["x-delivery-limit"]); ok && n < 0 && p.NegativeDeliveryLimit {
		t = maps.Clone(t)
		delete(t, "x-delivery-limit")
		unlimited = true
	}
	a, err := queue.ParseArgs(t)
	if err != nil {
		return a, err
	}
	if a.Quorum && p.DelayedRetry {
		if a.DelayedRetry, err = queue.ParseDelayedRetry(t); err != nil {
			return a, err
		}
	}
	if unlimited {
		a.DeliveryLimit = -1
	}
	a.HasDeliveryLimit = given
	return a, nil
}

// checkDeclare refuses a new queue the profile's RabbitMQ refuses beyond
// its arguments' types and ranges, in RabbitMQ's order: a deprecated
// transient non-exclusive queue (4.3: 541, closing the connection), the
// classic queue v1 arguments (4.3), x-consumer-timeout where the queue
// type does not take it (4.3.2, checkTimeoutArg), then the properties and
// arguments a quorum queue does not support (every version:
// rabbit_queue_type_util's check_auto_delete, check_exclusive,
// check_non_durable).
func (v *VHost) checkDeclare(def meta.Queue, m *amqp.QueueDeclare, a queue.Args) error {
	p := v.profile()
	// The resource's words are built only for a refusal: this runs on
	// every declare.
	res := func() string { return v.resource("queue", def.Name) }
	if p.RefuseTransientNonExclusive && !m.Durable && !m.Exclusive {
		return amqp.NewError(amqp.InternalError, 0, 0, "%s", compat.DeniedFeatureText("transient_nonexcl_queues"))
	}
	if p.RefuseQueueMode {
		if _, ok := m.Arguments["x-queue-mode"]; ok {
			return amqp.NewError(amqp.PreconditionFailed, 0, 0, "invalid arg 'x-queue-mode' for %s: classic queue v1 storage is removed; the argument is not supported", res())
		}
		if n, ok := queue.IntArg(m.Arguments["x-queue-version"]); ok && n == 1 {
			return amqp.NewError(amqp.PreconditionFailed, 0, 0, "invalid arg 'x-queue-version' for %s: classic queue v1 storage is removed; only version 2 is supported", res())
		}
	}
	if err := v.checkTimeoutArg(typeModule(a.Quorum, a.Stream), m.Arguments, def.Name, false); err != nil {
		return err
	}
	if !a.Quorum {
		return nil
	}
	switch {
	case m.AutoDelete:
		return amqp.NewError(amqp.PreconditionFailed, 0, 0, "invalid property 'auto-delete' for %s", res())
	case m.Exclusive:
		return amqp.NewError(amqp.PreconditionFailed, 0, 0, "invalid property 'exclusive-owner' for %s", res())
	case !m.Durable:
		return amqp.NewError(amqp.PreconditionFailed, 0, 0, "invalid property 'non-durable' for %s", res())
	}
	if _, ok := m.Arguments["x-max-priority"]; ok && p.QuorumPriorities != compat.StrictLevels {
		// Not among the quorum queue type's arguments before 4.3
		// (rabbit_amqqueue's check_arguments_key).
		return amqp.NewError(amqp.PreconditionFailed, 0, 0, "invalid arg 'x-max-priority' for %s of queue type rabbit_quorum_queue", res())
	}
	return nil
}

// comparedQueueArgs are the arguments a redeclaration of q must match,
// by its kind (queueargs.Compared: RabbitMQ 4.x compares a queue type's
// own arguments): from 4.3.2 a quorum queue's x-consumer-timeout too,
// which the quorum queue type lists among its arguments (and so
// compares).
func (v *VHost) comparedQueueArgs(q *Queue) []string {
	kind := queueargs.Classic
	switch {
	case q.IsStream():
		kind = queueargs.Stream
	case q.Args["x-queue-type"] == "quorum":
		kind = queueargs.Quorum
	}
	return queueargs.Compared(kind, func(h queueargs.Hook) bool {
		return h == queueargs.HookConsumerTimeout && v.profile().ConsumerTimeoutArgs == compat.TimeoutArgsQuorum
	})
}

// queueTypeModule is RabbitMQ's name for the type of a queue with these
// arguments (a vhost default queue type written in), as its refusals
// name it.
func queueTypeModule(args amqp.Table) string {
	return typeModule(args["x-queue-type"] == "quorum", args["x-queue-type"] == "stream")
}

func typeModule(quorum, stream bool) string {
	switch {
	case quorum:
		return "rabbit_quorum_queue"
	case stream:
		return "rabbit_stream_queue"
	}
	return "rabbit_classic_queue"
}

// checkTimeoutArg applies the profile's ConsumerTimeoutArgs to the
// x-consumer-timeout in args, a queue.declare's (consumer false) or a
// basic.consume's, for the queue named name of the type module mod
// (typeModule): from 4.3 (consumers) and 4.3.2 (queues) it is an argument of
// quorum queues only, which RabbitMQ's check_arguments_key refuses for
// the other types, and from 4.3.2 a non-negative integer
// (check_non_neg_int_arg).
func (v *VHost) checkTimeoutArg(mod string, args amqp.Table, name string, consumer bool) error {
	val, ok := args["x-consumer-timeout"]
	if !ok {
		return nil
	}
	rule := v.profile().ConsumerTimeoutArgs
	if rule == compat.TimeoutArgsAnywhere || !consumer && rule == compat.TimeoutArgsQuorumConsumers {
		return nil
	}
	res := v.resource("queue", name)
	if mod != "rabbit_quorum_queue" {
		return amqp.NewError(amqp.PreconditionFailed, 0, 0, "invalid arg 'x-consumer-timeout' for %s of queue type %s", res, mod)
	}
	if rule != compat.TimeoutArgsQuorum {
		return nil
	}
	switch n, isInt := queue.IntArg(val); {
	case !isInt:
		return amqp.NewError(amqp.PreconditionFailed, 0, 0, "invalid arg 'x-consumer-timeout' for %s: unacceptable type %s", res, fieldType(val))
	case n < 0:
		return amqp.NewError(amqp.PreconditionFailed, 0, 0, "invalid arg 'x-consumer-timeout' for %s: value %d is negative", res, n)
	}
	return nil
}

// CheckConsumeArgs refuses the basic.consume arguments the profile's
// RabbitMQ refuses for q's type (rabbit_amqqueue:check_consume_arguments):
// from 4.3 x-consumer-timeout on a classic queue or a stream, from 4.3.2
// one that is not a non-negative integer (checkTimeoutArg).
func (v *VHost) CheckConsumeArgs(q *Queue, args amqp.Table) error {
	return v.checkTimeoutArg(queueTypeModule(q.Args), args, q.Def.Name, true)
}

// exchangeTypeKnown is knownType under the profile: x-local-random is a
// type from 4.0.
func (v *VHost) exchangeTypeKnown(typ string) bool {
	if typ == typeLocalRandom && !v.profile().LocalRandomExchange {
		return false
	}
	return knownType(typ)
}

// typeLocalRandom is the x-local-random exchange's type.
const typeLocalRandom = "x-local-random"

// checkBindingLocked applies the binding rules of the source exchange's
// type that the routing table cannot check or that depend on the
// profile, after both ends were found and before the exclusive owner is
// checked, as RabbitMQ validates a binding (rabbit_binding's
// binding_checks) before it looks at exclusivity. q is the destination
// queue, nil for an exchange. topo is held.
//
//   - x-local-random (4.0, rabbit_exchange_type_local_random's
//     validate_binding): the key must be empty, the destination a queue
//     ("Destination not found" for an exchange) and a classic one.
//   - topic: at most TopicHashWildcards '#' words in the key (4.3.5,
//     rabbit_exchange_type_topic's validate_binding).
func (v *VHost) checkBindingLocked(b routing.Binding, q *Queue) error {
	src, ok := v.routes.Exchange(b.Source)
	if !ok {
		return nil
	}
	switch src.Kind {
	case routing.LocalRandom:
		switch {
		case b.Key != "":
			return amqp.NewError(amqp.PreconditionFailed, 0, 0, "Non empty binding '%s' key not permitted", b.Key)
		case q == nil:
			return amqp.NewError(amqp.PreconditionFailed, 0, 0, "Destination not found")
		}
		if mod := queueTypeModule(q.Args); mod != "rabbit_classic_queue" {
			return amqp.NewError(amqp.PreconditionFailed, 0, 0, "Queue type %s not valid for this exchange type", mod)
		}
	case routing.Topic:
		limit := v.profile().TopicHashWildcards
		if limit == 0 {
			return nil
		}
		n := 0
		if b.Key != "" { // RabbitMQ splits "" into no words
			for w := range strings.SplitSeq(b.Key, ".") {
				if w == "#" {
					n++
				}
			}
		}
		if n > limit {
			return amqp.NewError(amqp.PreconditionFailed, 0, 0, "Topic binding key '%s' uses %d '#' wildcards, at most %d are allowed", b.Key, n, limit)
		}
	}
	return nil
}

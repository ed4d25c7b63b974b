package vhost

import (
	"maps"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/compat"
	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/meta"
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
// classic queue v1 arguments (4.3), then the properties and arguments a
// quorum queue does not support (every version: rabbit_queue_type_util's
// check_auto_delete, check_exclusive, check_non_durable).
func (v *VHost) checkDeclare(def meta.Queue, m *amqp.QueueDeclare, a queue.Args) error {
	p := v.profile()
	res := v.resource("queue", def.Name)
	if p.RefuseTransientNonExclusive && !m.Durable && !m.Exclusive {
		return amqp.NewError(amqp.InternalError, 0, 0, "%s", compat.DeniedFeatureText("transient_nonexcl_queues"))
	}
	if p.RefuseQueueMode {
		if _, ok := m.Arguments["x-queue-mode"]; ok {
			return amqp.NewError(amqp.PreconditionFailed, 0, 0, "invalid arg 'x-queue-mode' for %s: classic queue v1 storage is removed; the argument is not supported", res)
		}
		if n, ok := queue.IntArg(m.Arguments["x-queue-version"]); ok && n == 1 {
			return amqp.NewError(amqp.PreconditionFailed, 0, 0, "invalid arg 'x-queue-version' for %s: classic queue v1 storage is removed; only version 2 is supported", res)
		}
	}
	if !a.Quorum {
		return nil
	}
	switch {
	case m.AutoDelete:
		return amqp.NewError(amqp.PreconditionFailed, 0, 0, "invalid property 'auto-delete' for %s", res)
	case m.Exclusive:
		return amqp.NewError(amqp.PreconditionFailed, 0, 0, "invalid property 'exclusive-owner' for %s", res)
	case !m.Durable:
		return amqp.NewError(amqp.PreconditionFailed, 0, 0, "invalid property 'non-durable' for %s", res)
	}
	if _, ok := m.Arguments["x-max-priority"]; ok && p.QuorumPriorities != compat.StrictLevels {
		// Not among the quorum queue type's arguments before 4.3
		// (rabbit_amqqueue's check_arguments_key).
		return amqp.NewError(amqp.PreconditionFailed, 0, 0, "invalid arg 'x-max-priority' for %s of queue type rabbit_quorum_queue", res)
	}
	return nil
}

// comparedQueueArgs are the arguments a redeclaration must match: from
// 4.3 x-consumer-timeout too, which the quorum queue type reads.
func (v *VHost) comparedQueueArgs() []string {
	if v.profile().QuorumConsumerTimeoutCancel {
		return append(comparedQueueArgs[:len(comparedQueueArgs):len(comparedQueueArgs)], "x-consumer-timeout")
	}
	return comparedQueueArgs
}

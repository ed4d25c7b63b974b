package vhost

import (
	"maps"
	"math"
	"sync/atomic"

	"github.com/warrenmq/broker/amqp"
)

// settings are what an operator may change on an open vhost (the
// management API's vhost metadata and vhost limits); each is read once per
// use, without a lock.
type settings struct {
	// defaultType is RabbitMQ's vhost default queue type; "" for none.
	defaultType atomic.Pointer[string]
	// queueLimit is the stored max-queues limit, or noLimitSet: then
	// Config.MaxQueues applies.
	queueLimit atomic.Int64
}

// noLimitSet marks settings.queueLimit as unset.
const noLimitSet = math.MinInt64

// SetDefaultQueueType sets the queue type ("classic", "quorum", "stream";
// "" for none) that a queue declared without x-queue-type gets when it is
// durable, not exclusive and not auto-delete (withDefaultType).
func (v *VHost) SetDefaultQueueType(t string) { v.settings.defaultType.Store(&t) }

// DefaultQueueType returns what SetDefaultQueueType set, "" at first.
func (v *VHost) DefaultQueueType() string {
	if p := v.settings.defaultType.Load(); p != nil {
		return *p
	}
	return ""
}

// SetQueueLimit sets the vhost's max-queues limit as RabbitMQ's vhost
// limits hold it: a negative n is no limit, 0 refuses every new queue.
// With set false the limit is dropped and Config.MaxQueues applies again.
func (v *VHost) SetQueueLimit(n int64, set bool) {
	if !set {
		n = noLimitSet
	}
	v.settings.queueLimit.Store(n)
}

// queueLimitReachedLocked returns the 406 RabbitMQ answers
// (rabbit_amqqueue:check_vhost_queue_limit) when one more queue would
// exceed the vhost's limit, nil otherwise. topo is held.
func (v *VHost) queueLimitReachedLocked(name string) error {
	limit := v.settings.queueLimit.Load()
	if limit == noLimitSet {
		limit = int64(v.cfg.MaxQueues)
		if limit <= 0 { // Options' zero is no limit
			return nil
		}
	}
	if limit < 0 || int64(len(v.queues)) < limit {
		return nil
	}
	return amqp.NewError(amqp.PreconditionFailed, 0, 0,
		"cannot declare queue '%s': queue limit in vhost '%s' (%d) is reached", name, v.cfg.Name, limit)
}

// withDefaultType returns the arguments a queue.declare is handled with:
// args with x-queue-type set to the vhost's default queue type when it
// has one, args has no x-queue-type, and the queue is durable, not
// exclusive and not auto-delete; args itself otherwise. This is RabbitMQ's
// rabbit_amqqueue:augment_declare_args (vhost default queue types came in
// 3.11; the rules are 3.13's and 4.x's): the default is written into the
// queue's arguments, so a later declare without x-queue-type is equivalent
// to it, and one naming another type is refused as inequivalent. Where
// the default does not fit (an exclusive, auto-delete or transient queue)
// RabbitMQ 4.x writes x-queue-type=classic instead; Warren, like 3.13,
// leaves the arguments alone, which is equivalent (no x-queue-type is
// classic). A caller's table is never modified.
func (v *VHost) withDefaultType(args amqp.Table, durable, exclusive, autoDelete bool) amqp.Table {
	t := v.DefaultQueueType()
	if t == "" || !durable || exclusive || autoDelete {
		return args
	}
	if _, ok := args["x-queue-type"]; ok {
		return args
	}
	out := make(amqp.Table, len(args)+1)
	maps.Copy(out, args)
	out["x-queue-type"] = t
	return out
}

// ExchangeType returns the type ("direct", "topic", ...) of the named
// exchange, "" when there is none; it allocates nothing, for the checks a
// publish makes.
func (v *VHost) ExchangeType(name string) string {
	if name == "" {
		return "direct"
	}
	v.mu.RLock()
	defer v.mu.RUnlock()
	if x, ok := v.exchanges[name]; ok {
		return x.def.Type
	}
	return ""
}

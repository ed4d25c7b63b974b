package vhost

import (
	"context"

	"github.com/warrenmq/broker/internal/compat"
	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/meta"
)

// features returns the settings a queue's actor starts with (its declared
// arguments args with the vhost's policies applied, policy.go), the
// profile's quorum behaviour, and its hooks into the vhost: the
// dead-letter router and the x-expires deletion. Both hooks are always
// set: a policy may turn either feature on later.
func (v *VHost) features(def meta.Queue, args queue.Args) queue.Features {
	eff, _ := v.effectiveArgs(def.Name, args)
	name := def.Name
	f := queue.Features{
		Args: eff, Group: v.group,
		DeadLetter: v.deadLetter,
		Expired:    func() { v.expireQueue(name) },
	}
	f.HoldDeadLetter = v.holdDeadLetter // a delayed exchange holds dead letters too
	f.CountFailedOnly = args.Quorum && v.profile().FailedDeliveryCount
	f.IgnoreClientDeaths = !v.profile().ClientDeathInterpreted
	if args.Quorum {
		switch v.profile().QuorumPriorities {
		case compat.TwoLevels:
			f.QuorumPriorities = queue.TwoLevelPriorities
		case compat.StrictLevels:
			f.QuorumPriorities = queue.StrictPriorities
		}
	}
	return f
}

// routeDeadLetter routes a dead-lettered copy like a publish, its CC
// header's keys included: RabbitMQ routes a dead letter with the keys it
// was published with, CC ones too, unless its queue names an
// x-dead-letter-routing-key (then the copy has lost its CC header, see
// queue.DeadLetterProperties). It runs on the source queue's actor and
// only takes mu (never held across a queue call), so it cannot deadlock
// with the actor. A missing exchange routes nowhere: RabbitMQ drops the
// message.
func (v *VHost) routeDeadLetter(exchange, key string, props []byte) []*queue.Queue {
	if v.plugins.Load() > 0 && v.deadLetterDuplicate(exchange, props) {
		return nil
	}
	cc, props, err := SenderSelected(props)
	if err != nil {
		cc = nil // a CC header that is not an array adds no key
	}
	_, qs, err := v.RouteCC(exchange, key, cc, props, nil, nil)
	if err != nil || len(qs) == 0 {
		return nil
	}
	out := make([]*queue.Queue, len(qs))
	for i, q := range qs {
		out[i] = q.Queue
	}
	return out
}

// expireQueue deletes the queue name when its actor confirms it has been
// unused for its x-expires period (it may have been used since the timer
// was armed). It runs on the timer's goroutine, never on the actor's.
func (v *VHost) expireQueue(name string) {
	ctx := context.Background()
	v.topo.Lock()
	defer v.topo.Unlock()
	v.mu.RLock()
	q, ok := v.queues[name]
	v.mu.RUnlock()
	if !ok || !q.Unused(ctx) {
		return
	}
	if _, err := v.removeQueueLocked(ctx, q); err != nil {
		v.cfg.Logger.Error("expire queue", "vhost", v.cfg.Name, "queue", name, "err", err)
	}
}

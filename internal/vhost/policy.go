package vhost

import (
	"sync/atomic"

	"github.com/warrenmq/broker/internal/policy"
	"github.com/warrenmq/broker/internal/queue"
)

// Policies. The vhost keeps its policy set (an immutable policy.Set) and,
// for each queue, its declared arguments and the settings its actor runs
// with. A queue's settings are computed when it starts and again when the
// set changes (SetPolicies), never per message: the actor reads them from
// its own state. An exchange's alternate exchange comes from a policy
// when it was declared without the argument.

// queuePolicy is a queue's policy state. declared and effective are
// written and read by topo holders only; match is read by anyone.
type queuePolicy struct {
	declared  queue.Args
	effective queue.Args
	match     atomic.Pointer[policy.Match]
}

// queueTarget is what apply-to a queue declared with args falls under.
func queueTarget(args queue.Args) policy.Target {
	switch {
	case args.Quorum:
		return policy.QuorumQueue
	case args.Stream:
		return policy.Stream
	}
	return policy.ClassicQueue
}

// effectiveArgs returns the settings a queue named name and declared with
// args runs with under the vhost's policies, and what applied. A quorum
// queue whose delivery limit neither its argument nor a policy sets gets
// the profile's default (20 from RabbitMQ 4.0: rabbit_quorum_queue's
// get_delivery_limit falls back to it only when args_policy_lookup finds
// nothing).
func (v *VHost) effectiveArgs(name string, args queue.Args) (queue.Args, policy.Match) {
	m := v.policies.Load().Match(queueTarget(args), name)
	p, op := m.Defs()
	eff := policy.Effective(policy.Inputs{Args: args, Policy: p, Operator: op})
	if args.Quorum && !args.HasDeliveryLimit && !setsDeliveryLimit(p) && !setsDeliveryLimit(op) {
		eff.DeliveryLimit = v.profile().QuorumDeliveryLimit
	}
	return eff, m
}

// setsDeliveryLimit reports whether policy definition d sets delivery-limit.
func setsDeliveryLimit(d *policy.Def) bool { return d != nil && d.Sets("delivery-limit") }

// attachPolicyLocked records a new queue's declared arguments and the
// policies its actor started with (features computed the same).
func (v *VHost) attachPolicyLocked(q *Queue) {
	declared, err := v.parseQueueArgs(q.Args)
	if err != nil {
		declared, _ = queue.ParseArgs(nil) // as startStoredLocked started it
	}
	q.pol.declared = declared
	eff, m := v.effectiveArgs(q.Def.Name, declared)
	q.pol.effective = eff
	q.pol.match.Store(&m)
}

// Policy returns the policy and operator policy that apply to the queue.
func (q *Queue) Policy() policy.Match {
	if m := q.pol.match.Load(); m != nil {
		return *m
	}
	return policy.Match{}
}

// Policies returns the vhost's policy set (nil for none).
func (v *VHost) Policies() *policy.Set { return v.policies.Load() }

// SetPolicies replaces the vhost's policies and applies them to every
// queue and exchange: a queue whose settings change gets them through
// queue.SetArgs, an exchange declared without alternate-exchange routes
// to the policy's.
func (v *VHost) SetPolicies(s *policy.Set) {
	v.topo.Lock()
	defer v.topo.Unlock()
	v.policies.Store(s)
	v.mu.RLock()
	qs := make([]*Queue, 0, len(v.queues))
	for _, q := range v.queues {
		qs = append(qs, q)
	}
	xs := make([]*exchange, 0, len(v.exchanges))
	for _, x := range v.exchanges {
		xs = append(xs, x)
	}
	v.mu.RUnlock()
	for _, q := range qs {
		eff, m := v.effectiveArgs(q.Def.Name, q.pol.declared)
		q.pol.match.Store(&m)
		if eff != q.pol.effective {
			q.pol.effective = eff
			q.SetArgs(eff)
		}
	}
	for _, x := range xs {
		if _, given := x.args["alternate-exchange"]; given {
			continue
		}
		ae := v.exchangePolicyAE(x.def.Name)
		v.mu.Lock()
		if cur, ok := v.routes.Exchange(x.def.Name); ok && cur.AlternateExchange != ae {
			cur.AlternateExchange = ae
			_ = v.routes.DeclareExchange(cur) // same kind: cannot fail
		}
		v.mu.Unlock()
	}
}

// exchangePolicyAE is the alternate exchange the policies give the
// exchange name, "" for none.
func (v *VHost) exchangePolicyAE(name string) string {
	return v.policies.Load().Match(policy.Exchange, name).AlternateExchange()
}

// ExchangePolicy returns the policy and operator policy that apply to the
// exchange name.
func (v *VHost) ExchangePolicy(name string) policy.Match {
	if name == "" {
		return policy.Match{} // the default exchange: RabbitMQ matches no policy
	}
	return v.policies.Load().Match(policy.Exchange, name)
}

package queueargs

import "slices"

// CheckPolicy checks the value v (JSON's types, whole numbers int64) of
// the definition key of a policy (operator: an operator policy) against
// the table. known is false for a key this policy may not set: unknown,
// removed, or (operator) not one an operator policy may set. refusal is
// RabbitMQ's words after the value when v is outside the key's range, ""
// when it is fine.
func CheckPolicy(key string, v any, operator bool) (known bool, refusal string) {
	r, ok := byPolicy[key]
	if !ok || r.Removed || operator && !r.Operator {
		return false, ""
	}
	if _, ok := policyValue(r, v); !ok {
		return true, r.PolicyRefusal
	}
	return true, ""
}

// policyValue reads a checked definition's value of row r: int64, string,
// bool or time.Duration by r.PolicyValue.
func policyValue(r *Arg, v any) (any, bool) {
	switch r.PolicyValue.Type {
	case String:
		s, ok := v.(string)
		return s, ok
	case Enum:
		s, ok := v.(string)
		return s, ok && slices.Contains(r.PolicyValue.Enum, s)
	case Int:
		n, ok := v.(int64)
		return n, ok && n >= r.PolicyValue.Min && n <= r.PolicyValue.Max
	case Age:
		s, ok := v.(string)
		if !ok {
			return nil, false
		}
		d, err := ParseMaxAge(s)
		return d, err == nil
	case Bool:
		b, ok := v.(bool)
		return b, ok
	}
	return v, true
}

// PolicyValues reads what a checked definition d sets, by key: the value
// of each key the table knows, as its type reads (int64, string or
// time.Duration), for Effective and MergePolicyValue. Keys it does not
// know, and values outside their range, are left out.
func PolicyValues(d map[string]any) map[string]any {
	out := make(map[string]any, len(d))
	for k, v := range d {
		r, ok := byPolicy[k]
		if !ok || r.Removed {
			continue
		}
		if x, ok := policyValue(r, v); ok {
			out[k] = x
		}
	}
	return out
}

// MergePolicyValue is the value of key when a policy sets p and an
// operator policy sets op (rabbit_policies:merge_policy_value): the
// lesser for the keys whose row says Lesser, else the operator's. Values
// that are not both int64 are the operator's.
func MergePolicyValue(key string, p, op any) any {
	r, ok := byPolicy[key]
	if !ok || !r.Lesser {
		return op
	}
	pn, pok := p.(int64)
	on, ook := op.(int64)
	if !pok || !ook {
		return op
	}
	return lesser(r.NegativeUnlimited, pn, on)
}

// lesser is rabbit_policies:merge_policy_value and the queues' res_min for
// an integer key both sides set; negativeUnlimited (delivery-limit,
// RabbitMQ 4.x rabbit_quorum_queue:resolve_delivery_limit): a negative
// value is unlimited, so it loses to any limit.
func lesser(negativeUnlimited bool, a, b int64) int64 {
	if negativeUnlimited && (a < 0 || b < 0) {
		return max(a, b)
	}
	return min(a, b)
}

// Effective returns the settings a queue declared with a runs with when a
// policy (values by key, PolicyValues) and an operator policy apply, nil
// for none: for each key the queue's kind takes, the policy's and the
// operator's values merge (MergePolicyValue), then the result meets the
// argument as the key's row says (RabbitMQ 4.x:
// rabbit_amqqueue_process:process_args_policy for classic queues,
// rabbit_quorum_queue:gather_policy_config for quorum queues,
// rabbit_stream_queue:update_stream_conf for streams). Arguments with no
// policy key (queue type, max-priority, single active consumer) are the
// declaration's.
func Effective(a Args, policy, operator map[string]any) Args {
	if policy == nil && operator == nil {
		return a
	}
	kind := a.Kind()
	for i := range table {
		r := &table[i]
		if r.apply == nil || r.Kinds&kind == 0 {
			continue
		}
		p, pok := policy[r.Policy]
		op, ook := operator[r.Policy]
		switch {
		case pok && ook:
			r.apply(&a, MergePolicyValue(r.Policy, p, op))
		case ook:
			r.apply(&a, op)
		case pok:
			r.apply(&a, p)
		}
	}
	return a
}

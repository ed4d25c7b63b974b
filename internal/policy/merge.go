package policy

import (
	"github.com/warrenmq/broker/internal/queueargs"
)

// Def is the part of a definition Warren reads: the value of each key the
// queue-argument table knows (queueargs.PolicyValues: int64, string or
// time.Duration by the key's type). The keys that change nothing here
// (queue-mode, queue-version, max-in-memory-*, stream-filter-size-bytes,
// the placement keys, dead-letter-strategy) are read too but no row
// applies them.
type Def struct {
	vals map[string]any
}

// parseDef reads the keys Warren knows from a checked definition.
func parseDef(d map[string]any) Def {
	return Def{vals: queueargs.PolicyValues(d)}
}

// Sets reports whether the definition sets key.
func (d *Def) Sets(key string) bool {
	_, ok := d.vals[key]
	return ok
}

// Int returns the integer key's value; ok is false when d does not set it.
func (d *Def) Int(key string) (n int64, ok bool) {
	n, ok = d.vals[key].(int64)
	return n, ok
}

// Str returns the string key's value; ok is false when d does not set it.
func (d *Def) Str(key string) (s string, ok bool) {
	s, ok = d.vals[key].(string)
	return s, ok
}

// Inputs are what a queue's effective settings come from.
type Inputs struct {
	// Args are the queue's declared arguments (queue.ParseArgs).
	Args queueargs.Args
	// Policy and Operator are the definitions that apply, nil for none.
	Policy, Operator *Def
}

// Effective returns the settings a queue runs with: its declared
// arguments with its policy and operator policy applied, per key as the
// queue-argument table's rows say (queueargs.Effective), which is how
// RabbitMQ 4.x resolves them (rabbit_amqqueue_process:process_args_policy
// for classic queues, rabbit_quorum_queue:gather_policy_config for quorum
// queues, rabbit_stream_queue:update_stream_conf for streams):
//
//   - message-ttl, expires, max-length, max-length-bytes: the lesser of
//     the argument and the (merged) policy value;
//   - delivery-limit: the lesser, a negative value meaning unlimited;
//   - dead-letter-exchange, dead-letter-routing-key: the argument wins;
//   - overflow: the argument wins on a classic queue, the policy on a
//     quorum queue;
//   - on a stream only max-length-bytes, max-age and
//     stream-max-segment-size-bytes, the policy's value winning over the
//     argument (policy_precedence, since 3.9, so that retention can be
//     raised as well as lowered on a stream that lives long); the vhost
//     fixes the segment size at the stream's creation.
//
// Everything else (queue type, max-priority, single active consumer) is
// the declaration's: policies cannot change it.
func Effective(in Inputs) queueargs.Args {
	var p, op map[string]any
	if in.Policy != nil {
		p = in.Policy.vals
		if p == nil {
			p = map[string]any{}
		}
	}
	if in.Operator != nil {
		op = in.Operator.vals
		if op == nil {
			op = map[string]any{}
		}
	}
	return queueargs.Effective(in.Args, p, op)
}

// AlternateExchange returns the alternate exchange m gives an exchange
// declared without the alternate-exchange argument (RabbitMQ's
// rabbit_policy:get_arg: the argument wins), "" for none.
func (m Match) AlternateExchange() string {
	if m.Operator != nil {
		if s, ok := m.Operator.Def.Str("alternate-exchange"); ok {
			return s
		}
	}
	if m.Policy != nil {
		s, _ := m.Policy.Def.Str("alternate-exchange")
		return s
	}
	return ""
}

// ConsumerTimeout returns the consumer-timeout in milliseconds that m's
// policy sets; ok is false when none does. RabbitMQ (3.12 and later)
// takes the lesser of it and the queue's x-consumer-timeout argument, and
// a consumer's own x-consumer-timeout over both; operator policies cannot
// set it.
func (m Match) ConsumerTimeout() (ms int64, ok bool) {
	if m.Policy == nil {
		return 0, false
	}
	return m.Policy.Def.Int("consumer-timeout")
}

// Defs returns the definitions of m for Inputs.
func (m Match) Defs() (policy, operator *Def) {
	if m.Policy != nil {
		policy = &m.Policy.Def
	}
	if m.Operator != nil {
		operator = &m.Operator.Def
	}
	return policy, operator
}

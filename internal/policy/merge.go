package policy

import (
	"time"

	"github.com/warrenmq/broker/internal/queue"
)

// Def is the part of a definition Warren acts on. The other keys RabbitMQ
// accepts (queue-mode, queue-version, max-in-memory-*,
// stream-filter-size-bytes, the placement keys, dead-letter-strategy) are
// stored and shown but change nothing here.
type Def struct {
	MessageTTL     Int
	Expires        Int
	MaxLength      Int
	MaxLengthBytes Int
	DeliveryLimit  Int
	Overflow       Str
	DeadLetterExch Str
	DeadLetterKey  Str
	AlternateExch  Str
	// ConsumerTimeout is consumer-timeout (ms), which only a policy, not
	// an operator policy, sets; the broker's consumer timeout reads it
	// (Match.ConsumerTimeout), not Effective.
	ConsumerTimeout Int
	// MaxAge and SegmentBytes are the stream keys max-age and
	// stream-max-segment-size-bytes (streams only, see streamEffective).
	MaxAge       Dur
	SegmentBytes Int
}

// Dur is a duration key, Set when the definition has it.
type Dur struct {
	V   time.Duration
	Set bool
}

// Int is an integer key, Set when the definition has it.
type Int struct {
	V   int64
	Set bool
}

// Str is a string key, Set when the definition has it.
type Str struct {
	V   string
	Set bool
}

// parseDef reads the keys Warren acts on from a checked definition.
func parseDef(d map[string]any) Def {
	var out Def
	ints := []struct {
		key string
		dst *Int
	}{
		{"message-ttl", &out.MessageTTL}, {"expires", &out.Expires}, {"max-length", &out.MaxLength},
		{"max-length-bytes", &out.MaxLengthBytes}, {"delivery-limit", &out.DeliveryLimit},
		{"consumer-timeout", &out.ConsumerTimeout}, {"stream-max-segment-size-bytes", &out.SegmentBytes},
	}
	for _, k := range ints {
		if n, ok := d[k.key].(int64); ok {
			*k.dst = Int{V: n, Set: true}
		}
	}
	strs := []struct {
		key string
		dst *Str
	}{
		{"overflow", &out.Overflow}, {"dead-letter-exchange", &out.DeadLetterExch},
		{"dead-letter-routing-key", &out.DeadLetterKey}, {"alternate-exchange", &out.AlternateExch},
	}
	for _, k := range strs {
		if s, ok := d[k.key].(string); ok {
			*k.dst = Str{V: s, Set: true}
		}
	}
	if s, ok := d["max-age"].(string); ok {
		if age, err := queue.ParseMaxAge(s); err == nil {
			out.MaxAge = Dur{V: age, Set: true}
		}
	}
	return out
}

// lesser is rabbit_policies:merge_policy_value and the queues' res_min for
// an integer key both sides set. delivery-limit follows RabbitMQ 4.x
// (rabbit_quorum_queue:resolve_delivery_limit): a negative value is
// unlimited, so it loses to any limit.
func lesser(key string, a, b int64) int64 {
	if key == "delivery-limit" && (a < 0 || b < 0) {
		return max(a, b)
	}
	return min(a, b)
}

// mergedInt is a policy's value for one key after the operator policy's was
// merged in: the lesser value for the limits, else the operator's.
func mergedInt(key string, p, op Int) Int {
	switch {
	case p.Set && op.Set:
		return Int{V: lesser(key, p.V, op.V), Set: true}
	case op.Set:
		return op
	}
	return p
}

func mergedStr(p, op Str) Str {
	if op.Set {
		return op
	}
	return p
}

// Inputs are what a queue's effective settings come from.
type Inputs struct {
	// Args are the queue's declared arguments (queue.ParseArgs).
	Args queue.Args
	// Policy and Operator are the definitions that apply, nil for none.
	Policy, Operator *Def
}

// Effective returns the settings a queue runs with: its declared
// arguments with its policy and operator policy applied, per key as
// RabbitMQ 4.x resolves them (rabbit_amqqueue_process:process_args_policy
// for classic queues, rabbit_quorum_queue:gather_policy_config for quorum
// queues):
//
//   - message-ttl, expires, max-length, max-length-bytes: the lesser of
//     the argument and the (merged) policy value;
//   - delivery-limit: the lesser, a negative value meaning unlimited;
//   - dead-letter-exchange, dead-letter-routing-key: the argument wins;
//   - overflow: the argument wins on a classic queue, the policy on a
//     quorum queue.
//
// Everything else (queue type, max-priority, single active consumer) is
// the declaration's: policies cannot change it.
func Effective(in Inputs) queue.Args {
	a := in.Args
	var p, op Def
	if in.Policy != nil {
		p = *in.Policy
	}
	if in.Operator != nil {
		op = *in.Operator
	}
	if in.Policy == nil && in.Operator == nil {
		return a
	}
	if a.Stream {
		return streamEffective(a, p, op)
	}
	ttl := mergedInt("message-ttl", p.MessageTTL, op.MessageTTL)
	if ttl.Set {
		d := time.Duration(ttl.V) * time.Millisecond
		if !a.HasMessageTTL || d < a.MessageTTL {
			a.MessageTTL, a.HasMessageTTL = d, true
		}
	}
	if exp := mergedInt("expires", p.Expires, op.Expires); exp.Set {
		d := time.Duration(exp.V) * time.Millisecond
		if a.Expires <= 0 || d < a.Expires {
			a.Expires = d
		}
	}
	// An absent x-max-length, x-max-length-bytes or x-delivery-limit
	// parses as -1 (unlimited), which ParseArgs never returns for a given
	// one; policy values of those keys are never negative but for
	// delivery-limit.
	if n := mergedInt("max-length", p.MaxLength, op.MaxLength); n.Set && (a.MaxLength < 0 || n.V < a.MaxLength) {
		a.MaxLength = n.V
	}
	if n := mergedInt("max-length-bytes", p.MaxLengthBytes, op.MaxLengthBytes); n.Set && (a.MaxLengthBytes < 0 || n.V < a.MaxLengthBytes) {
		a.MaxLengthBytes = n.V
	}
	if n := mergedInt("delivery-limit", p.DeliveryLimit, op.DeliveryLimit); n.Set {
		if a.DeliveryLimit < 0 {
			a.DeliveryLimit = max(n.V, -1)
		} else {
			a.DeliveryLimit = lesser("delivery-limit", n.V, a.DeliveryLimit)
		}
	}
	if of := mergedStr(p.Overflow, op.Overflow); of.Set && (!a.HasOverflow || a.Quorum) {
		a.Overflow, a.HasOverflow = parseOverflow(of.V), true
	}
	if dlx := mergedStr(p.DeadLetterExch, op.DeadLetterExch); dlx.Set && !a.HasDLX {
		a.DeadLetterExch, a.HasDLX = dlx.V, true
	}
	if key := mergedStr(p.DeadLetterKey, op.DeadLetterKey); key.Set && !a.HasDLXKey {
		a.DeadLetterKey, a.HasDLXKey = key.V, true
	}
	return a
}

// streamEffective is Effective for a stream, as RabbitMQ 4.0's
// rabbit_stream_queue:update_stream_conf resolves it: for
// max-length-bytes, max-age and stream-max-segment-size-bytes the
// policy's value wins over the argument (policy_precedence, since 3.9, so
// that retention can be raised as well as lowered on a stream that lives
// long), an operator policy's max-length-bytes merging with the policy's
// as for any queue (the lesser). Every other key is one of the stream
// type's unsupported_policies and changes nothing. The vhost fixes the
// segment size at the stream's creation (RabbitMQ 3.13 and later).
func streamEffective(a queue.Args, p, op Def) queue.Args {
	if n := mergedInt("max-length-bytes", p.MaxLengthBytes, op.MaxLengthBytes); n.Set {
		a.MaxBytes = n.V
	}
	if p.MaxAge.Set {
		a.MaxAge = p.MaxAge.V
	}
	if p.SegmentBytes.Set && p.SegmentBytes.V > 0 {
		a.SegmentBytes = min(p.SegmentBytes.V, queue.MaxSegmentBytes)
	}
	return a
}

func parseOverflow(s string) queue.Overflow {
	switch s {
	case "reject-publish":
		return queue.RejectPublish
	case "reject-publish-dlx":
		return queue.RejectPublishDLX
	}
	return queue.DropHead
}

// AlternateExchange returns the alternate exchange m gives an exchange
// declared without the alternate-exchange argument (RabbitMQ's
// rabbit_policy:get_arg: the argument wins), "" for none.
func (m Match) AlternateExchange() string {
	var p, op Str
	if m.Policy != nil {
		p = m.Policy.Def.AlternateExch
	}
	if m.Operator != nil {
		op = m.Operator.Def.AlternateExch
	}
	return mergedStr(p, op).V
}

// ConsumerTimeout returns the consumer-timeout in milliseconds that m's
// policy sets; ok is false when none does. RabbitMQ (3.12 and later)
// takes the lesser of it and the queue's x-consumer-timeout argument, and
// a consumer's own x-consumer-timeout over both; operator policies cannot
// set it.
func (m Match) ConsumerTimeout() (ms int64, ok bool) {
	if m.Policy == nil || !m.Policy.Def.ConsumerTimeout.Set {
		return 0, false
	}
	return m.Policy.Def.ConsumerTimeout.V, true
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

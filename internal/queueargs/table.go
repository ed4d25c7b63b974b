package queueargs

import (
	"math"
	"time"
)

// Kind is a set of queue kinds (x-queue-type).
type Kind uint8

const (
	Classic Kind = 1 << iota
	Quorum
	Stream
	// AllKinds is every queue kind.
	AllKinds = Classic | Quorum | Stream
)

// Type is how a value is read and checked.
type Type uint8

const (
	// Unchecked: the value is kept as given; no check applies.
	Unchecked Type = iota
	// String is a long string.
	String
	// Bool is a boolean.
	Bool
	// Int is an integer (any AMQP width at declare, a JSON whole number
	// in a policy) in [Min, Max].
	Int
	// Enum is a long string among Enum.
	Enum
	// Age is a RabbitMQ age: a positive integer and one unit (ParseMaxAge).
	Age
)

// Value is a value's type and range.
type Value struct {
	Type     Type
	Min, Max int64    // Int
	Enum     []string // Enum
}

// Refusal is how RabbitMQ words a refused x-argument value, where it does
// not use the common texts ("unacceptable type <type>", "value N is
// negative", "value N is above the maximum M"). Format verbs: %v the
// value for Type and Unknown, %d the integer for BelowMin.
type Refusal struct {
	Type     string // a value of the wrong type
	Unknown  string // a string not among Enum, or not an age
	BelowMin string // an integer from 0 to Min-1
	// Above and Whole are whole reply texts: Above for an integer past
	// Max, Whole for any refusal.
	Above, Whole string
}

// Hook names the rule of the RabbitMQ version profile (internal/compat's
// Profile, applied by internal/vhost) that changes how an argument is
// taken; NoHook: every profile takes it alike.
type Hook uint8

const (
	NoHook Hook = iota
	// HookDeliveryLimit: from 4.0 a negative x-delivery-limit is
	// unlimited and a quorum queue without one takes the profile's
	// default (Profile.NegativeDeliveryLimit, QuorumDeliveryLimit;
	// vhost.parseQueueArgs and effectiveArgs).
	HookDeliveryLimit
	// HookDelayedRetry: only 4.3 quorum queues read x-delayed-retry-*
	// (Profile.DelayedRetry; vhost.parseQueueArgs calls
	// ParseDelayedRetry).
	HookDelayedRetry
	// HookConsumerTimeout: which kinds take x-consumer-timeout, how it is
	// checked and whether a quorum queue's redeclare repeats it
	// (Profile.ConsumerTimeoutArgs; vhost.checkTimeoutArg, Compared).
	HookConsumerTimeout
	// HookV1Storage: refused from 4.3, where classic queue v1 storage is
	// removed (Profile.RefuseQueueMode; vhost.checkDeclare).
	HookV1Storage
	// HookQuorumPriority: a quorum queue takes x-max-priority from 4.3
	// only (Profile.QuorumPriorities; vhost.checkDeclare).
	HookQuorumPriority
)

// Arg is one queue argument and the policy key that sets the same thing:
// everything the broker knows about it. A row may have only an argument
// (x-queue-type) or only a policy key (alternate-exchange).
type Arg struct {
	// Name is the x-argument, "" for a policy key alone.
	Name string
	// Kinds are the queue kinds that take the argument at declare; a
	// stream refuses one that other kinds take (RabbitMQ's
	// check_arguments_key), unless ProfileKinds.
	Kinds Kind
	// ProfileKinds: the profile (Hook) decides which kinds take it and
	// how it is checked; Parse leaves it alone.
	ProfileKinds bool
	// Value is its type and range at declare, Refusal RabbitMQ's words
	// for a value outside them.
	Value   Value
	Refusal Refusal
	// Equivalent are the kinds on which a redeclare must repeat it
	// (rabbit_misc:assert_args_equivalence); ProfileEquivalent: only
	// when the profile's Hook says so.
	Equivalent        Kind
	ProfileEquivalent bool
	// Hook is the version-profile rule that changes it.
	Hook Hook
	// Short is the argument's abbreviation in the management console's
	// Features column, as RabbitMQ's management UI writes it (KNOWN_ARGS
	// in its global.js, 3.13 and 4.x); "" for none.
	Short string

	// Policy is the policy definition key, "" for none.
	Policy string
	// PolicyValue is the key's type and range, PolicyRefusal RabbitMQ's
	// words after the value when it is outside them
	// (rabbit_policies:validate_policy0).
	PolicyValue   Value
	PolicyRefusal string
	// Operator: an operator policy may set the key too.
	Operator bool
	// Removed: RabbitMQ 4.0 removed the key (classic mirroring and master
	// placement); a policy naming it is refused, and definitions.Import
	// drops it from a 3.x export.
	Removed bool
	// Lesser: when a policy and an operator policy both set the key the
	// lesser value wins (rabbit_policies:merge_policy_value), else the
	// operator's. NegativeUnlimited: a negative value is unlimited and
	// loses to any limit (delivery-limit, RabbitMQ 4.x).
	Lesser, NegativeUnlimited bool

	// set stores a checked declare value in Args (nil: checked only). It
	// may refuse a value that depends on an argument set before it.
	set func(a *Args, v any) *Error
	// apply meets a policy value (policy and operator merged) with the
	// declared arguments, on the kinds in Kinds (nil: the key is stored
	// and shown but changes nothing, or is read elsewhere).
	apply func(a *Args, v any)
}

// expiryValue is a TTL or expiry in milliseconds.
func expiryValue(min int64) Value { return Value{Type: Int, Min: min, Max: MaxExpiry} }

var (
	nonNegative = Value{Type: Int, Min: 0, Max: math.MaxInt64}
	stringValue = Value{Type: String}
	ms          = time.Millisecond
)

// table is every queue argument and queue policy key Warren knows. Its
// order is the order declare checks arguments in (an argument that
// depends on another comes after it), a stream refuses them in, and a
// redeclare compares them in.
var table = []Arg{
	{
		Name: "x-dead-letter-exchange", Short: "DLX", Kinds: Classic | Quorum, Value: stringValue,
		Equivalent: Classic | Quorum,
		set:        func(a *Args, v any) *Error { a.DeadLetterExch, a.HasDLX = v.(string), true; return nil },
		Policy:     "dead-letter-exchange", PolicyValue: stringValue, PolicyRefusal: "is not a valid dead letter exchange name",
		// The argument wins.
		apply: func(a *Args, v any) {
			if !a.HasDLX {
				a.DeadLetterExch, a.HasDLX = v.(string), true
			}
		},
	},
	{
		Name: "x-dead-letter-routing-key", Short: "DLK", Kinds: Classic | Quorum, Value: stringValue,
		Equivalent: Classic | Quorum,
		set: func(a *Args, v any) *Error {
			if !a.HasDLX {
				return Refuse("x-dead-letter-routing-key", "routing key given but no x-dead-letter-exchange defined")
			}
			a.DeadLetterKey, a.HasDLXKey = v.(string), true
			return nil
		},
		Policy: "dead-letter-routing-key", PolicyValue: stringValue, PolicyRefusal: "is not a valid dead letter routing key",
		// The argument wins.
		apply: func(a *Args, v any) {
			if !a.HasDLXKey {
				a.DeadLetterKey, a.HasDLXKey = v.(string), true
			}
		},
	},
	{
		Name: "x-expires", Short: "Exp", Kinds: Classic | Quorum, Value: expiryValue(1),
		Refusal:    Refusal{BelowMin: "value %d must be positive"},
		Equivalent: Classic | Quorum,
		set:        func(a *Args, v any) *Error { a.Expires = time.Duration(v.(int64)) * ms; return nil },
		Policy:     "expires", PolicyValue: expiryValue(1), PolicyRefusal: "is not a valid queue expiry", Operator: true, Lesser: true,
		// The lesser of argument and policy.
		apply: func(a *Args, v any) {
			if d := time.Duration(v.(int64)) * ms; a.Expires <= 0 || d < a.Expires {
				a.Expires = d
			}
		},
	},
	{
		Name: "x-max-length", Short: "Lim", Kinds: Classic | Quorum, Value: nonNegative,
		Equivalent: Classic | Quorum,
		set:        func(a *Args, v any) *Error { a.MaxLength = v.(int64); return nil },
		Policy:     "max-length", PolicyValue: nonNegative, PolicyRefusal: "is not a valid maximum length", Operator: true, Lesser: true,
		// The lesser; an absent argument parses as -1 (unlimited).
		apply: func(a *Args, v any) {
			if n := v.(int64); a.MaxLength < 0 || n < a.MaxLength {
				a.MaxLength = n
			}
		},
	},
	{
		Name: "x-max-length-bytes", Short: "Lim B", Kinds: AllKinds, Value: nonNegative,
		Equivalent: AllKinds,
		set: func(a *Args, v any) *Error {
			if a.Stream {
				a.MaxBytes = v.(int64)
			} else {
				a.MaxLengthBytes = v.(int64)
			}
			return nil
		},
		Policy: "max-length-bytes", PolicyValue: nonNegative, PolicyRefusal: "is not a valid maximum length in bytes", Operator: true, Lesser: true,
		// The lesser; on a stream the policy wins (RabbitMQ 3.9 to 4.x
		// update_stream_conf, policy_precedence), so retention can be
		// raised as well as lowered.
		apply: func(a *Args, v any) {
			n := v.(int64)
			switch {
			case a.Stream:
				a.MaxBytes = n
			case a.MaxLengthBytes < 0 || n < a.MaxLengthBytes:
				a.MaxLengthBytes = n
			}
		},
	},
	{
		Name: "x-max-priority", Short: "Pri", Kinds: Classic | Quorum, Value: Value{Type: Int, Min: 0, Max: 255},
		Equivalent: Classic | Quorum, Hook: HookQuorumPriority,
		set: func(a *Args, v any) *Error { a.MaxPriority = uint8(v.(int64)); return nil },
	},
	{
		Name: "x-message-ttl", Short: "TTL", Kinds: Classic | Quorum, Value: expiryValue(0),
		Equivalent: Classic | Quorum,
		set: func(a *Args, v any) *Error {
			a.MessageTTL, a.HasMessageTTL = time.Duration(v.(int64))*ms, true
			return nil
		},
		Policy: "message-ttl", PolicyValue: expiryValue(0), PolicyRefusal: "is not a valid message TTL", Operator: true, Lesser: true,
		// The lesser of argument and policy.
		apply: func(a *Args, v any) {
			if d := time.Duration(v.(int64)) * ms; !a.HasMessageTTL || d < a.MessageTTL {
				a.MessageTTL, a.HasMessageTTL = d, true
			}
		},
	},
	{
		Name: "x-overflow", Short: "Ovfl", Kinds: Classic | Quorum,
		Value:      Value{Type: Enum, Enum: []string{"drop-head", "reject-publish", "reject-publish-dlx"}},
		Refusal:    Refusal{Unknown: "unknown overflow mode '%v'"},
		Equivalent: Classic | Quorum,
		set:        func(a *Args, v any) *Error { a.Overflow, a.HasOverflow = parseOverflow(v.(string)), true; return nil },
		Policy:     "overflow", PolicyRefusal: "is not a valid overflow value", Operator: true,
		PolicyValue: Value{Type: Enum, Enum: []string{"drop-head", "reject-publish", "reject-publish-dlx"}},
		// The argument wins on a classic queue, the policy on a quorum
		// queue (rabbit_quorum_queue:gather_policy_config).
		apply: func(a *Args, v any) {
			if !a.HasOverflow || a.Quorum {
				a.Overflow, a.HasOverflow = parseOverflow(v.(string)), true
			}
		},
	},
	{
		Name: "x-queue-mode", Kinds: Classic | Quorum, Value: Value{Type: Enum, Enum: []string{"default", "lazy"}},
		Refusal:    Refusal{Type: "unknown queue mode '%v'", Unknown: "unknown queue mode '%v'"},
		Equivalent: Classic | Quorum, Hook: HookV1Storage,
		Policy: "queue-mode", PolicyValue: Value{Type: Enum, Enum: []string{"default", "lazy"}}, PolicyRefusal: "is not a valid queue-mode value",
	},
	{
		// Checked first, by Parse: the kind decides which rows apply.
		Name: "x-queue-type", Kinds: AllKinds, Value: Value{Type: Enum, Enum: []string{"classic", "quorum", "stream"}},
		Refusal:    Refusal{Unknown: "unknown queue type '%v'"},
		Equivalent: AllKinds,
	},
	{
		Name: "x-single-active-consumer", Short: "SAC", Kinds: Classic | Quorum, Value: Value{Type: Bool},
		Equivalent: Classic | Quorum,
		set:        func(a *Args, v any) *Error { a.SingleActive = v.(bool); return nil },
	},
	{
		Name: "x-delivery-limit", Short: "DlL", Kinds: Classic | Quorum, Value: nonNegative,
		Equivalent: Classic | Quorum, Hook: HookDeliveryLimit,
		set: func(a *Args, v any) *Error { a.DeliveryLimit = v.(int64); return nil },
		// RabbitMQ 4.x: any integer, a negative one meaning unlimited.
		Policy: "delivery-limit", PolicyValue: Value{Type: Int, Min: math.MinInt64, Max: math.MaxInt64},
		PolicyRefusal: "is not a valid delivery limit", Operator: true, Lesser: true, NegativeUnlimited: true,
		// The lesser, a negative value meaning unlimited; an absent
		// argument parses as -1.
		apply: func(a *Args, v any) {
			if n := v.(int64); a.DeliveryLimit < 0 {
				a.DeliveryLimit = max(n, -1)
			} else {
				a.DeliveryLimit = lesser(true, n, a.DeliveryLimit)
			}
		},
	},
	{
		// The policy's value is read by the consumer timeout
		// (policy.Match.ConsumerTimeout), not by Effective.
		Name: "x-consumer-timeout", Kinds: Quorum, ProfileKinds: true,
		Equivalent: Quorum, ProfileEquivalent: true, Hook: HookConsumerTimeout,
		Policy: "consumer-timeout", PolicyValue: nonNegative, PolicyRefusal: "is not a valid consumer timeout",
	},
	{
		Name: "x-max-age", Kinds: Stream, Value: Value{Type: Age},
		Refusal:    Refusal{Unknown: "invalid_max_age"},
		Equivalent: Stream,
		set:        func(a *Args, v any) *Error { a.MaxAge = v.(time.Duration); return nil },
		Policy:     "max-age", PolicyValue: Value{Type: Age}, PolicyRefusal: "is not a valid max age",
		// The policy wins (update_stream_conf).
		apply: func(a *Args, v any) { a.MaxAge = v.(time.Duration) },
	},
	{
		Name: "x-stream-max-segment-size-bytes", Kinds: Stream, Value: Value{Type: Int, Min: 0, Max: MaxSegmentBytes},
		Refusal:    Refusal{Above: "Exceeded max value for x-stream-max-segment-size-bytes"},
		Equivalent: Stream,
		set: func(a *Args, v any) *Error {
			if n := v.(int64); n > 0 {
				a.SegmentBytes = n
			}
			return nil
		},
		Policy: "stream-max-segment-size-bytes", PolicyValue: nonNegative, PolicyRefusal: "is not a valid segment size",
		// The policy wins; the vhost fixes the segment size at the
		// stream's creation (RabbitMQ 3.13 and later).
		apply: func(a *Args, v any) {
			if n := v.(int64); n > 0 {
				a.SegmentBytes = min(n, MaxSegmentBytes)
			}
		},
	},
	{
		Name: "x-stream-filter-size-bytes", Kinds: Stream, Value: Value{Type: Int, Min: 16, Max: 255},
		Refusal: Refusal{Whole: "Invalid value for  x-stream-filter-size-bytes"},
		Policy:  "stream-filter-size-bytes", PolicyValue: Value{Type: Int, Min: 16, Max: 255},
		PolicyRefusal: "is not a valid filter size. Valid range is 16-255",
	},
	{
		// Warren serves every stream on every node, so the value changes
		// nothing, but it is checked as RabbitMQ checks it
		// (check_initial_cluster_size_arg: a positive integer).
		Name: "x-initial-cluster-size", Kinds: Stream, Value: Value{Type: Int, Min: 1, Max: math.MaxInt64},
		Refusal:    Refusal{BelowMin: "value %d is zero"},
		Equivalent: Stream,
		Policy:     "initial-cluster-size", PolicyValue: nonNegative, PolicyRefusal: "is not a valid cluster size",
	},
	{
		// RabbitMQ 4.x's rabbit_queue_location:queue_leader_locators, the
		// last two its older names.
		Name: "x-queue-leader-locator", Short: "LL", Kinds: Stream, Value: Value{Type: Enum, Enum: leaderLocators},
		Refusal:    Refusal{Unknown: "invalid_queue_locator_arg"},
		Equivalent: Stream,
		Policy:     "queue-leader-locator", PolicyValue: Value{Type: Enum, Enum: leaderLocators},
		PolicyRefusal: "is not a valid queue leader locator value",
	},
	{
		Name: "x-max-in-memory-length", Kinds: Quorum,
		Policy: "max-in-memory-length", PolicyValue: nonNegative, PolicyRefusal: "is not a valid maximum memory in bytes",
		Operator: true, Lesser: true,
	},
	{
		Name: "x-max-in-memory-bytes", Kinds: Quorum,
		Policy: "max-in-memory-bytes", PolicyValue: nonNegative, PolicyRefusal: "is not a valid maximum memory in bytes",
		Operator: true, Lesser: true,
	},
	{Name: "x-queue-master-locator", Short: "ML", Kinds: Classic, Policy: "queue-master-locator", Removed: true},
	{
		Name: "x-queue-version", Kinds: Classic, Hook: HookV1Storage,
		Policy: "queue-version", PolicyValue: Value{Type: Int, Min: 1, Max: 2}, PolicyRefusal: "is not a valid queue-version value",
		Operator: true,
	},
	{
		Name: "x-dead-letter-strategy", Kinds: Quorum,
		Policy: "dead-letter-strategy", PolicyValue: Value{Type: Enum, Enum: []string{"at-most-once", "at-least-once"}},
		PolicyRefusal: "is not a valid dead letter strategy",
	},
	{Name: "x-quorum-initial-group-size", Kinds: Quorum},
	{
		Name: "x-quorum-target-group-size", Kinds: Quorum,
		Policy: "target-group-size", PolicyValue: nonNegative, PolicyRefusal: "is not a valid target group size", Operator: true,
	},
	{
		Name: "x-delayed-retry-type", Kinds: Quorum, ProfileKinds: true, Hook: HookDelayedRetry,
		Value:   Value{Type: Enum, Enum: []string{"disabled", "all", "failed", "returned"}},
		Refusal: Refusal{Type: "unknown delayed retry type '%v'", Unknown: "unknown delayed retry type '%v'"},
	},
	{Name: "x-delayed-retry-min", Kinds: Quorum, ProfileKinds: true, Hook: HookDelayedRetry, Value: expiryValue(0)},
	{Name: "x-delayed-retry-max", Kinds: Quorum, ProfileKinds: true, Hook: HookDelayedRetry, Value: expiryValue(0)},
	{
		// An exchange's, read by policy.Match.AlternateExchange.
		Policy: "alternate-exchange", PolicyValue: stringValue, PolicyRefusal: "is not a valid alternate exchange name",
	},
	// Exchanges' and queues' federation (rabbit_federation_parameters:
	// validate_policy, RabbitMQ 3.10 to 4.x), read by internal/federation;
	// policy.Parse refuses any two together.
	{Policy: "federation-upstream", PolicyValue: stringValue, PolicyRefusal: "is not a valid federation upstream name"},
	{Policy: "federation-upstream-set", PolicyValue: stringValue, PolicyRefusal: "is not a valid federation upstream set name"},
	// A regular expression over the vhost's upstream names; policy.Parse
	// checks that it compiles.
	{Policy: "federation-upstream-pattern", PolicyValue: stringValue, PolicyRefusal: "is not a valid federation upstream pattern name"},
	// RabbitMQ 3.x classic queue mirroring, removed in 4.0.
	{Policy: "ha-mode", Removed: true},
	{Policy: "ha-params", Removed: true},
	{Policy: "ha-sync-mode", Removed: true},
	{Policy: "ha-sync-batch-size", Removed: true},
	{Policy: "ha-promote-on-shutdown", Removed: true},
	{Policy: "ha-promote-on-failure", Removed: true},
}

// leaderLocators are the x-queue-leader-locator values RabbitMQ 4.x
// accepts.
var leaderLocators = []string{"client-local", "balanced", "random", "least-leaders"}

// byName and byPolicy index the table.
var byName, byPolicy = func() (map[string]*Arg, map[string]*Arg) {
	n, p := make(map[string]*Arg), make(map[string]*Arg)
	for i := range table {
		r := &table[i]
		if r.Name != "" {
			n[r.Name] = r
		}
		if r.Policy != "" {
			p[r.Policy] = r
		}
	}
	return n, p
}()

// All returns a copy of the table, in its order.
func All() []Arg { return append([]Arg(nil), table...) }

// Lookup returns the row of the x-argument name.
func Lookup(name string) (Arg, bool) {
	r, ok := byName[name]
	if !ok {
		return Arg{}, false
	}
	return *r, true
}

// LookupPolicy returns the row of the policy key.
func LookupPolicy(key string) (Arg, bool) {
	r, ok := byPolicy[key]
	if !ok {
		return Arg{}, false
	}
	return *r, true
}

// Compared returns the arguments a redeclare of a queue of kind k must
// repeat, in the table's order; on says whether a hook's rule is on in
// the vhost's profile (for the rows that are ProfileEquivalent).
func Compared(k Kind, on func(Hook) bool) []string {
	var out []string
	for i := range table {
		r := &table[i]
		if r.Name == "" || r.Equivalent&k == 0 || r.ProfileEquivalent && (on == nil || !on(r.Hook)) {
			continue
		}
		out = append(out, r.Name)
	}
	return out
}

// Shorts returns the console's Features abbreviation of each argument
// that has one (Short), by argument name.
func Shorts() map[string]string {
	out := make(map[string]string)
	for i := range table {
		if r := &table[i]; r.Name != "" && r.Short != "" {
			out[r.Name] = r.Short
		}
	}
	return out
}

// RemovedPolicyKey reports whether key is a policy key RabbitMQ 4.0
// removed.
func RemovedPolicyKey(key string) bool {
	r, ok := byPolicy[key]
	return ok && r.Removed
}

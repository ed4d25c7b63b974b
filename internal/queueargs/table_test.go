package queueargs

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
)

// TestTableRows: names and policy keys are unique, and every row that
// stores or applies a value says how it is read.
func TestTableRows(t *testing.T) {
	names, keys := map[string]bool{}, map[string]bool{}
	for _, r := range table {
		require.False(t, r.Name == "" && r.Policy == "", "a row names an argument or a policy key")
		if r.Name != "" {
			require.False(t, names[r.Name], "argument %s twice", r.Name)
			names[r.Name] = true
		}
		if r.Policy != "" {
			require.False(t, keys[r.Policy], "policy key %s twice", r.Policy)
			keys[r.Policy] = true
		}
		if r.set != nil {
			require.NotEqual(t, Unchecked, r.Value.Type, "%s stores a value it does not check", r.Name)
		}
		if r.apply != nil {
			require.NotEmpty(t, r.Policy, "%s applies a policy value without a key", r.Name)
			require.NotEqual(t, Unchecked, r.PolicyValue.Type, "%s applies a value it does not check", r.Policy)
		}
		if r.Policy != "" && !r.Removed {
			require.NotEmpty(t, r.PolicyRefusal, "%s has no refusal text", r.Policy)
		}
		if r.ProfileKinds || r.ProfileEquivalent {
			require.NotEqual(t, NoHook, r.Hook, "%s depends on a profile without naming its rule", r.Name)
		}
	}
}

// TestCompared: the arguments a redeclare compares, per kind and in
// order, as RabbitMQ 4.x compares a queue type's own arguments.
func TestCompared(t *testing.T) {
	classic := []string{
		"x-dead-letter-exchange", "x-dead-letter-routing-key", "x-expires",
		"x-max-length", "x-max-length-bytes", "x-max-priority", "x-message-ttl",
		"x-overflow", "x-queue-mode", "x-queue-type", "x-single-active-consumer",
		"x-delivery-limit",
	}
	off := func(Hook) bool { return false }
	on := func(h Hook) bool { return h == HookConsumerTimeout }
	require.Equal(t, classic, Compared(Classic, off))
	require.Equal(t, classic, Compared(Classic, on), "only a quorum queue compares x-consumer-timeout")
	require.Equal(t, classic, Compared(Quorum, off))
	require.Equal(t, append(classic[:len(classic):len(classic)], "x-consumer-timeout"), Compared(Quorum, on))
	require.Equal(t, []string{
		"x-max-length-bytes", "x-queue-type", "x-max-age",
		"x-stream-max-segment-size-bytes", "x-initial-cluster-size", "x-queue-leader-locator",
	}, Compared(Stream, nil))
}

// TestParseRefusals: each refused value in RabbitMQ's words (the reply
// text is "invalid arg '<arg>': <reason>" unless Text is set).
func TestParseRefusals(t *testing.T) {
	stream := func(extra amqp.Table) amqp.Table {
		t := amqp.Table{"x-queue-type": "stream"}
		for k, v := range extra {
			t[k] = v
		}
		return t
	}
	for _, tc := range []struct {
		in           amqp.Table
		arg, reason  string
		text         string
		streamRefuse bool
	}{
		{in: amqp.Table{"x-queue-type": int32(1)}, arg: "x-queue-type", reason: "unacceptable type int32"},
		{in: amqp.Table{"x-queue-type": "fancy"}, arg: "x-queue-type", reason: "unknown queue type 'fancy'"},
		{in: amqp.Table{"x-message-ttl": "10"}, arg: "x-message-ttl", reason: "unacceptable type longstr"},
		{in: amqp.Table{"x-message-ttl": int32(-1)}, arg: "x-message-ttl", reason: "value -1 is negative"},
		{in: amqp.Table{"x-message-ttl": int64(MaxExpiry + 1)}, arg: "x-message-ttl", reason: "value 4294967296 is above the maximum 4294967295"},
		{in: amqp.Table{"x-expires": int32(0)}, arg: "x-expires", reason: "value 0 must be positive"},
		{in: amqp.Table{"x-dead-letter-exchange": true}, arg: "x-dead-letter-exchange", reason: "unacceptable type bool"},
		{in: amqp.Table{"x-dead-letter-routing-key": "k"}, arg: "x-dead-letter-routing-key", reason: "routing key given but no x-dead-letter-exchange defined"},
		{in: amqp.Table{"x-max-length": 1.5}, arg: "x-max-length", reason: "unacceptable type float"},
		{in: amqp.Table{"x-overflow": "explode"}, arg: "x-overflow", reason: "unknown overflow mode 'explode'"},
		{in: amqp.Table{"x-max-priority": int32(256)}, arg: "x-max-priority", reason: "value 256 is above the maximum 255"},
		{in: amqp.Table{"x-single-active-consumer": "yes"}, arg: "x-single-active-consumer", reason: "unacceptable type longstr"},
		{in: amqp.Table{"x-queue-mode": int32(1)}, arg: "x-queue-mode", reason: "unknown queue mode '1'"},
		{in: amqp.Table{"x-queue-mode": "eager"}, arg: "x-queue-mode", reason: "unknown queue mode 'eager'"},
		{in: amqp.Table{"x-delivery-limit": int64(-5)}, arg: "x-delivery-limit", reason: "value -5 is negative"},
		{in: stream(amqp.Table{"x-max-age": "7X"}), arg: "x-max-age", reason: "invalid_max_age"},
		{in: stream(amqp.Table{"x-max-age": int32(7)}), arg: "x-max-age", reason: "unacceptable type int32"},
		{in: stream(amqp.Table{"x-stream-max-segment-size-bytes": int64(MaxSegmentBytes + 1)}), arg: "x-stream-max-segment-size-bytes",
			text: "Exceeded max value for x-stream-max-segment-size-bytes"},
		{in: stream(amqp.Table{"x-stream-filter-size-bytes": int32(15)}), arg: "x-stream-filter-size-bytes", text: "Invalid value for  x-stream-filter-size-bytes"},
		{in: stream(amqp.Table{"x-stream-filter-size-bytes": "16"}), arg: "x-stream-filter-size-bytes", text: "Invalid value for  x-stream-filter-size-bytes"},
		{in: stream(amqp.Table{"x-initial-cluster-size": int32(0)}), arg: "x-initial-cluster-size", reason: "value 0 is zero"},
		{in: stream(amqp.Table{"x-queue-leader-locator": "nearest"}), arg: "x-queue-leader-locator", reason: "invalid_queue_locator_arg"},
		{in: stream(amqp.Table{"x-message-ttl": int32(1)}), arg: "x-message-ttl", reason: "of queue type rabbit_stream_queue",
			text: "invalid arg 'x-message-ttl' for {queue} of queue type rabbit_stream_queue"},
	} {
		_, err := Parse(tc.in)
		var e *Error
		require.ErrorAs(t, err, &e, "%v", tc.in)
		require.Equal(t, tc.arg, e.Arg)
		require.Equal(t, uint16(amqp.PreconditionFailed), e.Code)
		require.Equal(t, tc.reason, e.Reason, "%v", tc.in)
		require.Equal(t, tc.text, e.Text, "%v", tc.in)
	}
}

// TestParseKinds: a row applies to the kinds it names only: a classic
// queue ignores the stream arguments, a stream keeps x-max-length-bytes
// as retention, and the profile-decided arguments are left to the vhost.
func TestParseKinds(t *testing.T) {
	a, err := Parse(amqp.Table{"x-max-age": "nonsense", "x-stream-filter-size-bytes": int32(1), "x-consumer-timeout": "x", "x-delayed-retry-type": int32(1)})
	require.NoError(t, err)
	require.Equal(t, Args{MaxLength: -1, MaxLengthBytes: -1, DeliveryLimit: -1}, a)
	a, err = Parse(amqp.Table{"x-queue-type": "stream", "x-max-length-bytes": int64(10), "x-consumer-timeout": int32(1), "x-delayed-retry-type": "all"})
	require.NoError(t, err)
	require.Equal(t, Stream, a.Kind())
	require.EqualValues(t, 10, a.MaxBytes)
	require.EqualValues(t, -1, a.MaxLengthBytes)
	a, err = Parse(amqp.Table{"x-queue-type": "quorum", "x-queue-mode": "lazy"})
	require.NoError(t, err)
	require.Equal(t, Quorum, a.Kind())
}

func TestParseDelayedRetry(t *testing.T) {
	r, err := ParseDelayedRetry(amqp.Table{"x-delayed-retry-type": "failed", "x-delayed-retry-min": int32(10), "x-delayed-retry-max": int64(100)})
	require.NoError(t, err)
	require.Equal(t, DelayedRetry{Kind: RetryFailed, Min: 10 * time.Millisecond, Max: 100 * time.Millisecond}, r)
	for reason, in := range map[string]amqp.Table{
		"unknown delayed retry type '1'":                   {"x-delayed-retry-type": int32(1)},
		"unknown delayed retry type 'some'":                {"x-delayed-retry-type": "some"},
		"required with x-delayed-retry-type 'all'":         {"x-delayed-retry-type": "all"},
		"value -1 is negative":                             {"x-delayed-retry-min": int32(-1)},
		"value 4294967296 is above the maximum 4294967295": {"x-delayed-retry-max": int64(MaxExpiry + 1)},
	} {
		_, err := ParseDelayedRetry(in)
		var e *Error
		require.ErrorAs(t, err, &e)
		require.Equal(t, reason, e.Reason)
	}
}

// TestCheckPolicy: each key's range and who may set it, as RabbitMQ 4.x's
// rabbit_policies validates.
func TestCheckPolicy(t *testing.T) {
	for _, tc := range []struct {
		key      string
		good     any
		bad      any
		operator bool
	}{
		{"message-ttl", int64(0), int64(MaxExpiry + 1), true},
		{"expires", int64(1), int64(0), true},
		{"max-length", int64(0), int64(-1), true},
		{"max-length-bytes", int64(5), "5", true},
		{"delivery-limit", int64(-1), 1.5, true},
		{"overflow", "reject-publish", "explode", true},
		{"queue-version", int64(2), int64(3), true},
		{"target-group-size", int64(3), int64(-3), true},
		{"max-in-memory-length", int64(3), int64(-3), true},
		{"dead-letter-exchange", "dlx", int64(1), false},
		{"dead-letter-strategy", "at-least-once", "sometimes", false},
		{"queue-mode", "lazy", "eager", false},
		{"consumer-timeout", int64(1000), int64(-1), false},
		{"max-age", "7D", "7X", false},
		{"stream-max-segment-size-bytes", int64(math.MaxInt64), int64(-1), false},
		{"stream-filter-size-bytes", int64(16), int64(256), false},
		{"queue-leader-locator", "balanced", "nearest", false},
		{"initial-cluster-size", int64(0), int64(-1), false},
		{"alternate-exchange", "ae", int64(1), false},
	} {
		known, refusal := CheckPolicy(tc.key, tc.good, false)
		require.True(t, known, tc.key)
		require.Empty(t, refusal, tc.key)
		known, refusal = CheckPolicy(tc.key, tc.bad, false)
		require.True(t, known, tc.key)
		require.NotEmpty(t, refusal, tc.key)
		known, _ = CheckPolicy(tc.key, tc.good, true)
		require.Equal(t, tc.operator, known, "%s in an operator policy", tc.key)
	}
	for _, key := range []string{"ha-mode", "queue-master-locator", "max-priority", "x-message-ttl", "nonsense"} {
		known, _ := CheckPolicy(key, "x", false)
		require.False(t, known, key)
	}
	require.True(t, RemovedPolicyKey("ha-mode"))
	require.True(t, RemovedPolicyKey("queue-master-locator"))
	require.False(t, RemovedPolicyKey("message-ttl"))
}

// TestEffectiveStream: a stream takes retention from its policy, over
// its arguments, and nothing else.
func TestEffectiveStream(t *testing.T) {
	a, err := Parse(amqp.Table{"x-queue-type": "stream", "x-max-length-bytes": int64(100), "x-max-age": "1D"})
	require.NoError(t, err)
	got := Effective(a, PolicyValues(map[string]any{"max-length-bytes": int64(1000), "max-age": "2D", "message-ttl": int64(5), "stream-max-segment-size-bytes": int64(MaxSegmentBytes * 2)}),
		PolicyValues(map[string]any{"max-length-bytes": int64(500)}))
	require.EqualValues(t, 500, got.MaxBytes, "operator and policy merge to the lesser")
	require.Equal(t, 48*time.Hour, got.MaxAge)
	require.EqualValues(t, MaxSegmentBytes, got.SegmentBytes)
	require.False(t, got.HasMessageTTL)
	require.Equal(t, a, Effective(a, nil, nil))
}

func TestMergePolicyValue(t *testing.T) {
	require.Equal(t, int64(3), MergePolicyValue("max-length", int64(3), int64(5)))
	require.Equal(t, int64(5), MergePolicyValue("delivery-limit", int64(-1), int64(5)))
	require.Equal(t, "op", MergePolicyValue("dead-letter-exchange", "p", "op"))
	require.Equal(t, int64(9), MergePolicyValue("queue-version", int64(2), int64(9)), "not a lesser key: the operator's")
}

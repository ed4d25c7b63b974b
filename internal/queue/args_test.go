package queue

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
)

func TestParseArgs(t *testing.T) {
	good := []struct {
		name string
		in   amqp.Table
		want Args
	}{
		{"none", nil, Args{MaxLength: -1, MaxLengthBytes: -1, DeliveryLimit: -1}},
		{"ttl and dlx", amqp.Table{"x-message-ttl": int32(1500), "x-dead-letter-exchange": "dlx", "x-dead-letter-routing-key": "k"},
			Args{MessageTTL: 1500 * time.Millisecond, HasMessageTTL: true, DeadLetterExch: "dlx", HasDLX: true, DeadLetterKey: "k", HasDLXKey: true, MaxLength: -1, MaxLengthBytes: -1, DeliveryLimit: -1}},
		{"zero ttl", amqp.Table{"x-message-ttl": int64(0)}, Args{HasMessageTTL: true, MaxLength: -1, MaxLengthBytes: -1, DeliveryLimit: -1}},
		{"limits", amqp.Table{"x-max-length": uint8(3), "x-max-length-bytes": int16(100), "x-overflow": "reject-publish-dlx"},
			Args{MaxLength: 3, MaxLengthBytes: 100, Overflow: RejectPublishDLX, HasOverflow: true, DeliveryLimit: -1}},
		{"quorum", amqp.Table{"x-queue-type": "quorum", "x-delivery-limit": int32(2), "x-single-active-consumer": true},
			Args{Quorum: true, DeliveryLimit: 2, SingleActive: true, MaxLength: -1, MaxLengthBytes: -1}},
		{"priority", amqp.Table{"x-max-priority": int32(10), "x-unknown": "kept"}, Args{MaxPriority: 10, MaxLength: -1, MaxLengthBytes: -1, DeliveryLimit: -1}},
		{"expires", amqp.Table{"x-expires": int32(1000)}, Args{Expires: time.Second, MaxLength: -1, MaxLengthBytes: -1, DeliveryLimit: -1}},
		{"largest ttl", amqp.Table{"x-message-ttl": int64(MaxExpiry)},
			Args{MessageTTL: MaxExpiry * time.Millisecond, HasMessageTTL: true, MaxLength: -1, MaxLengthBytes: -1, DeliveryLimit: -1}},
		{"largest ttl as uint32", amqp.Table{"x-message-ttl": uint32(MaxExpiry)},
			Args{MessageTTL: MaxExpiry * time.Millisecond, HasMessageTTL: true, MaxLength: -1, MaxLengthBytes: -1, DeliveryLimit: -1}},
		{"largest expires", amqp.Table{"x-expires": int64(MaxExpiry)},
			Args{Expires: MaxExpiry * time.Millisecond, MaxLength: -1, MaxLengthBytes: -1, DeliveryLimit: -1}},
	}
	for _, tc := range good {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseArgs(tc.in)
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
	bad := []struct {
		name string
		in   amqp.Table
		arg  string
		code uint16
	}{
		{"negative ttl", amqp.Table{"x-message-ttl": int32(-1)}, "x-message-ttl", amqp.PreconditionFailed},
		{"string ttl", amqp.Table{"x-message-ttl": "10"}, "x-message-ttl", amqp.PreconditionFailed},
		{"zero expires", amqp.Table{"x-expires": int32(0)}, "x-expires", amqp.PreconditionFailed},
		{"overflow", amqp.Table{"x-overflow": "explode"}, "x-overflow", amqp.PreconditionFailed},
		{"priority range", amqp.Table{"x-max-priority": int32(256)}, "x-max-priority", amqp.PreconditionFailed},
		{"dlrk without dlx", amqp.Table{"x-dead-letter-routing-key": "k"}, "x-dead-letter-routing-key", amqp.PreconditionFailed},
		{"dlx type", amqp.Table{"x-dead-letter-exchange": int32(1)}, "x-dead-letter-exchange", amqp.PreconditionFailed},
		{"unknown type", amqp.Table{"x-queue-type": "fancy"}, "x-queue-type", amqp.PreconditionFailed},
		{"sac type", amqp.Table{"x-single-active-consumer": "yes"}, "x-single-active-consumer", amqp.PreconditionFailed},
		{"negative limit", amqp.Table{"x-delivery-limit": int64(-5)}, "x-delivery-limit", amqp.PreconditionFailed},
		// Past MaxExpiry RabbitMQ refuses; a Duration of the value would
		// also overflow (past year 2262) or wrap from here on.
		{"ttl above the maximum", amqp.Table{"x-message-ttl": int64(MaxExpiry + 1)}, "x-message-ttl", amqp.PreconditionFailed},
		{"ttl past 2262", amqp.Table{"x-message-ttl": int64(7_428_000_000_000)}, "x-message-ttl", amqp.PreconditionFailed},
		{"ttl at int64 max", amqp.Table{"x-message-ttl": int64(math.MaxInt64)}, "x-message-ttl", amqp.PreconditionFailed},
		{"expires above the maximum", amqp.Table{"x-expires": int64(MaxExpiry + 1)}, "x-expires", amqp.PreconditionFailed},
		{"expires that wraps", amqp.Table{"x-expires": int64(18_446_744_073_710)}, "x-expires", amqp.PreconditionFailed},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseArgs(tc.in)
			var ae *ArgError
			require.ErrorAs(t, err, &ae)
			require.Equal(t, tc.arg, ae.Arg)
			require.Equal(t, tc.code, ae.Code)
			require.Contains(t, err.Error(), tc.arg)
		})
	}
}

func TestParseExpiration(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
		err  string
	}{
		{in: ""},
		{in: "0", want: 0, ok: true},
		{in: "1500", want: 1500 * time.Millisecond, ok: true},
		{in: "4294967295", want: MaxExpiry * time.Millisecond, ok: true},
		{in: "4294967296", err: "above the maximum 4294967295"},
		{in: "7428000000000", err: "above the maximum"}, // past year 2262 as a deadline
		{in: "9223372036854775807", err: "above the maximum"},
		{in: "99999999999999999999", err: "above the maximum"},
		{in: "-1", err: "negative"},
		{in: "-99999999999999999999", err: "not an integer"},
		{in: "1.5", err: "not an integer"},
		{in: "abc", err: "not an integer"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			d, ok, err := ParseExpiration(tc.in)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				require.ErrorContains(t, err, "invalid expiration '"+tc.in+"'")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, d)
		})
	}
}

func TestDeadLetterProperties(t *testing.T) {
	now := time.Unix(1700000000, 0).UTC()
	p := amqp.Properties{Expiration: "60000", Headers: amqp.Table{"app": "x"}, MessageID: "m1"}
	raw := p.Append(nil)

	raw, err := DeadLetterProperties(raw, Death{Queue: "work", Reason: ReasonRejected, Exchange: "ex", RoutingKeys: []string{"k"}, Time: now})
	require.NoError(t, err)
	raw, err = DeadLetterProperties(raw, Death{Queue: "retry", Reason: ReasonExpired, Exchange: "dlx", RoutingKeys: []string{"k"}, Time: now})
	require.NoError(t, err)
	raw, err = DeadLetterProperties(raw, Death{Queue: "work", Reason: ReasonRejected, Exchange: "ex", RoutingKeys: []string{"k"}, Time: now.Add(time.Hour)})
	require.NoError(t, err)

	got, err := amqp.DecodeProperties(raw)
	require.NoError(t, err)
	require.Equal(t, "m1", got.MessageID)
	require.Empty(t, got.Expiration)
	require.Equal(t, "x", got.Headers["app"])
	deaths := got.Headers["x-death"].([]any)
	require.Len(t, deaths, 2)
	first := deaths[0].(amqp.Table)
	require.Equal(t, "work", first["queue"])
	require.Equal(t, int64(2), first["count"])
	require.Equal(t, "60000", first["original-expiration"])
	require.Equal(t, now, first["time"], "a repeat keeps the first time")
	second := deaths[1].(amqp.Table)
	require.Equal(t, "retry", second["queue"])
	require.Equal(t, "expired", second["reason"])
	require.Equal(t, int64(1), second["count"])
	require.Equal(t, "work", got.Headers["x-first-death-queue"])
	require.Equal(t, "rejected", got.Headers["x-first-death-reason"])
	require.Equal(t, "work", got.Headers["x-last-death-queue"])
	require.Equal(t, "ex", got.Headers["x-last-death-exchange"])
}

func TestDeadLetterCycle(t *testing.T) {
	now := time.Unix(1700000000, 0).UTC()
	raw := (&amqp.Properties{}).Append(nil)
	raw, err := DeadLetterProperties(raw, Death{Queue: "a", Reason: ReasonExpired, Time: now})
	require.NoError(t, err)
	require.True(t, IsDeadLetterCycle(raw, ReasonExpired, "a"), "expired back into a: automatic cycle")
	require.False(t, IsDeadLetterCycle(raw, ReasonExpired, "b"))
	require.False(t, IsDeadLetterCycle(raw, ReasonRejected, "a"), "a rejection is never a cycle")
	raw, err = DeadLetterProperties(raw, Death{Queue: "b", Reason: ReasonRejected, Time: now})
	require.NoError(t, err)
	require.False(t, IsDeadLetterCycle(raw, ReasonExpired, "a"), "a rejection since a breaks the cycle")
}

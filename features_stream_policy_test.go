package broker_test

import (
	"context"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/internal/amqptest"
)

// streamStats returns what stream name on vhost "/" holds.
func streamStats(t *testing.T, b *broker.Broker, name string) *broker.StreamStats {
	t.Helper()
	for _, q := range b.Stats(context.Background()).QueueDetails {
		if q.VHost == "/" && q.Name == name && q.Stream != nil {
			return q.Stream
		}
	}
	require.FailNow(t, "no such stream", name)
	return nil
}

// streamSegments returns the number of segments stream name holds.
func streamSegments(t *testing.T, b *broker.Broker, name string) int {
	t.Helper()
	return streamStats(t, b, name).Segments
}

// policyReached returns once queue name runs with the policies set so
// far. A policy reaches a queue's actor as an op (queue.SetArgs), as
// RabbitMQ casts policy_changed to the queue process, so an actor step
// already under way when the policy was set still finishes with the old
// settings, reading the clock as it goes: moved by a fake clock
// meanwhile, it would apply the old max-age to a time the test meant for
// the new one. The queue's Stats is sent after the policy's op and
// answered once it ran.
func policyReached(t *testing.T, b *broker.Broker, name string) {
	t.Helper()
	queueStats(t, b, name)
}

// TestStreamPolicyRetention: policies set a stream's retention as RabbitMQ
// 4.0's update_stream_conf does: max-length-bytes and max-age from the
// policy win over the arguments, take effect on a live stream when the
// policy is set and when it is deleted, and only policies whose apply-to
// covers streams count; the other queue keys change nothing on a stream.
// Segments of 100 bytes hold two of the 52-byte records (bodies50): 20
// messages are published, the policies set, the clock advanced; 20 more
// published; the policies deleted and the clock advanced again.
func TestStreamPolicyRetention(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    amqp091.Table
		applyTo string
		def     map[string]any
		op      map[string]any // an operator policy, if any
		advance time.Duration
		// what the stream holds after the policies, after 20 more
		// messages, and after the policies went
		set, more, deleted uint64
	}{
		{"max-length-bytes lowers", amqp091.Table{"x-max-length-bytes": int64(1 << 20)}, "streams",
			map[string]any{"max-length-bytes": 300}, nil, 0, 4, 4, 4},
		{"max-length-bytes raises over the argument", amqp091.Table{"x-max-length-bytes": int64(300)}, "queues",
			map[string]any{"max-length-bytes": 1 << 20}, nil, 0, 4, 24, 4},
		{"operator policy, the lesser", nil, "all",
			map[string]any{"max-length-bytes": 1 << 20}, map[string]any{"max-length-bytes": 300}, 0, 4, 4, 4},
		{"max-age", nil, "streams",
			map[string]any{"max-age": "1h"}, nil, 61 * time.Minute, 2, 20, 20},
		{"max-age raises over the argument", amqp091.Table{"x-max-age": "1m"}, "all",
			map[string]any{"max-age": "1D"}, nil, 2 * time.Minute, 20, 40, 2},
		{"apply-to classic_queues: none", nil, "classic_queues",
			map[string]any{"max-length-bytes": 300}, nil, 0, 20, 40, 40},
		{"apply-to quorum_queues: none", nil, "quorum_queues",
			map[string]any{"max-length-bytes": 300}, nil, 0, 20, 40, 40},
		{"queue keys do not apply", nil, "all",
			map[string]any{"max-length": 1, "message-ttl": 1, "expires": 1000, "overflow": "reject-publish"}, nil, time.Hour, 20, 40, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, fake, ch := featureBroker(t)
			conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
			pub := amqptest.ConfirmChannel(t, conn)
			args := amqp091.Table{"x-stream-max-segment-size-bytes": int64(100)}
			for k, v := range tc.args {
				args[k] = v
			}
			declareStream(t, ch, "s", args)
			publishStream(t, pub, "s", nil, bodies50(0, 20)...)
			ctx := context.Background()
			require.NoError(t, b.Admin().PutPolicy(ctx, broker.Policy{Name: "p", Pattern: "^s$", ApplyTo: tc.applyTo, Definition: tc.def}))
			if tc.op != nil {
				require.NoError(t, b.Admin().PutOperatorPolicy(ctx, broker.Policy{Name: "op", Pattern: "^s$", ApplyTo: "queues", Definition: tc.op}))
			}
			policyReached(t, b, "s")
			fake.Advance(tc.advance)
			waitStats(t, b, "s", func(c queueCounts) bool { return c.Ready == tc.set })
			publishStream(t, pub, "s", nil, bodies50(20, 40)...)
			require.Equal(t, tc.more, queueStats(t, b, "s").Ready)
			require.NoError(t, b.Admin().DeletePolicy(ctx, "/", "p"))
			if tc.op != nil {
				require.NoError(t, b.Admin().DeleteOperatorPolicy(ctx, "/", "op"))
			}
			policyReached(t, b, "s")
			fake.Advance(tc.advance)
			waitStats(t, b, "s", func(c queueCounts) bool { return c.Ready == tc.deleted })
			// A consumer from first reads what is left.
			_, ds := streamReader(t, conn, "s", 100, amqp091.Table{"x-stream-offset": "first"})
			got, _ := readN(t, ds, int(tc.deleted))
			require.Equal(t, bodies50(40-int(tc.deleted), 40), got)
		})
	}
}

// TestStreamPolicySegmentSize: stream-max-segment-size-bytes from a policy
// applies to a stream declared while the policy matches it, over the
// argument, and never changes afterwards: not when the policy changes or
// goes, not across a restart (RabbitMQ 3.13 and later).
func TestStreamPolicySegmentSize(t *testing.T) {
	dir := t.TempDir()
	fake := clock.NewFake(time.Unix(1_700_000_000, 0))
	b := startBroker(t, broker.Options{DataDir: dir, Clock: fake})
	ctx := context.Background()
	require.NoError(t, b.Admin().PutPolicy(ctx, broker.Policy{Name: "seg", Pattern: "^s", ApplyTo: "streams",
		Definition: map[string]any{"stream-max-segment-size-bytes": 100}}))
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	ch := amqptest.Channel(t, conn)
	declareStream(t, ch, "s1", nil)
	declareStream(t, ch, "s2", amqp091.Table{"x-stream-max-segment-size-bytes": int64(1 << 20)})
	declareStream(t, ch, "t", nil) // no policy: the default size
	pub := amqptest.ConfirmChannel(t, conn)
	for _, q := range []string{"s1", "s2", "t"} {
		publishStream(t, pub, q, nil, bodies50(0, 10)...)
	}
	require.Equal(t, 5, streamSegments(t, b, "s1"))
	require.Equal(t, 5, streamSegments(t, b, "s2"))
	require.Equal(t, 1, streamSegments(t, b, "t"))

	// A changed policy does not resize the segments of s1 and s2, nor
	// give t small ones.
	require.NoError(t, b.Admin().PutPolicy(ctx, broker.Policy{Name: "seg", Pattern: "^(s|t)", ApplyTo: "streams",
		Definition: map[string]any{"stream-max-segment-size-bytes": 1000}}))
	for _, q := range []string{"s1", "s2", "t"} {
		publishStream(t, pub, q, nil, bodies50(10, 14)...)
	}
	require.Equal(t, 7, streamSegments(t, b, "s1"))
	require.Equal(t, 7, streamSegments(t, b, "s2"))
	require.Equal(t, 1, streamSegments(t, b, "t"))
	require.NoError(t, b.Admin().DeletePolicy(ctx, "/", "seg"))
	require.NoError(t, conn.Close())
	require.NoError(t, b.Close())

	b2 := startBroker(t, broker.Options{DataDir: dir, Clock: fake})
	require.Equal(t, 7, streamSegments(t, b2, "s1"))
	require.Equal(t, 1, streamSegments(t, b2, "t"))
	conn2 := amqptest.Dial(t, b2.URL(), amqp091.Config{})
	pub2 := amqptest.ConfirmChannel(t, conn2)
	publishStream(t, pub2, "s1", nil, bodies50(14, 16)...)
	require.Equal(t, 8, streamSegments(t, b2, "s1"))
	// Tracked offsets live beside the size record and still work.
	_, ds := streamReader(t, conn2, "s1", 100, amqp091.Table{"x-stream-offset": "first"})
	got, _ := readN(t, ds, 16)
	require.Equal(t, bodies50(0, 16), got)
}

// TestStreamPlacementArgs: x-initial-cluster-size and
// x-queue-leader-locator are checked as RabbitMQ 4.x checks them
// (check_initial_cluster_size_arg, check_queue_leader_locator_arg: 406)
// and otherwise change nothing; x-stream-filter-size-bytes is 16 to 255.
func TestStreamPlacementArgs(t *testing.T) {
	b, _, _ := featureBroker(t)
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	for _, tc := range []struct {
		name string
		args amqp091.Table
		text string // "" accepted
	}{
		{"cluster size 3", amqp091.Table{"x-initial-cluster-size": int32(3)}, ""},
		{"cluster size 0", amqp091.Table{"x-initial-cluster-size": int32(0)}, "invalid arg 'x-initial-cluster-size' for queue 'q' in vhost '/'"},
		{"cluster size negative", amqp091.Table{"x-initial-cluster-size": int64(-1)}, "invalid arg 'x-initial-cluster-size' for queue 'q' in vhost '/'"},
		{"cluster size string", amqp091.Table{"x-initial-cluster-size": "3"}, "invalid arg 'x-initial-cluster-size' for queue 'q' in vhost '/'"},
		{"locator balanced", amqp091.Table{"x-queue-leader-locator": "balanced"}, ""},
		{"locator client-local", amqp091.Table{"x-queue-leader-locator": "client-local"}, ""},
		{"locator unknown", amqp091.Table{"x-queue-leader-locator": "nearest"}, "invalid arg 'x-queue-leader-locator' for queue 'q' in vhost '/'"},
		{"locator type", amqp091.Table{"x-queue-leader-locator": int32(1)}, "invalid arg 'x-queue-leader-locator' for queue 'q' in vhost '/'"},
		{"filter size 16", amqp091.Table{"x-stream-filter-size-bytes": int32(16)}, ""},
		{"filter size 255", amqp091.Table{"x-stream-filter-size-bytes": int32(255)}, ""},
		{"filter size 15", amqp091.Table{"x-stream-filter-size-bytes": int32(15)}, "Invalid value for  x-stream-filter-size-bytes"},
		{"filter size 256", amqp091.Table{"x-stream-filter-size-bytes": int32(256)}, "Invalid value for  x-stream-filter-size-bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := amqptest.Channel(t, conn)
			args := amqp091.Table{"x-queue-type": "stream"}
			for k, v := range tc.args {
				args[k] = v
			}
			_, err := ch.QueueDeclare("q", true, false, false, false, args)
			if tc.text == "" {
				require.NoError(t, err)
				_, err = ch.QueueDelete("q", false, false, false)
				require.NoError(t, err)
				return
			}
			amqptest.RequireReply(t, err, 406, tc.text)
			require.False(t, queueExists(b, "q"))
		})
	}
	requireServes(t, conn)
}

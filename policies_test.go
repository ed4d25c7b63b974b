package broker_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/meta"
)

// setPolicy sets a policy (operator: an operator policy) on vhost "/".
func setPolicy(t *testing.T, b *broker.Broker, name, pattern string, operator bool, def map[string]any) {
	t.Helper()
	p := broker.Policy{Name: name, Pattern: pattern, ApplyTo: "all", Definition: def}
	var err error
	if operator {
		err = b.Admin().PutOperatorPolicy(context.Background(), p)
	} else {
		err = b.Admin().PutPolicy(context.Background(), p)
	}
	require.NoError(t, err)
}

// nackRequeue settles a delivery with basic.nack, requeue set.
func nackRequeue(d amqp091.Delivery) error { return d.Nack(false, true) }

// TestPolicyKeys: each definition key takes effect on a queue (or
// exchange) declared without arguments.
func TestPolicyKeys(t *testing.T) {
	dlq := map[string]any{"dead-letter-exchange": "", "dead-letter-routing-key": "dlq"}
	with := func(extra map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range dlq {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	for _, tc := range []struct {
		name string
		def  map[string]any
		run  func(t *testing.T, b *broker.Broker, fake *clock.Fake, ch *amqp091.Channel)
	}{
		{"message-ttl", map[string]any{"message-ttl": 100}, func(t *testing.T, b *broker.Broker, fake *clock.Fake, ch *amqp091.Channel) {
			publishAll(t, ch, "pq", "a")
			fake.Advance(200 * time.Millisecond)
			waitStats(t, b, "pq", func(s queueCounts) bool { return s.Ready == 0 })
		}},
		{"expires", map[string]any{"expires": 1000}, func(t *testing.T, b *broker.Broker, fake *clock.Fake, ch *amqp091.Channel) {
			fake.Advance(1500 * time.Millisecond)
			amqptest.Poll(t, func() bool { return !queueExists(b, "pq") }, "queue pq was not expired")
		}},
		{"max-length", map[string]any{"max-length": 2}, func(t *testing.T, b *broker.Broker, _ *clock.Fake, ch *amqp091.Channel) {
			publishAll(t, ch, "pq", "m0", "m1", "m2", "m3")
			require.Equal(t, []string{"m2", "m3"}, bodiesOf(t, ch, "pq"))
		}},
		{"max-length-bytes", map[string]any{"max-length-bytes": 5}, func(t *testing.T, b *broker.Broker, _ *clock.Fake, ch *amqp091.Channel) {
			publishAll(t, ch, "pq", "m0", "m1", "m2", "m3")
			require.Equal(t, []string{"m2", "m3"}, bodiesOf(t, ch, "pq"))
		}},
		{"overflow", map[string]any{"max-length": 1, "overflow": "reject-publish"}, func(t *testing.T, b *broker.Broker, _ *clock.Fake, ch *amqp091.Channel) {
			require.Equal(t, []bool{true, false}, publishAll(t, ch, "pq", "m0", "m1"))
		}},
		{"dead-letter-exchange and routing key", dlq, func(t *testing.T, b *broker.Broker, _ *clock.Fake, ch *amqp091.Channel) {
			publishAll(t, ch, "pq", "x")
			d := amqptest.Get(t, ch, "pq", false)
			require.NoError(t, d.Reject(false))
			waitStats(t, b, "dlq", func(s queueCounts) bool { return s.Ready == 1 })
			require.EqualValues(t, 1, deathOf(t, amqptest.Get(t, ch, "dlq", true).Headers, "pq", "rejected")["count"])
		}},
		{"delivery-limit", with(map[string]any{"delivery-limit": 1}), func(t *testing.T, b *broker.Broker, _ *clock.Fake, ch *amqp091.Channel) {
			publishAll(t, ch, "pq", "x")
			require.True(t, settleTimes(t, ch, "pq", 2, nackRequeue))
			waitStats(t, b, "dlq", func(s queueCounts) bool { return s.Ready == 1 })
			require.Equal(t, queueCounts{}, queueStats(t, b, "pq"))
		}},
		{"alternate-exchange", map[string]any{"alternate-exchange": "ae"}, func(t *testing.T, b *broker.Broker, _ *clock.Fake, ch *amqp091.Channel) {
			require.NoError(t, ch.ExchangeDeclare("ae", "fanout", false, false, false, false, nil))
			amqptest.DeclareQueue(t, ch, "aeq", false)
			require.NoError(t, ch.QueueBind("aeq", "", "ae", false, nil))
			require.NoError(t, ch.ExchangeDeclare("pq.x", "direct", false, false, false, false, nil))
			amqptest.Publish(t, ch, "pq.x", "nobody", "lost?")
			waitStats(t, b, "aeq", func(s queueCounts) bool { return s.Ready == 1 })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, fake, ch := featureBroker(t)
			require.NoError(t, ch.Confirm(false)) // for amqptest.Publish
			amqptest.DeclareQueue(t, ch, "dlq", false)
			setPolicy(t, b, "p", "^pq", false, tc.def)
			declareWith(t, ch, "pq", nil)
			tc.run(t, b, fake, ch)
		})
	}
}

// TestPolicyPrecedence: per key, a queue argument, a policy and an
// operator policy combine as RabbitMQ 4.x combines them (internal/policy
// has the full table; this checks each key end to end).
func TestPolicyPrecedence(t *testing.T) {
	dl := amqp091.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"}
	for _, tc := range []struct {
		name             string
		args             amqp091.Table
		policy, operator map[string]any
		run              func(t *testing.T, b *broker.Broker, fake *clock.Fake, ch *amqp091.Channel)
	}{
		{"max-length: policy lower than argument", amqp091.Table{"x-max-length": int32(3)}, map[string]any{"max-length": 1}, nil,
			func(t *testing.T, b *broker.Broker, _ *clock.Fake, ch *amqp091.Channel) {
				publishAll(t, ch, "pq", "a", "b", "c")
				require.Equal(t, []string{"c"}, bodiesOf(t, ch, "pq"))
			}},
		{"max-length: argument lower than policy", amqp091.Table{"x-max-length": int32(1)}, map[string]any{"max-length": 3}, nil,
			func(t *testing.T, b *broker.Broker, _ *clock.Fake, ch *amqp091.Channel) {
				publishAll(t, ch, "pq", "a", "b", "c")
				require.Equal(t, []string{"c"}, bodiesOf(t, ch, "pq"))
			}},
		{"max-length-bytes: operator lowest", amqp091.Table{"x-max-length-bytes": int32(100)}, map[string]any{"max-length-bytes": 50}, map[string]any{"max-length-bytes": 2},
			func(t *testing.T, b *broker.Broker, _ *clock.Fake, ch *amqp091.Channel) {
				publishAll(t, ch, "pq", "aa", "bb", "cc")
				require.Equal(t, []string{"cc"}, bodiesOf(t, ch, "pq"))
			}},
		{"message-ttl: operator lower than argument", amqp091.Table{"x-message-ttl": int32(10_000)}, nil, map[string]any{"message-ttl": 100},
			func(t *testing.T, b *broker.Broker, fake *clock.Fake, ch *amqp091.Channel) {
				publishAll(t, ch, "pq", "a")
				fake.Advance(200 * time.Millisecond)
				waitStats(t, b, "pq", func(s queueCounts) bool { return s.Ready == 0 })
			}},
		{"message-ttl: argument lower than policy", amqp091.Table{"x-message-ttl": int32(100)}, map[string]any{"message-ttl": 10_000}, nil,
			func(t *testing.T, b *broker.Broker, fake *clock.Fake, ch *amqp091.Channel) {
				publishAll(t, ch, "pq", "a")
				fake.Advance(200 * time.Millisecond)
				waitStats(t, b, "pq", func(s queueCounts) bool { return s.Ready == 0 })
			}},
		{"expires: policy lower than argument", amqp091.Table{"x-expires": int32(60_000)}, map[string]any{"expires": 1000}, nil,
			func(t *testing.T, b *broker.Broker, fake *clock.Fake, ch *amqp091.Channel) {
				fake.Advance(1500 * time.Millisecond)
				amqptest.Poll(t, func() bool { return !queueExists(b, "pq") }, "queue pq was not expired")
			}},
		{"delivery-limit: policy lower than argument", amqp091.Table{"x-delivery-limit": int32(5), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"}, map[string]any{"delivery-limit": 1}, nil,
			func(t *testing.T, b *broker.Broker, _ *clock.Fake, ch *amqp091.Channel) {
				publishAll(t, ch, "pq", "x")
				require.True(t, settleTimes(t, ch, "pq", 2, nackRequeue))
				waitStats(t, b, "dlq", func(s queueCounts) bool { return s.Ready == 1 })
			}},
		{"delivery-limit: unlimited policy loses to the argument", amqp091.Table{"x-delivery-limit": int32(1), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"}, map[string]any{"delivery-limit": -1}, nil,
			func(t *testing.T, b *broker.Broker, _ *clock.Fake, ch *amqp091.Channel) {
				publishAll(t, ch, "pq", "x")
				require.True(t, settleTimes(t, ch, "pq", 2, nackRequeue))
				waitStats(t, b, "dlq", func(s queueCounts) bool { return s.Ready == 1 })
			}},
		{"expires: operator lower than policy", nil, map[string]any{"expires": 60_000}, map[string]any{"expires": 1000},
			func(t *testing.T, b *broker.Broker, fake *clock.Fake, ch *amqp091.Channel) {
				fake.Advance(1500 * time.Millisecond)
				amqptest.Poll(t, func() bool { return !queueExists(b, "pq") }, "queue pq was not expired")
			}},
		{"delivery-limit: operator lower than policy", dl, map[string]any{"delivery-limit": 5}, map[string]any{"delivery-limit": 1},
			func(t *testing.T, b *broker.Broker, _ *clock.Fake, ch *amqp091.Channel) {
				publishAll(t, ch, "pq", "x")
				require.True(t, settleTimes(t, ch, "pq", 2, nackRequeue))
				waitStats(t, b, "dlq", func(s queueCounts) bool { return s.Ready == 1 })
			}},
		{"dead-letter-exchange: argument wins", dl, map[string]any{"dead-letter-exchange": "no-such-exchange"}, nil,
			func(t *testing.T, b *broker.Broker, _ *clock.Fake, ch *amqp091.Channel) {
				publishAll(t, ch, "pq", "x")
				require.NoError(t, amqptest.Get(t, ch, "pq", false).Reject(false))
				waitStats(t, b, "dlq", func(s queueCounts) bool { return s.Ready == 1 })
			}},
		{"dead-letter-routing-key: argument wins", dl, map[string]any{"dead-letter-exchange": "", "dead-letter-routing-key": "other"}, nil,
			func(t *testing.T, b *broker.Broker, _ *clock.Fake, ch *amqp091.Channel) {
				publishAll(t, ch, "pq", "x")
				require.NoError(t, amqptest.Get(t, ch, "pq", false).Reject(false))
				waitStats(t, b, "dlq", func(s queueCounts) bool { return s.Ready == 1 })
				require.Zero(t, queueStats(t, b, "other").Ready)
			}},
		{"overflow: argument wins on a classic queue", amqp091.Table{"x-max-length": int32(1), "x-overflow": "reject-publish"}, nil, map[string]any{"overflow": "drop-head"},
			func(t *testing.T, b *broker.Broker, _ *clock.Fake, ch *amqp091.Channel) {
				require.Equal(t, []bool{true, false}, publishAll(t, ch, "pq", "a", "b"))
			}},
		{"overflow: policy wins on a quorum queue", amqp091.Table{"x-queue-type": "quorum", "x-max-length": int32(1), "x-overflow": "reject-publish"}, map[string]any{"overflow": "drop-head"}, nil,
			func(t *testing.T, b *broker.Broker, _ *clock.Fake, ch *amqp091.Channel) {
				require.Equal(t, []bool{true, true}, publishAll(t, ch, "pq", "a", "b"))
				require.Equal(t, []string{"b"}, bodiesOf(t, ch, "pq"))
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, fake, ch := featureBroker(t)
			amqptest.DeclareQueue(t, ch, "dlq", false)
			amqptest.DeclareQueue(t, ch, "other", false)
			if tc.policy != nil {
				setPolicy(t, b, "p", "^pq", false, tc.policy)
			}
			if tc.operator != nil {
				setPolicy(t, b, "op", "^pq", true, tc.operator)
			}
			_, err := ch.QueueDeclare("pq", tc.args["x-queue-type"] == "quorum", false, false, false, tc.args)
			require.NoError(t, err)
			tc.run(t, b, fake, ch)
		})
	}
}

// TestPolicyAlternateExchangePrecedence: an exchange's alternate-exchange
// argument wins over a policy's (rabbit_policy:get_arg, arguments first),
// and the policy's applies to an exchange declared without one.
func TestPolicyAlternateExchangePrecedence(t *testing.T) {
	b, _, ch := featureBroker(t)
	require.NoError(t, ch.Confirm(false)) // for amqptest.Publish
	for _, ae := range []string{"ae-arg", "ae-pol"} {
		require.NoError(t, ch.ExchangeDeclare(ae, "fanout", false, false, false, false, nil))
		amqptest.DeclareQueue(t, ch, ae+"-q", false)
		require.NoError(t, ch.QueueBind(ae+"-q", "", ae, false, nil))
	}
	setPolicy(t, b, "p", "^px", false, map[string]any{"alternate-exchange": "ae-pol"})
	require.NoError(t, ch.ExchangeDeclare("px-arg", "direct", false, false, false, false, amqp091.Table{"alternate-exchange": "ae-arg"}))
	require.NoError(t, ch.ExchangeDeclare("px-none", "direct", false, false, false, false, nil))
	amqptest.Publish(t, ch, "px-arg", "nobody", "to the argument's")
	amqptest.Publish(t, ch, "px-none", "nobody", "to the policy's")
	waitStats(t, b, "ae-arg-q", func(s queueCounts) bool { return s.Ready == 1 })
	waitStats(t, b, "ae-pol-q", func(s queueCounts) bool { return s.Ready == 1 })
	require.Equal(t, []string{"to the argument's"}, bodiesOf(t, ch, "ae-arg-q"))
	require.Equal(t, []string{"to the policy's"}, bodiesOf(t, ch, "ae-pol-q"))
}

// TestPolicyLive: setting, changing and deleting policies re-evaluates
// running queues without a redeclare.
func TestPolicyLive(t *testing.T) {
	t.Run("lowered max-length drops and dead-letters the excess", func(t *testing.T) {
		b, _, ch := featureBroker(t)
		amqptest.DeclareQueue(t, ch, "dlq", false)
		declareWith(t, ch, "pq", nil)
		publishAll(t, ch, "pq", "m0", "m1", "m2", "m3", "m4")
		setPolicy(t, b, "p", "^pq", false, map[string]any{"max-length": 4, "dead-letter-exchange": "", "dead-letter-routing-key": "dlq"})
		waitStats(t, b, "pq", func(s queueCounts) bool { return s.Ready == 4 })
		setPolicy(t, b, "p", "^pq", false, map[string]any{"max-length": 2, "dead-letter-exchange": "", "dead-letter-routing-key": "dlq"})
		waitStats(t, b, "pq", func(s queueCounts) bool { return s.Ready == 2 })
		waitStats(t, b, "dlq", func(s queueCounts) bool { return s.Ready == 3 })
		require.Equal(t, []string{"m0", "m1", "m2"}, bodiesOf(t, ch, "dlq"))
		require.Equal(t, []string{"m3", "m4"}, bodiesOf(t, ch, "pq"))
	})
	t.Run("a lowered operator max-length-bytes starts counting bytes", func(t *testing.T) {
		b, _, ch := featureBroker(t)
		declareWith(t, ch, "pq", nil)
		publishAll(t, ch, "pq", "aa", "bb", "cc")
		setPolicy(t, b, "op", "^pq", true, map[string]any{"max-length-bytes": 4})
		waitStats(t, b, "pq", func(s queueCounts) bool { return s.Ready == 2 })
		publishAll(t, ch, "pq", "dd")
		require.Equal(t, []string{"cc", "dd"}, bodiesOf(t, ch, "pq"))
	})
	t.Run("new and removed TTL", func(t *testing.T) {
		b, fake, ch := featureBroker(t)
		declareWith(t, ch, "pq", nil)
		setPolicy(t, b, "p", "^pq", false, map[string]any{"message-ttl": 100})
		publishAll(t, ch, "pq", "during")
		require.NoError(t, b.Admin().DeletePolicy(context.Background(), "/", "p"))
		publishAll(t, ch, "pq", "after")
		fake.Advance(time.Second)
		// A message keeps the deadline it was published with, as in
		// RabbitMQ: "during" expires, "after" has none.
		waitStats(t, b, "pq", func(s queueCounts) bool { return s.Ready == 1 })
		require.Equal(t, []string{"after"}, bodiesOf(t, ch, "pq"))
	})
	t.Run("a new dead-letter exchange takes the next dead-lettered message", func(t *testing.T) {
		b, _, ch := featureBroker(t)
		amqptest.DeclareQueue(t, ch, "dlq1", false)
		amqptest.DeclareQueue(t, ch, "dlq2", false)
		declareWith(t, ch, "pq", nil)
		publishAll(t, ch, "pq", "a", "b", "c")
		require.NoError(t, amqptest.Get(t, ch, "pq", false).Reject(false)) // no DLX yet: dropped
		waitStats(t, b, "pq", func(s queueCounts) bool { return s.Unacked == 0 })
		setPolicy(t, b, "p", "^pq", false, map[string]any{"dead-letter-exchange": "", "dead-letter-routing-key": "dlq1"})
		require.NoError(t, amqptest.Get(t, ch, "pq", false).Reject(false))
		waitStats(t, b, "dlq1", func(s queueCounts) bool { return s.Ready == 1 })
		setPolicy(t, b, "p", "^pq", false, map[string]any{"dead-letter-exchange": "", "dead-letter-routing-key": "dlq2"})
		require.NoError(t, amqptest.Get(t, ch, "pq", false).Reject(false))
		waitStats(t, b, "dlq2", func(s queueCounts) bool { return s.Ready == 1 })
		require.Equal(t, []string{"b"}, bodiesOf(t, ch, "dlq1"))
		require.Equal(t, []string{"c"}, bodiesOf(t, ch, "dlq2"))
	})
	t.Run("a higher priority policy replaces the match; deleting it restores", func(t *testing.T) {
		b, _, ch := featureBroker(t)
		declareWith(t, ch, "pq", nil)
		setPolicy(t, b, "low", ".", false, map[string]any{"max-length": 1, "overflow": "reject-publish"})
		require.NoError(t, b.Admin().PutPolicy(context.Background(), broker.Policy{Name: "high", Pattern: "^pq$", Priority: 5, Definition: map[string]any{"max-length": 3, "overflow": "reject-publish"}}))
		require.Equal(t, []bool{true, true, true, false}, publishAll(t, ch, "pq", "a", "b", "c", "d"))
		require.NoError(t, b.Admin().DeletePolicy(context.Background(), "/", "high"))
		bodiesOf(t, ch, "pq")
		require.Equal(t, []bool{true, false}, publishAll(t, ch, "pq", "e", "f"))
	})
	t.Run("alternate exchange set and cleared", func(t *testing.T) {
		b, _, ch := featureBroker(t)
		require.NoError(t, ch.Confirm(false)) // for amqptest.Publish
		require.NoError(t, ch.ExchangeDeclare("ae", "fanout", false, false, false, false, nil))
		amqptest.DeclareQueue(t, ch, "aeq", false)
		require.NoError(t, ch.QueueBind("aeq", "", "ae", false, nil))
		require.NoError(t, ch.ExchangeDeclare("x", "direct", false, false, false, false, nil))
		setPolicy(t, b, "p", "^x$", false, map[string]any{"alternate-exchange": "ae"})
		amqptest.Publish(t, ch, "x", "k", "one")
		waitStats(t, b, "aeq", func(s queueCounts) bool { return s.Ready == 1 })
		require.NoError(t, b.Admin().DeletePolicy(context.Background(), "/", "p"))
		amqptest.Publish(t, ch, "x", "k", "two")
		amqptest.Publish(t, ch, "ae", "", "marker")
		waitStats(t, b, "aeq", func(s queueCounts) bool { return s.Ready == 2 })
		require.Equal(t, []string{"one", "marker"}, bodiesOf(t, ch, "aeq"))
	})
}

func TestPolicyAPIErrors(t *testing.T) {
	b, _, _ := featureBroker(t)
	ctx := context.Background()
	err := b.Admin().PutPolicy(ctx, broker.Policy{Name: "p", Pattern: ".", Definition: map[string]any{"max-priority": 10}})
	require.EqualError(t, err, "Validation failed\n\n[{<<\"max-priority\">>,10}] are not recognised policy settings\n")
	err = b.Admin().PutOperatorPolicy(ctx, broker.Policy{Name: "p", Pattern: ".", Definition: map[string]any{"dead-letter-exchange": "x"}})
	require.ErrorContains(t, err, "are not recognised policy settings")
	err = b.Admin().PutPolicy(ctx, broker.Policy{VHost: "nope", Name: "p", Pattern: ".", Definition: map[string]any{"max-length": 1}})
	require.True(t, errors.Is(err, meta.ErrNotFound), "%v", err)
	require.True(t, errors.Is(b.Admin().DeletePolicy(ctx, "/", "missing"), meta.ErrNotFound))
	setPolicy(t, b, "p", ".", false, map[string]any{"max-length": int32(7)})
	ps, err := b.Admin().ListPolicies(ctx, "/")
	require.NoError(t, err)
	require.Equal(t, []broker.Policy{{VHost: "/", Name: "p", Pattern: ".", ApplyTo: "all", Definition: map[string]any{"max-length": int64(7)}}}, ps)
	ops, err := b.Admin().ListOperatorPolicies(ctx, "")
	require.NoError(t, err)
	require.Empty(t, ops)
}

// TestPoliciesSurvivePebbleRestart: policies are stored with the rest of
// the metadata and apply to the recovered queues at the next start.
func TestPoliciesSurvivePebbleRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	b1, err := broker.New(broker.Options{DataDir: dir})
	require.NoError(t, err)
	ch1, err := b1.Channel(ctx)
	require.NoError(t, err)
	_, err = ch1.QueueDeclare("pq", true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, b1.Admin().PutPolicy(ctx, broker.Policy{Name: "cap", Pattern: "^pq$", Definition: map[string]any{"max-length": 2, "overflow": "reject-publish"}}))
	require.NoError(t, b1.Admin().PutOperatorPolicy(ctx, broker.Policy{Name: "guard", Pattern: ".", Priority: 3, Definition: map[string]any{"message-ttl": 3_600_000}}))
	require.NoError(t, b1.Close())

	b2 := startBroker(t, broker.Options{DataDir: dir})
	ps, err := b2.Admin().ListPolicies(ctx, "/")
	require.NoError(t, err)
	require.Len(t, ps, 1)
	require.Equal(t, "cap", ps[0].Name)
	ops, err := b2.Admin().ListOperatorPolicies(ctx, "/")
	require.NoError(t, err)
	require.Equal(t, []broker.Policy{{VHost: "/", Name: "guard", Pattern: ".", ApplyTo: "all", Priority: 3, Definition: map[string]any{"message-ttl": int64(3_600_000)}}}, ops)
	conn := amqptest.Dial(t, b2.URL(), amqp091.Config{})
	ch := amqptest.Channel(t, conn)
	require.Equal(t, []bool{true, true, false}, publishAll(t, ch, "pq", "a", "b", "c"))
}

// TestOptionsPolicies: Options carry policies applied at start; a bad one
// fails New.
func TestOptionsPolicies(t *testing.T) {
	b := startBroker(t, broker.Options{
		Policies:         []broker.Policy{{Name: "cap", Pattern: "^pq", Definition: map[string]any{"max-length": 1}}},
		OperatorPolicies: []broker.Policy{{Name: "ttl", Pattern: ".", Definition: map[string]any{"expires": 60_000}}},
	})
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	ch := amqptest.Channel(t, conn)
	declareWith(t, ch, "pq", nil)
	publishAll(t, ch, "pq", "a", "b")
	require.Equal(t, []string{"b"}, bodiesOf(t, ch, "pq"))

	_, err := broker.New(broker.Options{Policies: []broker.Policy{{Name: "bad", Pattern: ".", Definition: map[string]any{"message-ttl": "soon"}}}})
	require.ErrorContains(t, err, `Options.Policies "bad"`)
	require.ErrorContains(t, err, `<<"soon">> is not a valid message TTL`)
}

// TestPolicyOnNonMatchingQueues: a policy that matches nothing changes
// nothing, and queues declared after a policy get it.
func TestPolicyOnNonMatchingQueues(t *testing.T) {
	b, _, ch := featureBroker(t)
	setPolicy(t, b, "p", "^only$", false, map[string]any{"max-length": 1})
	declareWith(t, ch, "other", nil)
	declareWith(t, ch, "only", nil)
	publishAll(t, ch, "other", "a", "b")
	publishAll(t, ch, "only", "a", "b")
	require.Equal(t, []string{"a", "b"}, bodiesOf(t, ch, "other"))
	require.Equal(t, []string{"b"}, bodiesOf(t, ch, "only"))
	for i := range 3 {
		name := fmt.Sprintf("only%d", i)
		declareWith(t, ch, name, nil)
		publishAll(t, ch, name, "a", "b")
		require.Equal(t, []string{"a", "b"}, bodiesOf(t, ch, name), "the pattern is unanchored but ^only$ is not")
	}
}

// TestPoliciesGoWithTheirVHost: deleting a vhost deletes its policies; a
// vhost of the same name created later has none.
func TestPoliciesGoWithTheirVHost(t *testing.T) {
	b, _, _ := featureBroker(t)
	ctx := context.Background()
	addVHost(t, b, "v")
	require.NoError(t, b.Admin().PutPolicy(ctx, broker.Policy{VHost: "v", Name: "p", Pattern: ".", Definition: map[string]any{"max-length": 1}}))
	require.NoError(t, b.Admin().PutOperatorPolicy(ctx, broker.Policy{VHost: "v", Name: "o", Pattern: ".", Definition: map[string]any{"max-length": 1}}))
	require.NoError(t, b.Admin().DeleteVHost(ctx, "v"))
	addVHost(t, b, "v")
	ps, err := b.Admin().ListPolicies(ctx, "v")
	require.NoError(t, err)
	require.Empty(t, ps)
	ops, err := b.Admin().ListOperatorPolicies(ctx, "v")
	require.NoError(t, err)
	require.Empty(t, ops)
}

// TestQuorumDefaultDeliveryLimitYieldsToPolicy: a quorum queue's default
// delivery limit (20 from RabbitMQ 4.0) applies only when neither its
// argument nor a policy sets one, as rabbit_quorum_queue's
// get_delivery_limit falls back to it; a policy's larger limit, or a
// negative (unlimited) one, is the queue's limit, also after a live change.
func TestQuorumDefaultDeliveryLimitYieldsToPolicy(t *testing.T) {
	reject := func(d amqp091.Delivery) error { return d.Reject(true) }
	for _, tc := range []struct {
		name    string
		version string
		limit   any // the policy's delivery-limit; nil: no policy
		want    string
	}{
		{"4.0 without a policy", "4.0", nil, "gone"},
		{"4.0 policy above the default", "4.0", 30, "present"},
		{"4.0 policy unlimited", "4.0", -1, "present"},
		{"4.0 policy below the default", "4.0", 5, "gone"},
		{"3.13 without a policy", "3.13", nil, "present"},
	} {
		// The policy set before the declare (the queue starts with it)
		// and after (its limit changes live).
		for _, live := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/live=%v", tc.name, live), func(t *testing.T) {
				b, err := broker.New(broker.Options{RabbitMQVersion: tc.version})
				require.NoError(t, err)
				t.Cleanup(func() { _ = b.Close() })
				ch := amqptest.ConfirmChannel(t, amqptest.DialVia(t, b.Dial, "guest", "guest"))
				setLimit := func() {
					if tc.limit != nil {
						setPolicy(t, b, "limit", "^qq$", false, map[string]any{"delivery-limit": tc.limit})
					}
				}
				if !live {
					setLimit()
				}
				declareQuorumWithOne(t, ch, "qq")
				if live {
					setLimit()
				}
				require.Equal(t, tc.want, requeueTimes(t, ch, "qq", 21, reject))
			})
		}
	}
}

// TestPolicyConsumerTimeout: a policy's consumer-timeout times out a
// consumer of a queue declared without x-consumer-timeout; with the
// queue's argument the lesser wins; a consumer's own x-consumer-timeout
// wins over both (RabbitMQ 3.12 and later).
func TestPolicyConsumerTimeout(t *testing.T) {
	long := int64(10 * 60 * 1000)
	for _, tc := range []struct {
		name          string
		queueArgs     amqp091.Table
		consumeArgs   amqp091.Table
		policyTimeout int64
		want          string
	}{
		{"policy alone", nil, nil, 200, "406 PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. Timeout value used: 200 ms. This timeout value can be configured, see consumers doc guide to learn more"},
		{"policy below the argument", amqp091.Table{"x-consumer-timeout": long}, nil, 200, "406 PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. Timeout value used: 200 ms. This timeout value can be configured, see consumers doc guide to learn more"},
		{"argument below the policy", amqp091.Table{"x-consumer-timeout": int64(200)}, nil, long, "406 PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. Timeout value used: 200 ms. This timeout value can be configured, see consumers doc guide to learn more"},
		{"consumer argument wins", nil, amqp091.Table{"x-consumer-timeout": long}, 200, "no timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startBroker(t, broker.Options{ScanInterval: 20 * time.Millisecond})
			setPolicy(t, b, "timeout", "^cq$", false, map[string]any{"consumer-timeout": tc.policyTimeout})
			ch := amqptest.ConfirmChannel(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
			timeoutQueue(t, ch, "cq", tc.queueArgs)
			require.Equal(t, tc.want, consumeUntilTimeout(t, amqptest.Dial(t, b.URL(), amqp091.Config{}), "cq", tc.consumeArgs))
		})
	}
}

package broker_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/compat"
)

// profileVersions are the releases of Options.RabbitMQVersion whose
// answers differ from the release before them: every profile.
var profileVersions = compat.Releases()

// outcome renders what a client saw: "ok", or the reply code and text of
// the channel or connection close that refused it.
func outcome(err error) string {
	var e *amqp091.Error
	switch {
	case err == nil:
		return "ok"
	case errors.As(err, &e):
		return fmt.Sprintf("%d %s", e.Code, e.Reason)
	}
	return "error: " + err.Error()
}

// same is the wanted outcome of every profile.
func same(want string) map[string]string {
	m := make(map[string]string, len(profileVersions))
	for _, v := range profileVersions {
		m[v] = want
	}
	return m
}

// from is before for the profiles older than first and after from first
// on; first is a release ("4.3.2") or a series ("4.3": its first release).
func from(first, before, after string) map[string]string {
	m := make(map[string]string, len(profileVersions))
	later := false
	for _, v := range profileVersions {
		later = later || v == first || strings.HasPrefix(v, first+".")
		m[v] = before
		if later {
			m[v] = after
		}
	}
	return m
}

// bySeries gives every release of a series the answer m names for it.
func bySeries(m map[string]string) map[string]string {
	out := make(map[string]string, len(profileVersions))
	for _, v := range profileVersions {
		out[v] = m[v[:strings.LastIndexByte(v, '.')]]
	}
	return out
}

// reported is each profile's answer when it is the release itself,
// printed by format.
func reported(format string) map[string]string {
	m := make(map[string]string, len(profileVersions))
	for _, v := range profileVersions {
		m[v] = fmt.Sprintf(format, v, v)
	}
	return m
}

// profileScenario is one client scenario run under every profile: run
// returns what the client saw, want says what each profile answers.
type profileScenario struct {
	name string
	run  func(t *testing.T, b *broker.Broker, ch *amqp091.Channel) string
	want map[string]string
}

func declareOutcome(name string, durable, exclusive, autoDelete bool, args amqp091.Table) func(*testing.T, *broker.Broker, *amqp091.Channel) string {
	return func(_ *testing.T, _ *broker.Broker, ch *amqp091.Channel) string {
		_, err := ch.QueueDeclare(name, durable, autoDelete, exclusive, false, args)
		return outcome(err)
	}
}

var quorum = amqp091.Table{"x-queue-type": "quorum"}

// settleTimes gets the one message of queue q n times, settling each
// delivery with settle; false when the queue ran out first.
func settleTimes(t *testing.T, ch *amqp091.Channel, q string, n int, settle func(amqp091.Delivery) error) bool {
	t.Helper()
	for range n {
		d, ok, err := ch.Get(q, false)
		require.NoError(t, err)
		if !ok {
			return false
		}
		require.NoError(t, settle(d))
	}
	return true
}

// requeueTimes settles the one message of queue q n times (settleTimes)
// and reports whether the message is still there.
func requeueTimes(t *testing.T, ch *amqp091.Channel, q string, n int, settle func(amqp091.Delivery) error) string {
	if !settleTimes(t, ch, q, n, settle) {
		return "gone"
	}
	_, ok, err := ch.Get(q, true)
	require.NoError(t, err)
	if !ok {
		return "gone"
	}
	return "present"
}

func declareQuorumWithOne(t *testing.T, ch *amqp091.Channel, name string) {
	t.Helper()
	_, err := ch.QueueDeclare(name, true, false, false, false, quorum)
	require.NoError(t, err)
	amqptest.Publish(t, ch, "", name, "poison") // confirmed: stored
}

// consumeUntilTimeout consumes the one message of q without acking it,
// with consume arguments args, and reports how the consumer timeout ended
// it within a few seconds: the channel closed, the consumer cancelled (and
// the message's headers when it is got again), or nothing.
func consumeUntilTimeout(t *testing.T, conn *amqp091.Connection, q string, args amqp091.Table) string {
	ch := amqptest.Channel(t, conn)
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	cancelled := ch.NotifyCancel(make(chan string, 1))
	msgs, err := ch.Consume(q, "c1", false, false, false, false, args)
	if err != nil {
		return outcome(err)
	}
	amqptest.Next(t, msgs)
	select {
	case e := <-closed:
		return outcome(e)
	case tag := <-cancelled:
		d := amqptest.Get(t, amqptest.Channel(t, conn), q, true)
		return fmt.Sprintf("cancelled %s; redelivered=%v dc=%v ac=%v", tag, d.Redelivered, d.Headers["x-delivery-count"], d.Headers["x-acquired-count"])
	case <-time.After(1500 * time.Millisecond):
		return "no timeout"
	}
}

// timeoutQueue declares a durable queue with args and one message, and
// says why not when the declare is refused.
func timeoutQueue(t *testing.T, ch *amqp091.Channel, name string, args amqp091.Table) error {
	t.Helper()
	if _, err := ch.QueueDeclare(name, true, false, false, false, args); err != nil {
		return err
	}
	amqptest.Publish(t, ch, "", name, "slow")
	return nil
}

var profileScenarios = []profileScenario{
	{
		name: "connection.start version",
		run: func(t *testing.T, b *broker.Broker, _ *amqp091.Channel) string {
			conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
			return fmt.Sprint(conn.Properties["version"])
		},
		want: reported("%[1]s"),
	},
	{
		name: "api overview rabbitmq_version",
		run: func(t *testing.T, b *broker.Broker, _ *amqp091.Channel) string {
			api := amqptest.NewAPI(t, b.ManagementHandler())
			o := api.Get("/api/overview").(map[string]any)
			return fmt.Sprint(o["rabbitmq_version"], " ", o["management_version"])
		},
		want: reported("%s %s"),
	},
	{
		// 4.3 refuses the transient non-exclusive queue before the queue
		// type looks at it.
		name: "quorum non-durable",
		run:  declareOutcome("qq", false, false, false, quorum),
		want: from("4.3", "406 PRECONDITION_FAILED - invalid property 'non-durable' for queue 'qq' in vhost '/'",
			"541 INTERNAL_ERROR - Feature `transient_nonexcl_queues` is deprecated.\nBy default, this feature is not permitted anymore.\nThe feature will be removed from a future major RabbitMQ version, regardless of the configuration; actual version to be determined.\nTo..."),
	},
	{
		name: "quorum exclusive",
		run:  declareOutcome("qq", true, true, false, quorum),
		want: same("406 PRECONDITION_FAILED - invalid property 'exclusive-owner' for queue 'qq' in vhost '/'"),
	},
	{
		name: "quorum auto-delete",
		run:  declareOutcome("qq", true, false, true, quorum),
		want: same("406 PRECONDITION_FAILED - invalid property 'auto-delete' for queue 'qq' in vhost '/'"),
	},
	{
		name: "quorum x-max-priority",
		run:  declareOutcome("qq", true, false, false, amqp091.Table{"x-queue-type": "quorum", "x-max-priority": int32(5)}),
		want: from("4.3", "406 PRECONDITION_FAILED - invalid arg 'x-max-priority' for queue 'qq' in vhost '/' of queue type rabbit_quorum_queue", "ok"),
	},
	{
		name: "negative x-delivery-limit",
		run:  declareOutcome("qq", true, false, false, amqp091.Table{"x-queue-type": "quorum", "x-delivery-limit": int32(-1)}),
		want: from("4.0", "406 PRECONDITION_FAILED - invalid arg 'x-delivery-limit' for queue 'qq' in vhost '/': value -1 is negative", "ok"),
	},
	{
		// 21 deliveries, each rejected with requeue: from 4.0 the 21st
		// return is over the default limit of 20 and, without a
		// dead-letter exchange, drops the message.
		name: "quorum default delivery limit, reject",
		run: func(t *testing.T, _ *broker.Broker, ch *amqp091.Channel) string {
			declareQuorumWithOne(t, ch, "qq")
			return requeueTimes(t, ch, "qq", 21, func(d amqp091.Delivery) error { return d.Reject(true) })
		},
		want: from("4.0", "present", "gone"),
	},
	{
		// basic.nack is a return, not a failed delivery, for 4.3.
		name: "quorum default delivery limit, nack",
		run: func(t *testing.T, _ *broker.Broker, ch *amqp091.Channel) string {
			declareQuorumWithOne(t, ch, "qq")
			return requeueTimes(t, ch, "qq", 21, nackRequeue)
		},
		want: bySeries(map[string]string{"3.13": "present", "4.0": "gone", "4.1": "gone", "4.2": "gone", "4.3": "present", "4.4": "present"}),
	},
	{
		name: "unlimited x-delivery-limit",
		run: func(t *testing.T, _ *broker.Broker, ch *amqp091.Channel) string {
			if _, err := ch.QueueDeclare("qq", true, false, false, false, amqp091.Table{"x-queue-type": "quorum", "x-delivery-limit": int64(-1)}); err != nil {
				return outcome(err)
			}
			amqptest.Publish(t, ch, "", "qq", "poison")
			return requeueTimes(t, ch, "qq", 25, func(d amqp091.Delivery) error { return d.Reject(true) })
		},
		want: from("4.0", "406 PRECONDITION_FAILED - invalid arg 'x-delivery-limit' for queue 'qq' in vhost '/': value -1 is negative", "present"),
	},
	{
		// Redelivery headers after a reject, then a nack.
		name: "quorum redelivery headers",
		run: func(t *testing.T, _ *broker.Broker, ch *amqp091.Channel) string {
			declareQuorumWithOne(t, ch, "qq")
			var seen []string
			for _, settle := range []func(amqp091.Delivery) error{
				func(d amqp091.Delivery) error { return d.Reject(true) },
				func(d amqp091.Delivery) error { return d.Nack(false, true) },
				func(d amqp091.Delivery) error { return d.Ack(false) },
			} {
				d := amqptest.Get(t, ch, "qq", false)
				seen = append(seen, fmt.Sprintf("dc=%v ac=%v", d.Headers["x-delivery-count"], d.Headers["x-acquired-count"]))
				require.NoError(t, settle(d))
			}
			return strings.Join(seen, "; ")
		},
		want: from("4.3", "dc=<nil> ac=<nil>; dc=1 ac=<nil>; dc=2 ac=<nil>", "dc=<nil> ac=<nil>; dc=1 ac=1; dc=1 ac=2"),
	},
	{
		name: "max message size",
		run: func(t *testing.T, _ *broker.Broker, ch *amqp091.Channel) string {
			amqptest.DeclareQueue(t, ch, "big", true)
			closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
			require.NoError(t, ch.PublishWithContext(t.Context(), "", "big", false, false, amqp091.Publishing{Body: make([]byte, 16<<20+1)}))
			if _, err := ch.QueueDeclarePassive("big", true, false, false, false, nil); err != nil {
				return outcome(amqptest.AwaitClose(t, closed))
			}
			return "ok"
		},
		want: from("4.0", "ok", "406 PRECONDITION_FAILED - message size 16777217 is larger than configured max size 16777216"),
	},
	{
		name: "unknown exchange type",
		run: func(_ *testing.T, _ *broker.Broker, ch *amqp091.Channel) string {
			return outcome(ch.ExchangeDeclare("x", "x-no-such-type", false, false, false, false, nil))
		},
		want: same("406 PRECONDITION_FAILED - unknown exchange type 'x-no-such-type'"),
	},
	{
		name: "transient non-exclusive classic queue",
		run:  declareOutcome("tq", false, false, false, nil),
		want: from("4.3", "ok", "541 INTERNAL_ERROR - Feature `transient_nonexcl_queues` is deprecated.\nBy default, this feature is not permitted anymore.\nThe feature will be removed from a future major RabbitMQ version, regardless of the configuration; actual version to be determined.\nTo..."),
	},
	{
		name: "transient exclusive classic queue",
		run:  declareOutcome("tq", false, true, false, nil),
		want: same("ok"),
	},
	{
		name: "x-queue-mode",
		run:  declareOutcome("cq", true, false, false, amqp091.Table{"x-queue-mode": "lazy"}),
		want: from("4.3", "ok", "406 PRECONDITION_FAILED - invalid arg 'x-queue-mode' for queue 'cq' in vhost '/': classic queue v1 storage is removed; the argument is not supported"),
	},
	{
		name: "x-queue-version 1",
		run:  declareOutcome("cq", true, false, false, amqp091.Table{"x-queue-version": int32(1)}),
		want: from("4.3", "ok", "406 PRECONDITION_FAILED - invalid arg 'x-queue-version' for queue 'cq' in vhost '/': classic queue v1 storage is removed; only version 2 is supported"),
	},
	{
		// Global QoS is refused by a quorum queue's consume; from 4.3 it
		// is per consumer, so nothing is refused.
		name: "global qos then quorum consume",
		run: func(t *testing.T, _ *broker.Broker, ch *amqp091.Channel) string {
			_, err := ch.QueueDeclare("qq", true, false, false, false, quorum)
			require.NoError(t, err)
			require.NoError(t, ch.Qos(10, 0, true))
			_, err = ch.Consume("qq", "", false, false, false, false, nil)
			return outcome(err)
		},
		want: from("4.3", "540 NOT_IMPLEMENTED - queue 'qq' in vhost '/' does not support global qos", "ok"),
	},
	{
		name: "tune-ok frame-max 4096",
		// Over the raw wire: amqp091-go writes connection.open right
		// behind tune-ok, and when the broker's connection.close wins the
		// race its reader closes the socket, the open's write fails and
		// the client reports its own "403 no access to this vhost".
		run: func(t *testing.T, b *broker.Broker, _ *amqp091.Channel) string {
			c := amqptest.DialRaw(t, b.Addr().String())
			tune := c.StartToTune()
			c.SendMethod(0, &amqp.ConnectionTuneOk{ChannelMax: tune.ChannelMax, FrameMax: 4096})
			c.SendMethod(0, &amqp.ConnectionOpen{VirtualHost: "/"})
			switch m := c.ExpectMethod(0).(type) {
			case *amqp.ConnectionOpenOk:
				return "ok"
			case *amqp.ConnectionClose:
				return fmt.Sprintf("%d %s", m.ReplyCode, m.ReplyText)
			default:
				return "unexpected " + m.Name()
			}
		},
		want: from("4.1", "ok", "530 NOT_ALLOWED - negotiated frame_max = 4096 is lower than the minimum allowed value (8192)"),
	},
	{
		// 4.3.0 and 4.3.1 accept the argument on a classic queue, which
		// has no consumer timeout any more; 4.3.2 refuses it.
		name: "classic queue x-consumer-timeout",
		run: func(t *testing.T, b *broker.Broker, ch *amqp091.Channel) string {
			if err := timeoutQueue(t, ch, "cq", amqp091.Table{"x-consumer-timeout": int32(200)}); err != nil {
				return outcome(err)
			}
			return consumeUntilTimeout(t, amqptest.Dial(t, b.URL(), amqp091.Config{}), "cq", nil)
		},
		want: merge(from("4.3", "406 PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. Timeout value used: 200 ms. This timeout value can be configured, see consumers doc guide to learn more", "no timeout"),
			from("4.3.2", "", "406 PRECONDITION_FAILED - invalid arg 'x-consumer-timeout' for queue 'cq' in vhost '/' of queue type rabbit_classic_queue")),
	},
	{
		// The consumer's argument wins over the queue's. From 4.3 a
		// classic queue's consumer may not have one (from 4.3.2 the
		// queue may not either).
		name: "consumer x-consumer-timeout",
		run: func(t *testing.T, b *broker.Broker, ch *amqp091.Channel) string {
			if err := timeoutQueue(t, ch, "cq", amqp091.Table{"x-consumer-timeout": int32(600_000)}); err != nil {
				return outcome(err)
			}
			return consumeUntilTimeout(t, amqptest.Dial(t, b.URL(), amqp091.Config{}), "cq", amqp091.Table{"x-consumer-timeout": int64(200)})
		},
		want: from("4.3", "406 PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. Timeout value used: 200 ms. This timeout value can be configured, see consumers doc guide to learn more",
			"406 PRECONDITION_FAILED - invalid arg 'x-consumer-timeout' for queue 'cq' in vhost '/' of queue type rabbit_classic_queue"),
	},
	{
		// 4.3 quorum queues cancel the consumer (amqp091-go announces
		// consumer_cancel_notify) and return the message, not as a
		// failed delivery.
		name: "quorum queue x-consumer-timeout",
		run: func(t *testing.T, b *broker.Broker, ch *amqp091.Channel) string {
			require.NoError(t, timeoutQueue(t, ch, "qq", amqp091.Table{"x-queue-type": "quorum", "x-consumer-timeout": int32(200)}))
			return consumeUntilTimeout(t, amqptest.Dial(t, b.URL(), amqp091.Config{}), "qq", nil)
		},
		want: from("4.3", "406 PRECONDITION_FAILED - delivery acknowledgement on channel 1 timed out. Timeout value used: 200 ms. This timeout value can be configured, see consumers doc guide to learn more",
			"cancelled c1; redelivered=true dc=0 ac=1"),
	},
	{
		name: "x-consumer-timeout equivalence",
		run: func(t *testing.T, _ *broker.Broker, ch *amqp091.Channel) string {
			_, err := ch.QueueDeclare("qq", true, false, false, false, amqp091.Table{"x-queue-type": "quorum", "x-consumer-timeout": int32(1000)})
			require.NoError(t, err)
			_, err = ch.QueueDeclare("qq", true, false, false, false, amqp091.Table{"x-queue-type": "quorum", "x-consumer-timeout": int32(2000)})
			return outcome(err)
		},
		want: from("4.3.2", "ok", "406 PRECONDITION_FAILED - inequivalent arg 'x-consumer-timeout' for queue 'qq' in vhost '/': received '2000' but current is '1000'"),
	},
	{
		// Published in this order with these priorities (none: 0).
		name: "quorum message priorities",
		run: func(t *testing.T, _ *broker.Broker, ch *amqp091.Channel) string {
			_, err := ch.QueueDeclare("qq", true, false, false, false, quorum)
			require.NoError(t, err)
			for _, m := range []struct {
				body     string
				priority uint8
			}{{"a", 1}, {"b", 8}, {"c", 0}, {"d", 9}, {"e", 2}, {"f", 6}} {
				amqptest.PublishMsg(t, ch, "", "qq", amqp091.Publishing{Body: []byte(m.body), Priority: m.priority})
			}
			return strings.Join(amqptest.GetAll(t, ch, "qq"), " ")
		},
		want: bySeries(map[string]string{"3.13": "a b c d e f", "4.0": "b d a f c e", "4.1": "b d a f c e", "4.2": "b d a f c e", "4.3": "d b f e a c", "4.4": "d b f e a c"}),
	},
	{
		// A rejected message is held for x-delayed-retry-min (4.3).
		name: "quorum delayed retry",
		run: func(t *testing.T, _ *broker.Broker, ch *amqp091.Channel) string {
			_, err := ch.QueueDeclare("qq", true, false, false, false, amqp091.Table{
				"x-queue-type": "quorum", "x-delayed-retry-type": "all", "x-delayed-retry-min": int32(300), "x-delayed-retry-max": int32(5000),
			})
			require.NoError(t, err)
			amqptest.Publish(t, ch, "", "qq", "m")
			require.NoError(t, amqptest.Get(t, ch, "qq", false).Reject(true))
			if _, ok, err := ch.Get("qq", true); err != nil || ok {
				return fmt.Sprintf("ready at once (err %v)", err)
			}
			start := time.Now()
			amqptest.Poll(t, func() bool {
				_, ok, err := ch.Get("qq", true)
				return err == nil && ok
			}, "the held message comes back")
			return fmt.Sprintf("held, back after 300 ms: %v", time.Since(start) >= 250*time.Millisecond)
		},
		want: from("4.3", "ready at once (err <nil>)", "held, back after 300 ms: true"),
	},
	{
		name: "x-delayed-retry-type refused",
		run:  declareOutcome("qq", true, false, false, amqp091.Table{"x-queue-type": "quorum", "x-delayed-retry-type": "sometimes"}),
		want: from("4.3", "ok", "406 PRECONDITION_FAILED - invalid arg 'x-delayed-retry-type' for queue 'qq' in vhost '/': unknown delayed retry type 'sometimes'"),
	},
	{
		// A client republishes a dead letter with the x-death it received
		// (count 5) and an x-first-death-queue of its own; a reject
		// dead-letters it again. 3.13 counts the client's x-death (6,
		// the first death stays "elsewhere"); 4.x does not interpret it:
		// the broker's own history starts anew and replaces both.
		name: "client-published x-death",
		run: func(t *testing.T, _ *broker.Broker, ch *amqp091.Channel) string {
			deadLetterPair(t, ch)
			amqptest.PublishMsg(t, ch, "", "src", amqp091.Publishing{Body: []byte("m"), Headers: amqp091.Table{
				"x-death": []any{amqp091.Table{"queue": "src", "reason": "rejected", "count": int64(5),
					"exchange": "", "routing-keys": []any{"src"}, "time": time.Unix(1_700_000_000, 0)}},
				"x-first-death-queue": "elsewhere", "x-first-death-reason": "expired",
			}})
			require.NoError(t, amqptest.Get(t, ch, "src", false).Reject(false))
			return deathSummary(pollGet(t, ch, "dlq").Headers)
		},
		want: from("4.0", "src/rejected=6 of 1; first elsewhere/expired; last src/rejected",
			"src/rejected=1 of 1; first src/rejected; last src/rejected"),
	},
	{
		// The broker's own x-death is interpreted in every profile: a
		// message rejected, expired back from dlq and rejected again has
		// died twice in src.
		name: "broker-made x-death",
		run: func(t *testing.T, _ *broker.Broker, ch *amqp091.Channel) string {
			deadLetterPair(t, ch)
			amqptest.Publish(t, ch, "", "src", "m")
			require.NoError(t, amqptest.Get(t, ch, "src", false).Reject(false))
			require.NoError(t, pollGet(t, ch, "src").Reject(false)) // back from dlq
			return deathSummary(pollGet(t, ch, "dlq").Headers)
		},
		want: same("src/rejected=2 of 2; first src/rejected; last src/rejected"),
	},
	{
		// A mandatory reply to a requester that is gone.
		name: "direct reply-to mandatory, requester gone",
		run: func(t *testing.T, b *broker.Broker, responder *amqp091.Channel) string {
			conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
			requester := amqptest.Channel(t, conn)
			_, err := responder.QueueDeclare("rpc", false, true, true, false, nil)
			require.NoError(t, err)
			requests, err := responder.Consume("rpc", "", true, false, false, false, nil)
			require.NoError(t, err)
			require.NoError(t, responder.Confirm(false))
			confirms := responder.NotifyPublish(make(chan amqp091.Confirmation, 1))
			returns := responder.NotifyReturn(make(chan amqp091.Return, 1))
			_, err = requester.Consume(replyQueue, "", true, false, false, false, nil)
			require.NoError(t, err)
			req := requestReply(t, requester, requests, "a")
			require.NoError(t, requester.Close())
			r, returned := replyConfirmed(t, responder, confirms, returns, req.ReplyTo, "a")
			if returned {
				return fmt.Sprintf("returned %d %s", r.ReplyCode, r.ReplyText)
			}
			return "routed"
		},
		want: from("4.2", "returned 312 NO_ROUTE", "routed"),
	},
}

// merge is a with b's non-empty answers over it.
func merge(a, b map[string]string) map[string]string {
	out := maps.Clone(a)
	for v, want := range b {
		if want != "" {
			out[v] = want
		}
	}
	return out
}

// deadLetterPair declares src, dead-lettering to dlq, and dlq, whose
// messages expire after 100 ms back to src.
func deadLetterPair(t *testing.T, ch *amqp091.Channel) {
	t.Helper()
	for name, args := range map[string]amqp091.Table{
		"src": {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dlq"},
		"dlq": {"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "src", "x-message-ttl": int32(100)},
	} {
		_, err := ch.QueueDeclare(name, true, false, false, false, args)
		require.NoError(t, err)
	}
}

// pollGet gets a message from q (manual ack), polling until one arrives:
// a dead-lettered copy reaches its queue after the reject's reply.
func pollGet(t *testing.T, ch *amqp091.Channel, q string) amqp091.Delivery {
	t.Helper()
	var d amqp091.Delivery
	amqptest.Poll(t, func() bool {
		var ok bool
		var err error
		d, ok, err = ch.Get(q, false)
		require.NoError(t, err)
		return ok
	}, "no message reached %s", q)
	return d
}

// deathSummary renders a dead letter's src/rejected x-death count, the
// number of x-death entries and its first and last death headers.
func deathSummary(h amqp091.Table) string {
	deaths, _ := h["x-death"].([]any)
	count := any(nil)
	for _, e := range deaths {
		if d, ok := e.(amqp091.Table); ok && d["queue"] == "src" && d["reason"] == "rejected" {
			count = d["count"]
		}
	}
	return fmt.Sprintf("src/rejected=%v of %d; first %v/%v; last %v/%v", count, len(deaths),
		h["x-first-death-queue"], h["x-first-death-reason"], h["x-last-death-queue"], h["x-last-death-reason"])
}

// TestRabbitMQVersionProfiles runs the same client scenarios against a
// broker of each RabbitMQ version profile and checks each profile's
// answers: reply codes and texts, headers, what stays in the queue.
func TestRabbitMQVersionProfiles(t *testing.T) {
	for _, sc := range slices.Concat(profileScenarios, releaseScenarios) {
		t.Run(sc.name, func(t *testing.T) {
			for _, v := range profileVersions {
				t.Run(v, func(t *testing.T) {
					// A short scan interval, for the consumer timeout rows.
					b := startBroker(t, broker.Options{RabbitMQVersion: v, ScanInterval: 50 * time.Millisecond})
					conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
					ch := amqptest.ConfirmChannel(t, conn)
					require.Equal(t, sc.want[v], sc.run(t, b, ch))
				})
			}
		})
	}
}

// TestRabbitMQVersionOption: "" is 3.13, a series is its newest release,
// a patch release is itself (the answers of the newest release of its
// series at or before it), anything else is refused by New.
func TestRabbitMQVersionOption(t *testing.T) {
	for _, tc := range []struct{ in, version, err string }{
		{"", "3.13.7", ""},
		{"4.1.3", "4.1.3", ""},
		{"4.3", "4.3.5", ""},
		{"4.3.4", "4.3.4", ""},
		{"4.4", "4.4.1", ""},
		{"4.4.0", "4.4.0", ""},
		{"3.12", "", `broker: Options.RabbitMQVersion: compat: unknown RabbitMQ version "3.12" (supported: 3.13, 4.0, 4.1, 4.2, 4.3, 4.4, or a release of one such as 4.3.2)`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if tc.err != "" {
				_, err := broker.New(broker.Options{RabbitMQVersion: tc.in})
				require.EqualError(t, err, tc.err)
				return
			}
			b := startBroker(t, broker.Options{RabbitMQVersion: tc.in})
			conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
			require.Equal(t, tc.version, conn.Properties["version"])
		})
	}
}

package broker_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/amqptest"
)

// The rows of the version profiles' table that came with the patch
// releases of 4.2 and 4.3, the x-local-random exchange and 4.4
// (docs/rabbitmq-versions.md says where each comes from). They run in
// TestRabbitMQVersionProfiles with the others.

// only is yes for the releases named and no for every other profile.
func only(yes, no string, releases ...string) map[string]string {
	m := make(map[string]string, len(profileVersions))
	for _, v := range profileVersions {
		m[v] = no
		if slices.Contains(releases, v) {
			m[v] = yes
		}
	}
	return m
}

// attempts runs each step on a channel of its own of conn (a refusal
// closes the channel) and renders their outcomes in order.
func attempts(t *testing.T, conn *amqp091.Connection, steps ...func(*amqp091.Channel) error) string {
	t.Helper()
	out := make([]string, len(steps))
	for i, step := range steps {
		out[i] = outcome(step(amqptest.Channel(t, conn)))
	}
	return strings.Join(out, "; ")
}

// localRandomCounts publishes n messages through the x-local-random
// exchange lr and reports how many reached each queue.
func localRandomCounts(t *testing.T, ch *amqp091.Channel, queues []string, n int) string {
	for i := range n {
		amqptest.Publish(t, ch, "lr", fmt.Sprint("key-", i), "m") // confirmed
	}
	total, empty := 0, 0
	for _, q := range queues {
		st, err := ch.QueueDeclarePassive(q, true, false, false, false, nil)
		require.NoError(t, err)
		total += st.Messages
		if st.Messages == 0 {
			empty++
		}
	}
	return fmt.Sprintf("%d messages, %d in the queues, %d queues without any", n, total, empty)
}

const passiveUser, passivePassword = "passive", "passive-pw"

var releaseScenarios = []profileScenario{
	{
		name: "x-local-random declare",
		run: func(_ *testing.T, _ *broker.Broker, ch *amqp091.Channel) string {
			return outcome(ch.ExchangeDeclare("lr", "x-local-random", true, false, false, false, nil))
		},
		want: from("4.0", "406 PRECONDITION_FAILED - unknown exchange type 'x-local-random'", "ok"),
	},
	{
		// Three classic queues on one node: every message reaches one
		// of them, whatever its routing key, and each is picked (300
		// picks of 3 leave one out with a probability of 1e-52).
		name: "x-local-random routes to one local queue",
		run: func(t *testing.T, _ *broker.Broker, ch *amqp091.Channel) string {
			if err := ch.ExchangeDeclare("lr", "x-local-random", true, false, false, false, nil); err != nil {
				return outcome(err)
			}
			queues := []string{"a", "b", "c"}
			for _, q := range queues {
				amqptest.DeclareQueue(t, ch, q, true)
				require.NoError(t, ch.QueueBind(q, "", "lr", false, nil))
			}
			return localRandomCounts(t, ch, queues, 300)
		},
		want: from("4.0", "406 PRECONDITION_FAILED - unknown exchange type 'x-local-random'",
			"300 messages, 300 in the queues, 0 queues without any"),
	},
	{
		name: "x-local-random binding rules",
		run: func(t *testing.T, b *broker.Broker, ch *amqp091.Channel) string {
			if err := ch.ExchangeDeclare("lr", "x-local-random", true, false, false, false, nil); err != nil {
				return outcome(err)
			}
			amqptest.DeclareQueue(t, ch, "cq", true)
			_, err := ch.QueueDeclare("qq", true, false, false, false, quorum)
			require.NoError(t, err)
			require.NoError(t, ch.ExchangeDeclare("fx", "fanout", true, false, false, false, nil))
			return attempts(t, amqptest.Dial(t, b.URL(), amqp091.Config{}),
				func(c *amqp091.Channel) error { return c.QueueBind("cq", "k", "lr", false, nil) },
				func(c *amqp091.Channel) error { return c.QueueBind("qq", "", "lr", false, nil) },
				func(c *amqp091.Channel) error { return c.ExchangeBind("fx", "", "lr", false, nil) },
				func(c *amqp091.Channel) error { return c.QueueBind("cq", "", "lr", false, nil) },
				// As a destination it is any exchange's.
				func(c *amqp091.Channel) error { return c.ExchangeBind("lr", "any", "amq.direct", false, nil) },
			)
		},
		want: from("4.0", "406 PRECONDITION_FAILED - unknown exchange type 'x-local-random'",
			"406 PRECONDITION_FAILED - Non empty binding 'k' key not permitted; "+
				"406 PRECONDITION_FAILED - Queue type rabbit_quorum_queue not valid for this exchange type; "+
				"406 PRECONDITION_FAILED - Destination not found; ok; ok"),
	},
	{
		name: "x-local-random mandatory, nothing bound",
		run: func(t *testing.T, _ *broker.Broker, ch *amqp091.Channel) string {
			if err := ch.ExchangeDeclare("lr", "x-local-random", false, true, false, false, nil); err != nil {
				return outcome(err)
			}
			returns := ch.NotifyReturn(make(chan amqp091.Return, 1))
			require.NoError(t, ch.PublishWithContext(t.Context(), "lr", "k", true, false, amqp091.Publishing{Body: []byte("m")}))
			r, ok := amqptest.Receive(t, returns)
			require.True(t, ok)
			return fmt.Sprintf("returned %d %s", r.ReplyCode, r.ReplyText)
		},
		want: from("4.0", "406 PRECONDITION_FAILED - unknown exchange type 'x-local-random'", "returned 312 NO_ROUTE"),
	},
	{
		name: "api overview lists x-local-random",
		run: func(t *testing.T, b *broker.Broker, _ *amqp091.Channel) string {
			api := amqptest.NewAPI(t, b.ManagementHandler())
			for _, x := range api.Get("/api/overview").(map[string]any)["exchange_types"].([]any) {
				if x.(map[string]any)["name"] == "x-local-random" {
					return "listed"
				}
			}
			return "not listed"
		},
		want: from("4.0", "not listed", "listed"),
	},
	{
		// A user who may read q and x, and nothing else, declares them
		// and "other" passively.
		name: "passive declare permissions",
		run: func(t *testing.T, b *broker.Broker, ch *amqp091.Channel) string {
			ctx := t.Context()
			amqptest.DeclareQueue(t, ch, "q", true)
			amqptest.DeclareQueue(t, ch, "other", true)
			require.NoError(t, ch.ExchangeDeclare("x", "fanout", true, false, false, false, nil))
			require.NoError(t, b.Admin().PutUser(ctx, broker.User{Name: passiveUser, Password: passivePassword}))
			require.NoError(t, b.Admin().PutPermission(ctx, broker.Permission{User: passiveUser, VHost: "/", Configure: "^$", Write: "^$", Read: "^(q|x)$"}))
			conn := amqptest.Dial(t, amqptest.UserURL(b.URL(), passiveUser, passivePassword), amqp091.Config{})
			return attempts(t, conn,
				func(c *amqp091.Channel) error {
					_, err := c.QueueDeclarePassive("q", true, false, false, false, nil)
					return err
				},
				func(c *amqp091.Channel) error {
					_, err := c.QueueDeclarePassive("other", true, false, false, false, nil)
					return err
				},
				func(c *amqp091.Channel) error {
					return c.ExchangeDeclarePassive("x", "fanout", true, false, false, false, nil)
				},
			)
		},
		want: map[string]string{
			"3.13.7": "ok; ok; ok", "4.0.0": "ok; ok; ok", "4.1.0": "ok; ok; ok", "4.2.0": "ok; ok; ok",
			"4.2.6": "403 ACCESS_REFUSED - access to queue 'q' in vhost '/' refused for user 'passive'; " +
				"403 ACCESS_REFUSED - access to queue 'other' in vhost '/' refused for user 'passive'; " +
				"403 ACCESS_REFUSED - access to exchange 'x' in vhost '/' refused for user 'passive'",
			"4.2.7": "ok; 403 ACCESS_REFUSED - access to queue 'other' in vhost '/' refused for user 'passive'; ok",
			"4.2.9": "ok; 403 ACCESS_REFUSED - access to queue 'other' in vhost '/' refused for user 'passive'; ok",
			"4.3.0": "403 ACCESS_REFUSED - access to queue 'q' in vhost '/' refused for user 'passive'; " +
				"403 ACCESS_REFUSED - access to queue 'other' in vhost '/' refused for user 'passive'; " +
				"403 ACCESS_REFUSED - access to exchange 'x' in vhost '/' refused for user 'passive'",
			"4.3.1": "ok; 403 ACCESS_REFUSED - access to queue 'other' in vhost '/' refused for user 'passive'; ok",
			"4.3.2": "ok; 403 ACCESS_REFUSED - access to queue 'other' in vhost '/' refused for user 'passive'; ok",
			"4.3.3": "ok; 403 ACCESS_REFUSED - access to queue 'other' in vhost '/' refused for user 'passive'; ok",
			"4.3.5": "ok; 403 ACCESS_REFUSED - access to queue 'other' in vhost '/' refused for user 'passive'; ok",
			"4.4.0": "ok; 403 ACCESS_REFUSED - access to queue 'other' in vhost '/' refused for user 'passive'; ok",
			"4.4.1": "ok; 403 ACCESS_REFUSED - access to queue 'other' in vhost '/' refused for user 'passive'; ok",
		},
	},
	{
		name: "topic binding key with three '#'",
		run: func(t *testing.T, b *broker.Broker, ch *amqp091.Channel) string {
			amqptest.DeclareQueue(t, ch, "q", true)
			return attempts(t, amqptest.Dial(t, b.URL(), amqp091.Config{}),
				func(c *amqp091.Channel) error { return c.QueueBind("q", "#.a.#", "amq.topic", false, nil) },
				func(c *amqp091.Channel) error { return c.QueueBind("q", "#.#.a.#", "amq.topic", false, nil) },
				func(c *amqp091.Channel) error { return c.ExchangeBind("amq.fanout", "#.#.#", "amq.topic", false, nil) },
			)
		},
		want: only("ok; 406 PRECONDITION_FAILED - Topic binding key '#.#.a.#' uses 3 '#' wildcards, at most 2 are allowed; "+
			"406 PRECONDITION_FAILED - Topic binding key '#.#.#' uses 3 '#' wildcards, at most 2 are allowed",
			"ok; ok; ok", "4.3.5", "4.4.0", "4.4.1"),
	},
	{
		// From 4.3.2 x-consumer-timeout is a quorum queue's argument:
		// a classic queue or a stream refuses it, a quorum queue wants
		// a non-negative integer.
		name: "x-consumer-timeout as a queue argument",
		run: func(t *testing.T, b *broker.Broker, _ *amqp091.Channel) string {
			declare := func(name string, args amqp091.Table) func(*amqp091.Channel) error {
				return func(c *amqp091.Channel) error {
					_, err := c.QueueDeclare(name, true, false, false, false, args)
					return err
				}
			}
			return attempts(t, amqptest.Dial(t, b.URL(), amqp091.Config{}),
				declare("cq", amqp091.Table{"x-consumer-timeout": int32(1000)}),
				declare("sq", amqp091.Table{"x-queue-type": "stream", "x-consumer-timeout": int32(1000)}),
				declare("qq1", amqp091.Table{"x-queue-type": "quorum", "x-consumer-timeout": "soon"}),
				declare("qq2", amqp091.Table{"x-queue-type": "quorum", "x-consumer-timeout": int64(-1)}),
				declare("qq3", amqp091.Table{"x-queue-type": "quorum", "x-consumer-timeout": int32(0)}),
			)
		},
		want: only("406 PRECONDITION_FAILED - invalid arg 'x-consumer-timeout' for queue 'cq' in vhost '/' of queue type rabbit_classic_queue; "+
			"406 PRECONDITION_FAILED - invalid arg 'x-consumer-timeout' for queue 'sq' in vhost '/' of queue type rabbit_stream_queue; "+
			"406 PRECONDITION_FAILED - invalid arg 'x-consumer-timeout' for queue 'qq1' in vhost '/': unacceptable type longstr; "+
			"406 PRECONDITION_FAILED - invalid arg 'x-consumer-timeout' for queue 'qq2' in vhost '/': value -1 is negative; ok",
			"ok; ok; ok; ok; ok", "4.3.2", "4.3.3", "4.3.5", "4.4.0", "4.4.1"),
	},
	{
		// From 4.3.0 x-consumer-timeout is a quorum queue's consumer
		// argument only; from 4.3.2 a non-negative integer.
		name: "x-consumer-timeout as a consumer argument",
		run: func(t *testing.T, b *broker.Broker, ch *amqp091.Channel) string {
			amqptest.DeclareQueue(t, ch, "cq", true)
			_, err := ch.QueueDeclare("qq", true, false, false, false, quorum)
			require.NoError(t, err)
			consume := func(q string, v any) func(*amqp091.Channel) error {
				return func(c *amqp091.Channel) error {
					_, err := c.Consume(q, "", false, false, false, false, amqp091.Table{"x-consumer-timeout": v})
					return err
				}
			}
			return attempts(t, amqptest.Dial(t, b.URL(), amqp091.Config{}), consume("cq", int32(60_000)), consume("qq", "soon"), consume("qq", int32(60_000)))
		},
		want: map[string]string{
			"3.13.7": "ok; ok; ok", "4.0.0": "ok; ok; ok", "4.1.0": "ok; ok; ok", "4.2.0": "ok; ok; ok",
			"4.2.6": "ok; ok; ok", "4.2.7": "ok; ok; ok", "4.2.9": "ok; ok; ok",
			"4.3.0": "406 PRECONDITION_FAILED - invalid arg 'x-consumer-timeout' for queue 'cq' in vhost '/' of queue type rabbit_classic_queue; ok; ok",
			"4.3.1": "406 PRECONDITION_FAILED - invalid arg 'x-consumer-timeout' for queue 'cq' in vhost '/' of queue type rabbit_classic_queue; ok; ok",
			"4.3.2": consumerArgRefusals, "4.3.3": consumerArgRefusals, "4.3.5": consumerArgRefusals,
			"4.4.0": consumerArgRefusals, "4.4.1": consumerArgRefusals,
		},
	},
	{
		// GET /api/definitions with an exclusive queue bound to
		// amq.fanout: the queue is never exported, its binding by the
		// streamed export of 4.2.9 and 4.3.3 to 4.4.0.
		name: "definitions export, binding to an exclusive queue",
		run: func(t *testing.T, b *broker.Broker, ch *amqp091.Channel) string {
			_, err := ch.QueueDeclare("excl", false, false, true, false, nil)
			require.NoError(t, err)
			require.NoError(t, ch.QueueBind("excl", "", "amq.fanout", false, nil))
			d := amqptest.NewAPI(t, b.ManagementHandler()).Get("/api/definitions").(map[string]any)
			var queues, bindings []string
			for _, q := range d["queues"].([]any) {
				queues = append(queues, q.(map[string]any)["name"].(string))
			}
			for _, bd := range d["bindings"].([]any) {
				bd := bd.(map[string]any)
				bindings = append(bindings, fmt.Sprint(bd["source"], "->", bd["destination"]))
			}
			return fmt.Sprintf("queues %v, bindings %v", queues, bindings)
		},
		want: only("queues [], bindings [amq.fanout->excl]", "queues [], bindings []", "4.2.9", "4.3.3", "4.3.5", "4.4.0"),
	},
	{
		// POST /api/definitions of a file as RabbitMQ before 4.4.1
		// exports it: a server-named queue with a binding, beside a
		// named one. Every release skips the amq.* queue; before 4.4.1
		// its binding then fails the import (Warren checks first and
		// applies nothing), 4.4.1 skips it too.
		name: "definitions import, binding to an amq.* queue",
		run: func(t *testing.T, b *broker.Broker, _ *amqp091.Channel) string {
			file := map[string]any{
				"queues": []map[string]any{
					{"name": "amq.gen-abc", "vhost": "/", "durable": true, "auto_delete": false, "arguments": map[string]any{}},
					{"name": "kept", "vhost": "/", "durable": true, "auto_delete": false, "arguments": map[string]any{}},
				},
				"bindings": []map[string]any{
					{"source": "amq.fanout", "vhost": "/", "destination": "amq.gen-abc", "destination_type": "queue", "routing_key": "", "arguments": map[string]any{}},
					{"source": "amq.fanout", "vhost": "/", "destination": "kept", "destination_type": "queue", "routing_key": "", "arguments": map[string]any{}},
				},
			}
			api := amqptest.NewAPI(t, b.ManagementHandler())
			status, _, body := api.Do("POST", "/api/definitions", "guest", file)
			if status != http.StatusNoContent {
				_, reason := amqptest.ErrorBody(t, body)
				return fmt.Sprintf("%d %s", status, reason)
			}
			conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
			return fmt.Sprintf("%d; kept %v, amq.gen-abc %v", status,
				amqptest.QueueExists(t, conn, "kept"), amqptest.QueueExists(t, conn, "amq.gen-abc"))
		},
		want: only("204; kept true, amq.gen-abc false",
			`400 broker: definitions: binding "amq.fanout" -> "amq.gen-abc": no queue "amq.gen-abc"`, "4.4.1"),
	},
	{
		// RabbitMQ up to 4.3 reads these headers (and 4.4 no longer
		// does) only when it converts a message to AMQP 1.0: for a
		// stream, or an AMQP 1.0 client. Warren stores and delivers AMQP
		// 0-9-1 messages as published, in every profile: 4.4's answer.
		name: "x-amqp-1.0-* and x-basic-* headers through a stream",
		run: func(t *testing.T, b *broker.Broker, ch *amqp091.Channel) string {
			declareStream(t, ch, "s", nil)
			// An AMQP 1.0 properties section whose message-id is "other".
			section := []byte{0x00, 0x53, 0x73, 0xc0, 0x08, 0x01, 0xa1, 0x05, 'o', 't', 'h', 'e', 'r'}
			amqptest.PublishMsg(t, ch, "", "s", amqp091.Publishing{Body: []byte("m"), MessageId: "m1", Headers: amqp091.Table{
				"x-amqp-1.0-properties": section, "x-basic-priority": int32(7), "x-basic-expiration": "60000",
			}})
			_, ds := streamReader(t, amqptest.Dial(t, b.URL(), amqp091.Config{}), "s", 1, amqp091.Table{"x-stream-offset": "first"})
			d := amqptest.Next(t, ds)
			return fmt.Sprintf("message-id %s, priority %d, expiration %q, properties header kept %v, x-basic-priority %v, x-basic-expiration %v",
				d.MessageId, d.Priority, d.Expiration, string(asBytes(d.Headers["x-amqp-1.0-properties"])) == string(section),
				d.Headers["x-basic-priority"], d.Headers["x-basic-expiration"])
		},
		want: same(`message-id m1, priority 0, expiration "", properties header kept true, x-basic-priority 7, x-basic-expiration 60000`),
	},
}

// consumerArgRefusals is the consumer argument row's answer from 4.3.2.
const consumerArgRefusals = "406 PRECONDITION_FAILED - invalid arg 'x-consumer-timeout' for queue 'cq' in vhost '/' of queue type rabbit_classic_queue; " +
	"406 PRECONDITION_FAILED - invalid arg 'x-consumer-timeout' for queue 'qq' in vhost '/': unacceptable type longstr; ok"

// asBytes is a header's value as bytes, whether it came back as a byte
// array or a long string.
func asBytes(v any) []byte {
	switch v := v.(type) {
	case []byte:
		return v
	case string:
		return []byte(v)
	}
	return nil
}

package broker_test

import (
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
)

// TestTopologyChannelErrors drives every topology rule whose violation
// closes the channel, through amqp091-go, and requires RabbitMQ's reply code
// and the words of its reply text. Every case runs on a fresh channel of one
// connection; afterwards the connection must still be open and serving.
// Errors of asynchronous methods (basic.publish, nowait) arrive as a
// server-sent channel.close.
func TestTopologyChannelErrors(t *testing.T) {
	_, conn := setup(t)

	// Fixtures the cases run against; no case changes them.
	set := amqptest.ConfirmChannel(t, conn)
	for _, x := range []struct {
		name, kind                  string
		durable, autoDelete, intern bool
		args                        amqp091.Table
	}{
		{name: "x.direct", kind: "direct"},
		{name: "x.durable", kind: "topic", durable: true},
		{name: "x.internal", kind: "fanout", intern: true},
		{name: "x.ae", kind: "fanout", args: amqp091.Table{"alternate-exchange": "x.direct"}},
		{name: "x.bound", kind: "direct"},
	} {
		require.NoError(t, set.ExchangeDeclare(x.name, x.kind, x.durable, x.autoDelete, x.intern, false, x.args))
	}
	for _, q := range []struct {
		name                string
		durable, autoDelete bool
		args                amqp091.Table
	}{
		{name: "q.plain"},
		{name: "q.durable", durable: true},
		{name: "q.args", args: amqp091.Table{"x-message-ttl": int32(1000), "x-max-length": int64(10)}},
		{name: "q.busy"},
		{name: "q.full"},
	} {
		_, err := set.QueueDeclare(q.name, q.durable, q.autoDelete, false, false, q.args)
		require.NoError(t, err)
	}
	require.NoError(t, set.QueueBind("q.plain", "k", "x.bound", false, nil))
	_, err := set.Consume("q.busy", "busy", false, false, false, false, nil)
	require.NoError(t, err)
	amqptest.Publish(t, set, "", "q.full", "one")
	amqptest.Publish(t, set, "", "q.full", "two")

	type op = func(ch *amqp091.Channel) error
	cases := []struct {
		name  string
		op    op
		code  int
		texts []string
	}{
		// passive
		{"passive exchange.declare of a missing exchange", func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclarePassive("nope", "direct", false, false, false, false, nil)
		}, 404, []string{"NOT_FOUND - no exchange 'nope' in vhost '/'"}},
		{"passive queue.declare of a missing queue", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclarePassive("nope", false, false, false, false, nil)
			return err
		}, 404, []string{"NOT_FOUND - no queue 'nope' in vhost '/'"}},
		{"passive exchange.declare of the default exchange", func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclarePassive("", "direct", false, false, false, false, nil)
		}, 403, []string{"ACCESS_REFUSED - operation not permitted on the default exchange"}},

		// redeclare with different properties or arguments
		{"queue redeclared durable", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclare("q.plain", true, false, false, false, nil)
			return err
		}, 406, []string{"PRECONDITION_FAILED - inequivalent arg 'durable' for queue 'q.plain' in vhost '/': received 'true' but current is 'false'"}},
		{"queue redeclared non-durable", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclare("q.durable", false, false, false, false, nil)
			return err
		}, 406, []string{"inequivalent arg 'durable'", "received 'false' but current is 'true'"}},
		{"queue redeclared auto-delete", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclare("q.plain", false, true, false, false, nil)
			return err
		}, 406, []string{"inequivalent arg 'auto_delete' for queue 'q.plain'"}},
		{"queue redeclared with another argument value", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclare("q.args", false, false, false, false, amqp091.Table{"x-message-ttl": int32(2000), "x-max-length": int64(10)})
			return err
		}, 406, []string{"inequivalent arg 'x-message-ttl' for queue 'q.args' in vhost '/': received '2000' but current is '1000'"}},
		{"queue redeclared without an argument", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclare("q.args", false, false, false, false, amqp091.Table{"x-message-ttl": int32(1000)})
			return err
		}, 406, []string{"inequivalent arg 'x-max-length'", "received none but current is the value '10' of type 'long'"}},
		{"queue redeclared with an extra argument", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclare("q.plain", false, false, false, false, amqp091.Table{"x-expires": int32(60000)})
			return err
		}, 406, []string{"inequivalent arg 'x-expires'", "received the value '60000' of type 'signedint' but current is none"}},
		{"exchange redeclared with another type", func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("x.direct", "fanout", false, false, false, false, nil)
		}, 406, []string{"PRECONDITION_FAILED - inequivalent arg 'type' for exchange 'x.direct' in vhost '/': received 'fanout' but current is 'direct'"}},
		{"exchange redeclared durable", func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("x.direct", "direct", true, false, false, false, nil)
		}, 406, []string{"inequivalent arg 'durable' for exchange 'x.direct'"}},
		{"exchange redeclared non-durable", func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("x.durable", "topic", false, false, false, false, nil)
		}, 406, []string{"inequivalent arg 'durable' for exchange 'x.durable'"}},
		{"exchange redeclared auto-delete", func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("x.direct", "direct", false, true, false, false, nil)
		}, 406, []string{"inequivalent arg 'auto_delete' for exchange 'x.direct'"}},
		{"exchange redeclared internal", func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("x.direct", "direct", false, false, true, false, nil)
		}, 406, []string{"inequivalent arg 'internal' for exchange 'x.direct'"}},
		{"exchange redeclared with another alternate-exchange", func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("x.ae", "fanout", false, false, false, false, amqp091.Table{"alternate-exchange": "other"})
		}, 406, []string{"inequivalent arg 'alternate-exchange' for exchange 'x.ae' in vhost '/': received 'other' but current is 'x.direct'"}},
		{"exchange redeclared without its alternate-exchange", func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("x.ae", "fanout", false, false, false, false, nil)
		}, 406, []string{"inequivalent arg 'alternate-exchange'", "received none but current is the value 'x.direct' of type 'longstr'"}},
		{"exchange redeclared with an alternate-exchange of another type", func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("x.ae", "fanout", false, false, false, false, amqp091.Table{"alternate-exchange": []byte("x.direct")})
		}, 406, []string{"inequivalent arg 'alternate-exchange'"}},
		{"predeclared exchange redeclared non-durable", func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("amq.direct", "direct", false, false, false, false, nil)
		}, 406, []string{"inequivalent arg 'durable' for exchange 'amq.direct'"}},

		// invalid arguments of a new entity
		{"alternate-exchange that is not a string", func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("x.bad-ae", "direct", false, false, false, false, amqp091.Table{"alternate-exchange": int32(1)})
		}, 406, []string{"invalid type", "'alternate-exchange'", "exchange 'x.bad-ae' in vhost '/'"}},
		{"alternate-exchange that is a byte array", func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("x.bytes-ae", "direct", false, false, false, false, amqp091.Table{"alternate-exchange": []byte("x.direct")})
		}, 406, []string{"PRECONDITION_FAILED - invalid type 'binary' for arg 'alternate-exchange' in exchange 'x.bytes-ae' in vhost '/'"}},
		{"x-dead-letter-exchange that is not a string", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclare("q.bad-dlx", false, false, false, false, amqp091.Table{"x-dead-letter-exchange": true})
			return err
		}, 406, []string{"invalid type", "'x-dead-letter-exchange'", "queue 'q.bad-dlx' in vhost '/'"}},

		{"headers binding with an unknown x-match", func(ch *amqp091.Channel) error {
			return ch.QueueBind("q.plain", "", "amq.headers", false, amqp091.Table{"x-match": "most"})
		}, 406, []string{"PRECONDITION_FAILED - invalid binding: x-match \"most\", expected all, any, all-with-x or any-with-x"}},

		// conditional deletes
		{"queue.delete if-unused of a queue with a consumer", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDelete("q.busy", true, false, false)
			return err
		}, 406, []string{"PRECONDITION_FAILED - queue 'q.busy' in vhost '/' in use"}},
		{"queue.delete if-empty of a queue with messages", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDelete("q.full", false, true, false)
			return err
		}, 406, []string{"PRECONDITION_FAILED - queue 'q.full' in vhost '/' not empty"}},
		{"exchange.delete if-unused of an exchange with a binding", func(ch *amqp091.Channel) error {
			return ch.ExchangeDelete("x.bound", true, false)
		}, 406, []string{"PRECONDITION_FAILED - exchange 'x.bound' in vhost '/' in use"}},

		// bindings with a missing end
		{"queue.bind to a missing exchange", func(ch *amqp091.Channel) error {
			return ch.QueueBind("q.plain", "k", "nope", false, nil)
		}, 404, []string{"no exchange 'nope' in vhost '/'"}},
		{"queue.bind of a missing queue", func(ch *amqp091.Channel) error {
			return ch.QueueBind("nope", "k", "x.direct", false, nil)
		}, 404, []string{"no queue 'nope' in vhost '/'"}},
		{"exchange.bind from a missing source", func(ch *amqp091.Channel) error {
			return ch.ExchangeBind("x.direct", "k", "nope", false, nil)
		}, 404, []string{"no exchange 'nope' in vhost '/'"}},
		{"exchange.bind to a missing destination", func(ch *amqp091.Channel) error {
			return ch.ExchangeBind("nope", "k", "x.direct", false, nil)
		}, 404, []string{"no exchange 'nope' in vhost '/'"}},

		// the default exchange
		{"exchange.declare of the default exchange", func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("", "direct", true, false, false, false, nil)
		}, 403, []string{"ACCESS_REFUSED - operation not permitted on the default exchange"}},
		{"exchange.delete of the default exchange", func(ch *amqp091.Channel) error {
			return ch.ExchangeDelete("", false, false)
		}, 403, []string{"operation not permitted on the default exchange"}},
		{"queue.bind to the default exchange", func(ch *amqp091.Channel) error {
			return ch.QueueBind("q.plain", "k", "", false, nil)
		}, 403, []string{"operation not permitted on the default exchange"}},
		{"queue.unbind from the default exchange", func(ch *amqp091.Channel) error {
			return ch.QueueUnbind("q.plain", "q.plain", "", nil)
		}, 403, []string{"operation not permitted on the default exchange"}},
		{"exchange.bind from the default exchange", func(ch *amqp091.Channel) error {
			return ch.ExchangeBind("x.direct", "k", "", false, nil)
		}, 403, []string{"operation not permitted on the default exchange"}},
		{"exchange.bind to the default exchange", func(ch *amqp091.Channel) error {
			return ch.ExchangeBind("", "k", "x.direct", false, nil)
		}, 403, []string{"operation not permitted on the default exchange"}},

		// reserved names
		{"exchange.declare of a new amq. exchange", func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("amq.custom", "direct", false, false, false, false, nil)
		}, 403, []string{"ACCESS_REFUSED - exchange name 'amq.custom' contains reserved prefix 'amq.*'"}},
		{"queue.declare of an amq. queue", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclare("amq.custom", false, false, false, false, nil)
			return err
		}, 403, []string{"ACCESS_REFUSED - queue name 'amq.custom' contains reserved prefix 'amq.*'"}},
		{"exchange.delete of a predeclared exchange", func(ch *amqp091.Channel) error {
			return ch.ExchangeDelete("amq.direct", false, false)
		}, 403, []string{"ACCESS_REFUSED - deletion of system exchange 'amq.direct' in vhost '/' not allowed"}},

		// publishing
		{"basic.publish to an internal exchange", func(ch *amqp091.Channel) error {
			return ch.Publish("x.internal", "k", false, false, amqp091.Publishing{Body: []byte("x")})
		}, 403, []string{"ACCESS_REFUSED - cannot publish to internal exchange 'x.internal' in vhost '/'"}},
		{"basic.publish to a missing exchange", func(ch *amqp091.Channel) error {
			return ch.Publish("nope", "k", false, false, amqp091.Publishing{Body: []byte("x")})
		}, 404, []string{"no exchange 'nope' in vhost '/'"}},

		// "" where the channel has declared no queue
		{"queue.declare passive of the last queue, none declared", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclarePassive("", false, false, false, false, nil)
			return err
		}, 404, []string{"NOT_FOUND - no previously declared queue"}},
		{"queue.bind of the last queue, none declared", func(ch *amqp091.Channel) error {
			return ch.QueueBind("", "k", "x.direct", false, nil)
		}, 404, []string{"no previously declared queue"}},
		{"queue.unbind of the last queue, none declared", func(ch *amqp091.Channel) error {
			return ch.QueueUnbind("", "k", "x.direct", nil)
		}, 404, []string{"no previously declared queue"}},
		{"queue.purge of the last queue, none declared", func(ch *amqp091.Channel) error {
			_, err := ch.QueuePurge("", false)
			return err
		}, 404, []string{"no previously declared queue"}},
		{"queue.delete of the last queue, none declared", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDelete("", false, false, false)
			return err
		}, 404, []string{"no previously declared queue"}},
		{"basic.consume of the last queue, none declared", func(ch *amqp091.Channel) error {
			_, err := ch.Consume("", "", false, false, false, false, nil)
			return err
		}, 404, []string{"no previously declared queue"}},
		{"basic.get of the last queue, none declared", func(ch *amqp091.Channel) error {
			_, _, err := ch.Get("", false)
			return err
		}, 404, []string{"no previously declared queue"}},

		// nowait: no reply, so the error closes the channel afterwards
		{"nowait queue.bind to a missing exchange", func(ch *amqp091.Channel) error {
			return ch.QueueBind("q.plain", "k", "nope", true, nil)
		}, 404, []string{"no exchange 'nope' in vhost '/'"}},
		{"nowait exchange.declare with another type", func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("x.direct", "topic", false, false, false, true, nil)
		}, 406, []string{"inequivalent arg 'type'"}},
		{"nowait queue.declare of an amq. queue", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclare("amq.nowait", false, false, false, true, nil)
			return err
		}, 403, []string{"reserved prefix 'amq.*'"}},
		{"nowait queue.delete if-empty of a queue with messages", func(ch *amqp091.Channel) error {
			_, err := ch.QueueDelete("q.full", false, true, true)
			return err
		}, 406, []string{"not empty"}},
		{"nowait exchange.delete of a predeclared exchange", func(ch *amqp091.Channel) error {
			return ch.ExchangeDelete("amq.fanout", false, true)
		}, 403, []string{"deletion of system exchange 'amq.fanout'"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ch := amqptest.Channel(t, conn)
			closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
			err := tc.op(ch)
			if err == nil {
				err = amqptest.AwaitClose(t, closed)
			}
			amqptest.RequireReply(t, err, tc.code, tc.texts...)
			require.False(t, conn.IsClosed(), "a channel error closed the connection")
			requireServes(t, conn)
		})
	}

	// The failed operations changed nothing.
	q, err := set.QueueDeclarePassive("q.full", false, false, false, false, nil)
	require.NoError(t, err)
	require.Equal(t, 2, q.Messages)
	q, err = set.QueueDeclarePassive("q.busy", false, false, false, false, nil)
	require.NoError(t, err)
	require.Equal(t, 1, q.Consumers)
	require.True(t, amqptest.ExchangeExists(t, conn, "amq.direct"))
	require.True(t, amqptest.ExchangeExists(t, conn, "x.bound"))
	require.False(t, amqptest.ExchangeExists(t, conn, "amq.custom"))
}

// TestTopologyUnknownExchangeTypeClosesChannel: 406 PRECONDITION_FAILED
// closes only the channel, as RabbitMQ 3.13.3 and every 4.x answer (3.10
// closed the connection with 503). The type is checked before anything
// else, so it applies to an existing exchange's name too.
func TestTopologyUnknownExchangeTypeClosesChannel(t *testing.T) {
	b, conn := setup(t)
	ch := amqptest.Channel(t, conn)
	require.NoError(t, ch.ExchangeDeclare("exists", "direct", false, false, false, false, nil))

	for _, name := range []string{"new", "exists"} {
		t.Run(name, func(t *testing.T) {
			conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
			ch := amqptest.Channel(t, conn)
			err := ch.ExchangeDeclare(name, "x-no-such-type", false, false, false, false, nil)
			amqptest.RequireReply(t, err, 406, "PRECONDITION_FAILED - unknown exchange type 'x-no-such-type'")
			require.False(t, conn.IsClosed(), "only the channel closes")

			// The connection and others are unaffected; the name was not taken.
			requireServes(t, conn)
			requireServes(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
		})
	}
	require.False(t, amqptest.ExchangeExists(t, conn, "new"))
	require.True(t, amqptest.ExchangeExists(t, conn, "exists"))
}

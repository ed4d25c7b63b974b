package broker

import (
	"context"
	"slices"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/meta"
)

// TestTopologySurvivesRestartOnPebble declares durable and non-durable
// exchanges, queues and bindings (and an exclusive durable queue) on a
// Pebble DataDir, closes the broker and opens a new one on the same
// directory: the durable ones are back with their properties and route
// through their restored bindings; the non-durable and exclusive ones are
// gone, bindings included. A second restart changes nothing.
func TestTopologySurvivesRestartOnPebble(t *testing.T) {
	amqptest.CheckGoroutines(t)
	dir := t.TempDir()

	b1 := startBroker(t, Options{DataDir: dir})
	conn := amqptest.Dial(t, b1.URL(), amqp091.Config{})
	ch := amqptest.ConfirmChannel(t, conn)

	type exchange struct {
		name, kind                  string
		durable, autoDelete, intern bool
		args                        amqp091.Table
	}
	durableExchanges := []exchange{
		{name: "d.topic", kind: "topic", durable: true},
		{name: "d.fanout", kind: "fanout", durable: true},
		{name: "d.ae", kind: "direct", durable: true, args: amqp091.Table{"alternate-exchange": "d.fanout"}},
		{name: "d.internal", kind: "direct", durable: true, intern: true},
		{name: "d.autodelete", kind: "direct", durable: true, autoDelete: true},
		{name: "d.headers", kind: "headers", durable: true},
	}
	for _, x := range append(durableExchanges, exchange{name: "t.direct", kind: "direct"}) {
		require.NoError(t, ch.ExchangeDeclare(x.name, x.kind, x.durable, x.autoDelete, x.intern, false, x.args), x.name)
	}
	dqArgs := amqp091.Table{"x-max-length": int32(100)}
	for _, q := range []struct {
		name               string
		durable, exclusive bool
		args               amqp091.Table
	}{
		{name: "d.q", durable: true, args: dqArgs},
		{name: "d.q2", durable: true},
		{name: "t.q"},
		{name: "x.q", durable: true, exclusive: true},
	} {
		_, err := ch.QueueDeclare(q.name, q.durable, false, q.exclusive, false, q.args)
		require.NoError(t, err, q.name)
	}

	durableBindings := []meta.Binding{
		{Source: "d.topic", Destination: "d.q", DestinationKind: meta.DestinationQueue, RoutingKey: "a.*"},
		{Source: "d.fanout", Destination: "d.topic", DestinationKind: meta.DestinationExchange, RoutingKey: ""},
		{Source: "amq.direct", Destination: "d.q", DestinationKind: meta.DestinationQueue, RoutingKey: "x"},
		{Source: "d.autodelete", Destination: "d.q2", DestinationKind: meta.DestinationQueue, RoutingKey: "k"},
		{Source: "d.internal", Destination: "d.q2", DestinationKind: meta.DestinationQueue, RoutingKey: "i"},
		{Source: "d.ae", Destination: "d.internal", DestinationKind: meta.DestinationExchange, RoutingKey: "i"},
	}
	bind := func(b meta.Binding, args amqp091.Table) {
		t.Helper()
		if b.DestinationKind == meta.DestinationExchange {
			require.NoError(t, ch.ExchangeBind(b.Destination, b.RoutingKey, b.Source, false, args))
			return
		}
		require.NoError(t, ch.QueueBind(b.Destination, b.RoutingKey, b.Source, false, args))
	}
	for _, b := range durableBindings {
		bind(b, nil)
	}
	headersArgs := amqp091.Table{"x-match": "any", "kind": "h"}
	bind(meta.Binding{Source: "d.headers", Destination: "d.q2", DestinationKind: meta.DestinationQueue}, headersArgs)
	// Bindings with a non-durable end are not durable.
	for _, b := range []meta.Binding{
		{Source: "d.topic", Destination: "t.q", DestinationKind: meta.DestinationQueue, RoutingKey: "a.*"},
		{Source: "t.direct", Destination: "d.q", DestinationKind: meta.DestinationQueue, RoutingKey: "k"},
		{Source: "d.fanout", Destination: "t.direct", DestinationKind: meta.DestinationExchange},
		{Source: "d.topic", Destination: "x.q", DestinationKind: meta.DestinationQueue, RoutingKey: "a.*"},
	} {
		bind(b, nil)
	}
	// A persistent message in a durable queue survives too (a transient
	// one does not: RabbitMQ drops it at restart).
	amqptest.PublishMsg(t, ch, "", "d.q", amqp091.Publishing{DeliveryMode: amqp091.Persistent, Body: []byte("persisted")})
	amqptest.PublishMsg(t, ch, "", "d.q", amqp091.Publishing{DeliveryMode: amqp091.Transient, Body: []byte("transient")})

	require.NoError(t, conn.Close())
	require.NoError(t, b1.Close())

	for restart := 1; restart <= 2; restart++ {
		b := startBroker(t, Options{DataDir: dir})
		conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
		ch := amqptest.ConfirmChannel(t, conn)

		for _, x := range durableExchanges {
			require.True(t, amqptest.ExchangeExists(t, conn, x.name), "restart %d: exchange %s", restart, x.name)
			// Back with the same properties: an identical redeclare passes,
			// a different one does not.
			require.NoError(t, ch.ExchangeDeclare(x.name, x.kind, x.durable, x.autoDelete, x.intern, false, x.args), x.name)
		}
		err := amqptest.Channel(t, conn).ExchangeDeclare("d.ae", "direct", true, false, false, false, nil)
		amqptest.RequireReply(t, err, 406, "inequivalent arg 'alternate-exchange'")
		for _, q := range []string{"d.q", "d.q2"} {
			require.True(t, amqptest.QueueExists(t, conn, q), "restart %d: queue %s", restart, q)
		}
		_, err = ch.QueueDeclare("d.q", true, false, false, false, dqArgs)
		require.NoError(t, err)
		_, err = amqptest.Channel(t, conn).QueueDeclare("d.q", true, false, false, false, amqp091.Table{"x-max-length": int32(200)})
		amqptest.RequireReply(t, err, 406, "inequivalent arg 'x-max-length'")

		require.False(t, amqptest.ExchangeExists(t, conn, "t.direct"), "non-durable exchange")
		require.False(t, amqptest.QueueExists(t, conn, "t.q"), "non-durable queue")
		require.False(t, amqptest.QueueExists(t, conn, "x.q"), "exclusive queue")

		if restart == 1 {
			require.Equal(t, []string{"persisted"}, amqptest.GetAll(t, ch, "d.q"))
		}

		// Routing works through the restored bindings, e2e and alternate
		// included, and through the restored internal exchange.
		for _, tc := range []struct {
			name, exchange, key string
			headers             amqp091.Table
			queue               string
		}{
			{"queue binding", "d.topic", "a.b", nil, "d.q"},
			{"exchange binding", "d.fanout", "a.c", nil, "d.q"},
			{"binding from a predeclared exchange", "amq.direct", "x", nil, "d.q"},
			{"auto-delete exchange", "d.autodelete", "k", nil, "d.q2"},
			{"headers binding arguments", "d.headers", "", amqp091.Table{"kind": "h"}, "d.q2"},
			{"exchange binding to an internal exchange", "d.ae", "i", nil, "d.q2"},
			{"alternate exchange", "d.ae", "a.unmatched", nil, "d.q"},
		} {
			amqptest.PublishMsg(t, ch, tc.exchange, tc.key, amqp091.Publishing{Headers: tc.headers, Body: []byte(tc.name)})
			require.Equal(t, []string{tc.name}, amqptest.GetAll(t, ch, tc.queue), "restart %d: %s", restart, tc.name)
		}

		// The non-durable bindings are gone even where both ends exist
		// again.
		_, err = ch.QueueDeclare("t.q", false, false, false, false, nil)
		require.NoError(t, err)
		amqptest.Publish(t, ch, "d.topic", "a.z", "only durable")
		require.Equal(t, []string{"only durable"}, amqptest.GetAll(t, ch, "d.q"))
		require.Empty(t, amqptest.GetAll(t, ch, "t.q"))
		_, err = ch.QueueDelete("t.q", false, false, false)
		require.NoError(t, err)

		// And the store holds exactly the durable bindings.
		stored, err := b.stores.Meta.ListBindings(context.Background(), "/")
		require.NoError(t, err)
		type key struct{ src, dst, kind, rk string }
		var got []key
		for _, sb := range stored {
			require.True(t, sb.Durable, "%+v", sb)
			got = append(got, key{sb.Source, sb.Destination, sb.DestinationKind, sb.RoutingKey})
		}
		want := []key{{"d.headers", "d.q2", meta.DestinationQueue, ""}}
		for _, db := range durableBindings {
			want = append(want, key{db.Source, db.Destination, db.DestinationKind, db.RoutingKey})
		}
		cmp := func(a, b key) int {
			return slices.Compare([]string{a.src, a.dst, a.kind, a.rk}, []string{b.src, b.dst, b.kind, b.rk})
		}
		slices.SortFunc(got, cmp)
		slices.SortFunc(want, cmp)
		require.Equal(t, want, got, "restart %d", restart)

		require.NoError(t, conn.Close())
		require.NoError(t, b.Close())
	}
}

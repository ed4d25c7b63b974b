package broker

import (
	"context"
	"encoding/json"
	"net"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
)

// noGuest is a broker whose only user is ops (password ops,
// administrator), serving TCP on loopback: RabbitMQ's advice for
// production, and what keeps links from logging in as guest.
func noGuest(t *testing.T) *Broker {
	t.Helper()
	return startBroker(t, Options{Users: []User{{Name: "ops", Password: "ops", Tags: []string{"administrator"}}}})
}

// TestLinksRunWithoutGuest: on a broker without guest, a shovel between
// two local queues written as RabbitMQ writes them ("amqp://", no user)
// moves its messages, and a federation link's local end republishes what
// the upstream sends; both log in as the internal user, which the
// connection listing shows as RabbitMQ shows its direct connections.
func TestLinksRunWithoutGuest(t *testing.T) {
	ctx := context.Background()
	b := noGuest(t)
	_, err := b.Admin().PutVHost(context.Background(), VHost{Name: "shop"})
	require.NoError(t, err)
	api := amqptest.NewAPI(t, b.ManagementHandler())
	conn := amqptest.DialVia(t, b.Dial, "ops", "test")
	ch := amqptest.ConfirmChannel(t, conn)
	amqptest.DeclareQueue(t, ch, "in", true)
	amqptest.PublishConfirmed(t, ch, "in", true, amqptest.Numbered("m", 20)...)

	// A shovel to a queue of another vhost: the internal user may open
	// any vhost (ops has no permission on shop).
	v, err := json.Marshal(map[string]any{"src-uri": "amqp://", "src-queue": "in", "dest-uri": "amqp:///shop", "dest-queue": "out",
		"src-delete-after": "queue-length"})
	require.NoError(t, err)
	_, err = b.Admin().PutParameter(ctx, Parameter{VHost: "/", Component: "shovel", Name: "move", Value: v})
	require.NoError(t, err)
	amqptest.Poll(t, func() bool { return len(b.shovels.Status("")) == 0 && queueDepth(b, "shop", "out") == 20 },
		"the shovel did not move 20 messages and delete itself")

	// A federated exchange whose upstream is another broker.
	up := startBroker(t, Options{})
	_, err = b.Admin().PutGlobalParameter(ctx, GlobalParameter{Name: "cluster_name", Value: json.RawMessage(`"down"`)})
	require.NoError(t, err)
	v, err = json.Marshal(map[string]any{"uri": up.URL(), "reconnect-delay": 1})
	require.NoError(t, err)
	_, err = b.Admin().PutParameter(ctx, Parameter{VHost: "/", Component: "federation-upstream", Name: "up", Value: v})
	require.NoError(t, err)
	require.NoError(t, b.Admin().PutPolicy(ctx, Policy{VHost: "/", Name: "fed", Pattern: `^fed$`, ApplyTo: "exchanges",
		Definition: map[string]any{"federation-upstream": "up"}}))
	require.NoError(t, ch.ExchangeDeclare("fed", "fanout", true, false, false, false, nil))
	amqptest.DeclareQueue(t, ch, "copies", true)
	require.NoError(t, ch.QueueBind("copies", "", "fed", false, nil))
	uconn := amqptest.Dial(t, up.URL(), amqp091.Config{})
	upAPI := amqptest.NewAPI(t, up.ManagementHandler())
	amqptest.Poll(t, func() bool {
		for _, bd := range upAPI.Get("/api/bindings/%2F").([]any) {
			if bd.(map[string]any)["source"] == "fed" {
				return true
			}
		}
		return false
	},
		"the link never bound its upstream exchange")
	require.True(t, amqptest.QueueExists(t, uconn, "federation: fed -> down"))
	uch := amqptest.ConfirmChannel(t, uconn)
	amqptest.PublishMsg(t, uch, "fed", "", amqp091.Publishing{Body: []byte("hello"), UserId: "guest"})
	amqptest.Poll(t, func() bool { return queueDepth(b, "/", "copies") == 1 }, "nothing federated")

	status, _, body := api.Do("GET", "/api/connections", "ops", nil)
	require.Equal(t, 200, status, "%s", body)
	var conns []map[string]any
	require.NoError(t, json.Unmarshal(body, &conns))
	var local map[string]any
	for _, c := range conns {
		if c["user_provided_name"] == "Federation link (upstream: up, policy: fed)" {
			local = c
		}
	}
	require.NotNil(t, local, "the link's local connection is not listed")
	require.Equal(t, "none", local["user"])
	require.Equal(t, "direct", local["type"])
	require.Equal(t, "Direct 0-9-1", local["protocol"])
}

// queueDepth is the ready count of queue in vhost, -1 when it is missing.
func queueDepth(b *Broker, vhost, queue string) int {
	vh, ok := b.lookupVHost(vhost)
	if !ok {
		return -1
	}
	q, ok := vh.LookupQueue(queue)
	if !ok {
		return -1
	}
	return int(q.Counts().Ready)
}

// TestInternalUserOnlyThroughTheLinksDoor: the internal user's login is
// the links' in-process door's alone. Through it any credentials log in,
// as "none", with every permission in every vhost and any user_id; the
// same names over TCP, a user's Broker.Dial or the management API are
// refused like any unknown user.
func TestInternalUserOnlyThroughTheLinksDoor(t *testing.T) {
	b := noGuest(t)
	_, err := b.Admin().PutVHost(context.Background(), VHost{Name: "shop"})
	require.NoError(t, err)

	for _, creds := range []string{"none:none", "none:", "guest:guest", "nobody:wrong"} {
		c := amqptest.Dial(t, "amqp://"+creds+"@localhost/shop", amqp091.Config{Dial: b.dialInternal})
		ch := amqptest.ConfirmChannel(t, c)
		amqptest.DeclareQueue(t, ch, "q", true)
		amqptest.PublishMsg(t, ch, "", "q", amqp091.Publishing{Body: []byte(creds), UserId: "someone-else"})
		require.Equal(t, creds, string(amqptest.Get(t, ch, "q", true).Body))
	}
	for _, in := range b.Connections() {
		require.Equal(t, "none", in.User)
	}

	doors := map[string]func(string, string) (net.Conn, error){
		"tcp":         func(_, _ string) (net.Conn, error) { return net.Dial("tcp", b.Addr().String()) },
		"Broker.Dial": b.Dial,
	}
	for name, dial := range doors {
		for _, creds := range []string{"none:none", "none:", "none:guest"} {
			_, err := amqp091.DialConfig("amqp://"+creds+"@localhost/", amqp091.Config{Dial: dial})
			amqptest.RequireCode(t, err, amqp091.AccessRefused, "%s as %s", name, creds)
		}
	}
	api := amqptest.NewAPI(t, b.ManagementHandler())
	status, _, _ := api.Do("GET", "/api/overview", "none", nil)
	require.Equal(t, 401, status)
}

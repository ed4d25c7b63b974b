package broker_test

import (
	"context"
	"net/url"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/amqptest"
)

// asUserBroker is a listening broker with vhosts "/" and "orders" and users
// with different permissions on "orders" (all with password "pw"): alice
// everything, bob configure on bob-* names only, reader read on everything
// only, carol nothing on "orders" but everything on "/". The queues
// "orders-q" and "bob-q" exist on "orders".
func asUserBroker(t *testing.T) *broker.Broker {
	t.Helper()
	b := startBroker(t, broker.Options{VHosts: []string{"/", "orders"}})
	ctx := context.Background()
	for user, perm := range map[string]broker.Permission{
		"alice":  fullPermission,
		"bob":    {Configure: "^bob-"},
		"reader": {Read: ".*"},
	} {
		require.NoError(t, b.Admin().PutUser(ctx, broker.User{Name: user, Password: "pw"}))
		require.NoError(t, b.Admin().PutPermission(ctx, permissionOn(perm, user, "orders")))
	}
	require.NoError(t, b.Admin().PutUser(ctx, broker.User{Name: "carol", Password: "pw"}))
	require.NoError(t, b.Admin().PutPermission(ctx, fullPermissionOn("carol", "/")))
	admin, err := b.Channel(ctx, broker.OnVHost("orders"))
	require.NoError(t, err)
	defer admin.Close()
	for _, q := range []string{"orders-q", "bob-q"} {
		_, err := admin.QueueDeclare(q, false, false, false, false, nil)
		require.NoError(t, err)
	}
	return b
}

// TestChannelAsUserOnVHost: Channel with AsUser and OnVHost opens where it
// is told, as whom it is told, and enforces that user's permissions: each
// operation is allowed or refused with 403 ACCESS_REFUSED exactly as the
// user's permissions on the vhost say, and a user or vhost that cannot
// open is refused with the code an AMQP client gets for the same user and
// vhost at connection.open (checked over TCP alongside). Without options
// the Channel stays as before: the default vhost, unrestricted.
func TestChannelAsUserOnVHost(t *testing.T) {
	b := asUserBroker(t)
	ctx := context.Background()
	ops := []struct {
		name string
		run  func(ch *broker.Channel, q string) error
	}{
		{"declare", func(ch *broker.Channel, q string) error {
			_, err := ch.QueueDeclare(q, false, false, false, false, nil)
			return err
		}},
		{"publish", func(ch *broker.Channel, q string) error {
			return ch.PublishWithContext(ctx, "", q, false, false, amqp091.Publishing{Body: []byte("m")})
		}},
		{"consume", func(ch *broker.Channel, q string) error {
			_, err := ch.Consume(q, "", true, false, false, false, nil)
			return err
		}},
		{"get", func(ch *broker.Channel, q string) error {
			_, _, err := ch.Get(q, false)
			return err
		}},
	}
	const ok, refused = 0, amqp091.AccessRefused
	for _, tc := range []struct {
		name  string
		opts  []broker.ChannelOption
		user  string // for the AMQP comparison; "" when not AsUser
		vhost string
		queue string
		open  int    // the code opening is refused with; 0: it opens
		want  [4]int // per op: ok or refused
	}{
		{name: "no options", vhost: "/", queue: "default-q", want: [4]int{ok, ok, ok, ok}},
		{name: "OnVHost only is unrestricted", opts: []broker.ChannelOption{broker.OnVHost("orders")}, vhost: "orders", queue: "orders-q", want: [4]int{ok, ok, ok, ok}},
		{name: "full permissions", opts: []broker.ChannelOption{broker.AsUser("alice"), broker.OnVHost("orders")}, user: "alice", vhost: "orders", queue: "orders-q", want: [4]int{ok, ok, ok, ok}},
		{name: "configure on bob-*: own queue", opts: []broker.ChannelOption{broker.AsUser("bob"), broker.OnVHost("orders")}, user: "bob", vhost: "orders", queue: "bob-q", want: [4]int{ok, refused, refused, refused}},
		{name: "configure on bob-*: other queue", opts: []broker.ChannelOption{broker.AsUser("bob"), broker.OnVHost("orders")}, user: "bob", vhost: "orders", queue: "orders-q", want: [4]int{refused, refused, refused, refused}},
		{name: "read only", opts: []broker.ChannelOption{broker.AsUser("reader"), broker.OnVHost("orders")}, user: "reader", vhost: "orders", queue: "orders-q", want: [4]int{refused, refused, ok, ok}},
		{name: "no permissions on the vhost", opts: []broker.ChannelOption{broker.AsUser("carol"), broker.OnVHost("orders")}, user: "carol", vhost: "orders", open: amqp091.NotAllowed},
		{name: "AsUser on the default vhost without permissions there", opts: []broker.ChannelOption{broker.AsUser("alice")}, user: "alice", vhost: "/", open: amqp091.NotAllowed},
		{name: "unknown user", opts: []broker.ChannelOption{broker.AsUser("nobody"), broker.OnVHost("orders")}, user: "nobody", vhost: "orders", open: amqp091.AccessRefused},
		{name: "unknown vhost", opts: []broker.ChannelOption{broker.AsUser("alice"), broker.OnVHost("nope")}, user: "alice", vhost: "nope", open: amqp091.NotAllowed},
		{name: "unknown vhost unrestricted", opts: []broker.ChannelOption{broker.OnVHost("nope")}, vhost: "nope", open: amqp091.NotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.open != 0 {
				_, err := b.Channel(ctx, tc.opts...)
				amqptest.RequireCode(t, err, tc.open)
				if tc.user != "" {
					u, perr := url.Parse(b.URL())
					require.NoError(t, perr)
					u.User = url.UserPassword(tc.user, "pw")
					u.Path = "/" + url.PathEscape(tc.vhost)
					conn, derr := amqp091.Dial(u.String())
					if derr == nil {
						conn.Close()
					}
					amqptest.RequireCode(t, derr, tc.open)
				}
				return
			}
			for i, op := range ops {
				ch, err := b.Channel(ctx, tc.opts...)
				require.NoError(t, err)
				err = op.run(ch, tc.queue)
				if tc.want[i] == ok {
					require.NoError(t, err, op.name)
				} else {
					amqptest.RequireCode(t, err, tc.want[i])
				}
				_ = ch.Close()
			}
		})
	}
}

// TestChannelAsUserFollowsAccountChanges: a Channel opened AsUser sees
// Admin.PutPermission at its next check (403 once its permission is gone) and
// is closed with 320 CONNECTION_FORCED when the user is deleted, like the
// user's AMQP connections.
func TestChannelAsUserFollowsAccountChanges(t *testing.T) {
	b := asUserBroker(t)
	ctx := context.Background()
	ch, err := b.Channel(ctx, broker.AsUser("alice"), broker.OnVHost("orders"))
	require.NoError(t, err)
	_, _, err = ch.Get("orders-q", true)
	require.NoError(t, err)
	require.NoError(t, b.Admin().PutPermission(ctx, broker.Permission{User: "alice", VHost: "orders", Configure: ".*", Write: ".*"}))
	_, _, err = ch.Get("orders-q", true)
	amqptest.RequireCode(t, err, amqp091.AccessRefused)

	ch, err = b.Channel(ctx, broker.AsUser("alice"), broker.OnVHost("orders"))
	require.NoError(t, err)
	closed := ch.NotifyClose(make(chan *amqp091.Error, 1))
	require.NoError(t, b.Admin().DeleteUser(ctx, "alice"))
	e := <-closed
	require.NotNil(t, e)
	require.Equal(t, amqp091.ConnectionForced, e.Code, e.Reason)
	_, err = b.Channel(ctx, broker.AsUser("alice"), broker.OnVHost("orders"))
	amqptest.RequireCode(t, err, amqp091.AccessRefused)
}

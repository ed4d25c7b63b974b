package broker_test

import (
	"context"
	"net/http"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/meta"
)

// TestPermissionsRoundTrip: Permissions returns exactly the Permission
// Admin.PutPermission stored, "" (nothing) included, and a second
// Admin.PutPermission replaces the first.
func TestPermissionsRoundTrip(t *testing.T) {
	b := brokertest.NewUnstarted(t, broker.Options{})
	ctx := context.Background()
	require.NoError(t, b.Admin().PutUser(ctx, broker.User{Name: "u", Password: "p"}))
	for _, perm := range []broker.Permission{
		fullPermission,
		{Configure: "", Write: "^amq\\.default$", Read: "q.*"},
		{},
		{Configure: "^(a|b)$", Write: "", Read: ".*"},
	} {
		perm.User, perm.VHost = "u", "/"
		require.NoError(t, b.Admin().PutPermission(ctx, perm))
		got, err := b.Admin().GetPermission(ctx, "u", "")
		require.NoError(t, err)
		require.Equal(t, perm, got)
	}
}

func TestAccountsAPIErrors(t *testing.T) {
	amqptest.CheckGoroutines(t)
	b := startBroker(t, broker.Options{})
	ctx := context.Background()
	require.Error(t, b.Admin().PutUser(ctx, broker.User{Name: "", Password: "x"}))
	require.ErrorIs(t, b.Admin().PutPermission(ctx, fullPermissionOn("nobody", "/")), meta.ErrNotFound)
	require.NoError(t, b.Admin().PutUser(ctx, broker.User{Name: "u", Password: "p"}))
	require.ErrorIs(t, b.Admin().PutPermission(ctx, fullPermissionOn("u", "/nope")), meta.ErrNotFound)
	require.ErrorContains(t, b.Admin().PutPermission(ctx, broker.Permission{User: "u", VHost: "/", Configure: "(", Write: ".*", Read: ".*"}), "configure permission")
	require.ErrorIs(t, b.Admin().DeleteUser(ctx, "nobody"), meta.ErrNotFound)
	_, err := b.Admin().GetPermission(ctx, "u", "/")
	require.ErrorIs(t, err, meta.ErrNotFound)
}

func TestLoginAndVHostAccess(t *testing.T) {
	amqptest.CheckGoroutines(t)
	b := startBroker(t, broker.Options{})
	ctx := context.Background()
	require.NoError(t, b.Admin().PutUser(ctx, broker.User{Name: "u", Password: "p"}))

	_, err := amqp091.Dial(amqptest.UserURL(b.URL(), "u", "wrong"))
	amqptest.RequireCode(t, err, amqp091.AccessRefused)
	_, err = amqp091.Dial(amqptest.UserURL(b.URL(), "nobody", "p"))
	amqptest.RequireCode(t, err, amqp091.AccessRefused)
	// A blank password is refused even when it is the user's.
	require.NoError(t, b.Admin().PutUser(ctx, broker.User{Name: "blank", Password: ""}))
	require.NoError(t, b.Admin().PutPermission(ctx, fullPermissionOn("blank", "/")))
	_, err = amqp091.Dial(amqptest.UserURL(b.URL(), "blank", ""))
	amqptest.RequireCode(t, err, amqp091.AccessRefused)

	// Logged in, but no permissions on "/": RabbitMQ's 530 at connection.open.
	_, err = amqp091.Dial(amqptest.UserURL(b.URL(), "u", "p"))
	amqptest.RequireReply(t, err, amqp091.NotAllowed, "access to vhost '/' refused for user 'u'")

	require.NoError(t, b.Admin().PutPermission(ctx, fullPermissionOn("u", "/")))
	conn := amqptest.Dial(t, amqptest.UserURL(b.URL(), "u", "p"), amqp091.Config{})
	amqptest.RequireWorks(t, conn)

	// Deleting the user closes its open connection (320, as RabbitMQ's
	// connection tracking does) and refuses any new login.
	errs := conn.NotifyClose(make(chan *amqp091.Error, 1))
	require.NoError(t, b.Admin().DeleteUser(ctx, "u"))
	amqptest.RequireReply(t, amqptest.AwaitClose(t, errs), amqp091.ConnectionForced, "CONNECTION_FORCED - user 'u' is deleted")
	_, err = amqp091.Dial(amqptest.UserURL(b.URL(), "u", "p"))
	amqptest.RequireCode(t, err, amqp091.AccessRefused)
}

// TestDeleteUserClosesItsConnections deletes users through the Go API and
// through DELETE /api/users/{name}: each closes exactly that user's
// connections, network and direct, with 320 CONNECTION_FORCED.
func TestDeleteUserClosesItsConnections(t *testing.T) {
	amqptest.CheckGoroutines(t)
	ctx := context.Background()
	b := startBroker(t, broker.Options{Users: []broker.User{
		{Name: "direct-user", Password: "d", Tags: []string{"administrator"}},
		{Name: "guest", Password: "guest", Tags: []string{"administrator"}},
	}})
	for _, u := range []string{"alice", "bob"} {
		require.NoError(t, b.Admin().PutUser(ctx, broker.User{Name: u, Password: u}))
		require.NoError(t, b.Admin().PutPermission(ctx, fullPermissionOn(u, "/")))
	}
	alice := amqptest.Dial(t, amqptest.UserURL(b.URL(), "alice", "alice"), amqp091.Config{})
	aliceErrs := alice.NotifyClose(make(chan *amqp091.Error, 1))
	bob := amqptest.Dial(t, amqptest.UserURL(b.URL(), "bob", "bob"), amqp091.Config{})
	bobErrs := bob.NotifyClose(make(chan *amqp091.Error, 1))
	guest := amqptest.Dial(t, amqptest.UserURL(b.URL(), "guest", "guest"), amqp091.Config{})

	// Through the HTTP API: 204, then 404 for a user that is gone.
	api := amqptest.NewAPI(t, b.ManagementHandler())
	status, _, body := api.Do("DELETE", "/api/users/alice", "guest", nil)
	require.Equal(t, http.StatusNoContent, status, "%s", body)
	amqptest.RequireReply(t, amqptest.AwaitClose(t, aliceErrs), amqp091.ConnectionForced, "CONNECTION_FORCED - user 'alice' is deleted")
	status, _, _ = api.Do("DELETE", "/api/users/alice", "guest", nil)
	require.Equal(t, http.StatusNotFound, status)
	require.False(t, bob.IsClosed())
	amqptest.RequireWorks(t, bob)

	// Through the Go API; a direct Channel is its user's connection too.
	ch, err := b.Channel(ctx)
	require.NoError(t, err)
	chErrs := ch.NotifyClose(make(chan *amqp091.Error, 1))
	require.NoError(t, b.Admin().DeleteUser(ctx, "bob"))
	amqptest.RequireReply(t, amqptest.AwaitClose(t, bobErrs), amqp091.ConnectionForced, "user 'bob' is deleted")
	require.False(t, ch.IsClosed())
	require.NoError(t, b.Admin().DeleteUser(ctx, "direct-user"))
	amqptest.RequireReply(t, amqptest.AwaitClose(t, chErrs), amqp091.ConnectionForced, "CONNECTION_FORCED - user 'direct-user' is deleted")
	amqptest.RequireWorks(t, guest)
	require.ErrorIs(t, b.Admin().DeleteUser(ctx, "bob"), meta.ErrNotFound)
}

// TestPermissionsRefuse checks every place RabbitMQ enforces a permission
// (rabbit_channel): each row grants everything but one kind and expects the
// operation to be refused with 403 naming the resource.
func TestPermissionsRefuse(t *testing.T) {
	amqptest.CheckGoroutines(t)
	b := startBroker(t, broker.Options{})
	ctx := context.Background()
	admin := amqptest.Dial(t, b.URL(), amqp091.Config{})
	ach := amqptest.Channel(t, admin)
	for _, x := range []string{"x.src", "x.dst", "x.del"} {
		require.NoError(t, ach.ExchangeDeclare(x, "direct", false, false, false, false, nil))
	}
	for _, q := range []string{"q.src", "q.del"} {
		_, err := ach.QueueDeclare(q, false, false, false, false, nil)
		require.NoError(t, err)
	}
	require.NoError(t, ach.QueueBind("q.src", "k", "x.src", false, nil))
	require.NoError(t, ach.ExchangeBind("x.dst", "k", "x.src", false, nil))
	require.NoError(t, b.Admin().PutUser(ctx, broker.User{Name: "u", Password: "p"}))

	const all = ".*"
	publish := func(exchange string) func(*amqp091.Channel) error {
		// In confirm mode a publish ends with either its ack (allowed) or
		// the channel's close (refused).
		return func(ch *amqp091.Channel) error {
			errs := ch.NotifyClose(make(chan *amqp091.Error, 1))
			if err := ch.Confirm(false); err != nil {
				return err
			}
			dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, exchange, "q.src", false, false, amqp091.Publishing{Body: []byte("m")})
			if err != nil {
				return err
			}
			// The channel's close also ends the confirmation (not acked),
			// and the select may see that first: only an ack is success.
			select {
			case <-dc.Done():
				if dc.Acked() {
					return nil
				}
				return amqptest.AwaitClose(t, errs)
			case e := <-errs:
				if e == nil {
					return amqp091.ErrClosed
				}
				return e
			}
		}
	}
	for _, tc := range []struct {
		name                   string
		configure, write, read string
		op                     func(*amqp091.Channel) error
		refused                string
	}{
		{"exchange.declare", "q.*", all, all, func(ch *amqp091.Channel) error {
			return ch.ExchangeDeclare("x.new", "fanout", false, false, false, false, nil)
		}, "exchange 'x.new'"},
		{"exchange.delete", "x.new", all, all, func(ch *amqp091.Channel) error {
			return ch.ExchangeDelete("x.del", false, false)
		}, "exchange 'x.del'"},
		{"queue.declare", "x.*", all, all, func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclare("q.new", false, false, false, false, nil)
			return err
		}, "queue 'q.new'"},
		// Anchored: unanchored, as RabbitMQ matches, "q.*" would match
		// "amq.gen-...".
		{"queue.declare server-named", `^q\.`, all, all, func(ch *amqp091.Channel) error {
			_, err := ch.QueueDeclare("", false, false, true, false, nil)
			return err
		}, "queue 'amq.gen-"},
		{"queue.delete", "x.*", all, all, func(ch *amqp091.Channel) error {
			_, err := ch.QueueDelete("q.del", false, false, false)
			return err
		}, "queue 'q.del'"},
		{"basic.publish", all, "x.dst", all, publish("x.src"), "exchange 'x.src'"},
		{"basic.publish default exchange", all, "x.*", all, publish(""), "exchange 'amq.default'"},
		{"basic.consume", all, all, "x.*", func(ch *amqp091.Channel) error {
			_, err := ch.Consume("q.src", "", false, false, false, false, nil)
			return err
		}, "queue 'q.src'"},
		{"basic.get", all, all, "x.*", func(ch *amqp091.Channel) error {
			_, _, err := ch.Get("q.src", false)
			return err
		}, "queue 'q.src'"},
		{"queue.purge", all, all, "x.*", func(ch *amqp091.Channel) error {
			_, err := ch.QueuePurge("q.src", false)
			return err
		}, "queue 'q.src'"},
		{"queue.bind write on queue", all, "x.*", all, func(ch *amqp091.Channel) error {
			return ch.QueueBind("q.src", "k2", "x.src", false, nil)
		}, "queue 'q.src'"},
		{"queue.bind read on exchange", all, all, "q.*", func(ch *amqp091.Channel) error {
			return ch.QueueBind("q.src", "k2", "x.src", false, nil)
		}, "exchange 'x.src'"},
		{"queue.unbind write on queue", all, "x.*", all, func(ch *amqp091.Channel) error {
			return ch.QueueUnbind("q.src", "k", "x.src", nil)
		}, "queue 'q.src'"},
		{"queue.unbind read on exchange", all, all, "q.*", func(ch *amqp091.Channel) error {
			return ch.QueueUnbind("q.src", "k", "x.src", nil)
		}, "exchange 'x.src'"},
		{"exchange.bind write on destination", all, "x.src", all, func(ch *amqp091.Channel) error {
			return ch.ExchangeBind("x.dst", "k2", "x.src", false, nil)
		}, "exchange 'x.dst'"},
		{"exchange.bind read on source", all, all, "x.dst", func(ch *amqp091.Channel) error {
			return ch.ExchangeBind("x.dst", "k2", "x.src", false, nil)
		}, "exchange 'x.src'"},
		{"exchange.unbind write on destination", all, "x.src", all, func(ch *amqp091.Channel) error {
			return ch.ExchangeUnbind("x.dst", "k", "x.src", false, nil)
		}, "exchange 'x.dst'"},
		{"exchange.unbind read on source", all, all, "x.dst", func(ch *amqp091.Channel) error {
			return ch.ExchangeUnbind("x.dst", "k", "x.src", false, nil)
		}, "exchange 'x.src'"},
		{"empty pattern refuses all", "", "", "", func(ch *amqp091.Channel) error {
			_, _, err := ch.Get("q.src", false)
			return err
		}, "queue 'q.src'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, b.Admin().PutPermission(ctx, broker.Permission{User: "u", VHost: "/", Configure: tc.configure, Write: tc.write, Read: tc.read}))
			conn := amqptest.Dial(t, amqptest.UserURL(b.URL(), "u", "p"), amqp091.Config{})
			ch := amqptest.Channel(t, conn)
			err := tc.op(ch)
			amqptest.RequireReply(t, err, amqp091.AccessRefused, "ACCESS_REFUSED - access to "+tc.refused)
			amqptest.RequireReply(t, err, amqp091.AccessRefused, "in vhost '/' refused for user 'u'")

			// The same operation with every permission passes the check.
			require.NoError(t, b.Admin().PutPermission(ctx, broker.Permission{User: "u", VHost: "/", Configure: all, Write: all, Read: all}))
			ch = amqptest.Channel(t, conn)
			err = tc.op(ch)
			var ae *amqp091.Error
			if err != nil {
				require.ErrorAs(t, err, &ae)
				require.NotEqual(t, amqp091.AccessRefused, ae.Code, "reason: %s", ae.Reason)
			}
		})
	}
}

// TestPermissionsAreUnanchored: RabbitMQ matches permission expressions
// with re:run, unanchored (rabbit_auth_backend_internal:
// check_resource_access), and reads "" as "^$".
func TestPermissionsAreUnanchored(t *testing.T) {
	amqptest.CheckGoroutines(t)
	b := startBroker(t, broker.Options{})
	ctx := context.Background()
	ch, err := b.Channel(ctx)
	require.NoError(t, err)
	defer ch.Close()
	_, err = ch.QueueDeclare("orders.eu", false, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, b.Admin().PutUser(ctx, broker.User{Name: "u", Password: "p"}))
	for _, tc := range []struct {
		read    string
		allowed bool
	}{
		{"orders", true},
		{`\.eu`, true},
		{`^orders\.eu$`, true},
		{".*", true},
		{"^eu", false},
		{"^orders$", false},
		{"", false},
	} {
		t.Run(tc.read, func(t *testing.T) {
			require.NoError(t, b.Admin().PutPermission(ctx, broker.Permission{User: "u", VHost: "/", Configure: "", Write: "", Read: tc.read}))
			conn := amqptest.Dial(t, amqptest.UserURL(b.URL(), "u", "p"), amqp091.Config{})
			uch := amqptest.Channel(t, conn)
			_, _, err := uch.Get("orders.eu", false)
			if tc.allowed {
				require.NoError(t, err)
				return
			}
			amqptest.RequireReply(t, err, amqp091.AccessRefused, "access to queue 'orders.eu' in vhost '/' refused for user 'u'")
		})
	}
}

func TestPermissionChangesReachOpenConnections(t *testing.T) {
	amqptest.CheckGoroutines(t)
	b := startBroker(t, broker.Options{})
	ctx := context.Background()
	require.NoError(t, b.Admin().PutUser(ctx, broker.User{Name: "u", Password: "p"}))
	require.NoError(t, b.Admin().PutPermission(ctx, fullPermissionOn("u", "/")))
	conn := amqptest.Dial(t, amqptest.UserURL(b.URL(), "u", "p"), amqp091.Config{})
	ch := amqptest.ConfirmChannel(t, conn)
	amqptest.DeclareQueue(t, ch, "q", false)
	// Warm the publish cache on the default exchange and the get cache on q.
	amqptest.PublishConfirmed(t, ch, "q", false, "one")
	_, ok, err := ch.Get("q", true)
	require.NoError(t, err)
	require.True(t, ok)

	// A read grant that no longer covers q refuses the next get on the
	// same connection: the cache does not outlive the grant it was made under.
	require.NoError(t, b.Admin().PutPermission(ctx, broker.Permission{User: "u", VHost: "/", Configure: ".*", Write: ".*", Read: "^other$"}))
	_, _, err = ch.Get("q", true)
	amqptest.RequireReply(t, err, amqp091.AccessRefused, "access to queue 'q' in vhost '/' refused for user 'u'")

	require.NoError(t, b.Admin().PutPermission(ctx, broker.Permission{User: "u", VHost: "/", Configure: ".*", Write: "nothing", Read: ".*"}))
	ch = amqptest.ConfirmChannel(t, conn)
	errs := ch.NotifyClose(make(chan *amqp091.Error, 1))
	require.NoError(t, ch.PublishWithContext(ctx, "", "q", false, false, amqp091.Publishing{Body: []byte("two")}))
	amqptest.RequireReply(t, amqptest.AwaitClose(t, errs), amqp091.AccessRefused, "access to exchange 'amq.default' in vhost '/' refused for user 'u'")

	require.NoError(t, b.Admin().DeletePermission(ctx, "u", "/"))
	ch = amqptest.Channel(t, conn)
	_, _, err = ch.Get("q", true)
	amqptest.RequireReply(t, err, amqp091.AccessRefused, "access to queue 'q' in vhost '/' refused for user 'u'")
	_, err = amqp091.Dial(amqptest.UserURL(b.URL(), "u", "p"))
	amqptest.RequireReply(t, err, amqp091.NotAllowed, "access to vhost '/' refused for user 'u'")

	// Passive declares are not permission checks in RabbitMQ 3.13 (the
	// default profile) to 4.2.5; later releases: the profile table test.
	require.NoError(t, b.Admin().PutPermission(ctx, broker.Permission{User: "u", VHost: "/", Configure: "", Write: "", Read: ""}))
	ch = amqptest.Channel(t, conn)
	_, err = ch.QueueDeclarePassive("q", false, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.ExchangeDeclarePassive("amq.direct", "direct", true, false, false, false, nil))
}

// BenchmarkPublishPermissions publishes through a Dial pipe as a user whose
// write permission is ".*" or a real regexp: with the per-connection cache
// a stream to one exchange costs no regexp match; alternating exchanges
// miss the cache and match each time.
func BenchmarkPublishPermissions(b *testing.B) {
	for _, bc := range []struct {
		name      string
		write     string
		exchanges []string
	}{
		{"all", ".*", []string{""}},
		{"regexp one exchange", `amq\.default|amq\.(direct|topic)|x\..*`, []string{""}},
		{"regexp alternating", `amq\.default|amq\.(direct|topic)|x\..*`, []string{"", "amq.direct"}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			br, err := broker.New(broker.Options{})
			require.NoError(b, err)
			defer br.Close()
			ctx := context.Background()
			require.NoError(b, br.Admin().PutUser(ctx, broker.User{Name: "u", Password: "p"}))
			require.NoError(b, br.Admin().PutPermission(ctx, broker.Permission{User: "u", VHost: "/", Configure: ".*", Write: bc.write, Read: ".*"}))
			conn, err := amqp091.DialConfig(amqptest.UserURL(br.URL(), "u", "p"), amqp091.Config{Dial: br.Dial})
			require.NoError(b, err)
			defer conn.Close()
			ch, err := conn.Channel()
			require.NoError(b, err)
			msg := amqp091.Publishing{Body: make([]byte, 16)}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := ch.PublishWithContext(ctx, bc.exchanges[i%len(bc.exchanges)], "nowhere", false, false, msg); err != nil {
					b.Fatal(err)
				}
				i++
			}
			// A round trip proves the channel survived every check.
			_, err = ch.QueueDeclare("", false, true, true, false, nil)
			require.NoError(b, err)
		})
	}
}

func TestAddAndDeleteVHost(t *testing.T) {
	amqptest.CheckGoroutines(t)
	dir := t.TempDir()
	ctx := context.Background()
	b := startBroker(t, broker.Options{DataDir: dir})
	created, err := b.Admin().PutVHost(ctx, broker.VHost{Name: "/"})
	require.NoError(t, err)
	require.False(t, created, "/ exists: its metadata is replaced")
	addVHost(t, b, "v2")
	v2URL := b.URL() + "v2"

	// No permissions on a new vhost until granted.
	_, err = amqp091.Dial(v2URL)
	amqptest.RequireReply(t, err, amqp091.NotAllowed, "access to vhost 'v2' refused for user 'guest'")
	require.NoError(t, b.Admin().PutPermission(ctx, fullPermissionOn("guest", "v2")))
	conn := amqptest.Dial(t, v2URL, amqp091.Config{})
	ch := amqptest.ConfirmChannel(t, conn)
	amqptest.DeclareQueue(t, ch, "kept", true)
	amqptest.PublishConfirmed(t, ch, "kept", true, "m1")
	require.NoError(t, ch.ExchangeDeclare("x2", "fanout", true, false, false, false, nil))
	require.NoError(t, ch.QueueBind("kept", "", "x2", false, nil))

	// A stored vhost is reopened at the next start, with its topology.
	require.NoError(t, b.Close())
	b = startBroker(t, broker.Options{DataDir: dir})
	v2URL = b.URL() + "v2"
	conn = amqptest.Dial(t, v2URL, amqp091.Config{})
	errs := conn.NotifyClose(make(chan *amqp091.Error, 1))
	ch = amqptest.Channel(t, conn)
	require.Equal(t, "m1", string(amqptest.Get(t, ch, "kept", true).Body))

	require.NoError(t, b.Admin().DeleteVHost(ctx, "v2"))
	amqptest.RequireReply(t, amqptest.AwaitClose(t, errs), amqp091.ConnectionForced, "vhost 'v2' is deleted")
	_, err = amqp091.Dial(v2URL)
	amqptest.RequireCode(t, err, amqp091.NotAllowed)
	require.ErrorIs(t, b.Admin().DeleteVHost(ctx, "v2"), meta.ErrNotFound)
	_, err = b.Admin().GetPermission(ctx, "guest", "v2")
	require.ErrorIs(t, err, meta.ErrNotFound)

	// Re-adding it starts empty.
	addVHost(t, b, "v2")
	require.NoError(t, b.Admin().PutPermission(ctx, fullPermissionOn("guest", "v2")))
	conn = amqptest.Dial(t, v2URL, amqp091.Config{})
	require.False(t, amqptest.QueueExists(t, conn, "kept"))
	require.False(t, amqptest.ExchangeExists(t, conn, "x2"))
}

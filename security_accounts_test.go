package broker

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/passwd"
	"github.com/warrenmq/broker/meta"
)

func TestUsersAreSeededOnceAndPersist(t *testing.T) {
	checkGoroutines(t)
	dir := t.TempDir()
	ctx := context.Background()
	opts := Options{DataDir: dir, Users: []User{{Name: "alice", Password: "pw1", Tags: []string{"administrator"}}}}

	b, err := New(opts)
	require.NoError(t, err)
	u, err := b.stores.meta.GetUser(ctx, "alice")
	require.NoError(t, err)
	require.True(t, passwd.Check(u.PasswordHash, "pw1"))
	require.NotContains(t, string(u.PasswordHash), "pw1")
	require.Equal(t, []string{"administrator"}, u.Tags)
	p, err := b.Permissions(ctx, "alice", "/")
	require.NoError(t, err)
	require.Equal(t, fullPermission, p)

	// Changes through the Go API win over Options at the next start.
	require.NoError(t, b.AddUser(ctx, "alice", "pw2"))
	require.NoError(t, b.AddUser(ctx, "bob", "bobpw", "monitoring"))
	require.NoError(t, b.SetPermissions(ctx, "bob", "/", Permission{Configure: "", Write: "^amq\\.default$", Read: "q.*"}))
	require.NoError(t, b.Close())

	b, err = New(opts)
	require.NoError(t, err)
	defer b.Close()
	u, err = b.stores.meta.GetUser(ctx, "alice")
	require.NoError(t, err)
	require.True(t, passwd.Check(u.PasswordHash, "pw2"), "a stored user keeps its password")
	_, err = b.stores.meta.GetUser(ctx, "bob")
	require.NoError(t, err)
	p, err = b.Permissions(ctx, "bob", "")
	require.NoError(t, err)
	require.Equal(t, "q.*", p.Read)
}

// TestPermissionsRoundTrip: Permissions returns exactly the Permission
// SetPermissions stored, "" (nothing) included, and a second
// SetPermissions replaces the first.
func TestPermissionsRoundTrip(t *testing.T) {
	b := newDirectBroker(t, Options{})
	ctx := context.Background()
	require.NoError(t, b.AddUser(ctx, "u", "p"))
	for _, perm := range []Permission{
		fullPermission,
		{Configure: "", Write: "^amq\\.default$", Read: "q.*"},
		{},
		{Configure: "^(a|b)$", Write: "", Read: ".*"},
	} {
		require.NoError(t, b.SetPermissions(ctx, "u", "/", perm))
		got, err := b.Permissions(ctx, "u", "")
		require.NoError(t, err)
		require.Equal(t, perm, got)
	}
}

func TestAccountsAPIErrors(t *testing.T) {
	checkGoroutines(t)
	b := startBroker(t, Options{})
	ctx := context.Background()
	require.Error(t, b.AddUser(ctx, "", "x"))
	require.ErrorIs(t, b.SetPermissions(ctx, "nobody", "/", fullPermission), meta.ErrNotFound)
	require.NoError(t, b.AddUser(ctx, "u", "p"))
	require.ErrorIs(t, b.SetPermissions(ctx, "u", "/nope", fullPermission), meta.ErrNotFound)
	require.ErrorContains(t, b.SetPermissions(ctx, "u", "/", Permission{Configure: "(", Write: ".*", Read: ".*"}), "configure permission")
	require.ErrorIs(t, b.DeleteUser(ctx, "nobody"), meta.ErrNotFound)
	_, err := b.Permissions(ctx, "u", "/")
	require.ErrorIs(t, err, meta.ErrNotFound)
}

// userURL is the broker's URL with other credentials.
func userURL(b *Broker, user, password string) string {
	u, _ := url.Parse(b.URL())
	u.User = url.UserPassword(user, password)
	return u.String()
}

func TestLoginAndVHostAccess(t *testing.T) {
	checkGoroutines(t)
	b := startBroker(t, Options{})
	ctx := context.Background()
	require.NoError(t, b.AddUser(ctx, "u", "p"))

	_, err := amqp091.Dial(userURL(b, "u", "wrong"))
	amqptest.RequireCode(t, err, amqp091.AccessRefused)
	_, err = amqp091.Dial(userURL(b, "nobody", "p"))
	amqptest.RequireCode(t, err, amqp091.AccessRefused)
	// A blank password is refused even when it is the user's.
	require.NoError(t, b.AddUser(ctx, "blank", ""))
	require.NoError(t, b.SetPermissions(ctx, "blank", "/", fullPermission))
	_, err = amqp091.Dial(userURL(b, "blank", ""))
	amqptest.RequireCode(t, err, amqp091.AccessRefused)

	// Logged in, but no permissions on "/": RabbitMQ's 530 at connection.open.
	_, err = amqp091.Dial(userURL(b, "u", "p"))
	topoRequireCode(t, err, amqp091.NotAllowed, "access to vhost '/' refused for user 'u'")

	require.NoError(t, b.SetPermissions(ctx, "u", "/", fullPermission))
	conn := dial(t, userURL(b, "u", "p"), amqp091.Config{})
	requireWorks(t, conn)

	// Deleting the user closes its open connection (320, as RabbitMQ's
	// connection tracking does) and refuses any new login.
	errs := conn.NotifyClose(make(chan *amqp091.Error, 1))
	require.NoError(t, b.DeleteUser(ctx, "u"))
	topoRequireCode(t, topoAwaitClose(t, errs), amqp091.ConnectionForced, "CONNECTION_FORCED - user 'u' is deleted")
	_, err = amqp091.Dial(userURL(b, "u", "p"))
	amqptest.RequireCode(t, err, amqp091.AccessRefused)
}

// TestDeleteUserClosesItsConnections deletes users through the Go API and
// through DELETE /api/users/{name}: each closes exactly that user's
// connections, network and direct, with 320 CONNECTION_FORCED.
func TestDeleteUserClosesItsConnections(t *testing.T) {
	checkGoroutines(t)
	ctx := context.Background()
	b := startBroker(t, Options{Users: []User{
		{Name: "direct-user", Password: "d", Tags: []string{"administrator"}},
		{Name: "guest", Password: "guest", Tags: []string{"administrator"}},
	}})
	h := mgmtServer(t, b)
	for _, u := range []string{"alice", "bob"} {
		require.NoError(t, b.AddUser(ctx, u, u))
		require.NoError(t, b.SetPermissions(ctx, u, "/", fullPermission))
	}
	alice := dial(t, userURL(b, "alice", "alice"), amqp091.Config{})
	aliceErrs := alice.NotifyClose(make(chan *amqp091.Error, 1))
	bob := dial(t, userURL(b, "bob", "bob"), amqp091.Config{})
	bobErrs := bob.NotifyClose(make(chan *amqp091.Error, 1))
	guest := dial(t, userURL(b, "guest", "guest"), amqp091.Config{})

	// Through the HTTP API: 204, then 404 for a user that is gone.
	status, _, body := h.do("DELETE", "/api/users/alice", "guest", nil)
	require.Equal(t, http.StatusNoContent, status, "%s", body)
	topoRequireCode(t, topoAwaitClose(t, aliceErrs), amqp091.ConnectionForced, "CONNECTION_FORCED - user 'alice' is deleted")
	status, _, _ = h.do("DELETE", "/api/users/alice", "guest", nil)
	require.Equal(t, http.StatusNotFound, status)
	require.False(t, bob.IsClosed())
	requireWorks(t, bob)

	// Through the Go API; a direct Channel is its user's connection too.
	ch, err := b.Channel(ctx)
	require.NoError(t, err)
	chErrs := ch.NotifyClose(make(chan *amqp091.Error, 1))
	require.NoError(t, b.DeleteUser(ctx, "bob"))
	topoRequireCode(t, topoAwaitClose(t, bobErrs), amqp091.ConnectionForced, "user 'bob' is deleted")
	require.False(t, ch.IsClosed())
	require.NoError(t, b.DeleteUser(ctx, "direct-user"))
	topoRequireCode(t, topoAwaitClose(t, chErrs), amqp091.ConnectionForced, "CONNECTION_FORCED - user 'direct-user' is deleted")
	requireWorks(t, guest)
	require.ErrorIs(t, b.DeleteUser(ctx, "bob"), meta.ErrNotFound)
}

// TestPermissionsRefuse checks every place RabbitMQ enforces a permission
// (rabbit_channel): each row grants everything but one kind and expects the
// operation to be refused with 403 naming the resource.
func TestPermissionsRefuse(t *testing.T) {
	checkGoroutines(t)
	b := startBroker(t, Options{})
	ctx := context.Background()
	admin := dial(t, b.URL(), amqp091.Config{})
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
	require.NoError(t, b.AddUser(ctx, "u", "p"))

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
			select {
			case <-dc.Done():
				return nil
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
			require.NoError(t, b.SetPermissions(ctx, "u", "/", Permission{Configure: tc.configure, Write: tc.write, Read: tc.read}))
			conn := dial(t, userURL(b, "u", "p"), amqp091.Config{})
			ch := amqptest.Channel(t, conn)
			err := tc.op(ch)
			topoRequireCode(t, err, amqp091.AccessRefused, "ACCESS_REFUSED - access to "+tc.refused)
			topoRequireCode(t, err, amqp091.AccessRefused, "in vhost '/' refused for user 'u'")

			// The same operation with every permission passes the check.
			require.NoError(t, b.SetPermissions(ctx, "u", "/", Permission{Configure: all, Write: all, Read: all}))
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
	checkGoroutines(t)
	b := startBroker(t, Options{})
	ctx := context.Background()
	ch, err := b.Channel(ctx)
	require.NoError(t, err)
	defer ch.Close()
	_, err = ch.QueueDeclare("orders.eu", false, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, b.AddUser(ctx, "u", "p"))
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
			require.NoError(t, b.SetPermissions(ctx, "u", "/", Permission{Configure: "", Write: "", Read: tc.read}))
			conn := dial(t, userURL(b, "u", "p"), amqp091.Config{})
			uch := amqptest.Channel(t, conn)
			_, _, err := uch.Get("orders.eu", false)
			if tc.allowed {
				require.NoError(t, err)
				return
			}
			topoRequireCode(t, err, amqp091.AccessRefused, "access to queue 'orders.eu' in vhost '/' refused for user 'u'")
		})
	}
}

func TestPermissionChangesReachOpenConnections(t *testing.T) {
	checkGoroutines(t)
	b := startBroker(t, Options{})
	ctx := context.Background()
	require.NoError(t, b.AddUser(ctx, "u", "p"))
	require.NoError(t, b.SetPermissions(ctx, "u", "/", fullPermission))
	conn := dial(t, userURL(b, "u", "p"), amqp091.Config{})
	ch := topoConfirmChannel(t, conn)
	declareQueue(t, ch, "q", false)
	// Warm the publish cache on the default exchange and the get cache on q.
	publishConfirmed(t, ch, "q", false, "one")
	_, ok, err := ch.Get("q", true)
	require.NoError(t, err)
	require.True(t, ok)

	// A read grant that no longer covers q refuses the next get on the
	// same connection: the cache does not outlive the grant it was made under.
	require.NoError(t, b.SetPermissions(ctx, "u", "/", Permission{Configure: ".*", Write: ".*", Read: "^other$"}))
	_, _, err = ch.Get("q", true)
	topoRequireCode(t, err, amqp091.AccessRefused, "access to queue 'q' in vhost '/' refused for user 'u'")

	require.NoError(t, b.SetPermissions(ctx, "u", "/", Permission{Configure: ".*", Write: "nothing", Read: ".*"}))
	ch = topoConfirmChannel(t, conn)
	errs := ch.NotifyClose(make(chan *amqp091.Error, 1))
	require.NoError(t, ch.PublishWithContext(ctx, "", "q", false, false, amqp091.Publishing{Body: []byte("two")}))
	topoRequireCode(t, topoAwaitClose(t, errs), amqp091.AccessRefused, "access to exchange 'amq.default' in vhost '/' refused for user 'u'")

	require.NoError(t, b.ClearPermissions(ctx, "u", "/"))
	ch = amqptest.Channel(t, conn)
	_, _, err = ch.Get("q", true)
	topoRequireCode(t, err, amqp091.AccessRefused, "access to queue 'q' in vhost '/' refused for user 'u'")
	_, err = amqp091.Dial(userURL(b, "u", "p"))
	topoRequireCode(t, err, amqp091.NotAllowed, "access to vhost '/' refused for user 'u'")

	// Passive declares are not permission checks in RabbitMQ.
	require.NoError(t, b.SetPermissions(ctx, "u", "/", Permission{Configure: "", Write: "", Read: ""}))
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
			br, err := New(Options{})
			require.NoError(b, err)
			defer br.Close()
			ctx := context.Background()
			require.NoError(b, br.AddUser(ctx, "u", "p"))
			require.NoError(b, br.SetPermissions(ctx, "u", "/", Permission{Configure: ".*", Write: bc.write, Read: ".*"}))
			conn, err := amqp091.DialConfig(userURL(br, "u", "p"), amqp091.Config{Dial: br.Dial})
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
	checkGoroutines(t)
	dir := t.TempDir()
	ctx := context.Background()
	b := startBroker(t, Options{DataDir: dir})
	require.ErrorContains(t, b.AddVHost(ctx, "/"), "already exists")
	require.NoError(t, b.AddVHost(ctx, "v2"))
	v2URL := b.URL() + "v2"

	// No permissions on a new vhost until granted.
	_, err := amqp091.Dial(v2URL)
	topoRequireCode(t, err, amqp091.NotAllowed, "access to vhost 'v2' refused for user 'guest'")
	require.NoError(t, b.SetPermissions(ctx, "guest", "v2", fullPermission))
	conn := dial(t, v2URL, amqp091.Config{})
	ch := topoConfirmChannel(t, conn)
	declareQueue(t, ch, "kept", true)
	publishConfirmed(t, ch, "kept", true, "m1")
	require.NoError(t, ch.ExchangeDeclare("x2", "fanout", true, false, false, false, nil))
	require.NoError(t, ch.QueueBind("kept", "", "x2", false, nil))

	// A stored vhost is reopened at the next start, with its topology.
	require.NoError(t, b.Close())
	b = startBroker(t, Options{DataDir: dir})
	v2URL = b.URL() + "v2"
	conn = dial(t, v2URL, amqp091.Config{})
	errs := conn.NotifyClose(make(chan *amqp091.Error, 1))
	ch = amqptest.Channel(t, conn)
	require.Equal(t, "m1", string(get(t, ch, "kept", true).Body))

	require.NoError(t, b.DeleteVHost(ctx, "v2"))
	topoRequireCode(t, topoAwaitClose(t, errs), amqp091.ConnectionForced, "vhost 'v2' is deleted")
	_, err = amqp091.Dial(v2URL)
	amqptest.RequireCode(t, err, amqp091.NotAllowed)
	require.ErrorIs(t, b.DeleteVHost(ctx, "v2"), meta.ErrNotFound)
	_, err = b.Permissions(ctx, "guest", "v2")
	require.ErrorIs(t, err, meta.ErrNotFound)

	// Re-adding it starts empty.
	require.NoError(t, b.AddVHost(ctx, "v2"))
	require.NoError(t, b.SetPermissions(ctx, "guest", "v2", fullPermission))
	conn = dial(t, v2URL, amqp091.Config{})
	require.False(t, topoQueueExists(t, conn, "kept"))
	require.False(t, topoExchangeExists(t, conn, "x2"))
}

package broker

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/auth"
	"github.com/warrenmq/broker/internal/amqptest"
)

// authzChannel is what the authorisation tests do on a channel, the same
// over amqp091-go (TCP, Dial) and on a direct Channel.
type authzChannel interface {
	Confirm(noWait bool) error
	NotifyClose(chan *amqp091.Error) chan *amqp091.Error
	PublishWithDeferredConfirmWithContext(ctx context.Context, exchange, key string, mandatory, immediate bool, msg amqp091.Publishing) (*amqp091.DeferredConfirmation, error)
	QueueDeclare(name string, durable, autoDelete, exclusive, noWait bool, args amqp091.Table) (amqp091.Queue, error)
	QueueBind(name, key, exchange string, noWait bool, args amqp091.Table) error
	Get(queue string, autoAck bool) (amqp091.Delivery, bool, error)
}

// confirmPublish publishes in confirm mode and returns nil for an ack,
// else the channel's (or connection's) close.
func confirmPublish(t *testing.T, ch authzChannel, exchange, key string) error {
	t.Helper()
	errs := ch.NotifyClose(make(chan *amqp091.Error, 1))
	if err := ch.Confirm(false); err != nil {
		return err
	}
	dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), exchange, key, false, false, amqp091.Publishing{Body: []byte("m")})
	if err != nil {
		return err
	}
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

// authzDoor opens a fresh channel as user on vhost through one door; the
// error is the open's.
type authzDoor struct {
	name string
	open func(t *testing.T, vhost string) (authzChannel, error)
}

func authzDoors(b *Broker, user, password string) []authzDoor {
	viaDial := amqp091.Config{Dial: func(network, addr string) (net.Conn, error) { return b.Dial(network, addr) }}
	amqpDoor := func(name string, cfg amqp091.Config) authzDoor {
		return authzDoor{name, func(t *testing.T, vhost string) (authzChannel, error) {
			cfg := cfg
			cfg.Vhost = vhost
			conn, err := amqp091.DialConfig(amqptest.UserURL(b.URL(), user, password), cfg)
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() { _ = conn.Close() })
			return conn.Channel()
		}}
	}
	return []authzDoor{
		amqpDoor("tcp", amqp091.Config{}),
		amqpDoor("dial", viaDial),
		{"direct", func(t *testing.T, vhost string) (authzChannel, error) {
			ch, err := b.Channel(context.Background(), AsUser(user), OnVHost(vhost))
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() { _ = ch.Close() })
			return ch, nil
		}},
	}
}

// TestAuthzChainEveryDoor: a Go hook lets "app" in and decides its
// permissions: vhost access, write on one exchange, read on one queue, a
// topic key for publish and bind are refused through TCP, Broker.Dial and
// a direct Channel opened AsUser, with RabbitMQ's 530 and 403 texts;
// everything else is allowed though "app" is no stored user. A backend
// error is 320 CONNECTION_FORCED, not a refusal.
func TestAuthzChainEveryDoor(t *testing.T) {
	hook := auth.Funcs{
		Login: func(ctx context.Context, req auth.Request) (auth.Identity, error) {
			if req.User == "app" && (req.Secret == "pw" || req.Mechanism == auth.MechanismDirect) {
				return auth.Identity{User: "app"}, nil
			}
			return auth.Identity{}, auth.Refuse("not app")
		},
		VHost: func(ctx context.Context, id auth.Identity, vhost string) (bool, error) {
			return vhost != "private", nil
		},
		Resource: func(ctx context.Context, id auth.Identity, r auth.Resource, p auth.Permission) (bool, error) {
			switch {
			case r.Kind == "exchange" && r.Name == "no-write-x" && p == auth.Write:
				return false, nil
			case r.Kind == "queue" && r.Name == "no-read-q" && p == auth.Read:
				return false, nil
			case r.Name == "broken-q":
				return false, errors.New("policy service down")
			}
			return true, nil
		},
		Topic: func(ctx context.Context, id auth.Identity, r auth.Resource, p auth.Permission, key string) (bool, error) {
			return !strings.HasPrefix(key, "secret."), nil
		},
	}
	b := startBroker(t, Options{VHosts: []string{"/", "private"}, Auth: auth.Hook(hook)})
	ctx := context.Background()
	admin, err := b.Channel(ctx)
	require.NoError(t, err)
	require.NoError(t, admin.ExchangeDeclare("no-write-x", "direct", false, false, false, false, nil))
	for _, q := range []string{"no-read-q", "broken-q", "free-q"} {
		_, err := admin.QueueDeclare(q, false, false, false, false, nil)
		require.NoError(t, err)
	}

	const refused = "refused for user 'app'"
	for _, door := range authzDoors(b, "app", "pw") {
		t.Run(door.name, func(t *testing.T) {
			_, err := door.open(t, "private")
			amqptest.RequireReply(t, err, amqp091.NotAllowed, "access to vhost 'private' refused for user 'app'")

			for _, tc := range []struct {
				name string
				do   func(ch authzChannel) error
				code int
				text string
			}{
				{"publish to a writable exchange", func(ch authzChannel) error { return confirmPublish(t, ch, "", "free-q") }, 0, ""},
				{"publish to no-write-x", func(ch authzChannel) error { return confirmPublish(t, ch, "no-write-x", "k") }, amqp091.AccessRefused, "access to exchange 'no-write-x' in vhost '/' " + refused},
				{"get from free-q", func(ch authzChannel) error { _, _, err := ch.Get("free-q", true); return err }, 0, ""},
				{"get from no-read-q", func(ch authzChannel) error { _, _, err := ch.Get("no-read-q", true); return err }, amqp091.AccessRefused, "access to queue 'no-read-q' in vhost '/' " + refused},
				{"declare a queue", func(ch authzChannel) error {
					_, err := ch.QueueDeclare("app-q-"+door.name, false, true, false, false, nil)
					return err
				}, 0, ""},
				{"topic key allowed", func(ch authzChannel) error { return confirmPublish(t, ch, "amq.topic", "public.x") }, 0, ""},
				{"topic key refused on publish", func(ch authzChannel) error { return confirmPublish(t, ch, "amq.topic", "secret.x") }, amqp091.AccessRefused, "access to topic 'secret.x' in exchange 'amq.topic' in vhost '/' " + refused},
				{"topic key refused on bind", func(ch authzChannel) error { return ch.QueueBind("free-q", "secret.k", "amq.topic", false, nil) }, amqp091.AccessRefused, "access to topic 'secret.k' in exchange 'amq.topic' in vhost '/' " + refused},
				{"backend error is not a refusal", func(ch authzChannel) error { _, _, err := ch.Get("broken-q", true); return err }, amqp091.ConnectionForced, "try again"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					ch, err := door.open(t, "/")
					require.NoError(t, err)
					err = tc.do(ch)
					if tc.code == 0 {
						require.NoError(t, err)
						return
					}
					amqptest.RequireReply(t, err, tc.code, tc.text)
				})
			}
		})
	}
}

// TestAuthzChainCachesPerConnection: a stream of publishes to one exchange
// asks the Authorizer once, not once per message (the connection's cache
// of allowed decisions); a refusal is asked again each time.
func TestAuthzChainCachesPerConnection(t *testing.T) {
	var asked atomic.Int32
	hook := auth.Funcs{
		Login: func(ctx context.Context, req auth.Request) (auth.Identity, error) {
			return auth.Identity{User: req.User}, nil
		},
		Resource: func(ctx context.Context, id auth.Identity, r auth.Resource, p auth.Permission) (bool, error) {
			asked.Add(1)
			return r.Name != "no-read-q", nil
		},
	}
	b := startBroker(t, Options{Auth: auth.Hook(hook)})
	for _, door := range authzDoors(b, "app", "pw") {
		t.Run(door.name, func(t *testing.T) {
			ch, err := door.open(t, "/")
			require.NoError(t, err)
			asked.Store(0)
			for range 50 {
				require.NoError(t, confirmPublish(t, ch, "amq.direct", "k"))
			}
			require.EqualValues(t, 1, asked.Load(), "one question for 50 publishes")
			for range 2 {
				ch, err := door.open(t, "/")
				require.NoError(t, err)
				_, _, err = ch.Get("no-read-q", true)
				amqptest.RequireCode(t, err, amqp091.AccessRefused)
			}
			require.EqualValues(t, 3, asked.Load(), "refusals are asked each time")
		})
	}
}

// TestAuthzChainMixedBackends: authentication from one backend and
// authorisation from another (RabbitMQ's auth_backends.N.authn / .authz):
// a hook logs "ext" in and the stored permissions decide (InternalAuthz);
// another entry logs "svc" in and a second hook decides.
func TestAuthzChainMixedBackends(t *testing.T) {
	login := func(user, secret string) func(context.Context, auth.Request) (auth.Identity, error) {
		return func(ctx context.Context, req auth.Request) (auth.Identity, error) {
			if req.User == user && (req.Secret == secret || req.Mechanism == auth.MechanismDirect) {
				return auth.Identity{User: user}, nil
			}
			return auth.Identity{}, auth.Refuse("not %s", user)
		}
	}
	noConfigure := auth.Funcs{Resource: func(ctx context.Context, id auth.Identity, r auth.Resource, p auth.Permission) (bool, error) {
		return p != auth.Configure, nil
	}}
	b := startBroker(t, Options{Auth: auth.Chain{
		auth.Internal,
		{Name: "sso+internal", Authn: auth.Funcs{Login: login("ext", "token")}, Authz: auth.InternalAuthz},
		{Name: "sso+policy", Authn: auth.Funcs{Login: login("svc", "token")}, Authz: noConfigure},
	}})
	ctx := context.Background()
	// ext's stored password is not what it logs in with: the hook lets it
	// in, the stored permissions decide.
	require.NoError(t, b.Admin().PutUser(ctx, User{Name: "ext", Password: "stored"}))
	require.NoError(t, b.Admin().PutPermission(ctx, Permission{User: "ext", VHost: "/", Configure: ".*", Write: "^amq\\.direct$", Read: ".*"}))

	for _, door := range authzDoors(b, "ext", "token") {
		t.Run("ext/"+door.name, func(t *testing.T) {
			ch, err := door.open(t, "/")
			require.NoError(t, err)
			require.NoError(t, confirmPublish(t, ch, "amq.direct", "k"))
			ch, err = door.open(t, "/")
			require.NoError(t, err)
			amqptest.RequireReply(t, confirmPublish(t, ch, "amq.fanout", "k"), amqp091.AccessRefused, "access to exchange 'amq.fanout' in vhost '/' refused for user 'ext'")
		})
	}
	for _, door := range authzDoors(b, "svc", "token") {
		t.Run("svc/"+door.name, func(t *testing.T) {
			ch, err := door.open(t, "/")
			require.NoError(t, err)
			require.NoError(t, confirmPublish(t, ch, "amq.fanout", "k"))
			_, err = ch.QueueDeclare("svc-q", false, true, false, false, nil)
			amqptest.RequireReply(t, err, amqp091.AccessRefused, "access to queue 'svc-q' in vhost '/' refused for user 'svc'")
		})
	}
}

// TestAuthzChainManagement: the management API asks the Authorizer of the
// backend that logged its user in: vhost listings leave refused vhosts
// out, a declare the backend refuses is 401 with AMQP's text, a get runs
// on a channel the same Authorizer decides, and a backend error is 503,
// not 401.
func TestAuthzChainManagement(t *testing.T) {
	hook := auth.Funcs{
		Login: func(ctx context.Context, req auth.Request) (auth.Identity, error) {
			if req.User == "svc" && req.Secret == "svc" {
				return auth.Identity{User: "svc", Tags: []string{"management"}}, nil
			}
			return auth.Identity{}, auth.Refuse("not svc")
		},
		VHost: func(ctx context.Context, id auth.Identity, vhost string) (bool, error) {
			return vhost != "private", nil
		},
		Resource: func(ctx context.Context, id auth.Identity, r auth.Resource, p auth.Permission) (bool, error) {
			switch r.Name {
			case "locked-q":
				return p != auth.Configure, nil
			case "no-read-q":
				return p != auth.Read, nil
			case "broken-q":
				return false, errors.New("policy service down")
			}
			return true, nil
		},
	}
	b := startBroker(t, Options{VHosts: []string{"/", "private"}, Auth: auth.Hook(hook)})
	admin, err := b.Channel(context.Background())
	require.NoError(t, err)
	for _, q := range []string{"no-read-q", "free-q"} {
		_, err := admin.QueueDeclare(q, false, false, false, false, nil)
		require.NoError(t, err)
	}
	h := amqptest.NewAPI(t, b.ManagementHandler())

	status, _, body := h.Do("GET", "/api/vhosts", "svc", nil)
	require.Equal(t, 200, status, string(body))
	require.Contains(t, string(body), `"name":"/"`)
	require.NotContains(t, string(body), `"private"`)
	status, _, _ = h.Do("GET", "/api/queues/private", "svc", nil)
	require.Equal(t, 401, status)

	status, _, body = h.Do("PUT", "/api/queues/%2F/locked-q", "svc", map[string]any{})
	require.Equal(t, 401, status)
	require.Contains(t, string(body), "access to queue 'locked-q' in vhost '/' refused for user 'svc'")
	status, _, body = h.Do("PUT", "/api/queues/%2F/svc-q", "svc", map[string]any{})
	require.Equal(t, 201, status, string(body))
	status, _, body = h.Do("PUT", "/api/queues/%2F/broken-q", "svc", map[string]any{})
	require.Equal(t, 503, status, string(body))

	get := map[string]any{"count": 1, "ackmode": "ack_requeue_false", "encoding": "auto"}
	status, _, body = h.Do("POST", "/api/queues/%2F/free-q/get", "svc", get)
	require.Equal(t, 200, status, string(body))
	status, _, body = h.Do("POST", "/api/queues/%2F/no-read-q/get", "svc", get)
	require.Equal(t, 401, status, string(body))
	require.Contains(t, string(body), "access to queue 'no-read-q' in vhost '/' refused for user 'svc'")
}

// TestAuthzChainManagementStored: a user a hook lets into the management
// API, whose permissions are the stored ones (auth.InternalAuthz), gets
// and is refused by those permissions, on a channel opened without a
// second login by name (the hook refuses direct logins).
func TestAuthzChainManagementStored(t *testing.T) {
	hook := auth.Funcs{Login: func(ctx context.Context, req auth.Request) (auth.Identity, error) {
		if req.User == "ext" && req.Secret == "token" {
			return auth.Identity{User: "ext", Tags: []string{"management"}}, nil
		}
		return auth.Identity{}, auth.Refuse("not ext with its token")
	}}
	b := startBroker(t, Options{Auth: auth.Chain{{Name: "sso", Authn: hook, Authz: auth.InternalAuthz}}})
	ctx := context.Background()
	require.NoError(t, b.Admin().PutUser(ctx, User{Name: "ext", Password: "stored"}))
	require.NoError(t, b.Admin().PutPermission(ctx, Permission{User: "ext", VHost: "/", Configure: ".*", Write: ".*", Read: "^ext-"}))
	admin, err := b.Channel(ctx)
	require.NoError(t, err)
	for _, q := range []string{"ext-q", "other-q"} {
		_, err := admin.QueueDeclare(q, false, false, false, false, nil)
		require.NoError(t, err)
	}
	h := amqptest.NewAPI(t, b.ManagementHandler())
	const basic = "Basic ZXh0OnRva2Vu" // ext:token
	get := map[string]any{"count": 1, "ackmode": "ack_requeue_false", "encoding": "auto"}
	status, _, body := h.Do("POST", "/api/queues/%2F/ext-q/get", "ext", get, "Authorization", basic)
	require.Equal(t, 200, status, string(body))
	status, _, body = h.Do("POST", "/api/queues/%2F/other-q/get", "ext", get, "Authorization", basic)
	require.Equal(t, 401, status, string(body))
	require.Contains(t, string(body), "access to queue 'other-q' in vhost '/' refused for user 'ext'")
}

// TestAuthzChainUserID: a user a backend let in may not publish with
// another user's user_id (406), even when the backend allows every
// permission, unless its identity carries the impersonator tag.
func TestAuthzChainUserID(t *testing.T) {
	b := startBroker(t, Options{Auth: auth.Hook(auth.Funcs{Login: func(ctx context.Context, req auth.Request) (auth.Identity, error) {
		id := auth.Identity{User: req.User}
		if req.User == "proxy" {
			id.Tags = []string{"impersonator"}
		}
		return id, nil
	}})})
	publishAs := func(user, userID string) error {
		conn := amqptest.Dial(t, amqptest.UserURL(b.URL(), user, "x"), amqp091.Config{})
		ch := amqptest.Channel(t, conn)
		errs := ch.NotifyClose(make(chan *amqp091.Error, 1))
		require.NoError(t, ch.Confirm(false))
		dc, err := ch.PublishWithDeferredConfirmWithContext(context.Background(), "amq.direct", "k", false, false, amqp091.Publishing{UserId: userID})
		require.NoError(t, err)
		select {
		case <-dc.Done():
			if dc.Acked() {
				return nil
			}
			return amqptest.AwaitClose(t, errs)
		case e := <-errs:
			return e
		}
	}
	require.NoError(t, publishAs("app", "app"))
	amqptest.RequireReply(t, publishAs("app", "someone-else"), amqp091.PreconditionFailed, "user_id property set to 'someone-else' but authenticated user was 'app'")
	require.NoError(t, publishAs("proxy", "someone-else"))
}

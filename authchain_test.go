package broker

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/auth"
	"github.com/warrenmq/broker/internal/amqptest"
)

// hookLogin accepts "svc" with the secret "svc" (what amqptest.API.Do
// sends), as administrator, and refuses everyone else.
func hookLogin(ctx context.Context, req auth.Request) (auth.Identity, error) {
	if req.User == "svc" && req.Secret == "svc" {
		return auth.Identity{User: "svc", Tags: []string{"administrator"}}, nil
	}
	return auth.Identity{}, auth.Refuse("hook: not %q", req.User)
}

// TestAuthChainEveryDoor: with Options.Auth = internal, then a Go hook,
// both backends log users in, in order, over TCP, through Broker.Dial and
// in the management API; a login both refuse is 403 ACCESS_REFUSED over
// AMQP and 401 over HTTP, with a log line naming the reasons.
func TestAuthChainEveryDoor(t *testing.T) {
	amqptest.CheckGoroutines(t)
	var logs amqptest.SyncBuffer
	b := startBroker(t, Options{
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Auth:   auth.Chain{auth.Internal, auth.Hook(auth.Funcs{Login: hookLogin})[0]},
	})
	ctx := context.Background()
	require.NoError(t, b.Admin().PutUser(ctx, User{Name: "u", Password: "p"}))
	require.NoError(t, b.Admin().PutPermission(ctx, fullPermissionOn("u", "/")))
	// svc's stored password differs: only the hook lets svc/svc in.
	require.NoError(t, b.Admin().PutUser(ctx, User{Name: "svc", Password: "stored-password"}))
	require.NoError(t, b.Admin().PutPermission(ctx, fullPermissionOn("svc", "/")))

	viaDial := amqp091.Config{Dial: func(network, addr string) (net.Conn, error) { return b.Dial(network, addr) }}
	for _, door := range []struct {
		name string
		cfg  amqp091.Config
	}{{"tcp", amqp091.Config{}}, {"dial", viaDial}} {
		t.Run(door.name, func(t *testing.T) {
			amqptest.RequireWorks(t, amqptest.Dial(t, amqptest.UserURL(b.URL(), "u", "p"), door.cfg))
			amqptest.RequireWorks(t, amqptest.Dial(t, amqptest.UserURL(b.URL(), "svc", "svc"), door.cfg))
			amqptest.RequireWorks(t, amqptest.Dial(t, amqptest.UserURL(b.URL(), "svc", "stored-password"), door.cfg))
			_, err := amqp091.DialConfig(amqptest.UserURL(b.URL(), "svc", "wrong"), door.cfg)
			amqptest.RequireCode(t, err, amqp091.AccessRefused)
			_, err = amqp091.DialConfig(amqptest.UserURL(b.URL(), "nobody", "x"), door.cfg)
			amqptest.RequireCode(t, err, amqp091.AccessRefused)
		})
	}

	h := amqptest.NewAPI(t, b.ManagementHandler())
	status, _, _ := h.Do("GET", "/api/whoami", "svc", nil)
	require.Equal(t, http.StatusOK, status, "the hook logs svc into the management API")
	status, _, _ = h.Do("GET", "/api/whoami", "nobody", nil)
	require.Equal(t, http.StatusUnauthorized, status)

	out := logs.String()
	require.Contains(t, out, "login refused")
	require.Contains(t, out, `hook: not \"nobody\"`)
	require.Contains(t, out, "backend=hook")
}

// TestAuthChainHungBackend: a backend that hangs, ignoring its context,
// answers its login with 320 CONNECTION_FORCED at Options.LoginTimeout
// (the credentials were not checked), and holds up no other login
// meanwhile; a flood of refused logins from one source is throttled.
func TestAuthChainHungBackend(t *testing.T) {
	release := make(chan struct{})
	hung := make(chan struct{}, 16)
	slow := auth.Funcs{Login: func(ctx context.Context, req auth.Request) (auth.Identity, error) {
		if req.User != "slow" {
			return auth.Identity{}, auth.Refuse("not slow")
		}
		hung <- struct{}{}
		<-release // ignores ctx on purpose
		return auth.Identity{}, auth.Refuse("released")
	}}
	b := startBroker(t, Options{
		LoginTimeout: 500 * time.Millisecond,
		Auth:         auth.Chain{{Name: "slow", Authn: slow}, auth.Internal},
	})
	t.Cleanup(func() { close(release) })
	ctx := context.Background()
	require.NoError(t, b.Admin().PutUser(ctx, User{Name: "u", Password: "p"}))
	require.NoError(t, b.Admin().PutPermission(ctx, fullPermissionOn("u", "/")))

	errs := make(chan error, 1)
	go func() {
		_, err := amqp091.Dial(amqptest.UserURL(b.URL(), "slow", "x"))
		errs <- err
	}()
	<-hung
	// While the slow backend hangs, another login goes through.
	amqptest.RequireWorks(t, amqptest.Dial(t, amqptest.UserURL(b.URL(), "u", "p"), amqp091.Config{}))
	amqptest.RequireCode(t, <-errs, amqp091.ConnectionForced)
	require.Zero(t, b.acct.logins.Throttle.Admit("127.0.0.1"), "an undecided login is not counted")

	for range 12 {
		_, err := amqp091.Dial(amqptest.UserURL(b.URL(), "u", "wrong"))
		amqptest.RequireCode(t, err, amqp091.AccessRefused)
	}
	require.Positive(t, b.acct.logins.Throttle.Admit("127.0.0.1"), "refusals through the chain are throttled")
}

// TestAuthChainCache: a chain internal -> cache(hook): the hook is asked
// once for repeated AMQP logins with the same credentials, and every time
// for a refused one.
func TestAuthChainCache(t *testing.T) {
	var asked atomic.Int32
	hook := auth.Funcs{Login: func(ctx context.Context, req auth.Request) (auth.Identity, error) {
		asked.Add(1)
		return hookLogin(ctx, req)
	}}
	cache := &auth.Cache{Authn: hook, TTL: time.Hour}
	b := startBroker(t, Options{Auth: auth.Chain{auth.Internal, cache.Backend("cache")}})
	ctx := context.Background()
	require.NoError(t, b.Admin().PutUser(ctx, User{Name: "svc", Password: "stored-password"}))
	require.NoError(t, b.Admin().PutPermission(ctx, fullPermissionOn("svc", "/")))
	for range 3 {
		amqptest.RequireWorks(t, amqptest.Dial(t, amqptest.UserURL(b.URL(), "svc", "svc"), amqp091.Config{}))
	}
	require.EqualValues(t, 1, asked.Load(), "allowed login answered from the cache")
	for range 2 {
		_, err := amqp091.Dial(amqptest.UserURL(b.URL(), "svc", "wrong"))
		amqptest.RequireCode(t, err, amqp091.AccessRefused)
	}
	require.EqualValues(t, 3, asked.Load(), "refusals are asked each time")
}

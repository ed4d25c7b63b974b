package broker

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/auth"
	"github.com/warrenmq/broker/auth/httpbackend"
	"github.com/warrenmq/broker/internal/amqptest"
)

// authService is a rabbitmq_auth_backend_http service: "app" (password
// "pw") is allowed with the management tag, "slow" hangs until release is
// closed, everyone else is denied; vhost "private", read on "no-read-q"
// and routing keys under "secret." are denied. users counts user_path
// requests.
func authService(t *testing.T, release <-chan struct{}, users *atomic.Int32) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		allow := func(ok bool) {
			if ok {
				_, _ = w.Write([]byte("allow"))
				return
			}
			_, _ = w.Write([]byte("deny"))
		}
		switch r.URL.Path {
		case "/auth/user":
			users.Add(1)
			switch {
			case r.Form.Get("username") == "slow":
				<-release
				allow(false)
			case r.Form.Get("username") == "app" && r.Form.Get("password") == "pw":
				_, _ = w.Write([]byte("allow management"))
			default:
				_, _ = w.Write([]byte("deny no such user"))
			}
		case "/auth/vhost":
			allow(r.Form.Get("vhost") != "private")
		case "/auth/resource":
			allow(!(r.Form.Get("name") == "no-read-q" && r.Form.Get("permission") == "read"))
		case "/auth/topic":
			allow(!strings.HasPrefix(r.Form.Get("routing_key"), "secret."))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func httpBackendConfig(srv *httptest.Server) httpbackend.Config {
	return httpbackend.Config{
		UserPath: srv.URL + "/auth/user", VHostPath: srv.URL + "/auth/vhost",
		ResourcePath: srv.URL + "/auth/resource", TopicPath: srv.URL + "/auth/topic",
		Method: "post",
	}
}

// TestAuthzHTTPBackend: a chain internal -> http logs users in and
// decides their permissions through an HTTP service, through TCP, Dial
// and the direct Channel; a service that hangs on one user answers that
// login 320 CONNECTION_FORCED within Options.LoginTimeout while other
// logins go through; a flood of denied logins is throttled.
func TestAuthzHTTPBackend(t *testing.T) {
	release := make(chan struct{})
	var users atomic.Int32
	srv := authService(t, release, &users)
	t.Cleanup(func() { close(release) })
	hb, err := httpbackend.New(httpBackendConfig(srv))
	require.NoError(t, err)
	b := startBroker(t, Options{
		VHosts:       []string{"/", "private"},
		LoginTimeout: 500 * time.Millisecond,
		Auth:         auth.Chain{auth.Internal, hb.Entry("http")},
	})
	admin, err := b.Channel(context.Background())
	require.NoError(t, err)
	_, err = admin.QueueDeclare("no-read-q", false, false, false, false, nil)
	require.NoError(t, err)

	// The direct Channel asks user_path with no password; this service
	// denies that, as a service that checks passwords would.
	_, err = b.Channel(context.Background(), AsUser("app"))
	amqptest.RequireCode(t, err, amqp091.AccessRefused)

	for _, door := range authzDoors(b, "app", "pw")[:2] {
		t.Run(door.name, func(t *testing.T) {
			_, err := door.open(t, "private")
			amqptest.RequireReply(t, err, amqp091.NotAllowed, "access to vhost 'private' refused for user 'app'")
			ch, err := door.open(t, "/")
			require.NoError(t, err)
			require.NoError(t, confirmPublish(t, ch, "amq.topic", "public.k"))
			amqptest.RequireReply(t, confirmPublish(t, ch, "amq.topic", "secret.k"), amqp091.AccessRefused,
				"access to topic 'secret.k' in exchange 'amq.topic' in vhost '/' refused for user 'app'")
			ch, err = door.open(t, "/")
			require.NoError(t, err)
			_, _, err = ch.Get("no-read-q", true)
			amqptest.RequireReply(t, err, amqp091.AccessRefused, "access to queue 'no-read-q' in vhost '/' refused for user 'app'")
		})
	}
	_, err = amqp091.Dial(amqptest.UserURL(b.URL(), "app", "wrong"))
	amqptest.RequireCode(t, err, amqp091.AccessRefused)

	before := users.Load()
	errs := make(chan error, 1)
	go func() {
		_, err := amqp091.Dial(amqptest.UserURL(b.URL(), "slow", "x"))
		errs <- err
	}()
	amqptest.Poll(t, func() bool { return users.Load() > before }, "the slow login reached the service")
	amqptest.RequireWorks(t, amqptest.Dial(t, amqptest.UserURL(b.URL(), "app", "pw"), amqp091.Config{}))
	amqptest.RequireCode(t, <-errs, amqp091.ConnectionForced)

	h := amqptest.NewAPI(t, b.ManagementHandler())
	status, _, body := h.Do("GET", "/api/vhosts", "app", nil, "Authorization", "Basic YXBwOnB3") // app:pw
	require.Equal(t, 200, status, string(body))
	require.NotContains(t, string(body), `"private"`)

	// A flood of logins the service denies is throttled like any other.
	for range 12 {
		_, err := amqp091.Dial(amqptest.UserURL(b.URL(), "app", "wrong"))
		amqptest.RequireCode(t, err, amqp091.AccessRefused)
	}
	require.Positive(t, b.acct.logins.Throttle.Admit("127.0.0.1"), "refusals by the HTTP service are throttled")
}

// TestAuthzHTTPBackendCached: auth_backends.1 = cache with cached_backend =
// http: repeated logins and checks reach the service once.
func TestAuthzHTTPBackendCached(t *testing.T) {
	release := make(chan struct{})
	close(release)
	var users atomic.Int32
	srv := authService(t, release, &users)
	hb, err := httpbackend.New(httpBackendConfig(srv))
	require.NoError(t, err)
	cache := &auth.Cache{Authn: hb, Authz: hb, TTL: time.Minute}
	b := startBroker(t, Options{Auth: auth.Chain{cache.Backend("cache")}})
	for range 3 {
		amqptest.RequireWorks(t, amqptest.Dial(t, amqptest.UserURL(b.URL(), "app", "pw"), amqp091.Config{}))
	}
	require.EqualValues(t, 1, users.Load())
}

package broker

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/login"
	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/meta/memory"
)

// TestLoginFailuresThrottleTheirSource: over TCP, wrong passwords from
// 127.0.0.1 get that source throttled (AMQP and the management API count
// together), while 127.0.0.2 is not slowed and the right password still
// logs in from both: the source is slowed, the user is never locked out.
// A 120 KB user name is logged cut to 255 bytes with a marker.
func TestLoginFailuresThrottleTheirSource(t *testing.T) {
	amqptest.CheckGoroutines(t)
	var logs amqptest.SyncBuffer
	b := startBroker(t, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx := context.Background()
	require.NoError(t, b.Admin().PutUser(ctx, User{Name: "u", Password: "p"}))
	require.NoError(t, b.Admin().PutPermission(ctx, fullPermissionOn("u", "/")))
	from := func(ip string) amqp091.Config {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 30 * time.Second}
		return amqp091.Config{Dial: func(network, addr string) (net.Conn, error) { return d.Dial(network, addr) }}
	}

	_, err := amqp091.DialConfig(amqptest.UserURL(b.URL(), strings.Repeat("x", 120<<10), "p"), from("127.0.0.1"))
	amqptest.RequireCode(t, err, amqp091.AccessRefused)
	for range login.FreeFailures - 2 {
		_, err := amqp091.DialConfig(amqptest.UserURL(b.URL(), "u", "wrong"), from("127.0.0.1"))
		amqptest.RequireCode(t, err, amqp091.AccessRefused)
	}
	h := amqptest.NewAPI(t, b.ManagementHandler())
	status, _, _ := h.Do("GET", "/api/overview", "u", nil) // password "u": wrong
	require.Equal(t, http.StatusUnauthorized, status)
	require.Zero(t, b.acct.logins.Throttle.Admit("127.0.0.1"), "login.FreeFailures failures are free")
	_, err = amqp091.DialConfig(amqptest.UserURL(b.URL(), "u", "wrong"), from("127.0.0.1"))
	amqptest.RequireCode(t, err, amqp091.AccessRefused)

	require.Positive(t, b.acct.logins.Throttle.Admit("127.0.0.1"), "the failing source is slowed")
	require.Zero(t, b.acct.logins.Throttle.Admit("127.0.0.2"), "another source is not")
	amqptest.RequireWorks(t, amqptest.Dial(t, amqptest.UserURL(b.URL(), "u", "p"), from("127.0.0.2")))
	amqptest.RequireWorks(t, amqptest.Dial(t, amqptest.UserURL(b.URL(), "u", "p"), from("127.0.0.1")))

	out := logs.String()
	require.Contains(t, out, "...(truncated, 122880 bytes)")
	require.Less(t, len(out), 20<<10, "the 120 KB name is not logged in full")
}

// stalledMeta is a meta.Store whose user reads wait for their context
// while stalled is set, as a cluster member's consistent reads do while it
// has no raft leader.
type stalledMeta struct {
	meta.Store
	stalled atomic.Bool
}

func (s *stalledMeta) wait(ctx context.Context) error {
	if !s.stalled.Load() {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (s *stalledMeta) GetUser(ctx context.Context, name string) (meta.User, error) {
	if err := s.wait(ctx); err != nil {
		return meta.User{}, err
	}
	return s.Store.GetUser(ctx, name)
}

// TestLoginStoreUnavailable: a login whose user store does not answer
// within LoginTimeout is closed with 320 CONNECTION_FORCED (AMQP) or 503
// (management API), not 403 / 401, and counts as no failure; once the
// store answers, the same login succeeds.
func TestLoginStoreUnavailable(t *testing.T) {
	amqptest.CheckGoroutines(t)
	m := &stalledMeta{Store: memory.New()}
	b := startBroker(t, Options{Storage: StorageOptions{Meta: m}, LoginTimeout: 50 * time.Millisecond})
	m.stalled.Store(true)

	_, err := amqp091.Dial(b.URL())
	amqptest.RequireCode(t, err, amqp091.ConnectionForced)
	var ae *amqp091.Error
	require.ErrorAs(t, err, &ae)
	require.Contains(t, ae.Reason, "cannot authenticate now")
	h := amqptest.NewAPI(t, b.ManagementHandler())
	status, _, body := h.Do("GET", "/api/overview", "guest", nil)
	require.Equal(t, http.StatusServiceUnavailable, status, "%s", body)
	require.Zero(t, b.acct.logins.Throttle.Admit("127.0.0.1"), "an unanswered login is no failure")

	m.stalled.Store(false)
	amqptest.RequireWorks(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
	status, _, _ = h.Do("GET", "/api/overview", "guest", nil)
	require.Equal(t, http.StatusOK, status)
}

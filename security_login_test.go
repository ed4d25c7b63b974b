package broker

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/meta/memory"
)

// TestLoginThrottleDecisions drives the throttle on a fake clock: a source
// may fail throttleFree times at full speed; after that each of its logins
// waits, longer with each failure and one delay after the previous login,
// up to throttleMax; time forgives failures; other sources are never
// slowed, and in-process peers are not throttled.
func TestLoginThrottleDecisions(t *testing.T) {
	c := clock.NewFake(time.Unix(1_000_000, 0))
	th := newLoginThrottle(c)
	const a, b = "10.0.0.1", "10.0.0.2"

	for range throttleFree {
		require.Zero(t, th.admit(a))
		th.failed(a)
	}
	require.Zero(t, th.admit(a), "throttleFree failures are free")
	th.failed(a)
	require.Equal(t, throttleBase, th.admit(a), "the first failure beyond them costs throttleBase")
	require.Equal(t, 2*throttleBase, th.admit(a), "a second login at once is answered one delay after the first")
	th.failed(a)
	require.Equal(t, 4*throttleBase, th.admit(a), "the delay doubles, counted from the last reserved answer")
	for range 20 {
		th.failed(a)
	}
	require.Equal(t, throttleMax, th.admit(a), "capped")
	require.Equal(t, throttleMax, th.admit(a), "capped however many logins wait")

	require.Zero(t, th.admit(b), "another source is not slowed")
	require.Zero(t, th.admit(""), "in-process peers are not throttled")
	th.failed("")
	require.Empty(t, th.srcs[""])

	// Time forgives: after all failures were forgiven, a is free again.
	c.Advance(time.Duration(throttleFree+30) * throttleForgive)
	require.Zero(t, th.admit(a))
}

// TestLoginThrottleSources: the throttle keys IPv4 addresses, IPv4-mapped
// IPv6 as IPv4, IPv6 by /64, and treats pipes and no address as in-process.
func TestLoginThrottleSources(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.IPv4(192, 0, 2, 7), Port: 5}, "192.0.2.7"},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:192.0.2.7")}, "192.0.2.7"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:3:4:5:6")}, "2001:db8:1:2::/64"},
		{nil, ""},
		{pipeAddr{}, ""},
	} {
		require.Equal(t, tc.want, throttleKey(tc.addr), "%v", tc.addr)
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// TestLoginThrottleTableIsBounded: an attacker rotating addresses fills
// the table only up to throttleSources; past that its sources share one
// bucket, which is throttled like a single source.
func TestLoginThrottleTableIsBounded(t *testing.T) {
	c := clock.NewFake(time.Unix(1_000_000, 0))
	th := newLoginThrottle(c)
	for i := range throttleSources + throttleFree + 2 {
		th.failed(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}).String())
	}
	require.LessOrEqual(t, len(th.srcs), throttleSources+1)
	require.Positive(t, th.admit("192.0.2.1"), "an unknown source in a full table shares the throttled bucket")
	c.Advance(time.Duration(throttleFree+10) * throttleForgive)
	th.failed("192.0.2.1")
	require.Less(t, len(th.srcs), 10, "forgiven sources are pruned when the table is full")
}

// syncBuffer is a bytes.Buffer for a slog handler written from many
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLoginFailuresThrottleTheirSource: over TCP, wrong passwords from
// 127.0.0.1 get that source throttled (AMQP and the management API count
// together), while 127.0.0.2 is not slowed and the right password still
// logs in from both: the source is slowed, the user is never locked out.
// A 120 KB user name is logged cut to 255 bytes with a marker.
func TestLoginFailuresThrottleTheirSource(t *testing.T) {
	amqptest.CheckGoroutines(t)
	var logs syncBuffer
	b := startBroker(t, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx := context.Background()
	require.NoError(t, b.AddUser(ctx, "u", "p"))
	require.NoError(t, b.SetPermissions(ctx, "u", "/", fullPermission))
	from := func(ip string) amqp091.Config {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 30 * time.Second}
		return amqp091.Config{Dial: func(network, addr string) (net.Conn, error) { return d.Dial(network, addr) }}
	}

	_, err := amqp091.DialConfig(amqptest.UserURL(b.URL(), strings.Repeat("x", 120<<10), "p"), from("127.0.0.1"))
	amqptest.RequireCode(t, err, amqp091.AccessRefused)
	for range throttleFree - 2 {
		_, err := amqp091.DialConfig(amqptest.UserURL(b.URL(), "u", "wrong"), from("127.0.0.1"))
		amqptest.RequireCode(t, err, amqp091.AccessRefused)
	}
	h := mgmtServer(t, b)
	status, _, _ := h.do("GET", "/api/overview", "u", nil) // password "u": wrong
	require.Equal(t, http.StatusUnauthorized, status)
	require.Zero(t, b.acct.throttle.admit("127.0.0.1"), "throttleFree failures are free")
	_, err = amqp091.DialConfig(amqptest.UserURL(b.URL(), "u", "wrong"), from("127.0.0.1"))
	amqptest.RequireCode(t, err, amqp091.AccessRefused)

	require.Positive(t, b.acct.throttle.admit("127.0.0.1"), "the failing source is slowed")
	require.Zero(t, b.acct.throttle.admit("127.0.0.2"), "another source is not")
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
	b := startBroker(t, Options{Meta: m, LoginTimeout: 50 * time.Millisecond})
	m.stalled.Store(true)

	_, err := amqp091.Dial(b.URL())
	amqptest.RequireCode(t, err, amqp091.ConnectionForced)
	var ae *amqp091.Error
	require.ErrorAs(t, err, &ae)
	require.Contains(t, ae.Reason, "cannot authenticate now")
	h := mgmtServer(t, b)
	status, _, body := h.do("GET", "/api/overview", "guest", nil)
	require.Equal(t, http.StatusServiceUnavailable, status, "%s", body)
	require.Zero(t, b.acct.throttle.admit("127.0.0.1"), "an unanswered login is no failure")

	m.stalled.Store(false)
	amqptest.RequireWorks(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
	status, _, _ = h.do("GET", "/api/overview", "guest", nil)
	require.Equal(t, http.StatusOK, status)
}

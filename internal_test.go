package broker

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/faultstore"
	"github.com/warrenmq/broker/internal/passwd"
	"github.com/warrenmq/broker/internal/session"
	"github.com/warrenmq/broker/storage/memory"
)

// Tests whose neighbours are in package broker_test but which need the
// root's unexported names: TestOptions reads the defaults New filled in
// (b.opts), TestUsersAreSeededOnceAndPersist reads the stored user,
// TestGuestRefusedTextWithoutSafeCapability calls b.logins.AMQP with a peer
// address no test socket has, TestListenTLSNeedsConfig matches
// errNoTLSConfig, and TestEngineConfirmsCoalesce watches the session's
// publish counter while the store is blocked (Broker.Stats would ask the
// blocked queue). The files that need internals throughout (alarms, the
// scanner, shared mode, drain, the meta store after restarts, the login
// throttle, the management API) stay in package broker as a whole.

func TestOptions(t *testing.T) {
	t.Run("zero value gets defaults", func(t *testing.T) {
		b, err := New(Options{})
		require.NoError(t, err)
		defer b.Close()
		require.Equal(t, []User{{Name: "guest", Password: "guest", Tags: []string{"administrator"}}}, b.opts.Users)
		require.Equal(t, []string{"/"}, b.opts.VHosts)
		require.Equal(t, uint16(DefaultChannelMax), b.opts.ChannelMax)
		require.Equal(t, uint32(DefaultFrameMax), b.opts.FrameMax)
		require.Equal(t, DefaultHeartbeat, b.opts.Heartbeat)
		require.NotNil(t, b.opts.Logger)
		require.Equal(t, "amqp://guest:guest@127.0.0.1:5672/", b.URL())
	})
	t.Run("zero value tunes to RabbitMQ's defaults", func(t *testing.T) {
		// The exported defaults name internal/session's, which is what a
		// connection proposes; both must be RabbitMQ 4.x's values.
		require.Equal(t, []any{2047, 131072, 60 * time.Second, 128 << 20},
			[]any{DefaultChannelMax, DefaultFrameMax, DefaultHeartbeat, DefaultMaxMessageSize})
		b := startBroker(t, Options{})
		c := amqptest.DialRaw(t, b.Addr().String())
		tune := c.StartToTune()
		require.Equal(t, amqp.ConnectionTune{ChannelMax: DefaultChannelMax, FrameMax: DefaultFrameMax, Heartbeat: uint16(DefaultHeartbeat / time.Second)}, *tune)
		require.Equal(t, DefaultMaxMessageSize, b.opts.MaxMessageSize)
	})
	t.Run("caller's struct is not modified or aliased", func(t *testing.T) {
		opts := Options{Users: []User{{Name: "a", Password: "b", Tags: []string{"x"}}}, VHosts: []string{"v"}}
		b, err := New(opts)
		require.NoError(t, err)
		defer b.Close()
		require.Zero(t, opts.Heartbeat)
		opts.Users[0].Tags[0] = "changed"
		opts.VHosts[0] = "changed"
		require.Equal(t, "x", b.opts.Users[0].Tags[0])
		require.Equal(t, "v", b.opts.VHosts[0])
	})
	cases := []struct {
		name    string
		opts    Options
		wantErr []string // every one must appear
	}{
		{"empty user name", Options{Users: []User{{Password: "x"}}}, []string{"Users[0]: empty name"}},
		{"duplicate user", Options{Users: []User{{Name: "a"}, {Name: "a"}}}, []string{`Users[1]: duplicate user "a"`}},
		{"duplicate vhost", Options{VHosts: []string{"/", ""}}, []string{`VHosts[1]: duplicate vhost ""`}},
		{"fractional heartbeat", Options{Heartbeat: 1500 * time.Millisecond}, []string{"not a whole number of seconds"}},
		{"huge heartbeat", Options{Heartbeat: 70000 * time.Second}, []string{"exceeds 65535s"}},
		{"frame-max too small", Options{FrameMax: 4095}, []string{"FrameMax 4095 is below the minimum 4096"}},
		{"every problem at once", Options{
			Users:     []User{{Name: ""}},
			VHosts:    []string{"a", "a"},
			Heartbeat: time.Millisecond,
			FrameMax:  1,
		}, []string{"Users[0]", "VHosts[1]", "Heartbeat", "FrameMax"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.opts)
			require.Error(t, err)
			for _, want := range tc.wantErr {
				require.Contains(t, err.Error(), want)
			}
			require.True(t, strings.HasPrefix(err.Error(), "broker: "))
		})
	}
	t.Run("negative heartbeat disables it", func(t *testing.T) {
		b := startBroker(t, Options{Heartbeat: -1})
		c := amqptest.DialRaw(t, b.Addr().String())
		tune := c.StartToTune()
		require.Zero(t, tune.Heartbeat)
	})
	t.Run("configured users and limits reach the wire", func(t *testing.T) {
		b := startBroker(t, Options{
			Users:      []User{{Name: "app", Password: "s3cret"}},
			ChannelMax: 10,
			FrameMax:   8192,
			Heartbeat:  5 * time.Second,
			Logger:     slog.New(slog.DiscardHandler),
		})
		conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
		require.Equal(t, uint16(10), conn.Config.ChannelMax)
		require.Equal(t, 8192, conn.Config.FrameSize)
		require.Equal(t, 5*time.Second, conn.Config.Heartbeat)
		amqptest.RequireWorks(t, conn)
		_, err := amqp091.Dial("amqp://guest:guest@" + b.Addr().String() + "/")
		amqptest.RequireCode(t, err, amqp091.AccessRefused)
	})
}

func TestUsersAreSeededOnceAndPersist(t *testing.T) {
	amqptest.CheckGoroutines(t)
	dir := t.TempDir()
	ctx := context.Background()
	opts := Options{DataDir: dir, Users: []User{{Name: "alice", Password: "pw1", Tags: []string{"administrator"}}}}

	b, err := New(opts)
	require.NoError(t, err)
	u, err := b.stores.Meta.GetUser(ctx, "alice")
	require.NoError(t, err)
	require.True(t, passwd.CheckExported(u.HashingAlgorithm, u.PasswordHash, "pw1"))
	require.NotContains(t, string(u.PasswordHash), "pw1")
	require.Equal(t, []string{"administrator"}, []string(u.Tags))
	p, err := b.Admin().GetPermission(ctx, "alice", "/")
	require.NoError(t, err)
	require.Equal(t, Permission{User: "alice", VHost: "/", Configure: ".*", Write: ".*", Read: ".*"}, p)

	// Changes through the Go API win over Options at the next start.
	require.NoError(t, b.Admin().PutUser(ctx, User{Name: "alice", Password: "pw2"}))
	require.NoError(t, b.Admin().PutUser(ctx, User{Name: "bob", Password: "bobpw", Tags: []string{"monitoring"}}))
	require.NoError(t, b.Admin().PutPermission(ctx, Permission{User: "bob", VHost: "/", Configure: "", Write: "^amq\\.default$", Read: "q.*"}))
	require.NoError(t, b.Close())

	b, err = New(opts)
	require.NoError(t, err)
	defer b.Close()
	u, err = b.stores.Meta.GetUser(ctx, "alice")
	require.NoError(t, err)
	require.True(t, passwd.CheckExported(u.HashingAlgorithm, u.PasswordHash, "pw2"), "a stored user keeps its password")
	_, err = b.stores.Meta.GetUser(ctx, "bob")
	require.NoError(t, err)
	p, err = b.Admin().GetPermission(ctx, "bob", "")
	require.NoError(t, err)
	require.Equal(t, "q.*", p.Read)
}

func TestGuestRefusedTextWithoutSafeCapability(t *testing.T) {
	amqptest.CheckGoroutines(t)
	b, err := New(Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	ok, reason, err := b.logins.AMQP(&session.LoginAttempt{Mechanism: "PLAIN", User: "guest", Password: "guest", Peer: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1)}})
	require.NoError(t, err)
	require.False(t, ok)
	require.Equal(t, "user 'guest' can only connect via localhost", reason)
	ok, _, err = b.logins.AMQP(&session.LoginAttempt{Mechanism: "PLAIN", User: "guest", Password: "guest"})
	require.NoError(t, err)
	require.True(t, ok, "no peer address means in-process (Dial)")
}

func TestListenTLSNeedsConfig(t *testing.T) {
	amqptest.CheckGoroutines(t)
	b := startBroker(t, Options{})
	_, err := b.ListenTLS("127.0.0.1:0")
	require.ErrorIs(t, err, errNoTLSConfig)
}

// Under load one basic.ack multiple=true confirms many publishes. The
// queue's first store write is held until every publish reached the queue,
// so they are stored, and confirmed, in batches; a raw client counts the
// ack frames.
func TestEngineConfirmsCoalesce(t *testing.T) {
	in := faultstore.New()
	in.SetTracing(false)
	b := startBroker(t, Options{Storage: StorageOptions{Shards: faultstore.WrapShards(memory.New(), in)}})
	c := amqptest.DialRaw(t, b.Addr().String())
	c.Handshake()
	c.OpenChannel(1)
	c.SendMethod(1, &amqp.QueueDeclare{Queue: "co", Durable: true})
	_, ok := c.ExpectMethod(1).(*amqp.QueueDeclareOk)
	require.True(t, ok)
	c.SendMethod(1, &amqp.ConfirmSelect{})
	_, ok = c.ExpectMethod(1).(*amqp.ConfirmSelectOk)
	require.True(t, ok)
	gate := in.Block(faultstore.On(faultstore.Append))

	const n = 500
	noProps := (&amqp.Properties{}).Append(nil)
	var buf []byte
	for range n {
		buf = amqp.AppendMethodFrame(buf, 1, &amqp.BasicPublish{RoutingKey: "co"})
		buf = amqp.AppendHeaderFrame(buf, 1, amqp.ClassBasic, 1, noProps)
		buf = amqp.AppendFrame(buf, amqp.FrameBody, 1, []byte("x"))
	}
	c.Send(buf)
	select {
	case <-gate.Fired():
	case <-time.After(amqptest.Timeout):
		t.Fatal("no store write")
	}
	for b.counters.session.Publish.Load() < n {
		time.Sleep(time.Millisecond) // the reader hands the rest to the queue
	}
	gate.Release()

	var last uint64
	frames := 0
	for last < n {
		ack, ok := c.ExpectMethod(1).(*amqp.BasicAck)
		require.True(t, ok)
		require.Greater(t, ack.DeliveryTag, last)
		require.Equal(t, ack.DeliveryTag > last+1, ack.Multiple, "multiple exactly when it covers more than one")
		last = ack.DeliveryTag
		frames++
	}
	require.EqualValues(t, n, last)
	require.Less(t, frames, 10, "a burst is confirmed with a few frames")
}

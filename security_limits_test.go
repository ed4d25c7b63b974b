package broker_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/amqptest"
)

// remoteListener makes every accepted connection look as if it came from
// addr, so the loopback rule can be tested on a loopback socket.
type remoteListener struct {
	net.Listener
	addr net.Addr
}

func (l remoteListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return remoteConn{Conn: c, remote: l.addr}, nil
}

type remoteConn struct {
	net.Conn
	remote net.Addr
}

func (c remoteConn) RemoteAddr() net.Addr { return c.remote }

// serveAs starts a broker serving a listener whose peers appear to come
// from remote, and returns it with the URL to dial (guest's credentials).
func serveAs(t *testing.T, opts broker.Options, remote net.Addr) (*broker.Broker, string) {
	t.Helper()
	b, err := broker.New(opts)
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- b.Serve(remoteListener{Listener: l, addr: remote}) }()
	t.Cleanup(func() {
		require.NoError(t, b.Close())
		require.ErrorIs(t, <-done, broker.ErrClosed)
	})
	return b, fmt.Sprintf("amqp://guest:guest@%s/", l.Addr())
}

func TestGuestOnlyFromLoopback(t *testing.T) {
	remote := &net.TCPAddr{IP: net.IPv4(203, 0, 113, 7), Port: 40000}
	for _, tc := range []struct {
		name        string
		peer        net.Addr
		allowRemote bool
		user        string
		wantRefused bool
	}{
		{"guest from remote", remote, false, "guest", true},
		{"guest from remote IPv6", &net.TCPAddr{IP: net.ParseIP("2001:db8::1"), Port: 1}, false, "guest", true},
		{"guest from 127.0.0.1", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}, false, "guest", false},
		{"guest from ::1", &net.TCPAddr{IP: net.IPv6loopback, Port: 1}, false, "guest", false},
		{"guest from remote with AllowRemoteGuest", remote, true, "guest", false},
		{"other user from remote", remote, false, "alice", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			amqptest.CheckGoroutines(t)
			b, url := serveAs(t, broker.Options{AllowRemoteGuest: tc.allowRemote}, tc.peer)
			if tc.user != "guest" {
				require.NoError(t, b.Admin().PutUser(context.Background(), broker.User{Name: tc.user, Password: "pw"}))
				require.NoError(t, b.Admin().PutPermission(context.Background(), fullPermissionOn(tc.user, "/")))
				url = strings.Replace(url, "guest:guest", tc.user+":pw", 1)
			}
			conn, err := amqp091.Dial(url)
			if tc.wantRefused {
				// amqp091-go does not ask for authentication_failure_close,
				// so the text carries the reason (RabbitMQ's auth_fail).
				amqptest.RequireReply(t, err, amqp091.AccessRefused, "ACCESS_REFUSED - PLAIN login refused: user 'guest' can only connect via localhost")
				return
			}
			require.NoError(t, err)
			amqptest.RequireWorks(t, conn)
			require.NoError(t, conn.Close())
		})
	}
}

func TestMaxConnections(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  broker.Options
		limit int
		text  string
	}{
		{"broker", broker.Options{Limits: broker.LimitOptions{MaxConnections: 2}}, 2, "access to vhost '/' refused for user 'guest': node connection limit (2) is reached"},
		{"vhost", broker.Options{Limits: broker.LimitOptions{VHostMaxConnections: map[string]int{"/": 1}}}, 1, "access to vhost '/' refused for user 'guest': connection limit (1) is reached"},
		{"vhost zero", broker.Options{Limits: broker.LimitOptions{VHostMaxConnections: map[string]int{"": 0}}}, 0, "connection limit (0) is reached"},
		{"other vhost limited", broker.Options{VHosts: []string{"/", "other"}, Limits: broker.LimitOptions{VHostMaxConnections: map[string]int{"other": 0}}}, 3, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			amqptest.CheckGoroutines(t)
			b := startBroker(t, tc.opts)
			var conns []*amqp091.Connection
			for range tc.limit {
				conns = append(conns, amqptest.Dial(t, b.URL(), amqp091.Config{}))
			}
			if tc.text == "" {
				return
			}
			_, err := amqp091.Dial(b.URL())
			amqptest.RequireReply(t, err, amqp091.NotAllowed, tc.text)
			if tc.limit == 0 {
				return
			}
			// A closed connection gives its slot back before close-ok.
			require.NoError(t, conns[0].Close())
			amqptest.RequireWorks(t, amqptest.Dial(t, b.URL(), amqp091.Config{}))
		})
	}
}

func TestLimitOptionsValidate(t *testing.T) {
	_, err := broker.New(broker.Options{AuthMechanisms: []string{"EXTERNAL", "CRAM-MD5"}})
	require.ErrorContains(t, err, `unknown mechanism "CRAM-MD5"`)
	require.False(t, errors.Is(err, broker.ErrClosed))
}

func TestMaxQueuesPerVHost(t *testing.T) {
	amqptest.CheckGoroutines(t)
	b := startBroker(t, broker.Options{Limits: broker.LimitOptions{MaxQueuesPerVHost: 2}})
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	ch := amqptest.Channel(t, conn)
	for _, q := range []string{"q1", "q2", "q1"} { // redeclaring is not a new queue
		_, err := ch.QueueDeclare(q, false, false, false, false, nil)
		require.NoError(t, err)
	}
	_, err := ch.QueueDeclare("q3", false, false, false, false, nil)
	amqptest.RequireReply(t, err, amqp091.PreconditionFailed, "cannot declare queue 'q3': queue limit in vhost '/' (2) is reached")

	// Deleting one makes room.
	ch = amqptest.Channel(t, conn)
	_, err = ch.QueueDelete("q2", false, false, false)
	require.NoError(t, err)
	_, err = ch.QueueDeclare("q3", false, false, false, false, nil)
	require.NoError(t, err)
}

// A client that asks for authentication_failure_close gets RabbitMQ's safe
// text, which does not say why (auth_fail); others get the reason.
func TestLoginRefusalTextFollowsCapability(t *testing.T) {
	remote := &net.TCPAddr{IP: net.IPv4(198, 51, 100, 9), Port: 1}
	for _, tc := range []struct {
		name string
		safe bool
		want string
	}{
		{"safe", true, "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN. For details see the broker logfile."},
		{"detailed", false, "ACCESS_REFUSED - PLAIN login refused: user 'guest' can only connect via localhost"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			amqptest.CheckGoroutines(t)
			_, url := serveAs(t, broker.Options{}, remote)
			nc, err := net.Dial("tcp", strings.TrimSuffix(strings.TrimPrefix(url, "amqp://guest:guest@"), "/"))
			require.NoError(t, err)
			t.Cleanup(func() { nc.Close() })
			c := amqptest.NewRawClient(t, nc)
			c.Send([]byte("AMQP\x00\x00\x09\x01"))
			_, ok := c.ExpectMethod(0).(*amqp.ConnectionStart)
			require.True(t, ok)
			c.SendMethod(0, &amqp.ConnectionStartOk{
				ClientProperties: amqp.Table{"capabilities": amqp.Table{"authentication_failure_close": tc.safe}},
				Mechanism:        "PLAIN", Response: "\x00guest\x00guest", Locale: "en_US",
			})
			cl, ok := c.ExpectMethod(0).(*amqp.ConnectionClose)
			require.True(t, ok)
			require.Equal(t, amqp.AccessRefused, cl.ReplyCode)
			require.Equal(t, tc.want, cl.ReplyText)
		})
	}
}

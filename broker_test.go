package broker_test

import (
	"encoding/binary"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/amqptest"
)

func TestAMQP091OpensAndClosesChannels(t *testing.T) {
	amqptest.CheckGoroutines(t)
	b := startBroker(t, broker.Options{})
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})

	require.Equal(t, "Warren", conn.Properties["product"])
	caps, ok := conn.Properties["capabilities"].(amqp091.Table)
	require.True(t, ok)
	require.Equal(t, true, caps["authentication_failure_close"])
	require.Equal(t, true, caps["publisher_confirms"])
	require.Equal(t, true, caps["connection.blocked"], "alarms block publishers (alarms.go)")

	for range 100 {
		ch, err := conn.Channel()
		require.NoError(t, err)
		require.NoError(t, ch.Close())
	}
	// 100 open at once, then closed.
	chans := make([]*amqp091.Channel, 100)
	for i := range chans {
		var err error
		chans[i], err = conn.Channel()
		require.NoError(t, err)
	}
	for _, ch := range chans {
		require.NoError(t, ch.Close())
	}
	require.NoError(t, conn.Close())
}

func TestAMQP091HeartbeatsKeepIdleConnectionAlive(t *testing.T) {
	amqptest.CheckGoroutines(t)
	b := startBroker(t, broker.Options{})
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{Heartbeat: time.Second})
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))

	// Idle for three heartbeat intervals: both sides must keep the
	// connection alive with heartbeat frames alone.
	time.Sleep(3*time.Second + 500*time.Millisecond)

	select {
	case err := <-closed:
		t.Fatalf("connection closed while idle: %v", err)
	default:
	}
	amqptest.RequireWorks(t, conn)
	require.NoError(t, conn.Close())
}

func TestAMQP091WrongPasswordGets403(t *testing.T) {
	amqptest.CheckGoroutines(t)
	b := startBroker(t, broker.Options{})
	for _, auth := range []amqp091.Authentication{
		&amqp091.PlainAuth{Username: "guest", Password: "wrong"},
		&amqp091.AMQPlainAuth{Username: "guest", Password: "wrong"},
		&amqp091.PlainAuth{Username: "nobody", Password: "guest"},
	} {
		_, err := amqp091.DialConfig(b.URL(), amqp091.Config{SASL: []amqp091.Authentication{auth}})
		amqptest.RequireCode(t, err, amqp091.AccessRefused)
	}
	// The right password works, with either mechanism.
	for _, auth := range []amqp091.Authentication{
		&amqp091.PlainAuth{Username: "guest", Password: "guest"},
		&amqp091.AMQPlainAuth{Username: "guest", Password: "guest"},
	} {
		conn := amqptest.Dial(t, b.URL(), amqp091.Config{SASL: []amqp091.Authentication{auth}})
		amqptest.RequireWorks(t, conn)
		require.NoError(t, conn.Close())
	}
}

func TestAMQP091UnknownVHostGets530(t *testing.T) {
	amqptest.CheckGoroutines(t)
	b := startBroker(t, broker.Options{VHosts: []string{"/", "prod"}})
	_, err := amqp091.Dial(strings.TrimSuffix(b.URL(), "/") + "/staging")
	amqptest.RequireCode(t, err, amqp091.NotAllowed)

	conn := amqptest.Dial(t, strings.TrimSuffix(b.URL(), "/")+"/prod", amqp091.Config{})
	amqptest.RequireWorks(t, conn)
	require.NoError(t, conn.Close())
}

func TestCloseSendsConnectionForced(t *testing.T) {
	amqptest.CheckGoroutines(t)
	b, err := broker.New(broker.Options{})
	require.NoError(t, err)
	_, err = b.Listen("127.0.0.1:0")
	require.NoError(t, err)

	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	ch, err := conn.Channel()
	require.NoError(t, err)
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	chClosed := ch.NotifyClose(make(chan *amqp091.Error, 1))

	require.NoError(t, b.Close())
	cerr := <-closed
	require.NotNil(t, cerr)
	require.Equal(t, amqp091.ConnectionForced, cerr.Code)
	require.True(t, cerr.Server)
	<-chClosed
	require.True(t, conn.IsClosed())
}

func TestAMQP091UnimplementedMethodsAnswer540(t *testing.T) {
	amqptest.CheckGoroutines(t)
	b := startBroker(t, broker.Options{})
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	ch, err := conn.Channel()
	require.NoError(t, err)
	// basic.recover with requeue=false is refused with 540, as in RabbitMQ.
	err = ch.Recover(false)
	amqptest.RequireCode(t, err, amqp091.NotImplemented)
	// 540 is a hard error: the connection is gone, the broker is fine.
	conn2 := amqptest.Dial(t, b.URL(), amqp091.Config{})
	amqptest.RequireWorks(t, conn2)
}

func TestDialInMemory(t *testing.T) {
	amqptest.CheckGoroutines(t)
	b, err := broker.New(broker.Options{})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })

	// No listener at all: the URL only carries credentials and vhost.
	conn := amqptest.Dial(t, b.URL(), amqp091.Config{Dial: b.Dial})
	for range 10 {
		amqptest.RequireWorks(t, conn)
	}
	require.NoError(t, conn.Close())
}

// TestRawProtocolErrors sends broken input over raw sockets; each gets the
// spec's answer and the broker keeps serving a well-behaved client, checked
// before and after every case.
func TestRawProtocolErrors(t *testing.T) {
	amqptest.CheckGoroutines(t)
	b := startBroker(t, broker.Options{})
	good := amqptest.Dial(t, b.URL(), amqp091.Config{})
	amqptest.RequireWorks(t, good)

	publish := amqp.AppendMethod(nil, &amqp.BasicPublish{RoutingKey: "k"})
	cases := []struct {
		name string
		run  func(c *amqptest.RawClient)
	}{
		{"garbage instead of the protocol header", func(c *amqptest.RawClient) {
			c.Send([]byte("GARBAGE!"))
			got := make([]byte, 8)
			_, err := c.Conn.Read(got)
			require.NoError(t, err)
			require.Equal(t, "AMQP\x00\x00\x09\x01", string(got))
			c.ExpectEOF()
		}},
		{"bad frame end octet", func(c *amqptest.RawClient) {
			c.Handshake()
			f := amqp.AppendMethodFrame(nil, 1, &amqp.ChannelOpen{})
			f[len(f)-1] = 0xAB
			c.Send(f)
			c.ExpectClose(amqp.FrameError)
		}},
		{"frame larger than frame-max", func(c *amqptest.RawClient) {
			c.Handshake()
			h := []byte{amqp.FrameBody, 0, 1, 0, 0, 0, 0}
			binary.BigEndian.PutUint32(h[3:], broker.DefaultFrameMax) // + 8 octets of overhead
			c.Send(h)
			c.Send(make([]byte, 1000)) // part of the oversized payload
			c.ExpectClose(amqp.FrameError)
		}},
		{"method on an unopened channel", func(c *amqptest.RawClient) {
			c.Handshake()
			c.SendMethod(9, &amqp.BasicQos{PrefetchCount: 1})
			c.ExpectClose(amqp.ChannelError)
		}},
		{"body frame without a header", func(c *amqptest.RawClient) {
			c.Handshake()
			c.OpenChannel(1)
			c.Send(amqp.AppendFrame(nil, amqp.FrameBody, 1, []byte("hello")))
			c.ExpectClose(amqp.UnexpectedFrame)
		}},
		{"header frame without a content method", func(c *amqptest.RawClient) {
			c.Handshake()
			c.OpenChannel(1)
			c.Send(amqp.AppendHeaderFrame(nil, 1, amqp.ClassBasic, 5, (&amqp.Properties{}).Append(nil)))
			c.ExpectClose(amqp.UnexpectedFrame)
		}},
		{"method frame while body expected", func(c *amqptest.RawClient) {
			c.Handshake()
			c.OpenChannel(1)
			c.Send(amqp.AppendFrame(nil, amqp.FrameMethod, 1, publish))
			c.Send(amqp.AppendHeaderFrame(nil, 1, amqp.ClassBasic, 5, (&amqp.Properties{}).Append(nil)))
			c.SendMethod(1, &amqp.ChannelClose{})
			c.ExpectClose(amqp.UnexpectedFrame)
		}},
		{"peer vanishes mid-handshake", func(c *amqptest.RawClient) {
			c.Send([]byte("AMQP\x00\x00\x09\x01"))
			c.ExpectMethod(0)
			c.Conn.Close()
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.run(amqptest.DialRaw(t, b.Addr().String()))
			amqptest.RequireWorks(t, good)
		})
	}
	require.NoError(t, good.Close())
}

func TestRawHeartbeatSilentPeerDropped(t *testing.T) {
	amqptest.CheckGoroutines(t)
	b := startBroker(t, broker.Options{Heartbeat: time.Second})
	c := amqptest.DialRaw(t, b.Addr().String())
	tune := c.StartToTune()
	require.Equal(t, uint16(1), tune.Heartbeat)
	c.SendMethod(0, &amqp.ConnectionTuneOk{ChannelMax: tune.ChannelMax, FrameMax: tune.FrameMax, Heartbeat: 1})
	c.SendMethod(0, &amqp.ConnectionOpen{VirtualHost: "/"})
	_, ok := c.ExpectMethod(0).(*amqp.ConnectionOpenOk)
	require.True(t, ok)

	// We never send anything again: the broker heartbeats, then hangs up.
	heartbeats := 0
	for {
		f, err := c.Frames.ReadFrame()
		if err != nil {
			break
		}
		require.Equal(t, amqp.FrameHeartbeat, f.Type)
		heartbeats++
	}
	require.GreaterOrEqual(t, heartbeats, 1)
}

func TestCloseIsIdempotentAndConcurrent(t *testing.T) {
	amqptest.CheckGoroutines(t)
	b, err := broker.New(broker.Options{})
	require.NoError(t, err)
	_, err = b.Listen("127.0.0.1:0")
	require.NoError(t, err)
	_, err = b.Listen("127.0.0.1:0")
	require.NoError(t, err)
	var conns []*amqp091.Connection
	for range 5 {
		conns = append(conns, amqptest.Dial(t, b.URL(), amqp091.Config{}))
	}
	// A raw client that never answers close-ok: Close still returns.
	raw := amqptest.DialRaw(t, b.Addr().String())
	raw.Handshake()

	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = b.Close()
		}()
	}
	wg.Wait()
	require.NoError(t, b.Close())
	for _, c := range conns {
		<-c.NotifyClose(make(chan *amqp091.Error, 1))
		require.True(t, c.IsClosed())
	}

	_, err = b.Listen("127.0.0.1:0")
	require.ErrorIs(t, err, broker.ErrClosed)
	_, err = b.Dial("tcp", "ignored")
	require.ErrorIs(t, err, broker.ErrClosed)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	require.ErrorIs(t, b.Serve(l), broker.ErrClosed)
}

func TestServeReturnsErrClosed(t *testing.T) {
	amqptest.CheckGoroutines(t)
	b, err := broker.New(broker.Options{})
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- b.Serve(l) }()

	// Serve registers the listener asynchronously; a client connecting is
	// proof it is serving.
	conn := amqptest.Dial(t, "amqp://guest:guest@"+l.Addr().String()+"/", amqp091.Config{})
	amqptest.RequireWorks(t, conn)
	require.Equal(t, l.Addr().String(), b.Addr().String())

	require.NoError(t, b.Close())
	require.ErrorIs(t, <-served, broker.ErrClosed)
}

func TestListenAndServe(t *testing.T) {
	amqptest.CheckGoroutines(t)
	b, err := broker.New(broker.Options{})
	require.NoError(t, err)
	// Find a free port, release it, serve on it.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())

	served := make(chan error, 1)
	go func() { served <- b.ListenAndServe(addr) }()
	var conn *amqp091.Connection
	for conn == nil {
		conn, err = amqp091.Dial("amqp://guest:guest@" + addr + "/")
		if err != nil {
			// Not listening yet; the port may also have been taken meanwhile.
			select {
			case serr := <-served:
				t.Skipf("port taken before ListenAndServe bound it: %v", serr)
			default:
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	amqptest.RequireWorks(t, conn)
	require.NoError(t, conn.Close())
	require.NoError(t, b.Close())
	require.ErrorIs(t, <-served, broker.ErrClosed)
}

func TestURL(t *testing.T) {
	b, err := broker.New(broker.Options{Users: []broker.User{{Name: "ad@min", Password: "p:w/d"}}})
	require.NoError(t, err)
	require.Nil(t, b.Addr())
	require.Equal(t, "amqp://ad%40min:p%3Aw%2Fd@127.0.0.1:5672/", b.URL())

	addr, err := b.Listen("127.0.0.1:0")
	require.NoError(t, err)
	require.Equal(t, addr, b.Addr())
	require.Equal(t, "amqp://ad%40min:p%3Aw%2Fd@"+addr.String()+"/", b.URL())
	uri, err := amqp091.ParseURI(b.URL())
	require.NoError(t, err)
	require.Equal(t, "ad@min", uri.Username)
	require.Equal(t, "p:w/d", uri.Password)
	require.Equal(t, "/", uri.Vhost)
	require.NoError(t, b.Close())
}

// flakyListener fails its first Accept with a temporary error, then behaves
// like the listener it wraps.
type flakyListener struct {
	net.Listener
	mu    sync.Mutex
	calls int
}

type temporaryError struct{}

func (temporaryError) Error() string   { return "accept: too many open files" }
func (temporaryError) Temporary() bool { return true }
func (temporaryError) Timeout() bool   { return false }

func (l *flakyListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	l.calls++
	first := l.calls == 1
	l.mu.Unlock()
	if first {
		return nil, temporaryError{}
	}
	return l.Listener.Accept()
}

func TestServeRetriesTemporaryAcceptErrors(t *testing.T) {
	amqptest.CheckGoroutines(t)
	b, err := broker.New(broker.Options{})
	require.NoError(t, err)
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	l := &flakyListener{Listener: inner}
	served := make(chan error, 1)
	go func() { served <- b.Serve(l) }()

	conn := amqptest.Dial(t, "amqp://guest:guest@"+inner.Addr().String()+"/", amqp091.Config{})
	amqptest.RequireWorks(t, conn)
	require.NoError(t, conn.Close())
	require.NoError(t, b.Close())
	require.ErrorIs(t, <-served, broker.ErrClosed)
}

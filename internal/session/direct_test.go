package session

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/queue"
	"github.com/warrenmq/broker/internal/vhost"
	"github.com/warrenmq/broker/meta"
	metamemory "github.com/warrenmq/broker/meta/memory"
	"github.com/warrenmq/broker/storage/memory"
	"github.com/warrenmq/broker/unacked"
)

// recordingSink records what a direct connection sends, as a client would
// see it: method names per channel, message bodies, and the close.
type recordingSink struct {
	mu      sync.Mutex
	methods []sent
	closed  bool
	err     *amqp.Error
}

type sent struct {
	channel uint16
	method  amqp.Method
	body    string
}

func (s *recordingSink) Method(channel uint16, m amqp.Method) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.methods = append(s.methods, sent{channel: channel, method: m})
}

func (s *recordingSink) Content(channel uint16, m amqp.Method, props, body []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// The method struct may be reused by the sender: keep a copy.
	var cp amqp.Method
	switch m := m.(type) {
	case *amqp.BasicDeliver:
		d := *m
		cp = &d
	case *amqp.BasicGetOk:
		g := *m
		cp = &g
	case *amqp.BasicReturn:
		r := *m
		cp = &r
	}
	s.methods = append(s.methods, sent{channel: channel, method: cp, body: string(body)})
}

func (s *recordingSink) Closed(err *amqp.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		panic("Closed called twice")
	}
	s.closed, s.err = true, err
}

// take returns what was sent since the last take.
func (s *recordingSink) take() []sent {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.methods
	s.methods = nil
	return out
}

func (s *recordingSink) closeState() (bool, *amqp.Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed, s.err
}

// testVHost opens vhost "/" on in-memory stores, closed on cleanup.
func testVHost(t *testing.T) *vhost.VHost {
	t.Helper()
	st := queue.Stores{Shards: memory.New(), Cursors: metamemory.New(), Index: unacked.NewMemoryIndex()}
	vh, err := vhost.Open(context.Background(), vhost.Config{
		Name:  "/",
		Store: metamemory.New(),
		StartQueue: func(ctx context.Context, def meta.Queue, f queue.Features) (*queue.Queue, error) {
			return queue.Start(ctx, queue.Config{VHost: def.VHost, Name: def.Name, Shard: def.Name, Stores: st, Broker: "test", Incarnation: 1, Features: f})
		},
	})
	require.NoError(t, err)
	t.Cleanup(vh.Close)
	return vh
}

// newDirect returns an open direct connection with channel 1 open.
func newDirect(t *testing.T) (*Conn, *recordingSink) {
	t.Helper()
	sink := &recordingSink{}
	c := NewDirect(testConfig(), "direct#1", testVHost(t), "guest", sink)
	t.Cleanup(func() { c.Shutdown(amqp.ConnectionForced, "test over") })
	require.NoError(t, c.Handle(1, &amqp.ChannelOpen{}, nil, nil))
	requireSent(t, sink, sent{channel: 1, method: &amqp.ChannelOpenOk{}})
	return c, sink
}

func requireSent(t *testing.T, sink *recordingSink, want ...sent) {
	t.Helper()
	got := sink.take()
	require.Len(t, got, len(want), "sent: %v", got)
	for i := range want {
		require.Equal(t, want[i].channel, got[i].channel, "channel of #%d", i)
		require.Equal(t, want[i].method.Name(), got[i].method.Name(), "method #%d", i)
		require.Equal(t, want[i].body, got[i].body, "body of #%d", i)
	}
}

func TestDirectRunsTheChannelCode(t *testing.T) {
	c, sink := newDirect(t)
	require.NoError(t, c.Handle(1, &amqp.QueueDeclare{Queue: "q"}, nil, nil))
	requireSent(t, sink, sent{channel: 1, method: &amqp.QueueDeclareOk{}})

	props := (&amqp.Properties{ContentType: "text/plain"}).Append(nil)
	require.NoError(t, c.Handle(1, &amqp.BasicPublish{RoutingKey: "q"}, props, []byte("hello")))
	require.NoError(t, c.Handle(1, &amqp.BasicGet{Queue: "q"}, nil, nil))
	got := sink.take()
	require.Len(t, got, 1)
	getOk, ok := got[0].method.(*amqp.BasicGetOk)
	require.True(t, ok, "got %s", got[0].method.Name())
	require.Equal(t, "hello", got[0].body)
	require.NoError(t, c.Handle(1, &amqp.BasicAck{DeliveryTag: getOk.DeliveryTag}, nil, nil))
	require.NoError(t, c.Handle(1, &amqp.BasicGet{Queue: "q"}, nil, nil))
	requireSent(t, sink, sent{channel: 1, method: &amqp.BasicGetEmpty{}})

	// Client close: close-ok, then the connection ends with no error.
	require.NoError(t, c.Handle(1, &amqp.ChannelClose{ReplyCode: amqp.ReplySuccess}, nil, nil))
	requireSent(t, sink, sent{channel: 1, method: &amqp.ChannelCloseOk{}})
	require.NoError(t, c.Handle(0, &amqp.ConnectionClose{ReplyCode: amqp.ReplySuccess}, nil, nil))
	requireSent(t, sink, sent{channel: 0, method: &amqp.ConnectionCloseOk{}})
	closed, err := sink.closeState()
	require.True(t, closed)
	require.Nil(t, err)
	require.ErrorIs(t, c.Handle(1, &amqp.ChannelOpen{}, nil, nil), ErrClosed)
}

func TestDirectErrors(t *testing.T) {
	tests := []struct {
		name    string
		channel uint16
		method  amqp.Method
		body    []byte
		code    uint16
		hard    bool
	}{
		{"passive declare of a missing queue closes the channel", 1, &amqp.QueueDeclare{Queue: "missing", Passive: true}, nil, amqp.NotFound, false},
		{"ack of an unknown tag closes the channel", 1, &amqp.BasicAck{DeliveryTag: 7}, nil, amqp.PreconditionFailed, false},
		{"publish to a missing exchange closes the channel", 1, &amqp.BasicPublish{Exchange: "nope"}, []byte("x"), amqp.NotFound, false},
		{"oversized body closes the channel", 1, &amqp.BasicPublish{RoutingKey: "q"}, make([]byte, 2048), amqp.PreconditionFailed, false},
		{"server-only method closes the connection", 1, &amqp.BasicDeliver{}, nil, amqp.CommandInvalid, true},
		{"method on a closed channel closes the connection", 2, &amqp.QueueDeclare{Queue: "q"}, nil, amqp.ChannelError, true},
		{"second channel.open closes the connection", 1, &amqp.ChannelOpen{}, nil, amqp.ChannelError, true},
		{"non-connection method on channel 0 closes the connection", 0, &amqp.QueueDeclare{}, nil, amqp.ChannelError, true},
		{"immediate publish closes the connection", 1, &amqp.BasicPublish{RoutingKey: "q", Immediate: true}, []byte("x"), amqp.NotImplemented, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, sink := newDirect(t)
			c.cfg.MaxMessageSize = 1024 // Config is read per publish
			var props []byte
			if tt.method.HasContent() {
				props = (&amqp.Properties{}).Append(nil)
			}
			err := c.Handle(tt.channel, tt.method, props, tt.body)
			amqptest.RequireCode(t, err, tt.code, "err %v", err)
			closed, cerr := sink.closeState()
			if tt.hard {
				require.True(t, closed)
				require.NotNil(t, cerr)
				require.Equal(t, tt.code, cerr.Code)
				requireSent(t, sink)
				require.ErrorIs(t, c.Handle(1, &amqp.BasicQos{}, nil, nil), ErrClosed)
				return
			}
			require.False(t, closed)
			got := sink.take()
			require.Len(t, got, 1)
			cl, ok := got[0].method.(*amqp.ChannelClose)
			require.True(t, ok, "got %s", got[0].method.Name())
			require.Equal(t, tt.code, cl.ReplyCode)
			// As on the wire: everything but close-ok is dropped until the
			// client answers, then the channel number is free again.
			require.NoError(t, c.Handle(1, &amqp.QueueDeclare{Queue: "q"}, nil, nil))
			requireSent(t, sink)
			require.NoError(t, c.Handle(1, &amqp.ChannelCloseOk{}, nil, nil))
			require.NoError(t, c.Handle(1, &amqp.ChannelOpen{}, nil, nil))
			requireSent(t, sink, sent{channel: 1, method: &amqp.ChannelOpenOk{}})
		})
	}
}

func TestDirectShutdown(t *testing.T) {
	c, sink := newDirect(t)
	require.NoError(t, c.Handle(1, &amqp.QueueDeclare{Queue: "excl", Exclusive: true}, nil, nil))
	sink.take()
	c.Shutdown(amqp.ConnectionForced, "broker shutdown")
	closed, err := sink.closeState()
	require.True(t, closed)
	require.Equal(t, amqp.ConnectionForced, err.Code)
	require.ErrorIs(t, c.Handle(1, &amqp.BasicQos{}, nil, nil), ErrClosed)
	c.Shutdown(amqp.ConnectionForced, "again") // idempotent: Closed is called once
	// The exclusive queue went with the connection.
	_, qerr := c.vh.Queue("other", "excl")
	amqptest.RequireCode(t, qerr, amqp.NotFound, "err %v", qerr)
}

// TestDirectShutdownDuringHandle closes the connection from other
// goroutines while Handle calls run: the release happens exactly once
// (the sink panics otherwise), after the running call, and later calls
// see ErrClosed.
func TestDirectShutdownDuringHandle(t *testing.T) {
	for range 20 {
		c, sink := newDirect(t)
		require.NoError(t, c.Handle(1, &amqp.QueueDeclare{Queue: "q"}, nil, nil))
		var wg sync.WaitGroup
		errs := make(chan error, 4*50)
		for w := range 4 {
			wg.Go(func() {
				props := (&amqp.Properties{}).Append(nil)
				for i := range 50 {
					if w == 0 && i == 25 {
						c.Shutdown(amqp.ConnectionForced, "bye")
					}
					if err := c.Handle(1, &amqp.BasicPublish{RoutingKey: "q"}, props, []byte("m")); err != nil {
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.ErrorIs(t, err, ErrClosed)
		}
		closed, err := sink.closeState()
		require.True(t, closed)
		require.Equal(t, amqp.ConnectionForced, err.Code)
	}
}

func TestHandleNeedsADirectConnection(t *testing.T) {
	c := NewConn(nil, "tcp#1", testConfig())
	require.Error(t, c.Handle(1, &amqp.ChannelOpen{}, nil, nil))
	d := NewDirect(testConfig(), "direct#1", testVHost(t), "guest", &recordingSink{})
	require.Error(t, d.Handle(1, nil, nil, nil))
}

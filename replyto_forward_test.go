package broker_test

import (
	"strings"
	"sync"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/peer"
)

// linkedForwarder joins brokers by tag in one process: it hands a reply
// straight to the receiver the tagged broker attached, as package cluster
// does over the network.
type linkedForwarder struct {
	tag    string
	linked *receivers
	waited []bool // wait of every ForwardReply, in order
}

// receivers are the attached receivers of the linked brokers, by tag.
type receivers struct {
	mu sync.Mutex
	by map[string]peer.Receiver
}

func (r *receivers) get(tag string) (peer.Receiver, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rcv, ok := r.by[tag]
	return rcv, ok && rcv != nil
}

func (f *linkedForwarder) ReplyTag() string { return f.tag }

func (f *linkedForwarder) Attach(r peer.Receiver) {
	f.linked.mu.Lock()
	defer f.linked.mu.Unlock()
	f.linked.by[f.tag] = r
}

func (f *linkedForwarder) ForwardReply(vhost, tag, name string, props, body []byte, wait bool) bool {
	f.waited = append(f.waited, wait)
	r, ok := f.linked.get(tag)
	return ok && r.DeliverReply(vhost, name, append([]byte(nil), props...), append([]byte(nil), body...))
}

func (f *linkedForwarder) ReplyExists(vhost, tag, name string) bool {
	r, ok := f.linked.get(tag)
	return ok && r.ReplyExists(vhost, name)
}

// TestReplyForwarder: with a peer.Forwarder attached, a broker's reply names carry
// its tag, a reply published on another broker to such a name goes
// through the forwarder (waiting for the outcome only when mandatory) and
// reaches the requester, a passive declare of the name is asked of its
// broker, and a reply to a gone requester is returned. A tag that cannot
// sit in a name is refused.
func TestReplyForwarder(t *testing.T) {
	brokers := map[string]*broker.Broker{}
	fwd := map[string]*linkedForwarder{}
	linked := &receivers{by: map[string]peer.Receiver{}}
	for _, tag := range []string{"a", "b"} {
		fwd[tag] = &linkedForwarder{tag: tag, linked: linked}
		b, err := broker.New(withReplies(broker.Options{}, fwd[tag]))
		require.NoError(t, err)
		t.Cleanup(func() { b.Close() })
		brokers[tag] = b
	}
	reqConn := amqptest.DialVia(t, brokers["a"].Dial, "guest", "requester")
	req := amqptest.Channel(t, reqConn)
	replies, err := req.Consume(replyQueue, "", true, false, false, false, nil)
	require.NoError(t, err)
	amqptest.DeclareQueue(t, req, "rpc", false)
	requests, err := req.Consume("rpc", "", true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, req.PublishWithContext(t.Context(), "", "rpc", false, false, amqp091.Publishing{ReplyTo: replyQueue}))
	name := amqptest.Next(t, requests).ReplyTo
	require.True(t, strings.HasPrefix(name, replyQueue+".a."), name)

	resp := amqptest.Channel(t, amqptest.DialVia(t, brokers["b"].Dial, "guest", "responder"))
	require.NoError(t, resp.Confirm(false))
	confirms := resp.NotifyPublish(make(chan amqp091.Confirmation, 1))
	returns := resp.NotifyReturn(make(chan amqp091.Return, 1))
	for _, mandatory := range []bool{false, true} {
		require.NoError(t, resp.PublishWithContext(t.Context(), "", name, mandatory, false, amqp091.Publishing{Body: []byte("pong")}))
		require.Equal(t, "pong", string(amqptest.Next(t, replies).Body))
		c, _ := amqptest.Receive(t, confirms)
		require.True(t, c.Ack)
	}
	require.Equal(t, []bool{false, true}, fwd["b"].waited)
	_, err = resp.QueueDeclarePassive(name, false, false, false, false, nil)
	require.NoError(t, err, "broker a says its requester consumes")

	require.NoError(t, req.Close())
	require.NoError(t, resp.PublishWithContext(t.Context(), "", name, true, false, amqp091.Publishing{Body: []byte("late")}))
	ret, _ := amqptest.Receive(t, returns)
	require.Equal(t, uint16(amqp091.NoRoute), ret.ReplyCode)
	_, err = resp.QueueDeclarePassive(name, false, false, false, false, nil)
	amqptest.RequireCode(t, err, amqp091.NotFound)

	for _, tag := range []string{"", "a.b", strings.Repeat("x", 33)} {
		_, err := broker.New(withReplies(broker.Options{}, &linkedForwarder{tag: tag}))
		require.ErrorContains(t, err, "broker: peer replies: reply tag", "tag %q", tag)
	}
}

// withReplies attaches f to o, as package cluster attaches its forwarder.
func withReplies(o broker.Options, f peer.Forwarder) broker.Options {
	peer.Attach(&o, peer.Peers{Replies: f})
	return o
}

package cluster_test

import (
	"fmt"
	"net"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/cluster"
	"github.com/warrenmq/broker/internal/amqptest"
)

const replyQueue = "amq.rabbitmq.reply-to"

// dialNode opens amqp091-go on node i through its broker's Dial (no
// socket) and returns a channel on it.
func (c *testCluster) dialNode(i int, name string) (*amqp091.Connection, *amqp091.Channel) {
	c.t.Helper()
	conn := amqptest.DialVia(c.t, c.broker(i).Dial, "guest", name)
	return conn, amqptest.Channel(c.t, conn)
}

// requester is an RPC client on one node: a channel consuming
// amq.rabbitmq.reply-to.
type requester struct {
	ch      *amqp091.Channel
	replies <-chan amqp091.Delivery
}

func newRequester(t testing.TB, ch *amqp091.Channel) *requester {
	replies, err := ch.Consume(replyQueue, "", true, false, false, false, nil)
	require.NoError(t, err)
	return &requester{ch: ch, replies: replies}
}

// request publishes a request to queue with reply_to
// amq.rabbitmq.reply-to.
func (r *requester) request(t testing.TB, queue, corr string) {
	require.NoError(t, r.ch.PublishWithContext(t.Context(), "", queue, false, false, amqp091.Publishing{
		ReplyTo: replyQueue, CorrelationId: corr, Body: []byte("request " + corr),
	}))
}

// responder answers requests from a queue on its own channel, in confirm
// mode, with mandatory replies, and reports for each whether it was
// returned.
type responder struct {
	ch       *amqp091.Channel
	confirms chan amqp091.Confirmation
	returns  chan amqp091.Return
}

func newResponder(t testing.TB, ch *amqp091.Channel) *responder {
	require.NoError(t, ch.Confirm(false))
	return &responder{
		ch:       ch,
		confirms: ch.NotifyPublish(make(chan amqp091.Confirmation, 1)),
		returns:  ch.NotifyReturn(make(chan amqp091.Return, 1)),
	}
}

// reply publishes a mandatory reply to name and reports whether it came
// back (a basic.return precedes the publish's confirm), and how long the
// confirm took.
func (r *responder) reply(t testing.TB, name, corr string) (amqp091.Return, bool, time.Duration) {
	start := time.Now()
	require.NoError(t, r.ch.PublishWithContext(t.Context(), "", name, true, false, amqp091.Publishing{
		CorrelationId: corr, Body: []byte("reply " + corr),
	}))
	c, _ := amqptest.Receive(t, r.confirms)
	took := time.Since(start)
	require.True(t, c.Ack, "a reply's confirm is an ack, routed or not")
	select {
	case ret := <-r.returns:
		return ret, true, took
	default:
		return amqp091.Return{}, false, took
	}
}

// rpcQueue declares durable queue name on node 0 and waits until node i
// knows it.
func (c *testCluster) rpcQueue(ch *amqp091.Channel, i int, name string) {
	c.t.Helper()
	amqptest.DeclareQueue(c.t, ch, name, true)
	c.declared(i, name)
}

// serveRPC declares the queue "rpc" on the requester's channel ch (as
// seen by node 1) and opens a responder on node 1 that consumes it: the
// requests it takes and the responder that answers them.
func (c *testCluster) serveRPC(ch *amqp091.Channel) (<-chan amqp091.Delivery, *amqp091.Channel) {
	c.t.Helper()
	c.rpcQueue(ch, 1, "rpc")
	_, rch := c.dialNode(1, "responder")
	requests, err := rch.Consume("rpc", "", true, false, false, false, nil)
	require.NoError(c.t, err)
	return requests, rch
}

// TestReplyToAcrossNodes is an RPC round trip over direct reply-to with
// the requester on node 1 and the responder on node 2, then node 3 (and
// node 1 itself), each through amqp091-go over its node's Broker.Dial: the
// reply, published on the responder's node, reaches the requester on
// its node, mandatory and not returned, and only that requester.
func TestReplyToAcrossNodes(t *testing.T) {
	c := newTestCluster(t)
	_, ch := c.dialNode(0, "requester")
	req := newRequester(t, ch)
	for _, node := range []int{1, 2, 0} {
		t.Run(fmt.Sprintf("responder on node %d", node+1), func(t *testing.T) {
			queue := fmt.Sprintf("rpc-%d", node+1)
			c.rpcQueue(ch, node, queue)
			_, rch := c.dialNode(node, "responder")
			requests, err := rch.Consume(queue, "", true, false, false, false, nil)
			require.NoError(t, err)
			resp := newResponder(t, rch)
			for i := range 3 {
				corr := fmt.Sprintf("%d-%d", node+1, i)
				req.request(t, queue, corr)
				d := amqptest.Next(t, requests)
				require.Equal(t, corr, d.CorrelationId)
				require.True(t, strings.HasPrefix(d.ReplyTo, replyQueue+".1."), "the name says node 1 holds the requester: %q", d.ReplyTo)
				_, returned, _ := resp.reply(t, d.ReplyTo, corr)
				require.False(t, returned, "a reply its requester took is routed")
				got := amqptest.Next(t, req.replies)
				require.Equal(t, corr, got.CorrelationId)
				require.Equal(t, "reply "+corr, string(got.Body))
				require.Equal(t, d.ReplyTo, got.RoutingKey)
				// A queue.declare of the name is answered by its node.
				_, err := rch.QueueDeclarePassive(d.ReplyTo, false, false, false, false, nil)
				require.NoError(t, err, "the requester still consumes")
			}
		})
	}
}

// TestReplyToGoneRequester replies, from node 2, to a requester on node 1
// whose channel closed: under the 3.13 profile the mandatory reply is
// returned 312 NO_ROUTE (node 1 answered that nobody took it), and a
// passive declare of the name is 404; under 4.2 it is routed, as RabbitMQ
// 4.2 routes every mandatory reply, without asking node 1.
func TestReplyToGoneRequester(t *testing.T) {
	for _, tt := range []struct {
		version  string
		returned bool
	}{{"3.13", true}, {"4.2", false}} {
		t.Run(tt.version, func(t *testing.T) {
			c := newTestCluster(t, func(cfg *cluster.Config) { cfg.Broker.RabbitMQVersion = tt.version })
			conn, ch := c.dialNode(0, "requester")
			req := newRequester(t, ch)
			requests, rch := c.serveRPC(ch)
			resp := newResponder(t, rch)
			req.request(t, "rpc", "late")
			d := amqptest.Next(t, requests)
			require.NoError(t, req.ch.Close())

			ret, returned, _ := resp.reply(t, d.ReplyTo, "late")
			require.Equal(t, tt.returned, returned)
			if returned {
				require.Equal(t, uint16(amqp091.NoRoute), ret.ReplyCode)
				require.Equal(t, "NO_ROUTE", ret.ReplyText)
				require.Equal(t, d.ReplyTo, ret.RoutingKey)
			}
			_, err := amqptest.Channel(t, conn).QueueDeclarePassive(d.ReplyTo, false, false, false, false, nil)
			amqptest.RequireCode(t, err, amqp091.NotFound)
		})
	}
}

// TestReplyToNodeDown replies to a requester on node 3 after node 3 was
// cut off and stopped: node 2 gets no answer, so the mandatory reply is
// returned once Config.ReplyTimeout has passed, not later, and the
// responder's channel carries on.
func TestReplyToNodeDown(t *testing.T) {
	const timeout = 300 * time.Millisecond
	c := newTestCluster(t, func(cfg *cluster.Config) { cfg.ReplyTimeout = timeout })
	_, ch := c.dialNode(2, "requester")
	req := newRequester(t, ch)
	requests, rch := c.serveRPC(ch)
	resp := newResponder(t, rch)
	req.request(t, "rpc", "a")
	d := amqptest.Next(t, requests)
	_, returned, _ := resp.reply(t, d.ReplyTo, "a")
	require.False(t, returned)
	amqptest.Next(t, req.replies)

	c.kill(2)
	for _, corr := range []string{"b", "c"} {
		ret, returned, took := resp.reply(t, d.ReplyTo, corr)
		require.True(t, returned, "no answer from the requester's node: unroutable")
		require.Equal(t, uint16(amqp091.NoRoute), ret.ReplyCode)
		require.GreaterOrEqual(t, took, timeout, "it waited for the answer")
		require.Less(t, took, 10*timeout+amqptest.Timeout/2, "and no longer than the bound, give or take a loaded machine")
	}
	// Not mandatory: dropped at once, confirmed.
	require.NoError(t, rch.PublishWithContext(t.Context(), "", d.ReplyTo, false, false, amqp091.Publishing{Body: []byte("d")}))
	conf, _ := amqptest.Receive(t, resp.confirms)
	require.True(t, conf.Ack)
}

// TestReplyToManyConcurrent runs RPCs from requesters on all three nodes
// to responders on all three (one shared durable request queue), at once:
// every request gets its own reply, on its own requester.
func TestReplyToManyConcurrent(t *testing.T) {
	const (
		perNode  = 4  // requesters per node
		requests = 25 // each
	)
	c := newTestCluster(t)
	_, ch := c.dialNode(0, "setup")
	for i := range 3 {
		c.rpcQueue(ch, i, "rpc")
	}
	// Registered before the connections, so it runs after they closed,
	// which ends the responders.
	var stop sync.WaitGroup
	t.Cleanup(stop.Wait)
	for i := range 3 {
		_, rch := c.dialNode(i, fmt.Sprintf("responder %d", i+1))
		require.NoError(t, rch.Qos(16, 0, false))
		msgs, err := rch.Consume("rpc", "", false, false, false, false, nil)
		require.NoError(t, err)
		stop.Add(1)
		go func() {
			defer stop.Done()
			for d := range msgs {
				err := rch.PublishWithContext(t.Context(), "", d.ReplyTo, false, false, amqp091.Publishing{
					CorrelationId: d.CorrelationId, Body: append([]byte("reply to "), d.Body...),
				})
				if err != nil {
					return
				}
				_ = d.Ack(false)
			}
		}()
	}
	var wg sync.WaitGroup
	errs := make(chan error, 3*perNode)
	for node := range 3 {
		for k := range perNode {
			_, qch := c.dialNode(node, fmt.Sprintf("requester %d.%d", node+1, k))
			req := newRequester(t, qch)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := range requests {
					corr := fmt.Sprintf("%d.%d.%d", node+1, k, n)
					if err := req.ch.PublishWithContext(t.Context(), "", "rpc", false, false, amqp091.Publishing{
						ReplyTo: replyQueue, CorrelationId: corr, Body: []byte(corr),
					}); err != nil {
						errs <- err
						return
					}
					select {
					case d := <-req.replies:
						if d.CorrelationId != corr || string(d.Body) != "reply to "+corr {
							errs <- fmt.Errorf("requester %d.%d: got %q (%q), want %q", node+1, k, d.CorrelationId, d.Body, corr)
							return
						}
					case <-time.After(amqptest.Timeout):
						errs <- fmt.Errorf("requester %d.%d: no reply to %s", node+1, k, corr)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// stallConn is a client connection whose reads stop once stall is called,
// as a client that no longer reads its socket, until the test ends.
type stallConn struct {
	net.Conn
	stalled atomic.Bool
	release chan struct{}
	once    sync.Once
}

// resume lets reads through again.
func (c *stallConn) resume() { c.once.Do(func() { close(c.release) }) }

func (c *stallConn) Read(p []byte) (int, error) {
	if c.stalled.Load() {
		<-c.release
	}
	return c.Conn.Read(p)
}

// liveHeap is the live heap after a collection (runtime/metrics).
func liveHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestReplyToSlowRequesterBounded floods a requester on node 1 that has
// stopped reading with 32 MiB of replies published on node 2: node 1
// drops what the requester's connection has no room for, as it does for
// local replies, so the heap grows by far less than the flood. A last
// mandatory reply, behind the flood on the same queue, is still routed
// (dropped, but taken): the forwarding kept going.
func TestReplyToSlowRequesterBounded(t *testing.T) {
	const (
		replies = 512
		size    = 64 << 10
	)
	c := newTestCluster(t)
	var conn *stallConn
	dial := func(network, addr string) (net.Conn, error) {
		nc, err := c.broker(0).Dial(network, addr)
		if err != nil {
			return nil, err
		}
		conn = &stallConn{Conn: nc, release: make(chan struct{})}
		return conn, nil
	}
	rconn := amqptest.DialVia(t, dial, "guest", "stalled requester")
	t.Cleanup(conn.resume) // runs before the connection's close
	ch := amqptest.Channel(t, rconn)
	req := newRequester(t, ch)
	requests, rch := c.serveRPC(ch)
	req.request(t, "rpc", "flood")
	name := amqptest.Next(t, requests).ReplyTo
	conn.stalled.Store(true)
	// Deferred, so reads resume before the cleanups close the
	// connection's channels: they wait for their close-ok.
	defer conn.resume()

	before := liveHeap()
	body := make([]byte, size)
	for range replies {
		require.NoError(t, rch.PublishWithContext(t.Context(), "", name, false, false, amqp091.Publishing{Body: body}))
	}
	resp := newResponder(t, rch)
	_, returned, _ := resp.reply(t, name, "last")
	require.False(t, returned, "the requester is still there")
	after := liveHeap()
	grew := int64(after) - int64(before)
	t.Logf("live heap grew by %d KiB for a %d MiB flood", grew>>10, replies*size>>20)
	require.Less(t, grew, int64(replies*size/4), "the flood was dropped, not held")
}

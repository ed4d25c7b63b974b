package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/cluster"
	"github.com/warrenmq/broker/internal/amqptest"
)

// federateFromOutside federates the cluster's fanout exchange fed from a
// broker outside it (upstream up, stored through member 2), with queue
// out bound to fed, and returns that broker.
func federateFromOutside(t *testing.T, c *testCluster) *broker.Broker {
	t.Helper()
	up := brokertest.New(t)
	ctx := context.Background()
	a := c.broker(1).Admin()
	v, err := json.Marshal(map[string]any{"uri": up.URL(), "reconnect-delay": 0.2})
	require.NoError(t, err)
	_, err = a.PutParameter(ctx, broker.Parameter{Component: "federation-upstream", VHost: "/", Name: "up", Value: v})
	require.NoError(t, err)
	require.NoError(t, a.PutPolicy(ctx, broker.Policy{VHost: "/", Name: "fed", Pattern: "^fed$", ApplyTo: "exchanges",
		Definition: map[string]any{"federation-upstream": "up"}}))
	_, ch := c.dial(1)
	require.NoError(t, ch.ExchangeDeclare("fed", "fanout", true, false, false, false, nil))
	_, err = ch.QueueDeclare("out", true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.QueueBind("out", "", "fed", false, nil))
	return up
}

// depthOf returns a func reading queue's ready count through ch (-1 when
// the read fails).
func depthOf(ch *amqp091.Channel, queue string) func() int {
	return func() int {
		q, err := ch.QueueDeclarePassive(queue, true, false, false, false, nil)
		if err != nil {
			return -1
		}
		return q.Messages
	}
}

// TestFederationLinkRunsOnOneMemberAndMovesWhenItDies federates a
// cluster exchange from a broker outside it. Exactly one member runs the
// link (no two members ever list it running with themselves as its node,
// and the upstream queue never has two consumers), and every member
// lists it with that node; when that member is killed another takes the
// link over, the others list it on that one, and messages keep arriving.
func TestFederationLinkRunsOnOneMemberAndMovesWhenItDies(t *testing.T) {
	c := newTestCluster(t, func(cfg *cluster.Config) { cfg.Broker.LinkLease = 3 * time.Second })
	up := federateFromOutside(t, c)
	ctx := context.Background()

	var holder atomic.Int32 // 1+index of the member seen running it
	var twice atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			var running []int
			for i, node := range c.nodes {
				b := node.Broker()
				if b == nil {
					continue
				}
				// The listing is cluster-wide: what runs here is what
				// this member lists on itself.
				links, err := linksOn(b, "/api/federation-links", true)
				if err == nil && len(links) == 1 && links[0].Status == "running" {
					running = append(running, i)
				}
			}
			if len(running) > 1 {
				twice.CompareAndSwap(nil, running)
			}
			if len(running) == 1 {
				holder.Store(int32(running[0] + 1))
			}
		}
	}()
	defer func() { close(stop); wg.Wait() }()
	waitUntil := func(what string, f func() bool) {
		t.Helper()
		for deadline := time.Now().Add(waitFor); !f(); time.Sleep(5 * time.Millisecond) {
			require.True(t, time.Now().Before(deadline), "waiting for %s", what)
		}
	}
	uch := amqptest.ConfirmChannel(t, brokertest.Dial(t, up))
	qname := ""
	waitUntil("a member to run the link", func() bool { return holder.Load() != 0 })
	first := int(holder.Load() - 1)
	waitListedOn(t, c, "/api/federation-links", first)
	consumers := func() int {
		for _, q := range up.Stats(ctx).QueueDetails {
			if len(q.Name) > 12 && q.Name[:12] == "federation: " {
				qname = q.Name
				return q.Consumers
			}
		}
		return 0
	}
	waitUntil("the upstream queue's consumer", func() bool { return consumers() == 1 })
	other := (first + 1) % 3
	_, och := c.dial(other)
	depth := depthOf(och, "out")
	publish := func(from, n int) {
		for i := range n {
			amqptest.Publish(t, uch, "fed", "", fmt.Sprint("m", from+i))
		}
	}
	publish(0, 10)
	waitUntil("the first ten", func() bool { return depth() == 10 })
	c.kill(first)
	publish(10, 10)
	t.Logf("killed member %d, the one running the link", first+1)
	waitUntil("another member to run the link", func() bool { h := holder.Load(); return h != 0 && int(h-1) != first })
	t.Logf("member %d runs it now; upstream queue %q", holder.Load(), qname)
	waitListedOn(t, c, "/api/federation-links", int(holder.Load()-1))
	// Published while nobody ran the link: they waited in the upstream
	// queue, which every member names alike (cluster_name).
	waitUntil("the next ten", func() bool { return depth() >= 20 })
	publish(20, 10)
	waitUntil("the last ten", func() bool { return depth() >= 30 })
	require.Nil(t, twice.Load(), "members seen running the link at once")
	require.LessOrEqual(t, consumers(), 1)
}

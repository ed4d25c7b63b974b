package cluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/clock"
	"github.com/warrenmq/broker/cluster"
)

// onClock runs every node's broker on fc.
func onClock(fc *clock.Fake) func(*cluster.Config) {
	return func(cfg *cluster.Config) { cfg.Broker.Clock = fc }
}

// declareDelayed declares, on node i, a durable x-delayed-message exchange
// dx (direct) and a durable queue q bound to it with key k, and waits until
// every node knows q.
func (c *testCluster) declareDelayed(i int) {
	c.t.Helper()
	_, ch := c.dial(i)
	require.NoError(c.t, ch.ExchangeDeclare("dx", "x-delayed-message", true, false, false, false,
		amqp091.Table{"x-delayed-type": "direct"}))
	_, err := ch.QueueDeclare("q", true, false, false, false, nil)
	require.NoError(c.t, err)
	require.NoError(c.t, ch.QueueBind("q", "k", "dx", false, nil))
	for j := range c.nodes {
		if !c.stopped[j] {
			c.declared(j, "q")
		}
	}
}

// publishDelayed publishes a persistent message held delay ms by dx on
// node i and requires its confirm.
func (c *testCluster) publishDelayed(i int, body string, delay int32) {
	c.t.Helper()
	_, ch := c.dial(i)
	require.NoError(c.t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1))
	require.NoError(c.t, ch.PublishWithContext(context.Background(), "dx", "k", false, false, amqp091.Publishing{
		Body: []byte(body), DeliveryMode: amqp091.Persistent, Headers: amqp091.Table{"x-delay": delay},
	}))
	select {
	case conf := <-confirms:
		require.True(c.t, conf.Ack, "confirmed %s", body)
	case <-time.After(waitFor):
		c.t.Fatalf("no confirm for %s", body)
	}
}

// delayedHeld waits until node i's broker counts n messages held by dx.
func (c *testCluster) delayedHeld(i int, n int64) {
	c.t.Helper()
	require.Eventually(c.t, func() bool {
		got, err := c.broker(i).DelayedCount("/", "dx")
		return err == nil && got == n
	}, waitFor, 10*time.Millisecond, "node %d holds %d delayed", i+1, n)
}

// drain takes every message of q on node i with basic.get once dx holds
// nothing more (each was routed and deleted), and counts them by body.
func (c *testCluster) drain(i int, want int) map[string]int {
	c.t.Helper()
	c.delayedHeld(i, 0)
	_, ch := c.dial(i)
	got := map[string]int{}
	n := 0
	require.Eventually(c.t, func() bool {
		for {
			d, ok, err := ch.Get("q", true)
			require.NoError(c.t, err)
			if !ok {
				return n >= want
			}
			got[string(d.Body)]++
			n++
			require.Equal(c.t, int32(-60000), d.Headers["x-delay"])
		}
	}, waitFor, 10*time.Millisecond, "node %d gets %d messages", i+1, want)
	// Routed and deleted everywhere: nothing more arrives.
	for j := range c.nodes {
		if !c.stopped[j] {
			c.delayedHeld(j, 0)
		}
	}
	q, err := ch.QueueDeclarePassive("q", true, false, false, false, nil)
	require.NoError(c.t, err)
	require.Zero(c.t, q.Messages, "routed once")
	return got
}

// A confirmed delayed message of a durable exchange is replicated: the
// node that accepted it dies before it is due, and another routes it, once,
// when due.
func TestDelayedSurvivesItsNode(t *testing.T) {
	for _, tt := range []struct {
		name   string
		leader bool // the node that accepts and dies leads the group
	}{{"leader dies", true}, {"follower dies", false}} {
		t.Run(tt.name, func(t *testing.T) {
			fc := clock.NewFake(time.Unix(1_800_000_000, 0))
			c := newTestCluster(t, onClock(fc))
			a := c.leader()
			if !tt.leader {
				a = (a + 1) % 3
			}
			b := (a + 1) % 3
			c.declareDelayed(a)
			c.publishDelayed(a, "m", 60000)
			c.delayedHeld(b, 1) // replicated before the confirm

			c.kill(a)
			c.leader(a)
			fc.Advance(59 * time.Second)
			c.delayedHeld(b, 1) // not due yet
			fc.Advance(2 * time.Second)
			require.Equal(t, map[string]int{"m": 1}, c.drain(b, 1))
		})
	}
}

// With every node up, messages published on all of them are routed once
// each, by one node, whichever node's broker saw them due.
func TestDelayedRoutedOnce(t *testing.T) {
	fc := clock.NewFake(time.Unix(1_800_000_000, 0))
	c := newTestCluster(t, onClock(fc))
	c.declareDelayed(0)
	const n = 30
	for i := range n {
		c.publishDelayed(i%3, fmt.Sprint("m", i), 60000)
	}
	for i := range c.nodes {
		c.delayedHeld(i, n)
	}
	fc.Advance(61 * time.Second)
	got := c.drain(1, n)
	require.Len(t, got, n)
	for body, times := range got {
		require.Equal(t, 1, times, body)
	}
}

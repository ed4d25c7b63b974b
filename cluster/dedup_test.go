package cluster_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/clock"
)

// publishDedup publishes a persistent message with x-deduplication-header
// key to exchange dd on node i and requires its confirm (a duplicate is
// confirmed too).
func (c *testCluster) publishDedup(i int, key string) {
	c.t.Helper()
	c.publishDedupTo(i, "dd", "", key)
}

// publishDedupTo is publishDedup to exchange with routing key rk.
func (c *testCluster) publishDedupTo(i int, exchange, rk, key string) {
	c.t.Helper()
	_, ch := c.dial(i)
	require.NoError(c.t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1))
	require.NoError(c.t, ch.PublishWithContext(context.Background(), exchange, rk, false, false, amqp091.Publishing{
		Body: []byte(key), DeliveryMode: amqp091.Persistent, Headers: amqp091.Table{"x-deduplication-header": key},
	}))
	select {
	case conf := <-confirms:
		require.True(c.t, conf.Ack, "confirmed %s", key)
	case <-time.After(waitFor):
		c.t.Fatalf("no confirm for %s", key)
	}
}

// takeAll gets the messages of queue on node i until it has as many as
// want (publishes on other nodes reach it through the log), and requires
// them to be want and nothing more to be there.
func (c *testCluster) takeAll(i int, queue string, want ...string) {
	c.t.Helper()
	_, ch := c.dial(i)
	var got []string
	require.Eventually(c.t, func() bool {
		for {
			d, ok, err := ch.Get(queue, true)
			require.NoError(c.t, err)
			if !ok {
				return len(got) >= len(want)
			}
			got = append(got, string(d.Body))
		}
	}, waitFor, 10*time.Millisecond, "node %d gets %v", i+1, want)
	require.Equal(c.t, want, got)
}

// An x-message-deduplication exchange's cache is one for the whole
// cluster: a duplicate published on another node, or after the node that
// saw the original died, is dropped while the entry lives; the TTL and the
// size bound apply across nodes.
func TestDedupAcrossNodes(t *testing.T) {
	fc := clock.NewFake(time.Unix(1_800_000_000, 0))
	c := newTestCluster(t, onClock(fc))
	_, ch := c.dial(0)
	require.NoError(t, ch.ExchangeDeclare("dd", "x-message-deduplication", true, false, false, false,
		amqp091.Table{"x-cache-size": int32(3), "x-cache-ttl": int32(60000)}))
	_, err := ch.QueueDeclare("dq", true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.QueueBind("dq", "", "dd", false, nil))
	for j := range c.nodes {
		c.declared(j, "dq")
	}

	c.publishDedup(0, "a")
	c.publishDedup(1, "a") // another node: a duplicate
	c.publishDedup(2, "a")
	c.takeAll(1, "dq", "a")

	c.kill(0) // the node that recorded it
	c.leader(0)
	c.publishDedup(1, "a")
	c.publishDedup(2, "b")
	c.takeAll(2, "dq", "b")

	fc.Advance(61 * time.Second) // a and b expire
	c.publishDedup(2, "a")
	c.takeAll(1, "dq", "a")

	// Size 3: recording c and d evicts the oldest (b expired, then a).
	c.publishDedup(1, "c")
	c.publishDedup(2, "d")
	c.publishDedup(1, "e")
	c.publishDedup(2, "c") // still held
	c.takeAll(2, "dq", "c", "d", "e")
	c.publishDedup(1, "a") // evicted: routed again
	c.takeAll(1, "dq", "a")
}

// A queue declared with x-message-deduplication refuses a message whose
// key is in it whichever node the message is published on, and frees the
// key when the message leaves, whichever node takes it; the node that
// appended it dying changes nothing.
func TestDedupQueueAcrossNodes(t *testing.T) {
	c := newTestCluster(t)
	_, ch := c.dial(0)
	_, err := ch.QueueDeclare("uq", true, false, false, false, amqp091.Table{"x-message-deduplication": true})
	require.NoError(t, err)
	for j := range c.nodes {
		c.declared(j, "uq")
	}
	c.publishDedupTo(0, "", "uq", "a")
	c.publishDedupTo(1, "", "uq", "a") // in the queue: refused
	c.publishDedupTo(2, "", "uq", "b")
	c.takeAll(2, "uq", "a", "b") // taken (and acked) on a node that did not append a

	c.publishDedupTo(1, "", "uq", "a") // free again
	c.kill(1)                          // the node that appended it
	c.leader(1)
	c.publishDedupTo(0, "", "uq", "a")
	c.publishDedupTo(2, "", "uq", "a")
	c.takeAll(0, "uq", "a")
	c.publishDedupTo(2, "", "uq", "a")
	c.takeAll(2, "uq", "a")
}

// One value published on every node at once is routed exactly once: the
// nodes' conditional records of it exclude each other.
func TestDedupRaceAcrossNodes(t *testing.T) {
	c := newTestCluster(t)
	_, ch := c.dial(0)
	require.NoError(t, ch.ExchangeDeclare("dd", "x-message-deduplication", true, false, false, false,
		amqp091.Table{"x-cache-size": int32(1000)}))
	_, err := ch.QueueDeclare("dq", true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.QueueBind("dq", "", "dd", false, nil))
	chans := make([]*amqp091.Channel, len(c.nodes))
	confirms := make([]chan amqp091.Confirmation, len(c.nodes))
	for j := range c.nodes {
		c.declared(j, "dq")
		_, chans[j] = c.dial(j)
		require.NoError(t, chans[j].Confirm(false))
		confirms[j] = chans[j].NotifyPublish(make(chan amqp091.Confirmation, 1))
	}
	for round := range 10 {
		key := fmt.Sprint("k", round)
		var wg sync.WaitGroup
		errs := make([]error, len(chans))
		for j, pch := range chans {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[j] = pch.PublishWithContext(context.Background(), "dd", "", false, false, amqp091.Publishing{
					Body: []byte(key), DeliveryMode: amqp091.Persistent, Headers: amqp091.Table{"x-deduplication-header": key},
				})
			}()
		}
		wg.Wait()
		for j := range chans {
			require.NoError(t, errs[j])
			select {
			case conf := <-confirms[j]:
				require.True(t, conf.Ack)
			case <-time.After(waitFor):
				t.Fatalf("no confirm from node %d", j+1)
			}
		}
		c.takeAll(round%3, "dq", key)
	}
}

package cluster_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/cluster"
	"github.com/warrenmq/broker/meta/raft"
)

const waitFor = 60 * time.Second

// testCluster is three nodes on an in-memory raft network; node i has raft
// id i+1 and serves AMQP on 127.0.0.1:0 while it leads.
type testCluster struct {
	t     testing.TB
	net   *raft.Network
	nodes []*cluster.Node
}

func newTestCluster(t testing.TB) *testCluster {
	c := &testCluster{t: t, net: raft.NewNetwork(), nodes: make([]*cluster.Node, 3)}
	t.Cleanup(c.net.Close) // after the nodes stop (cleanups run last first)
	root := t.TempDir()
	var peers []raft.Peer
	for i := range c.nodes {
		peers = append(peers, raft.Peer{ID: uint64(i + 1), RaftAddr: fmt.Sprintf("mem-%d", i+1)})
	}
	for i := range c.nodes {
		n, err := cluster.Start(cluster.Config{
			Raft: raft.Config{
				ID: uint64(i + 1), Dir: filepath.Join(root, fmt.Sprint(i+1)), Peers: peers,
				Transport: c.net.Transport(uint64(i + 1)),
				// A 1 s election timeout: a busy test machine must not
				// cause elections on its own.
				TickInterval: 25 * time.Millisecond, ElectionTicks: 40, HeartbeatTicks: 2,
			},
			Listen:       "127.0.0.1:0",
			PollInterval: 10 * time.Millisecond,
		})
		require.NoError(t, err)
		c.nodes[i] = n
		t.Cleanup(func() { require.NoError(t, n.Stop()) })
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	require.NoError(t, c.nodes[0].Raft().Campaign(ctx))
	return c
}

// serving waits until a node other than those in skip serves AMQP and
// returns its index.
func (c *testCluster) serving(skip ...int) int {
	c.t.Helper()
	deadline := time.Now().Add(waitFor)
	for time.Now().Before(deadline) {
		for i, n := range c.nodes {
			if !contains(skip, i) && n.Broker() != nil {
				return i
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.t.Fatal("cluster: no node serves AMQP")
	return -1
}

func contains(s []int, i int) bool {
	for _, x := range s {
		if x == i {
			return true
		}
	}
	return false
}

// TestFailover: confirmed persistent messages survive the leader's loss,
// including those confirmed while it was being cut off; the client
// reconnects to the new leader and continues; deliveries the old leader
// had out unacknowledged come back redelivered; nothing is duplicated.
func TestFailover(t *testing.T) {
	c := newTestCluster(t)
	lead := c.serving()

	conn, err := amqp091.Dial(c.nodes[lead].Broker().URL())
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	require.NoError(t, err)
	_, err = ch.QueueDeclare("jobs", true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 1))

	var mu sync.Mutex
	confirmed := map[string]bool{}
	publish := func(body string) bool { // one at a time: a confirm names its publish
		err := ch.PublishWithContext(context.Background(), "", "jobs", false, false,
			amqp091.Publishing{Body: []byte(body), DeliveryMode: amqp091.Persistent})
		if err != nil {
			return false
		}
		c, ok := <-confirms
		if !ok || !c.Ack {
			return false
		}
		mu.Lock()
		confirmed[body] = true
		mu.Unlock()
		return true
	}
	for i := range 50 {
		require.True(t, publish(fmt.Sprintf("m-%d", i)))
	}

	// Ten deliveries out, never acknowledged, on another channel.
	cch, err := conn.Channel()
	require.NoError(t, err)
	require.NoError(t, cch.Qos(10, 0, false))
	msgs, err := cch.Consume("jobs", "", false, false, false, false, nil)
	require.NoError(t, err)
	out := map[string]bool{}
	for range 10 {
		select {
		case d := <-msgs:
			out[string(d.Body)] = true
		case <-time.After(waitFor):
			t.Fatal("no delivery")
		}
	}

	// Keep publishing while the leader is cut off from the others: as
	// good as dead to them (it can commit nothing, and it cannot tidy up
	// its deliveries on the way out).
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; publish(fmt.Sprintf("late-%d", i)); i++ {
		}
	}()
	// Cut it off mid-publish, once some late publishes are confirmed.
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(confirmed) >= 60
	}, waitFor, time.Millisecond, "late publishes are confirmed")
	leadID := uint64(lead + 1)
	var others []uint64
	for i := range c.nodes {
		if i != lead {
			others = append(others, uint64(i+1))
		}
	}
	c.net.Partition([]uint64{leadID}, others)

	next := c.serving(lead)
	// The old leader steps down (CheckQuorum) and closes its broker: the
	// publisher's connection ends with 320 and its goroutine returns.
	wg.Wait()

	conn2, err := amqp091.Dial(c.nodes[next].Broker().URL())
	require.NoError(t, err)
	t.Cleanup(func() { conn2.Close() })
	ch2, err := conn2.Channel()
	require.NoError(t, err)
	seen := map[string]int{}
	redelivered := map[string]bool{}
	for {
		d, ok, err := ch2.Get("jobs", true)
		require.NoError(t, err)
		if !ok {
			break
		}
		seen[string(d.Body)]++
		if d.Redelivered {
			redelivered[string(d.Body)] = true
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for body := range confirmed {
		require.Equal(t, 1, seen[body], "confirmed %s is on the new leader exactly once", body)
	}
	for body, n := range seen {
		require.Equal(t, 1, n, "%s delivered once", body)
	}
	for body := range out {
		require.True(t, redelivered[body], "%s was out on the old leader: redelivered", body)
	}
	t.Logf("confirmed %d, found %d (stored but never confirmed: %d), redelivered %d",
		len(confirmed), len(seen), len(seen)-len(confirmed), len(redelivered))

	// The publisher carries on against the new leader.
	pch, err := conn2.Channel()
	require.NoError(t, err)
	require.NoError(t, pch.PublishWithContext(context.Background(), "", "jobs", false, false,
		amqp091.Publishing{Body: []byte("after"), DeliveryMode: amqp091.Persistent}))
	d, ok, err := pch.Get("jobs", true)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "after", string(d.Body))
	c.net.Heal()
}

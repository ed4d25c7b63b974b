package raft_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/meta/raft"
)

// cluster is a group of nodes on an in-memory network, each with its own
// directory under the test's temp dir. Node i has raft id i+1.
type cluster struct {
	tb    testing.TB
	net   *raft.Network
	root  string
	peers []raft.Peer
	nodes []*raft.Node // nil while stopped
	// snapshotEvery is passed to every node; 0 means the default.
	snapshotEvery uint64
}

// newCluster starts size nodes, makes node 1 campaign and waits until every
// node knows the leader. Cleanup stops whatever runs and closes the network.
func newCluster(tb testing.TB, size int, snapshotEvery uint64) *cluster {
	tb.Helper()
	c := &cluster{tb: tb, net: raft.NewNetwork(), root: tb.TempDir(), nodes: make([]*raft.Node, size), snapshotEvery: snapshotEvery}
	for i := range size {
		c.peers = append(c.peers, raft.Peer{ID: uint64(i + 1), RaftAddr: fmt.Sprintf("mem-%d", i+1), AMQPAddr: fmt.Sprintf("amqp-%d", i+1)})
	}
	tb.Cleanup(func() {
		for i := range c.nodes {
			c.stop(i)
		}
		c.net.Close()
	})
	for i := range size {
		c.start(i)
	}
	ctx := testCtx(tb)
	require.NoError(tb, c.nodes[0].Campaign(ctx))
	c.waitLeader(ctx)
	return c
}

func testCtx(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	tb.Cleanup(cancel)
	return ctx
}

func (c *cluster) config(i int) raft.Config {
	return raft.Config{
		ID:        uint64(i + 1),
		Dir:       filepath.Join(c.root, fmt.Sprint(i+1)),
		Peers:     c.peers,
		Transport: c.net.Transport(uint64(i + 1)),
		// Generous timeouts: a busy test machine must not cause
		// elections, which fail waiting writes with ErrLeaderChanged.
		TickInterval:   25 * time.Millisecond,
		ElectionTicks:  40,
		HeartbeatTicks: 2,
		SnapshotEvery:  c.snapshotEvery,
	}
}

func (c *cluster) start(i int) *raft.Node {
	c.tb.Helper()
	n, err := raft.Start(c.config(i))
	require.NoError(c.tb, err)
	c.nodes[i] = n
	return n
}

func (c *cluster) stop(i int) {
	c.tb.Helper()
	if c.nodes[i] == nil {
		return
	}
	require.NoError(c.tb, c.nodes[i].Stop())
	c.nodes[i] = nil
}

// waitLeader waits until every running node knows the same leader and
// returns its index.
func (c *cluster) waitLeader(ctx context.Context) int {
	c.tb.Helper()
	for {
		lead := uint64(0)
		agree := true
		for _, n := range c.nodes {
			if n == nil {
				continue
			}
			l, err := n.WaitLeader(ctx)
			require.NoError(c.tb, err)
			if lead != 0 && l != lead {
				agree = false
			}
			lead = l
		}
		if agree && c.nodes[lead-1] != nil && c.nodes[lead-1].IsLeader() {
			return int(lead - 1)
		}
		select {
		case <-ctx.Done():
			require.NoError(c.tb, ctx.Err(), "nodes never agreed on a leader")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// follower returns the index of a running node that is not the leader.
func (c *cluster) follower(ctx context.Context) int {
	lead := c.waitLeader(ctx)
	for i, n := range c.nodes {
		if n != nil && i != lead {
			return i
		}
	}
	c.tb.Fatal("raft test: no follower")
	return -1
}

// waitLeaderAmong waits until one of nodes leads and every one of them
// knows it, and returns its index in c.nodes.
func (c *cluster) waitLeaderAmong(ctx context.Context, nodes []*raft.Node) int {
	c.tb.Helper()
	for {
		lead := nodes[0].Leader()
		agree := lead != 0
		for _, n := range nodes {
			agree = agree && n.Leader() == lead
		}
		for _, n := range nodes {
			if agree && n.ID() == lead && n.IsLeader() {
				return int(lead - 1)
			}
		}
		select {
		case <-ctx.Done():
			require.NoError(c.tb, ctx.Err(), "no leader among the nodes")
		case <-time.After(10 * time.Millisecond):
		}
	}
}

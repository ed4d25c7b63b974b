package raft_test

import (
	"testing"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/meta/metatest"
)

// TestPolicies: policies written on the leader are on every node, and
// survive a restart of the whole cluster.
func TestPolicies(t *testing.T) {
	c := newCluster(t, 3, 0)
	metatest.RunPolicies(t, c.nodes[c.waitLeader(testCtx(t))], func() meta.Store {
		for i := range c.nodes {
			c.stop(i)
		}
		for i := range c.nodes {
			c.start(i)
		}
		return c.nodes[c.follower(testCtx(t))]
	})
}

// TestParameters: parameters written on the leader are on every node,
// and survive a restart of the whole cluster.
func TestParameters(t *testing.T) {
	c := newCluster(t, 3, 0)
	metatest.RunParameters(t, c.nodes[c.waitLeader(testCtx(t))], func() meta.Store {
		for i := range c.nodes {
			c.stop(i)
		}
		for i := range c.nodes {
			c.start(i)
		}
		return c.nodes[c.follower(testCtx(t))]
	})
}

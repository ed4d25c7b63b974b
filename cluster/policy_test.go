package cluster_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
)

// TestPolicyAcrossNodes: a policy set on one node applies to a queue
// served by another, live (the running queue is capped), and to every
// node's actor of the shared queue; deleting it on a third node lifts the
// cap everywhere.
func TestPolicyAcrossNodes(t *testing.T) {
	c := newTestCluster(t)
	_, ch1 := c.dial(1)
	_, err := ch1.QueueDeclare("capped", true, false, false, false, nil)
	require.NoError(t, err)
	for i := range c.nodes {
		c.declared(i, "capped")
	}
	ctx := context.Background()
	require.NoError(t, c.broker(0).Admin().PutPolicy(ctx, broker.Policy{Name: "cap", Pattern: "^capped$",
		Definition: map[string]any{"max-length": 2, "overflow": "reject-publish"}}))
	for i := range c.nodes {
		require.Eventually(t, func() bool {
			ps, err := c.broker(i).Admin().ListPolicies(ctx, "/")
			return err == nil && len(ps) == 1
		}, waitFor, 10*time.Millisecond, "node %d stores the policy", i+1)
	}

	// Node 2 serves the queue: a third publish there is refused. Each
	// node applies the policy when its follower hears of it, so the
	// publisher retries until the cap is in place.
	_, ch2 := c.dial(1)
	p := newConfirmer(t, ch2)
	require.True(t, p.publish("", "capped", "a", waitFor))
	require.True(t, p.publish("", "capped", "b", waitFor))
	require.Eventually(t, func() bool { return !p.publish("", "capped", "c", waitFor) }, waitFor, 10*time.Millisecond,
		"node 2 refuses a publish over the policy's max-length")

	// On node 3 too, once its follower has caught up with the policy and
	// with node 2's appends (shared queues count what they observed).
	_, ch3 := c.dial(2)
	p3 := newConfirmer(t, ch3)
	require.Eventually(t, func() bool { return !p3.publish("", "capped", "d", waitFor) }, waitFor, 10*time.Millisecond,
		"node 3 refuses a publish over the policy's max-length")

	require.NoError(t, c.broker(2).Admin().DeletePolicy(ctx, "/", "cap"))
	require.Eventually(t, func() bool { return p.publish("", "capped", "e", waitFor) }, waitFor, 10*time.Millisecond,
		"node 2 takes publishes once the policy is deleted on node 3")
}

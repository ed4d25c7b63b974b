package raft_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLiveNodes: the leader sees every member it hears from; a stopped
// member drops out within a few election timeouts and comes back when it
// restarts; a follower has no view of liveness.
func TestLiveNodes(t *testing.T) {
	c := newCluster(t, 3, 0)
	ctx := testCtx(t)
	lead := c.waitLeader(ctx)
	liveAre := func(want ...uint64) func() bool {
		return func() bool {
			ids, ok := c.nodes[lead].LiveNodes()
			return ok && slices.Equal(ids, want)
		}
	}
	require.Eventually(t, liveAre(1, 2, 3), 30*time.Second, 10*time.Millisecond)

	f := c.follower(ctx)
	_, ok := c.nodes[f].LiveNodes()
	require.False(t, ok, "a follower does not track liveness")

	c.stop(f)
	var rest []uint64
	for i := range 3 {
		if i != f {
			rest = append(rest, uint64(i+1))
		}
	}
	require.Eventually(t, liveAre(rest...), 30*time.Second, 10*time.Millisecond,
		"the stopped node drops out")
	c.start(f)
	require.Eventually(t, liveAre(1, 2, 3), 30*time.Second, 10*time.Millisecond,
		"the restarted node is live again")
}

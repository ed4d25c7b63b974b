package multiraft

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestMembershipChange grows one group of three replicas to a fourth
// member (as a learner, then a voter: it catches up from a snapshot and
// the log, commands from before it joined included), shrinks it by
// another, and removes the group from the member taken out; the other
// groups never notice.
func TestMembershipChange(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c := newTestCluster(t, 4, func(c *Config) { c.SnapshotEntries = 8 })
	ids := []uint64{1, 2, 3}
	for g := uint64(1); g <= 3; g++ {
		for _, id := range ids {
			require.NoError(t, c.members[id].e.CreateGroup(ctx, g, ids))
		}
		require.NoError(t, c.members[1].e.Campaign(ctx, g))
	}
	for i := range 20 {
		require.NoError(t, c.propose(ctx, 2, 1, []byte(fmt.Sprintf("before-%d", i))))
	}
	require.Eventually(t, func() bool { return c.converged(1, 20) }, 10*time.Second, 10*time.Millisecond)

	// Member 4 joins group 1: an empty replica, added as a learner, then
	// promoted.
	require.NoError(t, c.members[4].e.CreateGroup(ctx, 1, nil))
	lead := c.leader(ctx, 1, 1)
	require.NoError(t, c.members[lead].e.AddLearner(ctx, 1, 4))
	require.Eventually(t, func() bool { return c.members[4].sm(1).len() >= 20 }, 15*time.Second, 10*time.Millisecond, "the learner catches up")
	require.NoError(t, c.members[lead].e.AddReplica(ctx, 1, 4))
	st, err := c.members[lead].e.Status(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, []uint64{1, 2, 3, 4}, st.Voters)
	require.Empty(t, st.Learners)
	require.NoError(t, c.propose(ctx, 4, 1, []byte("from the new member")))

	// Member 3 leaves group 1; the group commits with 1, 2 and 4.
	require.NoError(t, c.members[c.leader(ctx, 1, 1)].e.RemoveReplica(ctx, 1, 3))
	require.Eventually(t, func() bool {
		st, err := c.members[4].e.Status(ctx, 1)
		require.NoError(t, err)
		return fmt.Sprint(st.Voters) == "[1 2 4]"
	}, 10*time.Second, 10*time.Millisecond, "member 4 applies the removal")
	require.NoError(t, c.members[3].e.RemoveGroup(ctx, 1))
	_, err = c.members[3].e.Status(ctx, 1)
	require.ErrorIs(t, err, ErrNoGroup)
	c.members[3].e.Close()
	c.members[3].e = nil // converged skips it
	c.net.Remove(3)
	for i := range 5 {
		require.NoError(t, c.propose(ctx, 1, 1, []byte(fmt.Sprintf("after-%d", i))))
	}
	require.Eventually(t, func() bool { return c.converged(1, 26) }, 10*time.Second, 10*time.Millisecond)
	// The groups 3 still belonged to commit with the two others.
	require.NoError(t, c.propose(ctx, 2, 2, []byte("group 2")))
	require.NoError(t, c.propose(ctx, 2, 3, []byte("group 3")))
	require.NotZero(t, c.members[1].e.Stats().SnapshotsSent, "the new member caught up from a snapshot")

	// Errors a caller can get.
	require.ErrorIs(t, c.members[1].e.CreateGroup(ctx, 1, ids), ErrGroupExists)
	require.ErrorIs(t, c.members[1].e.CreateGroup(ctx, 0, ids), errBadGroupID)
	require.Error(t, c.members[1].e.CreateGroup(ctx, 9, []uint64{2, 3}), "voters without this member")
	_, err = c.members[1].e.Propose(ctx, 99, []byte("x"))
	require.ErrorIs(t, err, ErrNoGroup)
}

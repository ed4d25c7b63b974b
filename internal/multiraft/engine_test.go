package multiraft

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
)

// TestManyGroupsCommit runs 1,000 groups on 3 engines: a proposal to each,
// through the member that does not lead it, commits and reaches every
// member's state machine.
func TestManyGroupsCommit(t *testing.T) {
	const groups = 1000
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := newTestCluster(t, 3, nil)
	c.createGroups(ctx, groups)
	var eg errgroup.Group
	eg.SetLimit(64)
	for g := uint64(1); g <= groups; g++ {
		eg.Go(func() error {
			return c.propose(ctx, 1+g%3, g, []byte(fmt.Sprintf("cmd-%d", g)))
		})
	}
	require.NoError(t, eg.Wait())
	require.Eventually(t, func() bool {
		for g := uint64(1); g <= groups; g++ {
			if !c.converged(g, 1) {
				return false
			}
		}
		return true
	}, time.Minute, 20*time.Millisecond, "every member applied every group's command")
	st := c.members[1].e.Stats()
	t.Logf("member 1: %d groups, %d syncs for %d group readies", st.Groups, st.Syncs, st.ReadyGroups)
	require.Equal(t, groups, st.Groups)
	require.Less(t, st.Syncs, st.ReadyGroups/4, "many groups' readies share an fsync")
}

// TestManyGroupsCommitTCP is TestManyGroupsCommit over TCP on loopback,
// members authenticated with a cluster secret: one connection per member
// pair carries every group.
func TestManyGroupsCommitTCP(t *testing.T) {
	const groups = 300
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := newTCPCluster(t, 3, nil)
	c.createGroups(ctx, groups)
	var eg errgroup.Group
	eg.SetLimit(64)
	for g := uint64(1); g <= groups; g++ {
		eg.Go(func() error { return c.propose(ctx, 1+g%3, g, []byte(fmt.Sprintf("cmd-%d", g))) })
	}
	require.NoError(t, eg.Wait())
	require.Eventually(t, func() bool {
		for g := uint64(1); g <= groups; g++ {
			if !c.converged(g, 1) {
				return false
			}
		}
		return true
	}, time.Minute, 20*time.Millisecond)
	for id, tr := range c.tcps {
		require.Zero(t, tr.Refused(), "member %d refused nothing", id)
	}
}

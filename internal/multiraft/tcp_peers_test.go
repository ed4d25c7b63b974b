package multiraft

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestTCPPeersAtRunTime grows a group of members 1 and 2 onto member 3,
// which they learn of only at run time (AddPeer), and shrinks it again
// with RemovePeer: the group commits throughout, member 3 catches up
// while it is a peer and hears nothing once removed.
func TestTCPPeersAtRunTime(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := newTCPCluster(t, 2, nil)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	c.addrs[3] = l.Addr().String()
	m3 := &testMember{id: 3, dir: filepath.Join(t.TempDir(), "3")}
	c.members[3] = m3
	c.startWith(m3, c.newTCP(3, l)) // it knows 1 and 2; they do not know it yet
	require.Equal(t, []uint64{2}, c.tcps[1].members())

	const g = 1
	for _, id := range []uint64{1, 2} {
		require.NoError(t, c.members[id].e.CreateGroup(ctx, g, []uint64{1, 2}))
	}
	require.NoError(t, c.members[1].e.Campaign(ctx, g))
	write := func(n int, tag string) {
		for i := range n {
			require.NoError(t, c.propose(ctx, 2, g, fmt.Appendf(nil, "%s-%d", tag, i)))
		}
	}
	write(10, "before")

	require.NoError(t, m3.e.CreateGroup(ctx, g, nil))
	for _, id := range []uint64{1, 2} {
		c.tcps[id].AddPeer(3, c.addrs[3])
		c.tcps[id].AddPeer(3, c.addrs[3]) // the same address again changes nothing
	}
	require.Equal(t, []uint64{2, 3}, c.tcps[1].members())
	require.NoError(t, c.members[c.leader(ctx, 2, g)].e.AddReplica(ctx, g, 3))
	write(10, "grown")
	require.Eventually(t, func() bool { return c.converged(g, 20) }, 30*time.Second, testTick, "member 3 catches up")

	require.NoError(t, c.members[c.leader(ctx, 2, g)].e.RemoveReplica(ctx, g, 3))
	for _, id := range []uint64{1, 2} {
		c.tcps[id].RemovePeer(3)
		require.False(t, slices.Contains(c.tcps[id].members(), 3))
	}
	at := m3.sm(g).len()
	write(10, "shrunk")
	require.Eventually(t, func() bool {
		return c.members[1].sm(g).len() >= 30 && c.members[2].sm(g).len() >= 30
	}, 30*time.Second, testTick)
	require.Equal(t, at, m3.sm(g).len(), "a removed peer hears nothing")
	c.tcps[1].RemovePeer(3) // again: nothing to do
}

package multiraft

import (
	"cmp"
	"context"
	"slices"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/tracker"
)

// GroupInfo is one group's replica set and leader as this member sees
// them: what a placement or a rebalancing decides on.
type GroupInfo struct {
	ID       uint64
	Leader   uint64 // 0: no leader known to this member
	Voters   []uint64
	Learners []uint64
	// Current is filled on the group's leader only: the other replicas
	// (voters and learners) it believes alive whose log matches its
	// committed index, which a leadership transfer or a learner's
	// promotion can go to without waiting.
	Current []uint64
}

// ID is this member's id.
func (e *Engine) ID() uint64 { return e.cfg.ID }

// GroupInfos returns every group on this member with its leader and
// replicas, in group id order, read in one pass of the loop.
func (e *Engine) GroupInfos(ctx context.Context) ([]GroupInfo, error) {
	var out []GroupInfo
	err := e.do(ctx, func() {
		out = make([]GroupInfo, 0, len(e.groups))
		for id, g := range e.groups {
			st := g.rn.BasicStatus()
			gi := GroupInfo{
				ID: id, Leader: st.Lead,
				Voters: slices.Clone(g.conf.GetVoters()), Learners: slices.Clone(g.conf.GetLearners()),
			}
			if st.RaftState == raft.StateLeader {
				commit := st.HardState.GetCommit()
				g.rn.WithProgress(func(peer uint64, _ raft.ProgressType, pr tracker.Progress) {
					if peer != e.cfg.ID && e.alive[peer] && pr.Match >= commit {
						gi.Current = append(gi.Current, peer)
					}
				})
				slices.Sort(gi.Current)
			}
			out = append(out, gi)
		}
	})
	slices.SortFunc(out, func(a, b GroupInfo) int { return cmp.Compare(a.ID, b.ID) })
	return out, err
}

// Alive returns this member and the members it heard from within an
// election timeout, in id order.
func (e *Engine) Alive(ctx context.Context) ([]uint64, error) {
	var out []uint64
	err := e.do(ctx, func() {
		out = append(out, e.cfg.ID)
		for id, ok := range e.alive {
			if ok && id != e.cfg.ID {
				out = append(out, id)
			}
		}
	})
	slices.Sort(out)
	return out, err
}

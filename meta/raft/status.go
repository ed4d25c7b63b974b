package raft

import (
	"context"
	"slices"
	"strings"

	"github.com/warrenmq/broker/meta"
)

var _ meta.Replicated = (*Node)(nil)

// ReplicationStatus implements meta.Replicated from etcd raft's status:
// role, term, commit index and, on the leader, each member's progress;
// Applied is what this node applied to its state DB. It answers at once
// (an empty status for the role when the node is stopped).
func (n *Node) ReplicationStatus() meta.ReplicationStatus {
	st := n.raft.Status()
	s := meta.ReplicationStatus{
		ID:      n.cfg.ID,
		Role:    roleName(st.RaftState.String()),
		Leader:  st.Lead,
		Term:    st.HardState.GetTerm(), // nil-safe: a stopped node's status is empty
		Commit:  st.HardState.GetCommit(),
		Applied: n.AppliedIndex(),
	}
	for id, pr := range st.Progress {
		s.Peers = append(s.Peers, meta.PeerStatus{
			ID: id, Match: pr.Match, Next: pr.Next,
			State:        strings.ToLower(strings.TrimPrefix(pr.State.String(), "State")),
			RecentActive: pr.RecentActive,
		})
	}
	slices.SortFunc(s.Peers, func(a, b meta.PeerStatus) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return s
}

// roleName turns etcd raft's StateLeader, StatePreCandidate, ... into
// "leader", "pre-candidate", ...
func roleName(s string) string {
	switch s = strings.TrimPrefix(s, "State"); s {
	case "PreCandidate":
		return "pre-candidate"
	default:
		return strings.ToLower(s)
	}
}

// QueueReplications implements meta.Replicated: every queue of a single
// group lives in the node's one group, so none has a group of its own.
func (n *Node) QueueReplications(context.Context, string) []meta.QueueReplication { return nil }

// QueueReplication implements meta.Replicated: no queue has a group of
// its own on a single group.
func (n *Node) QueueReplication(context.Context, meta.QueueKey) (meta.QueueReplication, bool) {
	return meta.QueueReplication{}, false
}

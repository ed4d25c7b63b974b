package cluster

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/warrenmq/broker/internal/qgroup"
	"github.com/warrenmq/broker/meta"
)

// statusTimeout bounds one listing of the queue groups' state: the
// management API and metrics must not wait long on the engine's loop.
const statusTimeout = time.Second

// QueueReplications implements meta.Replicated: the queue groups of
// vhost ("": every vhost) as this member sees them, members by node name
// (NodeName).
func (m *groupedMeta) QueueReplications(ctx context.Context, vhost string) []meta.QueueReplication {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	keys := m.mgr.Keys()
	if vhost != "" {
		keys = slices.DeleteFunc(keys, func(k meta.QueueKey) bool { return k.VHost != vhost })
	}
	slices.SortFunc(keys, func(a, b meta.QueueKey) int {
		return cmp.Or(cmp.Compare(a.VHost, b.VHost), cmp.Compare(a.Name, b.Name))
	})
	alive := m.alive(ctx)
	out := make([]meta.QueueReplication, 0, len(keys))
	for _, k := range keys {
		if st, ok := m.mgr.Status(ctx, k); ok {
			out = append(out, m.replication(k, st, alive))
		}
	}
	return out
}

// QueueReplication implements meta.Replicated for one queue.
func (m *groupedMeta) QueueReplication(ctx context.Context, k meta.QueueKey) (meta.QueueReplication, bool) {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	st, ok := m.mgr.Status(ctx, k)
	if !ok {
		return meta.QueueReplication{}, false
	}
	return m.replication(k, st, m.alive(ctx)), true
}

// alive is the set of members this member's engine hears from, itself
// included; only itself when the engine does not answer.
func (m *groupedMeta) alive(ctx context.Context) map[uint64]bool {
	self := m.mgr.Engine().ID()
	out := map[uint64]bool{self: true}
	ids, err := m.mgr.Engine().Alive(ctx)
	if err != nil {
		return out
	}
	for _, id := range ids {
		out[id] = true
	}
	return out
}

func (m *groupedMeta) replication(k meta.QueueKey, st qgroup.Status, alive map[uint64]bool) meta.QueueReplication {
	voters := slices.Sorted(slices.Values(st.Voters))
	r := meta.QueueReplication{
		Queue: k, Term: st.Term, Commit: st.Commit,
		Members: make([]string, 0, len(voters)), Online: []string{},
		Leading: st.Leader != 0 && st.Leader == m.mgr.Engine().ID(),
	}
	if st.Leader != 0 {
		r.Leader = NodeName(st.Leader)
	}
	for _, id := range voters {
		r.Members = append(r.Members, NodeName(id))
		if alive[id] {
			r.Online = append(r.Online, NodeName(id))
		}
	}
	return r
}

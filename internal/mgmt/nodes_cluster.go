package mgmt

import (
	"context"
	"time"
)

// ClusterNodes is the optional part of a Broker that is a cluster member
// with queue groups: what /api/nodes shows of every member.
type ClusterNodes interface {
	// ClusterNodes lists every member, this one included, by node name,
	// with what this member sees of its share of the queue groups.
	ClusterNodes(ctx context.Context) []ClusterNode
}

// ClusterNode is one member as /api/nodes shows it.
type ClusterNode struct {
	Name string
	// Self is the member answering.
	Self bool
	// Running: this member hears from it (always true for Self).
	Running bool
	// Voter, Learner, Leader count the queue groups whose configuration
	// has the member as a voter, as a learner, and those it leads, as
	// this member's replicas of them say.
	Voter, Learner, Leader int
	// Groups and Active are Self's engine: the groups it holds and those
	// not quiesced (0 on other members).
	Groups, Active int
}

// nodesTimeout bounds the groups' listing behind /api/nodes.
const nodesTimeout = 2 * time.Second

// clusterNodes is /api/nodes' answer: self, the node this member
// describes in full, and, on a member with queue groups, every other
// member as RabbitMQ lists the nodes of a cluster (name, type, running),
// each with a "queue_groups" object (a Warren extension): the groups it
// votes in, learns and leads; on self also the groups its engine holds
// and how many of them are active (not quiesced).
func (m *mgmt) clusterNodes(ctx context.Context, self map[string]any) []map[string]any {
	cn, ok := m.b.(ClusterNodes)
	if !ok {
		return []map[string]any{self}
	}
	ctx, cancel := context.WithTimeout(ctx, nodesTimeout)
	defer cancel()
	out := []map[string]any{self}
	for _, n := range cn.ClusterNodes(ctx) {
		groups := map[string]any{"voter": n.Voter, "learner": n.Learner, "leader": n.Leader}
		if n.Self {
			groups["groups"], groups["active"] = n.Groups, n.Active
			self["queue_groups"] = groups
			continue
		}
		out = append(out, map[string]any{"name": n.Name, "type": "disc", "running": n.Running, "queue_groups": groups})
	}
	return out
}

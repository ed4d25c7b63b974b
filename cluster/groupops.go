package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/warrenmq/broker/meta"
	"github.com/warrenmq/broker/meta/raft"

	"github.com/warrenmq/broker/internal/peer"
	"github.com/warrenmq/broker/internal/qgroup"
)

// groupedMeta is the management API's way to the queue groups'
// membership (peer.QueueReplicas, attached in startBroker): the routes
// RabbitMQ 4.x's rabbitmq-queues add_member, delete_member, grow and
// shrink use.
var _ peer.QueueReplicas = (*groupedMeta)(nil)

// ClusterNode implements peer.QueueReplicas: node is a member's NodeName.
func (m *groupedMeta) ClusterNode(ctx context.Context, node string) (member, running bool) {
	id, ok := nodeID(node)
	if !ok {
		return false, false
	}
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	peers, err := m.Node.Peers(ctx)
	if err != nil {
		return false, false
	}
	if !slices.ContainsFunc(peers, func(p raft.Peer) bool { return p.ID == id }) {
		return false, false
	}
	return true, m.alive(ctx)[id]
}

// quorumQueue finds a quorum queue's key and the member node names,
// refusing with RabbitMQ's reasons.
func (m *groupedMeta) quorumQueue(ctx context.Context, vhost, name, node string) (meta.QueueKey, uint64, error) {
	id, ok := nodeID(node)
	if member, _ := m.ClusterNode(ctx, node); !ok || !member {
		return meta.QueueKey{}, 0, fmt.Errorf("%w: %q", peer.ErrNotClusterMember, node)
	}
	q, err := m.Node.GetQueue(ctx, vhost, name)
	if errors.Is(err, meta.ErrNotFound) {
		return meta.QueueKey{}, 0, fmt.Errorf("%w: queue %q in vhost %q", peer.ErrQueueNotFound, name, vhost)
	}
	if err != nil {
		return meta.QueueKey{}, 0, err
	}
	switch qgroup.QueueType(q) {
	case "quorum":
	case "stream":
		return meta.QueueKey{}, 0, peer.ErrNotQuorumQueue
	default:
		return meta.QueueKey{}, 0, peer.ErrClassicQueue
	}
	return q.Key(), id, nil
}

// AddQueueReplica implements peer.QueueReplicas.
func (m *groupedMeta) AddQueueReplica(ctx context.Context, vhost, name, node string) error {
	k, id, err := m.quorumQueue(ctx, vhost, name, node)
	if err != nil {
		return err
	}
	return replicaErr(m.mgr.AddMember(ctx, k, id))
}

// DeleteQueueReplica implements peer.QueueReplicas.
func (m *groupedMeta) DeleteQueueReplica(ctx context.Context, vhost, name, node string) error {
	k, id, err := m.quorumQueue(ctx, vhost, name, node)
	if err != nil {
		return err
	}
	return replicaErr(m.mgr.DeleteMember(ctx, k, id))
}

func replicaErr(err error) error {
	switch {
	case errors.Is(err, qgroup.ErrNoGroup):
		return fmt.Errorf("%w: %w", peer.ErrNoQueueGroup, err)
	case errors.Is(err, qgroup.ErrLastReplica):
		return fmt.Errorf("%w: %w", peer.ErrLastNode, err)
	case errors.Is(err, qgroup.ErrMemberDown):
		return fmt.Errorf("%w: %w", peer.ErrNodeNotRunning, err)
	case errors.Is(err, qgroup.ErrNotMember):
		return fmt.Errorf("%w: %w", peer.ErrNotClusterMember, err)
	}
	return err
}

// quorumQueues lists the quorum queues with a group whose vhost and
// name match takes.
func (m *groupedMeta) quorumQueues(ctx context.Context, match func(vhost, name string) bool) ([]meta.QueueKey, error) {
	var out []meta.QueueKey
	keys := m.mgr.Keys()
	slices.SortFunc(keys, func(a, b meta.QueueKey) int {
		return cmp.Or(cmp.Compare(a.VHost, b.VHost), cmp.Compare(a.Name, b.Name))
	})
	for _, k := range keys {
		if match != nil && !match(k.VHost, k.Name) {
			continue
		}
		q, err := m.Node.GetQueue(ctx, k.VHost, k.Name)
		if errors.Is(err, meta.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if qgroup.QueueType(q) == "quorum" {
			out = append(out, k)
		}
	}
	return out, nil
}

// GrowQueueReplicas implements peer.QueueReplicas, as
// rabbit_quorum_queue:grow: one queue after another.
func (m *groupedMeta) GrowQueueReplicas(ctx context.Context, node string, match func(vhost, name string) bool, even bool) error {
	id, ok := nodeID(node)
	if member, running := m.ClusterNode(ctx, node); !ok || !member {
		return fmt.Errorf("%w: %q", peer.ErrNotClusterMember, node)
	} else if !running {
		return fmt.Errorf("%w: %q", peer.ErrNodeNotRunning, node)
	}
	keys, err := m.quorumQueues(ctx, match)
	if err != nil {
		return err
	}
	var errs []error
	for _, k := range keys {
		p, ok, err := m.mgr.Placement(k)
		if err != nil || !ok || slices.Contains(p.Voters, id) || (even && len(p.Voters)%2 != 0) {
			continue
		}
		if err := eachQueue(ctx, func(ctx context.Context) error { return m.mgr.AddMember(ctx, k, id) }); err != nil {
			errs = append(errs, fmt.Errorf("queue %q in vhost %q: %w", k.Name, k.VHost, replicaErr(err)))
		}
	}
	return errors.Join(errs...)
}

// ShrinkQueueReplicas implements peer.QueueReplicas, as
// rabbit_quorum_queue:shrink_all: every quorum queue node votes in but
// those whose last voter it is (skipped, as RabbitMQ logs and skips
// them).
func (m *groupedMeta) ShrinkQueueReplicas(ctx context.Context, node string) error {
	id, ok := nodeID(node)
	if member, _ := m.ClusterNode(ctx, node); !ok || !member {
		return fmt.Errorf("%w: %q", peer.ErrNotClusterMember, node)
	}
	keys, err := m.quorumQueues(ctx, nil)
	if err != nil {
		return err
	}
	var errs []error
	for _, k := range keys {
		p, ok, err := m.mgr.Placement(k)
		if err != nil || !ok || !slices.Contains(p.Voters, id) || len(p.Voters) == 1 {
			continue
		}
		if err := eachQueue(ctx, func(ctx context.Context) error { return m.mgr.DeleteMember(ctx, k, id) }); err != nil {
			errs = append(errs, fmt.Errorf("queue %q in vhost %q: %w", k.Name, k.VHost, replicaErr(err)))
		}
	}
	return errors.Join(errs...)
}

// perQueueTimeout bounds each queue's change of a grow or shrink, as
// RabbitMQ bounds each member change.
const perQueueTimeout = 30 * time.Second

func eachQueue(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, perQueueTimeout)
	defer cancel()
	return f(ctx)
}

// ClusterNodes implements peer.QueueReplicas: every member, with the
// groups this member's engine shows it voting in, learning and leading.
func (m *groupedMeta) ClusterNodes(ctx context.Context) []peer.ClusterNode {
	peers, err := m.Node.Peers(ctx)
	if err != nil {
		return nil
	}
	counts, _ := m.mgr.MemberGroups(ctx)
	alive := m.alive(ctx)
	self := m.mgr.Engine().ID()
	stats := m.mgr.Engine().Stats()
	out := make([]peer.ClusterNode, 0, len(peers))
	for _, p := range peers {
		c := counts[p.ID]
		n := peer.ClusterNode{Name: NodeName(p.ID), Self: p.ID == self, Running: alive[p.ID],
			Voter: c.Voter, Learner: c.Learner, Leader: c.Leader}
		if n.Self {
			n.Groups, n.Active = stats.Groups, stats.Active
		}
		out = append(out, n)
	}
	return out
}

// AddQueueReplica makes member a voter of the group of quorum queue name
// in vhost, as `rabbitmq-queues add_member` does, and returns once it is
// (it joins as a learner and is promoted once it caught up). It refuses
// with the errors of package internal/peer's QueueReplicas: a member the
// cluster does not have or that is not running, a queue that does not
// exist, is not a quorum queue or has no group of its own.
func (n *Node) AddQueueReplica(ctx context.Context, vhost, name string, member uint64) error {
	if n.groups == nil {
		return peer.ErrNoQueueGroup
	}
	return (&groupedMeta{Node: n.raft, mgr: n.groups.mgr}).AddQueueReplica(ctx, vhost, name, NodeName(member))
}

// DeleteQueueReplica removes member's voter from the group of quorum
// queue name in vhost, as `rabbitmq-queues delete_member` does, refusing
// to remove the last one; when every member holds the group, member
// keeps a learner's copy, so it still serves the queue.
func (n *Node) DeleteQueueReplica(ctx context.Context, vhost, name string, member uint64) error {
	if n.groups == nil {
		return peer.ErrNoQueueGroup
	}
	return (&groupedMeta{Node: n.raft, mgr: n.groups.mgr}).DeleteQueueReplica(ctx, vhost, name, NodeName(member))
}

// The refusals of AddQueueReplica and DeleteQueueReplica, named as
// RabbitMQ names them (errors.Is matches them).
var (
	ErrQueueNotFound    = peer.ErrQueueNotFound
	ErrNotClusterMember = peer.ErrNotClusterMember
	ErrNodeNotRunning   = peer.ErrNodeNotRunning
	ErrLastNode         = peer.ErrLastNode
	ErrNotQuorumQueue   = peer.ErrNotQuorumQueue
	ErrClassicQueue     = peer.ErrClassicQueue
	ErrNoQueueGroup     = peer.ErrNoQueueGroup
)

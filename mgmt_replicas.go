package broker

import (
	"context"
	"errors"
	"regexp"

	"github.com/warrenmq/broker/internal/mgmt"
	"github.com/warrenmq/broker/internal/peer"
)

// The management API's quorum queue replica routes and the cluster view
// of /api/nodes, over the peer.QueueReplicas package cluster attaches
// (peer.Peers); on a broker that is not a cluster member, no node but
// itself exists.
var (
	_ mgmt.Replicas     = mgmtView{}
	_ mgmt.ClusterNodes = mgmtView{}
)

func (v mgmtView) replicas() (peer.QueueReplicas, bool) {
	r := v.b.opts.peers.QueueReplicas
	return r, r != nil
}

func (v mgmtView) ClusterNode(ctx context.Context, node string) (member, running bool) {
	if r, ok := v.replicas(); ok {
		return r.ClusterNode(ctx, node)
	}
	return false, false
}

func (v mgmtView) AddQueueReplica(ctx context.Context, vhost, name, node string) error {
	r, ok := v.replicas()
	if !ok {
		return replicaError(peer.ErrNotClusterMember)
	}
	return replicaError(r.AddQueueReplica(ctx, vhost, name, node))
}

func (v mgmtView) DeleteQueueReplica(ctx context.Context, vhost, name, node string) error {
	r, ok := v.replicas()
	if !ok {
		return replicaError(peer.ErrNotClusterMember)
	}
	return replicaError(r.DeleteQueueReplica(ctx, vhost, name, node))
}

func (v mgmtView) GrowQueueReplicas(ctx context.Context, node string, vhost, queue *regexp.Regexp, even bool) error {
	r, ok := v.replicas()
	if !ok {
		return replicaError(peer.ErrNotClusterMember)
	}
	match := func(vh, name string) bool { return vhost.MatchString(vh) && queue.MatchString(name) }
	// As RabbitMQ's grow, a queue that refuses is skipped (and logged).
	if err := r.GrowQueueReplicas(ctx, node, match, even); err != nil {
		v.b.log.Warn("management: grow quorum queue replicas", "node", node, "err", err)
	}
	return nil
}

func (v mgmtView) ShrinkQueueReplicas(ctx context.Context, node string) error {
	r, ok := v.replicas()
	if !ok {
		return replicaError(peer.ErrNotClusterMember)
	}
	if err := r.ShrinkQueueReplicas(ctx, node); err != nil {
		v.b.log.Warn("management: shrink quorum queue replicas", "node", node, "err", err)
	}
	return nil
}

func (v mgmtView) ClusterNodes(ctx context.Context) []mgmt.ClusterNode {
	r, ok := v.replicas()
	if !ok {
		return nil
	}
	var out []mgmt.ClusterNode
	for _, n := range r.ClusterNodes(ctx) {
		out = append(out, mgmt.ClusterNode(n))
	}
	return out
}

// replicaError gives a replica change's failure the management API's
// form: RabbitMQ's reason for it.
func replicaError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, peer.ErrQueueNotFound):
		return errors.Join(mgmt.ErrNotFound, err)
	case errors.Is(err, peer.ErrNotClusterMember):
		return &mgmt.ReplicaError{Reason: peer.ErrNotClusterMember.Error(), BadRequest: true, Err: err}
	case errors.Is(err, context.DeadlineExceeded):
		return &mgmt.ReplicaError{Reason: "timeout", Err: err}
	}
	for _, e := range []error{peer.ErrLastNode, peer.ErrNotQuorumQueue, peer.ErrClassicQueue, peer.ErrNodeNotRunning, peer.ErrNoQueueGroup} {
		if errors.Is(err, e) {
			return &mgmt.ReplicaError{Reason: e.Error(), Err: err}
		}
	}
	return &mgmt.ReplicaError{Reason: err.Error(), Err: err}
}

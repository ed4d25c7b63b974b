package peer

import (
	"context"
	"errors"
)

// QueueReplicas is what a cluster member with queue groups offers the
// management API: growing and shrinking quorum queues' replicas
// (RabbitMQ's rabbitmq-queues add_member, delete_member, grow and
// shrink) and its view of every member's share of the groups. Package
// cluster implements it and hands it over in Peers.QueueReplicas.
type QueueReplicas interface {
	// ClusterNode reports whether node names a member and whether this
	// member hears from it.
	ClusterNode(ctx context.Context, node string) (member, running bool)
	// AddQueueReplica makes node a voter of the queue's group and
	// DeleteQueueReplica no longer one, returning once done; both are
	// idempotent.
	AddQueueReplica(ctx context.Context, vhost, name, node string) error
	DeleteQueueReplica(ctx context.Context, vhost, name, node string) error
	// GrowQueueReplicas adds node to every quorum queue match takes that
	// node does not vote in (with even, only those with an even number of
	// voters); ShrinkQueueReplicas removes node from every quorum queue it
	// votes in and is not the last voter of. A queue that refuses is
	// skipped; the error joins the refusals.
	GrowQueueReplicas(ctx context.Context, node string, match func(vhost, name string) bool, even bool) error
	ShrinkQueueReplicas(ctx context.Context, node string) error
	// ClusterNodes lists every member with its share of the groups.
	ClusterNodes(ctx context.Context) []ClusterNode
}

// ClusterNode is one member and its share of the queue groups, as the
// member answering sees them.
type ClusterNode struct {
	Name          string
	Self, Running bool
	// Voter, Learner, Leader: the groups it votes in, learns, leads.
	Voter, Learner, Leader int
	// Groups, Active: on Self, the groups its engine holds and those not
	// quiesced.
	Groups, Active int
}

// The refusals of QueueReplicas, each named as RabbitMQ names it.
var (
	ErrQueueNotFound    = errors.New("not_found")
	ErrNotClusterMember = errors.New("Node is not a cluster member")
	ErrNodeNotRunning   = errors.New("node_not_running")
	ErrLastNode         = errors.New("last_node")
	ErrNotQuorumQueue   = errors.New("not_quorum_queue")
	ErrClassicQueue     = errors.New("classic_queue_not_supported")
	// ErrNoQueueGroup: a quorum queue whose data stayed in the metadata
	// group (declared before queue groups were turned on); a Warren
	// reason.
	ErrNoQueueGroup = errors.New("queue_has_no_raft_group")
)

package mgmt

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"time"
)

// Replicas is the optional part of a Broker that grows and shrinks
// quorum queues' replicas: a cluster member whose quorum queues have raft
// groups of their own. A Broker without it answers its routes as a
// RabbitMQ node without other members does: 400, the node is not a
// cluster member.
type Replicas interface {
	// ClusterNode reports whether node names a member of the cluster and
	// whether it is running.
	ClusterNode(ctx context.Context, node string) (member, running bool)
	// AddQueueReplica and DeleteQueueReplica make node a voter of the
	// queue's group, or no longer one (rabbitmq-queues add_member,
	// delete_member); GrowQueueReplicas adds node to every quorum queue
	// whose vhost and name the patterns match and, for strategy "even",
	// which has an even number of voters; ShrinkQueueReplicas removes
	// node from every quorum queue but those it is the last voter of.
	// Errors wrap ErrNotFound (no such queue) or are *ReplicaError.
	AddQueueReplica(ctx context.Context, vhost, name, node string) error
	DeleteQueueReplica(ctx context.Context, vhost, name, node string) error
	GrowQueueReplicas(ctx context.Context, node string, vhost, queue *regexp.Regexp, even bool) error
	ShrinkQueueReplicas(ctx context.Context, node string) error
}

// ReplicaError is a replica change refused or failed, with RabbitMQ's
// reason: last_node, not_quorum_queue, classic_queue_not_supported,
// node_not_running, timeout (503), or, with BadRequest, the input's fault
// (400, "Node is not a cluster member").
type ReplicaError struct {
	Reason     string
	BadRequest bool
	Err        error
}

func (e *ReplicaError) Error() string {
	if e.Err != nil {
		return e.Reason + ": " + e.Err.Error()
	}
	return e.Reason
}

func (e *ReplicaError) Unwrap() error { return e.Err }

// replicaTimeout is RabbitMQ's ?TIMEOUT of these routes.
const replicaTimeout = 30 * time.Second

// replicaRoutes: quorum queue membership, as RabbitMQ 4.x's management
// plugin serves it (rabbit_mgmt_wm_quorum_queue_replicas_add_member,
// _delete_member, _grow and _shrink), administrators only.
func (m *mgmt) replicaRoutes() {
	m.handle("POST", "/api/queues/quorum/{vhost}/{name}/replicas/add", administrator, m.replicaAdd)
	m.handle("DELETE", "/api/queues/quorum/{vhost}/{name}/replicas/delete", administrator, m.replicaDelete)
	m.handle("POST", "/api/queues/quorum/replicas/on/{node}/grow", administrator, m.replicasGrow)
	m.handle("DELETE", "/api/queues/quorum/replicas/on/{node}/shrink", administrator, m.replicasShrink)
}

// replicaBody is the bodies' keys: node for add and delete;
// vhost_pattern, queue_pattern and strategy for grow; membership (add,
// grow) is accepted as RabbitMQ accepts it, "promotable" or "voter" (a
// new replica is promoted once it caught up, either way).
type replicaBody struct {
	Node         *string `json:"node"`
	Membership   *string `json:"membership"`
	VHostPattern *string `json:"vhost_pattern"`
	QueuePattern *string `json:"queue_pattern"`
	Strategy     *string `json:"strategy"`
}

func (m *mgmt) readReplicaBody(c *mgmtCall) (replicaBody, bool) {
	var b replicaBody
	if !readBody(c, &b) {
		return b, false
	}
	if b.Membership != nil && *b.Membership != "promotable" && *b.Membership != "voter" {
		WriteError(c.w, http.StatusBadRequest, "bad_request", "Invalid membership value")
		return b, false
	}
	return b, true
}

// replicaQueue reads the path's vhost and queue, answering 404 when
// either does not exist, and the body's node, answering 400 without one
// or for one that is not a member.
func (m *mgmt) replicaQueue(c *mgmtCall) (vhost, name, node string, ok bool) {
	vh, ok := m.vhostParam(c)
	if !ok {
		return "", "", "", false
	}
	if !m.b.HasQueue(vh, c.p("name")) {
		notFound(c.w)
		return "", "", "", false
	}
	b, ok := m.readReplicaBody(c)
	if !ok || refuseMissing(c.w, bodyKey{"node", b.Node != nil}) {
		return "", "", "", false
	}
	if !m.clusterMember(c, *b.Node) {
		return "", "", "", false
	}
	return vh, c.p("name"), *b.Node, true
}

func (m *mgmt) clusterMember(c *mgmtCall, node string) bool {
	if r, ok := m.b.(Replicas); ok {
		if member, _ := r.ClusterNode(c.r.Context(), node); member {
			return true
		}
	}
	WriteError(c.w, http.StatusBadRequest, "bad_request", "Node is not a cluster member")
	return false
}

// replicaAdd is POST /api/queues/quorum/{vhost}/{name}/replicas/add:
// 204 once node is a voter.
func (m *mgmt) replicaAdd(c *mgmtCall) {
	m.replicaChange(c, Replicas.AddQueueReplica, http.StatusNoContent)
}

// replicaDelete is DELETE /api/queues/quorum/{vhost}/{name}/replicas/delete:
// 202 once node is no longer a voter (RabbitMQ answers 202, the change
// being asynchronous in Ra; here it is done when answered).
func (m *mgmt) replicaDelete(c *mgmtCall) {
	m.replicaChange(c, Replicas.DeleteQueueReplica, http.StatusAccepted)
}

func (m *mgmt) replicaChange(c *mgmtCall, change func(Replicas, context.Context, string, string, string) error, okStatus int) {
	vh, name, node, ok := m.replicaQueue(c)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(c.r.Context(), replicaTimeout)
	defer cancel()
	m.replicaAnswer(c, change(m.b.(Replicas), ctx, vh, name, node), okStatus)
}

// replicasGrow is POST /api/queues/quorum/replicas/on/{node}/grow: 404
// when node is not a running member, 400 without the three keys or with
// a pattern that is not a regular expression, else 204 once every
// matching queue was grown (a queue that refused is left as it is, as
// RabbitMQ logs and skips it).
func (m *mgmt) replicasGrow(c *mgmtCall) {
	r, isCluster := m.b.(Replicas)
	node := c.p("node")
	if !isCluster {
		notFound(c.w)
		return
	}
	if member, running := r.ClusterNode(c.r.Context(), node); !member || !running {
		notFound(c.w)
		return
	}
	b, ok := m.readReplicaBody(c)
	if !ok || refuseMissing(c.w, bodyKey{"vhost_pattern", b.VHostPattern != nil}, bodyKey{"queue_pattern", b.QueuePattern != nil}, bodyKey{"strategy", b.Strategy != nil}) {
		return
	}
	if *b.Strategy != "all" && *b.Strategy != "even" {
		WriteError(c.w, http.StatusBadRequest, "bad_request", "Invalid strategy value")
		return
	}
	vre, err := regexp.Compile(*b.VHostPattern)
	if err != nil {
		WriteError(c.w, http.StatusBadRequest, "bad_request", "Invalid vhost_pattern: "+err.Error())
		return
	}
	qre, err := regexp.Compile(*b.QueuePattern)
	if err != nil {
		WriteError(c.w, http.StatusBadRequest, "bad_request", "Invalid queue_pattern: "+err.Error())
		return
	}
	m.replicaAnswer(c, r.GrowQueueReplicas(c.r.Context(), node, vre, qre, *b.Strategy == "even"), http.StatusNoContent)
}

// replicasShrink is DELETE /api/queues/quorum/replicas/on/{node}/shrink:
// 404 when node is not a member, else 202 once node's voters are removed
// from every quorum queue it is not the last voter of.
func (m *mgmt) replicasShrink(c *mgmtCall) {
	r, isCluster := m.b.(Replicas)
	node := c.p("node")
	if !isCluster {
		notFound(c.w)
		return
	}
	if member, _ := r.ClusterNode(c.r.Context(), node); !member {
		notFound(c.w)
		return
	}
	m.replicaAnswer(c, r.ShrinkQueueReplicas(c.r.Context(), node), http.StatusAccepted)
}

func (m *mgmt) replicaAnswer(c *mgmtCall, err error, okStatus int) {
	var re *ReplicaError
	switch {
	case err == nil:
		c.w.WriteHeader(okStatus)
	case errors.Is(err, ErrNotFound):
		notFound(c.w)
	case errors.As(err, &re) && re.BadRequest:
		WriteError(c.w, http.StatusBadRequest, "bad_request", re.Reason)
	case errors.As(err, &re):
		WriteError(c.w, http.StatusServiceUnavailable, "service_unavailable", re.Reason)
	default:
		WriteError(c.w, http.StatusServiceUnavailable, "service_unavailable", err.Error())
	}
}

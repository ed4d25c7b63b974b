package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/cluster"
)

// mgmtDo sends method path with body (JSON) to member i's management API
// as user:pass and returns the status and the body.
func (c *testCluster) mgmtDo(i int, user, method, path, body string) (int, string) {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.SetBasicAuth(user, user)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	c.broker(i).ManagementHandler().ServeHTTP(w, req)
	return w.Code, w.Body.String()
}

// votersOf waits until member i sees queue name's group with voters want.
func (c *testCluster) votersOf(t *testing.T, i int, name string, want ...uint64) {
	t.Helper()
	var st cluster.GroupStatus
	require.Eventually(t, func() bool {
		var ok bool
		st, ok = c.nodes[i].QueueGroup(context.Background(), "/", name)
		return ok && fmt.Sprint(st.Voters) == fmt.Sprint(want) && st.Leader != 0
	}, waitFor, 10*time.Millisecond, "member %d: voters of %s want %v, have %+v", i, name, want, st)
}

// TestQueueReplicasOverHTTP grows and shrinks a quorum queue's group
// through RabbitMQ 4.x's routes, from members that do not lead it:
// add_member (204, idempotent), delete_member of its leader (202, the
// leadership moves), the last voter refused (503 last_node), grow and
// shrink on a node; every confirmed message is consumed afterwards.
// Bad input gets RabbitMQ's status and reason.
func TestQueueReplicasOverHTTP(t *testing.T) {
	c := newTestCluster(t, withGroups)
	_, ch := c.dial(0)
	_, err := ch.QueueDeclare("qr", true, false, false, false, amqp091.Table{"x-queue-type": "quorum", "x-quorum-initial-group-size": 1})
	require.NoError(t, err)
	_, err = ch.QueueDeclare("cl", true, false, false, false, nil)
	require.NoError(t, err)
	// The stream's group is led by member 2, so that no member leads
	// more than its share and the rebalancer moves no leadership: the
	// removal of qr's leader below is the removal's own hand-over.
	_, ch1 := c.dial(1)
	_, err = ch1.QueueDeclare("st", true, false, false, false, amqp091.Table{"x-queue-type": "stream"})
	require.NoError(t, err)
	c.votersOf(t, 2, "qr", 1)
	p := newConfirmer(t, ch)
	var bodies []string
	publish := func() {
		body := fmt.Sprintf("m%d", len(bodies))
		require.True(t, p.publish("", "qr", body, waitFor), "confirmed %s", body)
		bodies = append(bodies, body)
	}
	publish()

	const add, del = "/api/queues/quorum/%2F/qr/replicas/add", "/api/queues/quorum/%2F/qr/replicas/delete"
	code, body := c.mgmtDo(2, "guest", "POST", add, `{"node":"warren@2"}`)
	require.Equal(t, http.StatusNoContent, code, body)
	c.votersOf(t, 0, "qr", 1, 2)
	q, err := c.queueOver(1, "qr")
	require.NoError(t, err)
	require.Equal(t, []string{"warren@1", "warren@2"}, *q.Members)
	code, body = c.mgmtDo(1, "guest", "POST", add, `{"node":"warren@2"}`)
	require.Equal(t, http.StatusNoContent, code, "add is idempotent: %s", body)
	publish()

	// Delete the leader's voter.
	st, _ := c.nodes[0].QueueGroup(context.Background(), "/", "qr")
	leader, other := st.Leader, 3-st.Leader
	require.Contains(t, []uint64{1, 2}, leader)
	code, body = c.mgmtDo(1, "guest", "DELETE", del, fmt.Sprintf(`{"node":"warren@%d"}`, leader))
	require.Equal(t, http.StatusAccepted, code, body)
	c.votersOf(t, 2, "qr", other)
	st, _ = c.nodes[2].QueueGroup(context.Background(), "/", "qr")
	require.Equal(t, other, st.Leader, "the removed leader handed over")
	require.Contains(t, st.Learners, leader, "every member holds the group: the removed voter stays a learner")
	publish()
	code, body = c.mgmtDo(0, "guest", "DELETE", del, fmt.Sprintf(`{"node":"warren@%d"}`, other))
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.JSONEq(t, `{"error":"service_unavailable","reason":"last_node"}`, body)

	code, body = c.mgmtDo(0, "guest", "POST", "/api/queues/quorum/replicas/on/warren@3/grow", `{"vhost_pattern":".*","queue_pattern":"^qr$","strategy":"all"}`)
	require.Equal(t, http.StatusNoContent, code, body)
	c.votersOf(t, 0, "qr", min(other, 3), max(other, 3))
	code, body = c.mgmtDo(0, "guest", "POST", fmt.Sprintf("/api/queues/quorum/replicas/on/warren@%d/grow", leader), `{"vhost_pattern":".*","queue_pattern":".*","strategy":"even"}`)
	require.Equal(t, http.StatusNoContent, code, body)
	c.votersOf(t, 0, "qr", 1, 2, 3)
	publish()
	code, body = c.mgmtDo(1, "guest", "DELETE", "/api/queues/quorum/replicas/on/warren@3/shrink", "")
	require.Equal(t, http.StatusAccepted, code, body)
	c.votersOf(t, 1, "qr", 1, 2)
	publish()

	for _, tc := range []struct {
		name, user, method, path, body string
		code                           int
		reason                         string
	}{
		{"unknown node", "guest", "POST", add, `{"node":"warren@9"}`, 400, "Node is not a cluster member"},
		{"not a node name", "guest", "POST", add, `{"node":"rabbit@x"}`, 400, "Node is not a cluster member"},
		{"no node", "guest", "POST", add, `{}`, 400, "[{key_missing,node}]"},
		{"not JSON", "guest", "POST", add, `{"node":`, 400, "not_json"},
		{"bad membership", "guest", "POST", add, `{"node":"warren@3","membership":"nope"}`, 400, "Invalid membership value"},
		{"unknown queue", "guest", "POST", "/api/queues/quorum/%2F/nope/replicas/add", `{"node":"warren@3"}`, 404, ""},
		{"unknown vhost", "guest", "POST", "/api/queues/quorum/nope/qr/replicas/add", `{"node":"warren@3"}`, 404, "vhost_not_found"},
		{"classic queue", "guest", "POST", "/api/queues/quorum/%2F/cl/replicas/add", `{"node":"warren@3"}`, 503, "classic_queue_not_supported"},
		{"stream", "guest", "DELETE", "/api/queues/quorum/%2F/st/replicas/delete", `{"node":"warren@3"}`, 503, "not_quorum_queue"},
		{"not administrator", "mon", "POST", add, `{"node":"warren@3"}`, 401, ""},
		{"grow on an unknown node", "guest", "POST", "/api/queues/quorum/replicas/on/warren@9/grow", `{"vhost_pattern":".*","queue_pattern":".*","strategy":"all"}`, 404, ""},
		{"grow without keys", "guest", "POST", "/api/queues/quorum/replicas/on/warren@3/grow", `{"strategy":"all"}`, 400, "[{key_missing,vhost_pattern},{key_missing,queue_pattern}]"},
		{"grow with a bad strategy", "guest", "POST", "/api/queues/quorum/replicas/on/warren@3/grow", `{"vhost_pattern":".*","queue_pattern":".*","strategy":"odd"}`, 400, "Invalid strategy value"},
		{"grow with a bad pattern", "guest", "POST", "/api/queues/quorum/replicas/on/warren@3/grow", `{"vhost_pattern":"(","queue_pattern":".*","strategy":"all"}`, 400, ""},
		{"shrink an unknown node", "guest", "DELETE", "/api/queues/quorum/replicas/on/warren@9/shrink", "", 404, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.user == "mon" {
				code, body := c.mgmtDo(0, "guest", "PUT", "/api/users/mon", `{"password":"mon","tags":"monitoring"}`)
				require.Less(t, code, 300, body)
			}
			code, body := c.mgmtDo(0, tc.user, tc.method, tc.path, tc.body)
			require.Equal(t, tc.code, code, body)
			if tc.reason != "" {
				var e map[string]string
				require.NoError(t, json.Unmarshal([]byte(body), &e), body)
				require.Equal(t, tc.reason, e["reason"], body)
			}
		})
	}
	c.votersOf(t, 0, "qr", 1, 2)

	got := newTally()
	_, ch2 := c.dial(2)
	consume(t, ch2, "qr", got)
	require.Eventually(t, func() bool { return got.has(bodies) }, waitFor, 10*time.Millisecond, "every confirmed message is consumed")
}

// TestQueueReplicasGoAPI: Node.AddQueueReplica and DeleteQueueReplica
// change the group as the routes do and refuse with errors.Is-able
// errors: a member down, the last voter, a classic queue, no queue.
func TestQueueReplicasGoAPI(t *testing.T) {
	c := newTestCluster(t, withGroups)
	_, ch := c.dial(0)
	_, err := ch.QueueDeclare("qg", true, false, false, false, amqp091.Table{"x-queue-type": "quorum", "x-quorum-initial-group-size": 2})
	require.NoError(t, err)
	_, err = ch.QueueDeclare("cl", true, false, false, false, nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	st, ok := c.nodes[0].QueueGroup(ctx, "/", "qg")
	require.True(t, ok)
	require.Len(t, st.Voters, 2)
	require.NoError(t, c.nodes[1].DeleteQueueReplica(ctx, "/", "qg", st.Voters[0]))
	c.votersOf(t, 0, "qg", st.Voters[1])
	require.ErrorIs(t, c.nodes[2].DeleteQueueReplica(ctx, "/", "qg", st.Voters[1]), cluster.ErrLastNode)
	require.ErrorIs(t, c.nodes[2].AddQueueReplica(ctx, "/", "cl", 1), cluster.ErrClassicQueue)
	require.ErrorIs(t, c.nodes[2].AddQueueReplica(ctx, "/", "none", 1), cluster.ErrQueueNotFound)
	require.ErrorIs(t, c.nodes[2].AddQueueReplica(ctx, "/", "qg", 7), cluster.ErrNotClusterMember)
	require.NoError(t, c.nodes[2].AddQueueReplica(ctx, "/", "qg", st.Voters[0]))
	c.votersOf(t, 1, "qg", st.Voters...)

	down := 2
	if st.Voters[0] == 3 || st.Voters[1] == 3 {
		down = int(6-st.Voters[0]-st.Voters[1]) - 1 // the member that is not a voter
	}
	c.kill(down)
	require.Eventually(t, func() bool {
		err := c.nodes[(down+1)%3].AddQueueReplica(ctx, "/", "qg", uint64(down+1))
		return err != nil && strings.Contains(err.Error(), cluster.ErrNodeNotRunning.Error())
	}, waitFor, 50*time.Millisecond)
}

// nodeGroups is the part of an /api/nodes entry TestNodesShowQueueGroups
// checks.
type nodeGroups struct {
	Name        string `json:"name"`
	Running     bool   `json:"running"`
	QueueGroups *struct {
		Voter   int  `json:"voter"`
		Learner int  `json:"learner"`
		Leader  int  `json:"leader"`
		Groups  *int `json:"groups"`
		Active  *int `json:"active"`
	} `json:"queue_groups"`
	Raft *json.RawMessage `json:"raft"`
}

// TestNodesShowQueueGroups: with queue groups, /api/nodes lists every
// member (as RabbitMQ lists a cluster's nodes), the answering one first
// with its alarms and raft state, each with the groups it votes in,
// learns and leads; a member cut off shows running false.
func TestNodesShowQueueGroups(t *testing.T) {
	c := newTestCluster(t, withGroups)
	declareQuorum(t, c, "nq", 6)
	var nodes []nodeGroups
	require.Eventually(t, func() bool {
		code, body := c.mgmtDo(1, "guest", "GET", "/api/nodes", "")
		if code != http.StatusOK || json.Unmarshal([]byte(body), &nodes) != nil || len(nodes) != 3 {
			return false
		}
		leaders := 0
		for _, n := range nodes {
			if n.QueueGroups == nil || n.QueueGroups.Voter != 6 || !n.Running {
				return false
			}
			leaders += n.QueueGroups.Leader
		}
		return leaders == 6
	}, waitFor, 20*time.Millisecond, "%+v", nodes)
	require.Equal(t, "warren@2", nodes[0].Name, "the answering member first")
	require.NotNil(t, nodes[0].Raft)
	require.NotNil(t, nodes[0].QueueGroups.Groups)
	require.Equal(t, 6, *nodes[0].QueueGroups.Groups)
	require.Nil(t, nodes[1].QueueGroups.Groups, "the engine's counts are the answering member's only")
	require.ElementsMatch(t, []string{"warren@1", "warren@3"}, []string{nodes[1].Name, nodes[2].Name})

	c.kill(2)
	require.Eventually(t, func() bool {
		code, body := c.mgmtDo(0, "guest", "GET", "/api/nodes", "")
		if code != http.StatusOK || json.Unmarshal([]byte(body), &nodes) != nil {
			return false
		}
		for _, n := range nodes {
			if n.Name == "warren@3" {
				return !n.Running
			}
		}
		return false
	}, waitFor, 20*time.Millisecond, "%+v", nodes)
}

package cluster_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
)

// queueRaft is the part of a queue object of /api/queues this file checks.
type queueRaft struct {
	Name    string    `json:"name"`
	Node    string    `json:"node"`
	Type    string    `json:"type"`
	Leader  *string   `json:"leader"`
	Members *[]string `json:"members"`
	Online  *[]string `json:"online"`
}

// queueOver reads queue name in "/" from node i's /api/queues/%2F/name.
func (c *testCluster) queueOver(i int, name string) (queueRaft, error) {
	body, err := httpGet(c.broker(i).ManagementHandler(), "/api/queues/%2F/"+name)
	if err != nil {
		return queueRaft{}, err
	}
	var q queueRaft
	return q, json.Unmarshal(body, &q)
}

// TestQueueGroupsStatusOverHTTP: on every member, /api/queues and
// /api/queues/{vhost}/{name} show a quorum queue's group as RabbitMQ 4.x
// shows a quorum queue (leader, members, online, node = the leader, type
// quorum) and a classic queue without those fields; per-object /metrics
// have the group's term, commit index and a leader flag set only on the
// leading member; once a member is cut off, online leaves it out.
func TestQueueGroupsStatusOverHTTP(t *testing.T) {
	c := newTestCluster(t, withGroups)
	_, ch := c.dial(0)
	_, err := ch.QueueDeclare("qs", true, false, false, false, quorumArgs)
	require.NoError(t, err)
	_, err = ch.QueueDeclare("cl", true, false, false, false, nil)
	require.NoError(t, err)
	p := newConfirmer(t, ch)
	require.True(t, p.publish("", "qs", "m", waitFor))

	all := []string{"warren@1", "warren@2", "warren@3"}
	for i := range 3 {
		var q queueRaft
		require.Eventually(t, func() bool {
			var err error
			q, err = c.queueOver(i, "qs")
			return err == nil && q.Leader != nil && *q.Leader == "warren@1" && q.Online != nil && len(*q.Online) == 3
		}, waitFor, 20*time.Millisecond, "member %d: %+v", i, q)
		require.Equal(t, "warren@1", q.Node)
		require.Equal(t, "quorum", q.Type)
		require.Equal(t, all, *q.Members)
		require.Equal(t, all, *q.Online)

		body, err := httpGet(c.broker(i).ManagementHandler(), "/api/queues")
		require.NoError(t, err)
		var qs []queueRaft
		require.NoError(t, json.Unmarshal(body, &qs))
		require.Len(t, qs, 2)
		require.Equal(t, "cl", qs[0].Name)
		require.Nil(t, qs[0].Leader, "a classic queue has no leader field")
		require.Nil(t, qs[0].Members)
		require.Equal(t, "classic", qs[0].Type)
		require.Equal(t, "qs", qs[1].Name)
		require.Equal(t, "warren@1", *qs[1].Leader)
		require.Equal(t, all, *qs[1].Members)
	}

	st, ok := c.nodes[0].QueueGroup("/", "qs")
	require.True(t, ok)
	for i := range 3 {
		body, err := httpGet(c.broker(i).MetricsHandler(broker.MetricsOptions{PerObject: true}), "/metrics")
		require.NoError(t, err)
		m := string(body)
		require.Contains(t, m, fmt.Sprintf(`warren_raft_queue_leader{vhost="/",queue="qs"} %d`+"\n", map[bool]int{true: 1}[i == 0]))
		require.Contains(t, m, `rabbitmq_raft_log_commit_index{vhost="/",queue="qs"} `)
		require.NotContains(t, m, `queue_leader{vhost="/",queue="cl"}`)
		if i == 0 {
			require.Contains(t, m, fmt.Sprintf(`rabbitmq_raft_term_total{vhost="/",queue="qs"} %d`+"\n", st.Term))
		}
	}
	summed := c.metricsOf(0)
	require.Contains(t, summed, "warren_raft_queue_leader 1\n")
	require.False(t, strings.Contains(summed, `queue="qs"`), "no labels without per-object")

	c.kill(2)
	require.Eventually(t, func() bool {
		q, err := c.queueOver(0, "qs")
		return err == nil && q.Online != nil && strings.Join(*q.Online, ",") == "warren@1,warren@2"
	}, waitFor, 20*time.Millisecond, "online leaves the cut-off member out")
}

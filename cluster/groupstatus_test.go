package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/cluster"
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

	st, ok := c.nodes[0].QueueGroup(context.Background(), "/", "qs")
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

// TestQueueGroupsLocatorPrecedence: a new queue's leader locator is its
// policy's queue-leader-locator over its x-queue-leader-locator argument
// over the member's QueueLeaderLocator setting (RabbitMQ 4.x's
// rabbit_queue_location). Member 1 leads three queues first, so
// client-local leaves a queue declared there on member 1 and balanced
// moves it to another voter.
func TestQueueGroupsLocatorPrecedence(t *testing.T) {
	c := newTestCluster(t, withGroups, func(cfg *cluster.Config) { cfg.QueueLeaderLocator = "balanced" })
	ctx := context.Background()
	require.NoError(t, c.broker(0).Admin().PutPolicy(ctx, broker.Policy{Name: "local", Pattern: "^pol-local", ApplyTo: "quorum_queues",
		Definition: map[string]any{"queue-leader-locator": "client-local"}}))
	require.NoError(t, c.broker(0).Admin().PutPolicy(ctx, broker.Policy{Name: "bal", Pattern: "^pol-bal", ApplyTo: "quorum_queues",
		Definition: map[string]any{"queue-leader-locator": "balanced"}}))
	_, ch := c.dial(0)
	first := declareQuorumOn(t, ch, []string{"first-0", "first-1", "first-2"}, "client-local")
	require.Eventually(t, func() bool { return leaders(c, 0, first)[1] == 3 }, waitFor, 10*time.Millisecond)

	for _, tc := range []struct {
		name, arg string
		local     bool
	}{
		{"setting", "", false},                   // the setting: balanced
		{"arg-local", "client-local", true},      // argument over setting
		{"pol-local-over-arg", "balanced", true}, // policy over argument
		{"pol-bal-over-arg", "client-local", false},
	} {
		declareQuorumOn(t, ch, []string{tc.name}, tc.arg)
		var st cluster.GroupStatus
		require.Eventually(t, func() bool {
			var ok bool
			st, ok = c.nodes[0].QueueGroup(context.Background(), "/", tc.name)
			return ok && st.Leader != 0 && (st.Leader == 1) == tc.local
		}, waitFor, 10*time.Millisecond, "%s: led by member 1 = %v (%+v)", tc.name, tc.local, st)
	}
}

// declareQuorumOn declares quorum queues names on ch with locator as
// their x-queue-leader-locator ("" for none).
func declareQuorumOn(t *testing.T, ch *amqp091.Channel, names []string, locator string) []string {
	for _, name := range names {
		args := amqp091.Table{"x-queue-type": "quorum"}
		if locator != "" {
			args["x-queue-leader-locator"] = locator
		}
		_, err := ch.QueueDeclare(name, true, false, false, false, args)
		require.NoError(t, err)
	}
	return names
}

// TestQueueLeaderLocatorSettingChecked: Start refuses a locator setting
// RabbitMQ does not have.
func TestQueueLeaderLocatorSettingChecked(t *testing.T) {
	_, err := cluster.Start(cluster.Config{QueueLeaderLocator: "nearest"})
	require.ErrorContains(t, err, `cluster: Config.QueueLeaderLocator: qplace: leader locator "nearest" is not one of client-local, balanced`)
}

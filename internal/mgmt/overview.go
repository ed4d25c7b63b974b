package mgmt

import (
	"net/http"
	"slices"

	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/internal/rates"
	"github.com/warrenmq/broker/meta"
)

// overviewRoutes: the broker as a whole and the caller (RabbitMQ's
// rabbit_mgmt_wm_overview, _nodes and _whoami).
func (m *mgmt) overviewRoutes() {
	m.handle("GET", "/api/overview", anyManagement, m.overview)
	m.handle("GET", "/api/nodes", anyManagement, m.nodes)
	m.handle("GET", "/api/whoami", anyManagement, m.whoami)
}

func (m *mgmt) overview(c *mgmtCall) {
	rq, ok := rateQueriesOf(c)
	if !ok {
		return
	}
	s := m.b.Overview()
	listeners := []map[string]any{}
	for _, a := range s.Listeners {
		listeners = append(listeners, map[string]any{
			"node": m.node(), "protocol": "amqp", "ip_address": a.IP.String(), "port": a.Port,
		})
	}
	slices.SortFunc(listeners, func(a, b map[string]any) int { return a["port"].(int) - b["port"].(int) })
	types := []map[string]any{}
	for _, k := range []string{"direct", "fanout", "headers", "topic"} {
		types = append(types, map[string]any{"name": k, "description": "AMQP " + k + " exchange, as per the AMQP specification", "enabled": true})
	}
	if s.LocalRandomExchange {
		types = append(types, localRandomExchangeType)
	}
	types = append(types, pluginExchangeTypes...)
	queueTotals := map[string]any{}
	addLengths(queueTotals, lengthsOf(s.Ready, s.Unacked), m.details(rates.BrokerKey, rq.lengths))
	writeJSON(c.w, http.StatusOK, map[string]any{
		"management_version": s.RabbitMQVersion,
		"rabbitmq_version":   s.RabbitMQVersion,
		"product_name":       "Warren",
		"product_version":    s.ProductVersion,
		"cluster_name":       m.node(),
		"node":               m.node(),
		"rates_mode":         "none",
		"disable_stats":      false,
		"exchange_types":     types,
		"listeners":          listeners,
		"message_stats":      messageStats(brokerStats, BrokerValues(s.Totals), m.details(rates.BrokerKey, rq.msg)),
		"object_totals": map[string]int{
			"connections": s.Connections, "channels": s.Channels, "consumers": s.Consumers,
			"exchanges": s.Exchanges, "queues": s.Queues,
		},
		"queue_totals": queueTotals,
		"churn_rates": map[string]uint64{
			"connection_created": s.ConnectionsOpened, "connection_closed": s.ConnectionsClosed,
			"channel_created": s.ChannelsOpened, "channel_closed": s.ChannelsClosed,
		},
	})
}

// nodes lists the one node with RabbitMQ's alarm fields. mem_used is
// the process's memory, as RabbitMQ's is (its default strategy reads the
// RSS); Warren's memory alarm compares the message bytes held in memory
// with mem_limit, shown as mem_message_bytes (a Warren extension).
// disk_free is left out while the disk is not watched.
func (m *mgmt) nodes(c *mgmtCall) {
	a := m.b.Node()
	node := map[string]any{"name": m.node(), "type": "disc", "running": true,
		"mem_alarm": a.MemAlarm, "mem_used": a.MemUsed, "mem_limit": a.MemLimit, "mem_message_bytes": a.MessageBytes,
		"disk_free_alarm": a.DiskFreeAlarm, "disk_free_limit": a.DiskFreeLimit}
	if a.DiskFree >= 0 {
		node["disk_free"] = a.DiskFree
	}
	if a.Raft != nil {
		node["raft"] = raftJSON(*a.Raft)
	}
	writeJSON(c.w, http.StatusOK, m.clusterNodes(c.r.Context(), node)) // nodes_cluster.go
}

// raftJSON is the "raft" object of /api/nodes for a replicated meta store
// (a Warren extension: RabbitMQ shows its quorum queues' raft state per
// queue, rabbitmq-diagnostics quorum_status): this member's role, term,
// leader, commit and applied indexes and, on the leader, each member's
// replication progress.
func raftJSON(s meta.ReplicationStatus) map[string]any {
	peers := make([]map[string]any, 0, len(s.Peers))
	for _, p := range s.Peers {
		peers = append(peers, map[string]any{"id": p.ID, "match_index": p.Match, "next_index": p.Next,
			"state": p.State, "recent_active": p.RecentActive})
	}
	return map[string]any{"id": s.ID, "role": s.Role, "leader": s.Leader, "term": s.Term,
		"commit_index": s.Commit, "applied_index": s.Applied, "peers": peers}
}

func (m *mgmt) whoami(c *mgmtCall) {
	writeJSON(c.w, http.StatusOK, map[string]any{"name": c.user.Name, "tags": definitions.UserTags(c.user.Tags)})
}

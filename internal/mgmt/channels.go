package mgmt

import (
	"fmt"
	"net/http"
)

// channelRoutes: the channels of the connections the user may see.
func (m *mgmt) channelRoutes() {
	m.handle("GET", "/api/channels", anyManagement, m.channels)
	m.handle("GET", "/api/channels/{name}", anyManagement, m.channel)
}

func channelName(connID string, n uint16) string { return fmt.Sprintf("%s (%d)", connID, n) }

func (m *mgmt) channelJSON(v Connection, ch Channel) map[string]any {
	peerHost, peerPort := peerOf(v)
	state := "running"
	if ch.Closing {
		state = "closing"
	}
	return map[string]any{
		"name": channelName(v.ID, ch.Number), "number": ch.Number, "node": m.node(),
		"vhost": v.VHost, "user": v.User, "state": state,
		"connection_details": map[string]any{"name": v.ID, "peer_host": peerHost, "peer_port": peerPort},
		"consumer_count":     len(ch.Consumers), "messages_unacknowledged": ch.Unacked,
		"messages_unconfirmed": ch.Unconfirmed, "prefetch_count": ch.Prefetch,
		"global_prefetch_count": ch.GlobalPrefetch, "confirm": ch.Confirm, "transactional": ch.Transactional,
	}
}

func (m *mgmt) allChannels(c *mgmtCall, only func(Connection) bool) []map[string]any {
	out := []map[string]any{}
	for _, v := range m.visibleConns(c) {
		if only != nil && !only(v) {
			continue
		}
		for _, ch := range v.Channels {
			out = append(out, m.channelJSON(v, ch))
		}
	}
	return out
}

func (m *mgmt) channels(c *mgmtCall) {
	lq, ok := parseListQuery(c) // paging.go
	if !ok {
		return
	}
	writeListQuery(c, lq, m.allChannels(c, nil))
}

func (m *mgmt) connectionChannels(c *mgmtCall) {
	if _, ok := m.findConn(c); !ok {
		return
	}
	writeJSON(c.w, http.StatusOK, m.allChannels(c, func(v Connection) bool { return v.ID == c.p("name") }))
}

func (m *mgmt) channel(c *mgmtCall) {
	for _, ch := range m.allChannels(c, nil) {
		if ch["name"] == c.p("name") {
			writeJSON(c.w, http.StatusOK, ch)
			return
		}
	}
	notFound(c.w)
}

package mgmt

import (
	"net/http"
)

// consumerRoutes: the consumers of the connections the user may see.
func (m *mgmt) consumerRoutes() {
	m.handle("GET", "/api/consumers", anyManagement, m.consumers)
	m.handle("GET", "/api/consumers/{vhost}", anyManagement, m.consumers)
}

type consumerJSON struct {
	Arguments      map[string]any `json:"arguments"`
	AckRequired    bool           `json:"ack_required"`
	Active         bool           `json:"active"`
	ActivityStatus string         `json:"activity_status"`
	ChannelDetails map[string]any `json:"channel_details"`
	ConsumerTag    string         `json:"consumer_tag"`
	Exclusive      bool           `json:"exclusive"`
	PrefetchCount  uint16         `json:"prefetch_count"`
	Queue          map[string]any `json:"queue"`
}

func (m *mgmt) consumerList(c *mgmtCall, only func(Consumer) bool) []consumerJSON {
	out := []consumerJSON{}
	for _, v := range m.visibleConns(c) {
		peerHost, peerPort := peerOf(v)
		for _, ch := range v.Channels {
			for _, cons := range ch.Consumers {
				if only != nil && !only(cons) {
					continue
				}
				out = append(out, consumerJSON{
					Arguments: map[string]any{}, AckRequired: !cons.NoAck, Active: true, ActivityStatus: "up",
					ChannelDetails: map[string]any{
						"connection_name": v.ID, "name": channelName(v.ID, ch.Number), "node": m.node(),
						"number": ch.Number, "peer_host": peerHost, "peer_port": peerPort, "user": v.User,
					},
					ConsumerTag: cons.Tag, Exclusive: cons.Exclusive, PrefetchCount: cons.Prefetch,
					Queue: map[string]any{"name": cons.Queue, "vhost": cons.VHost},
				})
			}
		}
	}
	return out
}

func (m *mgmt) consumers(c *mgmtCall) {
	var only func(Consumer) bool
	if c.has("vhost") {
		vh, ok := m.vhostParam(c)
		if !ok {
			return
		}
		only = func(ci Consumer) bool { return ci.VHost == vh }
	}
	writeJSON(c.w, http.StatusOK, m.consumerList(c, only))
}

package mgmt

import (
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/internal/rates"
)

// connectionRoutes: connections, closing one, and its channels
// (channels.go).
func (m *mgmt) connectionRoutes() {
	m.handle("GET", "/api/connections", anyManagement, m.connections)
	m.handle("GET", "/api/connections/{name}", anyManagement, m.connection)
	m.handle("DELETE", "/api/connections/{name}", anyManagement, m.deleteConnection)
	m.handle("GET", "/api/connections/{name}/channels", anyManagement, m.connectionChannels)
}

// visibleConns lists the connections the user may see: all of them for
// administrator and monitoring, else the user's own.
func (m *mgmt) visibleConns(c *mgmtCall) []Connection {
	var out []Connection
	for _, conn := range m.b.Connections() {
		if c.all || conn.User == c.user.Name {
			out = append(out, conn)
		}
	}
	return out
}

func hostPort(a net.Addr) (string, int) {
	if a == nil {
		return "", 0
	}
	host, port, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String(), 0
	}
	p, _ := strconv.Atoi(port)
	return host, p
}

// peerOf is the peer_host and peer_port of channel and consumer details:
// "unknown" for a direct connection, as in RabbitMQ.
func peerOf(in Connection) (any, any) {
	if in.Direct {
		return "unknown", "unknown"
	}
	return hostPort(in.Peer)
}

func (m *mgmt) connectionJSON(in Connection, rq rateQueries) map[string]any {
	out := map[string]any{
		"name": in.ID, "node": m.node(), "vhost": in.VHost, "user": in.User, "state": in.State,
		"channels": in.ChannelCount, "client_properties": definitions.TableJSON(in.ClientProperties),
	}
	if !in.ConnectedAt.IsZero() {
		out["connected_at"] = in.ConnectedAt.UnixMilli()
	}
	if name, ok := in.ClientProperties["connection_name"].(string); ok {
		out["user_provided_name"] = name
	}
	if in.Direct {
		// What RabbitMQ shows for a direct (Erlang client) connection
		// without adapter info (amqp_direct_connection): type direct,
		// protocol {'Direct', {0,9,1}}, and the socket ends unknown. It
		// has no socket, so no tuning, byte counts or ssl.
		unknown := "unknown"
		out["type"], out["protocol"] = "direct", "Direct 0-9-1"
		out["host"], out["port"], out["peer_host"], out["peer_port"] = unknown, unknown, unknown, unknown
		return out
	}
	peerHost, peerPort := hostPort(in.Peer)
	host, port := hostPort(in.Local)
	out["type"], out["protocol"], out["ssl"] = "network", "AMQP 0-9-1", false
	out["host"], out["port"], out["peer_host"], out["peer_port"] = host, port, peerHost, peerPort
	out["channel_max"], out["frame_max"] = in.ChannelMax, in.FrameMax
	out["timeout"] = int(in.Heartbeat / time.Second)
	out["recv_oct"], out["send_oct"] = in.RecvOct, in.SendOct
	if d := m.details(rates.ConnKey(in.ID), rq.data); d != nil {
		out["recv_oct_details"], out["send_oct_details"] = d[rates.RecvOct], d[rates.SendOct]
	}
	return out
}

func (m *mgmt) connections(c *mgmtCall) {
	rq, lq, ok := listParams(c)
	if !ok {
		return
	}
	out := []map[string]any{}
	for _, v := range m.visibleConns(c) {
		out = append(out, m.connectionJSON(v, rq))
	}
	writeListQuery(c, lq, out)
}

func (m *mgmt) findConn(c *mgmtCall) (Connection, bool) {
	for _, v := range m.visibleConns(c) {
		if v.ID == c.p("name") {
			return v, true
		}
	}
	notFound(c.w)
	return Connection{}, false
}

func (m *mgmt) connection(c *mgmtCall) {
	rq, ok := rateQueriesOf(c)
	if !ok {
		return
	}
	if v, ok := m.findConn(c); ok {
		writeJSON(c.w, http.StatusOK, m.connectionJSON(v, rq))
	}
}

// deleteConnection closes a connection as RabbitMQ's management plugin
// does: 320 CONNECTION_FORCED, with the X-Reason header as the text.
func (m *mgmt) deleteConnection(c *mgmtCall) {
	v, ok := m.findConn(c)
	if !ok {
		return
	}
	// Seeing a connection is not closing it: monitoring sees every
	// connection but closes only its own (RabbitMQ's is_authorized_user).
	if v.User != c.user.Name && !HasTag(c.user, "administrator") {
		WriteError(c.w, http.StatusUnauthorized, "not_authorised", "User not authorised to access object")
		return
	}
	reason := c.r.Header.Get("X-Reason")
	if reason == "" {
		reason = "Closed via management plugin"
	}
	m.b.CloseConnection(v.ID, amqp.ConnectionForced, reason)
	c.w.WriteHeader(http.StatusNoContent)
}

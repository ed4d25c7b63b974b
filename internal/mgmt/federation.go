package mgmt

import (
	"context"
	"net/http"
	"time"
)

// Federation is the model's side of /api/federation-links: the running
// federation links (RabbitMQ's rabbitmq_federation_management). It is
// optional: a Broker that does not implement it serves those routes as
// 404.
type Federation interface {
	// FederationLinks lists the links of vhost ("" for every vhost).
	FederationLinks(vhost string) []FederationLink
	// RestartFederationLink stops and starts again the link of vhost
	// whose ID is id, listed as running on node (NodeName for this
	// member), on that member; false when there is no such link there.
	RestartFederationLink(ctx context.Context, vhost, id, node string) (bool, error)
}

// FederationLink is one link as GET /api/federation-links shows it.
type FederationLink struct {
	VHost string
	Queue bool // a queue's link; else an exchange's
	// Name is the local exchange or queue, UpstreamName the upstream's.
	Name, Upstream, UpstreamName string
	ConsumerTag                  string
	ID                           string
	// Node is the cluster member that runs the link, "" for this one.
	Node            string
	State, Error    string
	LocalConnection string
	URI             string
	Timestamp       time.Time
	Forwarded       int64
}

// federationRoutes: GET /api/federation-links[/{vhost}] and the links
// that are not up (/state/down).
func (m *mgmt) federationRoutes() {
	m.handle("GET", "/api/federation-links", anyManagement, m.listFederationLinks(false))
	m.handle("GET", "/api/federation-links/{vhost}", anyManagement, m.listFederationLinks(false))
	m.handle("GET", "/api/federation-links/state/down", anyManagement, m.listFederationLinks(true))
	m.handle("GET", "/api/federation-links/{vhost}/state/down", anyManagement, m.listFederationLinks(true))
	m.handle("DELETE", "/api/federation-links/vhost/{vhost}/{id}/{node}/restart", anyManagement, m.restartFederationLink)
}

// restartFederationLink is DELETE
// /api/federation-links/vhost/{vhost}/{id}/{node}/restart, the route of
// RabbitMQ 3.10.8's rabbit_federation_mgmt (4.0's is the same): 204 once
// the link on node (any member, not only this one) restarted, 404 for an
// unknown vhost, link or node, or a link node does not run; 500 when the
// restart failed or timed out.
func (m *mgmt) restartFederationLink(c *mgmtCall) {
	f, ok := m.b.(Federation)
	if !ok {
		notFound(c.w)
		return
	}
	vh, ok := m.vhostParam(c)
	if !ok {
		return
	}
	found, err := f.RestartFederationLink(c.r.Context(), vh, c.p("id"), c.p("node"))
	if err != nil {
		writeAdminError(c.w, err)
		return
	}
	if !found {
		notFound(c.w)
		return
	}
	c.w.WriteHeader(http.StatusNoContent)
}

// listFederationLinks answers the links of the vhosts the user may see in
// RabbitMQ 3.10's shape (rabbit_federation_status:format and
// rabbit_federation_mgmt:format): exchange and upstream_exchange, or
// queue, upstream_queue and consumer_tag; type, vhost, upstream, id,
// status with local_connection when running or error otherwise, uri
// without credentials, timestamp and node. down keeps only the links
// that are neither running nor starting. messages_forwarded is Warren's.
func (m *mgmt) listFederationLinks(down bool) func(*mgmtCall) {
	return func(c *mgmtCall) {
		f, ok := m.b.(Federation)
		m.listLinks(c, ok, func(vh string) (out []map[string]any) {
			for _, l := range f.FederationLinks(vh) {
				if down && (l.State == "running" || l.State == "starting") {
					continue
				}
				j := m.linkJSON(l.Node, l.VHost, l.Timestamp, l.Forwarded)
				j["upstream"], j["id"], j["status"], j["uri"] = l.Upstream, l.ID, l.State, redactURI(l.URI)
				if l.Queue {
					j["type"], j["queue"], j["upstream_queue"], j["consumer_tag"] = "queue", l.Name, l.UpstreamName, l.ConsumerTag
				} else {
					j["type"], j["exchange"], j["upstream_exchange"] = "exchange", l.Name, l.UpstreamName
				}
				switch {
				case l.State == "running":
					j["local_connection"] = l.LocalConnection
				case l.Error != "":
					j["error"] = l.Error
				}
				out = append(out, j)
			}
			return out
		})
	}
}

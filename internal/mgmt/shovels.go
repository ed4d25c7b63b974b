package mgmt

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// Shovels is the model's side of /api/shovels: the running shovel links
// (RabbitMQ's rabbitmq_shovel_management). It is optional: a Broker that
// does not implement it serves those routes as 404.
type Shovels interface {
	// Shovels lists the links of vhost ("" for every vhost), sorted by
	// vhost and name.
	Shovels(vhost string) []Shovel
	// RestartShovel stops and starts a link again, on whichever cluster
	// member runs it; false when there is no such link.
	RestartShovel(ctx context.Context, vhost, name string) (bool, error)
	// DeleteShovel deletes the parameter of a running link, which stops
	// it; false when vhost has no such link.
	DeleteShovel(ctx context.Context, vhost, name string) (bool, error)
}

// Shovel is one link as GET /api/shovels shows it (RabbitMQ 3.10's
// rabbit_shovel_mgmt format of a dynamic shovel).
type Shovel struct {
	VHost, Name string
	// Node is the cluster member that runs the link, "" for this one.
	Node          string
	State, Reason string
	SrcURI        string
	SrcQueue      string
	SrcExchange   string
	SrcKey        string
	DestURI       string
	DestQueue     string
	DestExchange  string
	DestKey       string
	Forwarded     int64
	Remaining     int64     // -1: src-delete-after never
	Since         time.Time // when State last changed
}

// shovelRoutes: GET /api/shovels[/{vhost}] and the restart of one link.
func (m *mgmt) shovelRoutes() {
	m.handle("GET", "/api/shovels", anyManagement, m.listShovels)
	m.handle("GET", "/api/shovels/{vhost}", anyManagement, m.listShovels)
	m.handle("DELETE", "/api/shovels/vhost/{vhost}/{name}/restart", anyManagement, m.restartShovel)
	m.handle("DELETE", "/api/shovels/vhost/{vhost}/{name}", policymaker, m.deleteShovel)
}

func (m *mgmt) shovelModel(c *mgmtCall) (Shovels, bool) {
	s, ok := m.b.(Shovels)
	if !ok {
		notFound(c.w)
	}
	return s, ok
}

// listShovels answers the links of the vhosts the user may see, each with
// the fields RabbitMQ's shovel status shows; URIs lose their passwords,
// as RabbitMQ shows them.
func (m *mgmt) listShovels(c *mgmtCall) {
	s, ok := m.b.(Shovels)
	m.listLinks(c, ok, func(vh string) (out []map[string]any) {
		for _, l := range s.Shovels(vh) {
			j := m.linkJSON(l.Node, l.VHost, l.Since, l.Forwarded)
			j["type"], j["name"], j["state"] = "dynamic", l.Name, l.State
			j["src_protocol"], j["dest_protocol"] = "amqp091", "amqp091"
			j["src_uri"], j["dest_uri"] = redactURI(l.SrcURI), redactURI(l.DestURI)
			if l.Remaining >= 0 {
				j["messages_remaining"] = l.Remaining
			}
			if l.Reason != "" && l.State != "running" {
				j["reason"] = l.Reason
			}
			for k, v := range map[string]string{"src_queue": l.SrcQueue, "src_exchange": l.SrcExchange, "src_exchange_key": l.SrcKey,
				"dest_queue": l.DestQueue, "dest_exchange": l.DestExchange, "dest_exchange_key": l.DestKey} {
				if v != "" {
					j[k] = v
				}
			}
			out = append(out, j)
		}
		return out
	})
}

// listLinks is the body GET /api/shovels and /api/federation-links
// share: 404 without the model (ok false), else the rows of each vhost
// the user may see, in order.
func (m *mgmt) listLinks(c *mgmtCall, ok bool, rows func(vhost string) []map[string]any) {
	if !ok {
		notFound(c.w)
		return
	}
	vhs, ok := m.vhostsParam(c)
	if !ok {
		return
	}
	out := []map[string]any{}
	for _, vh := range vhs {
		out = append(out, rows(vh)...)
	}
	writeJSON(c.w, http.StatusOK, out)
}

// linkJSON is what a shovel's and a federation link's row start with:
// the node that runs it (node, "" for this one), the vhost, when the
// state last changed in RabbitMQ's format, and Warren's forwarded count.
func (m *mgmt) linkJSON(node, vhost string, since time.Time, forwarded int64) map[string]any {
	if node == "" {
		node = m.b.NodeName()
	}
	return map[string]any{"node": node, "vhost": vhost, "timestamp": since.UTC().Format("2006-01-02 15:04:05"),
		"messages_forwarded": forwarded}
}

// restartShovel is DELETE /api/shovels/vhost/{vhost}/{name}/restart: 204
// once the member running the link restarted it, 404 when the vhost has
// no such link (RabbitMQ 3.10.8's and 4.0's rabbit_shovel_mgmt: a link
// the cluster-wide status does not list is not found), 500 when the
// restart failed or timed out (their delete_resource answering false).
func (m *mgmt) restartShovel(c *mgmtCall) {
	s, ok := m.shovelModel(c)
	if !ok {
		return
	}
	vh, ok := m.vhostParam(c)
	if !ok {
		return
	}
	found, err := s.RestartShovel(c.r.Context(), vh, c.p("name"))
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

// deleteShovel is DELETE /api/shovels/vhost/{vhost}/{name}: the link's
// parameter is deleted (RabbitMQ's rabbit_shovel_util:delete_shovel),
// 204; 404 when the vhost has no such link. RabbitMQ 3.10 lets a
// monitoring user do this; Warren asks what deleting the parameter over
// /api/parameters asks, policymaker.
func (m *mgmt) deleteShovel(c *mgmtCall) {
	s, ok := m.shovelModel(c)
	if !ok {
		return
	}
	vh, ok := m.vhostParam(c)
	if !ok {
		return
	}
	found, err := s.DeleteShovel(c.r.Context(), vh, c.p("name"))
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

// redactURI drops a URI's password (amqp://user:secret@host is shown as
// amqp://user@host); a URI that does not parse is shown as it is.
func redactURI(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	u.User = url.User(u.User.Username())
	return u.String()
}

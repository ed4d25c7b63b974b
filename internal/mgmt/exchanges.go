package mgmt

import (
	"net/http"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/routing"
)

// exchangeRoutes: exchanges, the delayed messages an x-delayed-message
// exchange holds (delayed.go) and publishing to one (publish.go).
func (m *mgmt) exchangeRoutes() {
	m.handle("GET", "/api/exchanges", anyManagement, m.exchanges)
	m.handle("GET", "/api/exchanges/{vhost}", anyManagement, m.exchanges)
	m.handle("GET", "/api/exchanges/{vhost}/{name}", anyManagement, m.exchange)
	m.handle("PUT", "/api/exchanges/{vhost}/{name}", anyManagement, m.putExchange)
	m.handle("DELETE", "/api/exchanges/{vhost}/{name}", anyManagement, m.deleteExchange)
	m.handle("GET", "/api/exchanges/{vhost}/{name}/delayed", anyManagement, m.delayed)
	m.handle("POST", "/api/exchanges/{vhost}/{name}/publish", anyManagement, m.publish)
}

// exchangeJSON is an exchange as the API lists it: as the definitions
// file carries it, with the name of the policy that applies (RabbitMQ's
// exchange objects carry "policy" only when one does, as
// rabbit_exchange:info drops the empty value, and no operator policy)
// and, for an x-delayed-message exchange, the count of messages it holds,
// as the plugin's messages_delayed.
type exchangeJSON struct {
	definitions.Exchange
	Policy          string `json:"policy,omitempty"`
	MessagesDelayed *int64 `json:"messages_delayed,omitempty"`
}

// exchangeOf is exchange x of vhost vh as the API lists it.
func (m *mgmt) exchangeOf(vh string, x definitions.Exchange) exchangeJSON {
	out := exchangeJSON{Exchange: x}
	if ps, ok := m.b.(Policies); ok {
		out.Policy, _ = ps.ExchangePolicy(vh, x.Name).Names()
	}
	if d, ok := m.b.(Delayed); ok && x.Type == routing.TypeDelayed {
		n := d.DelayedCount(x.VHost, x.Name)
		out.MessagesDelayed = &n
	}
	return out
}

func (m *mgmt) exchanges(c *mgmtCall) {
	vhs, ok := m.vhostsParam(c)
	if !ok {
		return
	}
	lq, ok := parseListQuery(c) // paging.go
	if !ok {
		return
	}
	out := []exchangeJSON{}
	for _, vh := range vhs {
		for _, x := range m.b.Exchanges(vh) {
			out = append(out, m.exchangeOf(vh, x))
		}
	}
	writeListQuery(c, lq, out)
}

func (m *mgmt) exchange(c *mgmtCall) {
	vh, ok := m.vhostParam(c)
	if !ok {
		return
	}
	x, ok := m.b.Exchange(vh, exchangeName(c.p("name")))
	if !ok {
		notFound(c.w)
		return
	}
	writeJSON(c.w, http.StatusOK, m.exchangeOf(vh, x))
}

func (m *mgmt) putExchange(c *mgmtCall) {
	vh, ok := m.vhostParam(c)
	if !ok {
		return
	}
	var body struct {
		Type       string         `json:"type"`
		Durable    flexBool       `json:"durable"`
		AutoDelete flexBool       `json:"auto_delete"`
		Internal   flexBool       `json:"internal"`
		Arguments  map[string]any `json:"arguments"`
	}
	// RabbitMQ looks the name up as sent (201 or 204) and declares it
	// without CR and LF, as exchange.declare does (routing.StripCRLF).
	raw := exchangeName(c.p("name"))
	name := routing.StripCRLF(raw)
	if !m.permit(c, vh, mgmtCheck{mgmtConfigure, "exchange", name}) || !readBody(c, &body) {
		return
	}
	if body.Type == "" {
		WriteError(c.w, http.StatusBadRequest, "bad_request", "[{key_missing,type}]")
		return
	}
	args, ok := tableArg(c, body.Arguments)
	if !ok {
		return
	}
	_, existed := m.b.Exchange(vh, raw)
	err := m.b.DeclareExchange(c.r.Context(), vh, &amqp.ExchangeDeclare{
		Exchange: name, Type: body.Type, Durable: bool(body.Durable), AutoDelete: bool(body.AutoDelete),
		Internal: bool(body.Internal), Arguments: args,
	})
	if err != nil {
		writeAMQPError(c.w, err)
		return
	}
	created(c.w, !existed)
}

// existingExchange reads the vhost and exchange named by c's path and
// checks the caller's permission perm on it; it has answered (404 for an
// exchange that does not exist, 401/403 for no permission) when ok is
// false.
func (m *mgmt) existingExchange(c *mgmtCall, perm mgmtPerm) (vh, name string, ok bool) {
	if vh, ok = m.vhostParam(c); !ok {
		return "", "", false
	}
	name = exchangeName(c.p("name"))
	if _, ok := m.b.Exchange(vh, name); !ok {
		notFound(c.w)
		return "", "", false
	}
	if !m.permit(c, vh, mgmtCheck{perm, "exchange", name}) {
		return "", "", false
	}
	return vh, name, true
}

func (m *mgmt) deleteExchange(c *mgmtCall) {
	vh, name, ok := m.existingExchange(c, mgmtConfigure)
	if !ok {
		return
	}
	noContent(c.w, m.b.DeleteExchange(c.r.Context(), vh, name, c.r.URL.Query().Get("if-unused") == "true"))
}

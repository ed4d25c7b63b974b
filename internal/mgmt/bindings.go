package mgmt

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/url"
	"strings"

	"github.com/warrenmq/broker/amqp"
	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/routing"
)

// bindingRoutes: bindings, listed and, between an exchange and a queue
// ("q") or another exchange ("e"), created, read and deleted.
func (m *mgmt) bindingRoutes() {
	m.handle("GET", "/api/bindings", anyManagement, m.bindings)
	m.handle("GET", "/api/bindings/{vhost}", anyManagement, m.bindings)
	for _, kind := range []string{"q", "e"} {
		pattern := "/api/bindings/{vhost}/e/{source}/" + kind + "/{dest}"
		m.handle("GET", pattern, anyManagement, m.bindingsBetween(kind))
		m.handle("POST", pattern, anyManagement, m.postBinding(kind))
		m.handle("GET", pattern+"/{props}", anyManagement, m.binding(kind))
		m.handle("DELETE", pattern+"/{props}", anyManagement, m.deleteBinding(kind))
	}
}

// bindingJSON is a binding as the management API lists it: as the
// definitions file carries it, and the key that names it in URLs.
type bindingJSON struct {
	definitions.Binding
	PropertiesKey string `json:"properties_key"`
}

// allBindings lists a vhost's bindings as RabbitMQ does: the default
// exchange's implicit binding of every queue first, then the declared ones.
func (m *mgmt) allBindings(vh string) []bindingJSON {
	var out []bindingJSON
	for _, q := range m.b.QueueNames(vh) {
		out = append(out, bindingOf(vh, routing.Binding{Destination: routing.Destination{Name: q}, Key: q}))
	}
	for _, bd := range m.b.Bindings(vh) {
		out = append(out, bindingOf(vh, bd))
	}
	return out
}

func bindingOf(vhostName string, bd routing.Binding) bindingJSON {
	return bindingJSON{Binding: definitions.BindingOf(vhostName, bd), PropertiesKey: propertiesKey(bd.Key, bd.Args)}
}

// propertiesKey names a binding in URLs the way RabbitMQ does: the routing
// key quoted as in a form ("~" for an empty key), followed by "~" and a
// hash of the arguments when there are any. RabbitMQ hashes the Erlang
// term; Warren hashes its own canonical encoding, so the keys differ from
// RabbitMQ's but are stable and only ever round-trip through a listing.
func propertiesKey(key string, args amqp.Table) string {
	k := quotePlus(key)
	if len(args) == 0 {
		if k == "" {
			return "~"
		}
		return k
	}
	enc, _ := json.Marshal(definitions.TableJSON(args)) // maps marshal with sorted keys
	h := fnv.New32a()
	h.Write(enc)
	return k + "~" + base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// quotePlus is RabbitMQ's quote_plus: letters, digits and "-_." stay, a
// space becomes "+", everything else %XX.
func quotePlus(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.':
			sb.WriteByte(c)
		case c == ' ':
			sb.WriteByte('+')
		default:
			fmt.Fprintf(&sb, "%%%02X", c)
		}
	}
	return sb.String()
}

func (m *mgmt) bindings(c *mgmtCall) {
	vhs, ok := m.vhostsParam(c)
	if !ok {
		return
	}
	out := []bindingJSON{}
	for _, vh := range vhs {
		out = append(out, m.allBindings(vh)...)
	}
	writeJSON(c.w, http.StatusOK, out)
}

func (m *mgmt) queueBindings(c *mgmtCall) {
	vh, name, ok := m.queueParam(c)
	if !ok {
		return
	}
	out := []bindingJSON{}
	for _, bd := range m.allBindings(vh) {
		if bd.DestinationType == "queue" && bd.Destination == name {
			out = append(out, bd)
		}
	}
	writeJSON(c.w, http.StatusOK, out)
}

// bindingEnds resolves the source and destination a binding path names,
// answering 404 when either is missing. With strip, the names lose their
// CR and LF first, as queue.bind's do in RabbitMQ, whose management API
// creates bindings through it.
func (m *mgmt) bindingEnds(c *mgmtCall, kind string, strip bool) (string, routing.Binding, bool) {
	vh, ok := m.vhostParam(c)
	if !ok {
		return "", routing.Binding{}, false
	}
	src := exchangeName(c.p("source"))
	dst := routing.Destination{Name: c.p("dest"), Exchange: kind == "e"}
	if dst.Exchange {
		dst.Name = exchangeName(dst.Name)
	}
	if strip {
		src, dst.Name = routing.StripCRLF(src), routing.StripCRLF(dst.Name)
	}
	_, srcOK := m.b.Exchange(vh, src)
	dstOK := false
	if dst.Exchange {
		_, dstOK = m.b.Exchange(vh, dst.Name)
	} else {
		dstOK = m.b.HasQueue(vh, dst.Name)
	}
	if !srcOK || !dstOK {
		notFound(c.w)
		return "", routing.Binding{}, false
	}
	return vh, routing.Binding{Source: src, Destination: dst}, true
}

func (m *mgmt) between(vh string, b routing.Binding) []bindingJSON {
	out := []bindingJSON{}
	ends := definitions.BindingOf(vh, b)
	for _, bd := range m.allBindings(vh) {
		if bd.Source == ends.Source && bd.Destination == ends.Destination && bd.DestinationType == ends.DestinationType {
			out = append(out, bd)
		}
	}
	return out
}

func (m *mgmt) bindingsBetween(kind string) func(*mgmtCall) {
	return func(c *mgmtCall) {
		vh, b, ok := m.bindingEnds(c, kind, false)
		if !ok {
			return
		}
		writeJSON(c.w, http.StatusOK, m.between(vh, b))
	}
}

func (m *mgmt) postBinding(kind string) func(*mgmtCall) {
	return func(c *mgmtCall) {
		vh, b, ok := m.bindingEnds(c, kind, true)
		if !ok {
			return
		}
		var body struct {
			RoutingKey string         `json:"routing_key"`
			Arguments  map[string]any `json:"arguments"`
		}
		if !m.permit(c, vh, bindChecks(b)...) || !readBody(c, &body) {
			return
		}
		args, ok := tableArg(c, body.Arguments)
		if !ok {
			return
		}
		b.Key, b.Args = body.RoutingKey, args
		// As a connection of its own: another connection's exclusive
		// queue is 405 RESOURCE_LOCKED, as over AMQP.
		if err := m.b.Bind(c.r.Context(), vh, b); err != nil {
			writeAMQPError(c.w, err)
			return
		}
		// Location is relative to the request URL, as RabbitMQ sends it.
		c.w.Header().Set("Location", url.PathEscape(c.p("dest"))+"/"+propertiesKey(b.Key, b.Args))
		c.w.WriteHeader(http.StatusCreated)
	}
}

// bindChecks are the permissions a bind or unbind needs, as AMQP's
// binding_action checks them: write on the destination, read on the source.
func bindChecks(b routing.Binding) []mgmtCheck {
	kind := "queue"
	if b.Destination.Exchange {
		kind = "exchange"
	}
	return []mgmtCheck{{mgmtWrite, kind, b.Destination.Name}, {mgmtRead, "exchange", b.Source}}
}

// findBinding returns the binding a props path segment names.
func (m *mgmt) findBinding(c *mgmtCall, kind string) (string, routing.Binding, bool) {
	vh, b, ok := m.bindingEnds(c, kind, false)
	if !ok {
		return "", routing.Binding{}, false
	}
	props := c.p("props")
	for _, bd := range m.b.Bindings(vh) {
		if bd.Source == b.Source && bd.Destination == b.Destination && propertiesKey(bd.Key, bd.Args) == props {
			return vh, bd, true
		}
	}
	if b.Source == "" && !b.Destination.Exchange && props == propertiesKey(b.Destination.Name, nil) {
		return vh, routing.Binding{Destination: b.Destination, Key: b.Destination.Name}, true
	}
	notFound(c.w)
	return "", routing.Binding{}, false
}

func (m *mgmt) binding(kind string) func(*mgmtCall) {
	return func(c *mgmtCall) {
		vh, bd, ok := m.findBinding(c, kind)
		if !ok {
			return
		}
		writeJSON(c.w, http.StatusOK, bindingOf(vh, bd))
	}
}

func (m *mgmt) deleteBinding(kind string) func(*mgmtCall) {
	return func(c *mgmtCall) {
		vh, bd, ok := m.findBinding(c, kind)
		if !ok || !m.permit(c, vh, bindChecks(bd)...) {
			return
		}
		noContent(c.w, m.b.Unbind(c.r.Context(), vh, bd))
	}
}

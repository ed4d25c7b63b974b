package mgmt

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/warrenmq/broker/definitions"
)

// Parameters is the model's side of /api/parameters and
// /api/global-parameters: the broker's runtime parameters (components
// such as shovel and federation-upstream) and global ones. It is
// optional: a Broker that does not implement it serves those routes as
// 404.
type Parameters interface {
	// CheckParameter reports why p could not be stored, in the words the
	// API answers with: an unknown component or the component's refusal.
	CheckParameter(p definitions.Parameter) error
	// PutParameter stores p; created reports that there was none. A
	// vhost that does not exist is an error wrapping meta.ErrNotFound.
	PutParameter(ctx context.Context, p definitions.Parameter) (created bool, err error)
	// GetParameter reads one (meta.ErrNotFound when there is none);
	// ListParameters lists those of component ("" for all) in vhost
	// ("" for all); DeleteParameter of a missing one is not an error.
	GetParameter(ctx context.Context, component, vhost, name string) (definitions.Parameter, error)
	ListParameters(ctx context.Context, component, vhost string) ([]definitions.Parameter, error)
	DeleteParameter(ctx context.Context, component, vhost, name string) error
	// The global parameters' verbs, as the runtime ones.
	PutGlobalParameter(ctx context.Context, p definitions.GlobalParameter) (created bool, err error)
	GetGlobalParameter(ctx context.Context, name string) (definitions.GlobalParameter, error)
	ListGlobalParameters(ctx context.Context) ([]definitions.GlobalParameter, error)
	DeleteGlobalParameter(ctx context.Context, name string) error
}

// parameterRoutes: runtime parameters (RabbitMQ's rabbit_mgmt_wm_parameters
// and _parameter: policymaker or administrator, with access to the vhost)
// and global parameters (rabbit_mgmt_wm_global_parameter(s): administrator).
func (m *mgmt) parameterRoutes() {
	m.handle("GET", "/api/parameters", policymaker, m.listParameters)
	m.handle("GET", "/api/parameters/{component}", policymaker, m.listParameters)
	m.handle("GET", "/api/parameters/{component}/{vhost}", policymaker, m.listParameters)
	m.handle("GET", "/api/parameters/{component}/{vhost}/{name}", policymaker, m.getParameter)
	m.handle("PUT", "/api/parameters/{component}/{vhost}/{name}", policymaker, m.putParameter)
	m.handle("DELETE", "/api/parameters/{component}/{vhost}/{name}", policymaker, m.deleteParameter)
	m.handle("GET", "/api/global-parameters", administrator, m.listGlobalParameters)
	m.handle("GET", "/api/global-parameters/{name}", administrator, m.getGlobalParameter)
	m.handle("PUT", "/api/global-parameters/{name}", administrator, m.putGlobalParameter)
	m.handle("DELETE", "/api/global-parameters/{name}", administrator, m.deleteGlobalParameter)
}

// parameterModel returns the model's Parameters, or answers 404.
func (m *mgmt) parameterModel(c *mgmtCall) (Parameters, bool) {
	ps, ok := m.b.(Parameters)
	if !ok {
		notFound(c.w)
	}
	return ps, ok
}

// listParameters is GET /api/parameters[/{component}[/{vhost}]]: the
// parameters of the vhosts the user may see, sorted by component, vhost
// and name.
func (m *mgmt) listParameters(c *mgmtCall) {
	ps, ok := m.parameterModel(c)
	if !ok {
		return
	}
	vhs, ok := m.vhostsParam(c)
	if !ok {
		return
	}
	component := ""
	if c.has("component") {
		component = c.p("component")
	}
	out := []definitions.Parameter{}
	for _, vh := range vhs {
		list, err := ps.ListParameters(c.r.Context(), component, vh)
		if err != nil {
			writeAMQPError(c.w, err)
			return
		}
		out = append(out, list...)
	}
	writeJSON(c.w, http.StatusOK, out)
}

// getParameter is GET /api/parameters/{component}/{vhost}/{name}: the
// parameter as RabbitMQ shows it ({"value", "vhost", "component",
// "name"}), 404 when there is none.
func (m *mgmt) getParameter(c *mgmtCall) {
	ps, ok := m.parameterModel(c)
	if !ok {
		return
	}
	vh, ok := m.vhostParam(c)
	if !ok {
		return
	}
	p, err := ps.GetParameter(c.r.Context(), c.p("component"), vh, c.p("name"))
	if err != nil {
		writeAdminError(c.w, err)
		return
	}
	writeJSON(c.w, http.StatusOK, p)
}

// putParameter is PUT /api/parameters/{component}/{vhost}/{name} with
// {"value": …}: 201 for a new parameter, 204 for a replaced one; 400
// "[{key_missing,value}]" without a value, and 400 with RabbitMQ's
// "Validation failed" text for an unknown component or a value the
// component refuses.
func (m *mgmt) putParameter(c *mgmtCall) {
	ps, ok := m.parameterModel(c)
	if !ok {
		return
	}
	vh, ok := m.vhostParam(c)
	if !ok {
		return
	}
	name := c.p("name")
	if !validName(c, "parameter", name) {
		return
	}
	value, ok := bodyValue(c)
	if !ok {
		return
	}
	p := definitions.Parameter{Component: c.p("component"), VHost: vh, Name: name, Value: value}
	if err := ps.CheckParameter(p); err != nil {
		WriteError(c.w, http.StatusBadRequest, "bad_request", err.Error())
		return
	}
	isNew, err := ps.PutParameter(c.r.Context(), p)
	if err != nil {
		writeAdminError(c.w, err)
		return
	}
	created(c.w, isNew)
}

// deleteParameter is DELETE /api/parameters/{component}/{vhost}/{name}:
// 204, 404 when there is no such parameter (as RabbitMQ answers).
func (m *mgmt) deleteParameter(c *mgmtCall) {
	ps, ok := m.parameterModel(c)
	if !ok {
		return
	}
	vh, ok := m.vhostParam(c)
	if !ok {
		return
	}
	component, name := c.p("component"), c.p("name")
	if _, err := ps.GetParameter(c.r.Context(), component, vh, name); err != nil {
		writeAdminError(c.w, err)
		return
	}
	noContent(c.w, ps.DeleteParameter(c.r.Context(), component, vh, name))
}

func (m *mgmt) listGlobalParameters(c *mgmtCall) {
	ps, ok := m.parameterModel(c)
	if !ok {
		return
	}
	list, err := ps.ListGlobalParameters(c.r.Context())
	writeList(c.w, list, err)
}

func (m *mgmt) getGlobalParameter(c *mgmtCall) {
	ps, ok := m.parameterModel(c)
	if !ok {
		return
	}
	p, err := ps.GetGlobalParameter(c.r.Context(), c.p("name"))
	if err != nil {
		writeAdminError(c.w, err)
		return
	}
	writeJSON(c.w, http.StatusOK, p)
}

// putGlobalParameter is PUT /api/global-parameters/{name} with {"value":
// …}: 201 or 204; RabbitMQ validates no global parameter's value.
func (m *mgmt) putGlobalParameter(c *mgmtCall) {
	ps, ok := m.parameterModel(c)
	if !ok {
		return
	}
	name := c.p("name")
	if !validName(c, "parameter", name) {
		return
	}
	value, ok := bodyValue(c)
	if !ok {
		return
	}
	isNew, err := ps.PutGlobalParameter(c.r.Context(), definitions.GlobalParameter{Name: name, Value: value})
	if err != nil {
		writeAdminError(c.w, err)
		return
	}
	created(c.w, isNew)
}

func (m *mgmt) deleteGlobalParameter(c *mgmtCall) {
	ps, ok := m.parameterModel(c)
	if !ok {
		return
	}
	name := c.p("name")
	if _, err := ps.GetGlobalParameter(c.r.Context(), name); err != nil {
		writeAdminError(c.w, err)
		return
	}
	noContent(c.w, ps.DeleteGlobalParameter(c.r.Context(), name))
}

// bodyValue reads a parameter's body and returns its "value", answering
// 400 "[{key_missing,value}]" (RabbitMQ's with_decode) when it has none.
func bodyValue(c *mgmtCall) (json.RawMessage, bool) {
	var body map[string]json.RawMessage
	if !readBody(c, &body) {
		return nil, false
	}
	v, ok := body["value"]
	if !ok || string(v) == "null" {
		WriteError(c.w, http.StatusBadRequest, "bad_request", "[{key_missing,value}]")
		return nil, false
	}
	return v, true
}

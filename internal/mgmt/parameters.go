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
// One parameter's GET, PUT and DELETE have one shape for both kinds
// (paramKey); only the listings differ.
func (m *mgmt) parameterRoutes() {
	m.handle("GET", "/api/parameters", policymaker, m.listParameters)
	m.handle("GET", "/api/parameters/{component}", policymaker, m.listParameters)
	m.handle("GET", "/api/parameters/{component}/{vhost}", policymaker, m.listParameters)
	m.handle("GET", "/api/global-parameters", administrator, m.listGlobalParameters)
	for _, r := range []struct {
		pattern string
		need    access
		global  bool
	}{
		{"/api/parameters/{component}/{vhost}/{name}", policymaker, false},
		{"/api/global-parameters/{name}", administrator, true},
	} {
		m.handle("GET", r.pattern, r.need, m.withParameter(r.global, getParameter))
		m.handle("PUT", r.pattern, r.need, m.withParameter(r.global, putParameter))
		m.handle("DELETE", r.pattern, r.need, m.withParameter(r.global, deleteParameter))
	}
}

// parameterModel returns the model's Parameters, or answers 404.
func (m *mgmt) parameterModel(c *mgmtCall) (Parameters, bool) {
	ps, ok := m.b.(Parameters)
	if !ok {
		notFound(c.w)
	}
	return ps, ok
}

// paramKey names the one parameter a route is about: a runtime one
// (component, vhost, name) or a global one (name only).
type paramKey struct {
	global                 bool
	component, vhost, name string
}

// withParameter resolves the route's parameter (the model, and for a
// runtime parameter the vhost the user may access; each answers 404 or
// 401 itself) and hands it to h.
func (m *mgmt) withParameter(global bool, h func(*mgmtCall, Parameters, paramKey)) func(*mgmtCall) {
	return func(c *mgmtCall) {
		ps, ok := m.parameterModel(c)
		if !ok {
			return
		}
		k := paramKey{global: global, name: c.p("name")}
		if !global {
			if k.vhost, ok = m.vhostParam(c); !ok {
				return
			}
			k.component = c.p("component")
		}
		h(c, ps, k)
	}
}

// get reads the parameter k names, in its kind's JSON shape.
func (k paramKey) get(ctx context.Context, ps Parameters) (any, error) {
	if k.global {
		return ps.GetGlobalParameter(ctx, k.name)
	}
	return ps.GetParameter(ctx, k.component, k.vhost, k.name)
}

// getParameter is GET of one parameter: as RabbitMQ shows it ({"value",
// "vhost", "component", "name"}, or {"value", "name"} for a global one),
// 404 when there is none.
func getParameter(c *mgmtCall, ps Parameters, k paramKey) {
	p, err := k.get(c.r.Context(), ps)
	if err != nil {
		writeAdminError(c.w, err)
		return
	}
	writeJSON(c.w, http.StatusOK, p)
}

// putParameter is PUT of one parameter with {"value": …}: 201 for a new
// parameter, 204 for a replaced one; 400 "[{key_missing,value}]" without
// a value, and for a runtime parameter 400 with RabbitMQ's "Validation
// failed" text for an unknown component or a value the component refuses
// (RabbitMQ validates no global parameter's value).
func putParameter(c *mgmtCall, ps Parameters, k paramKey) {
	if !validName(c, "parameter", k.name) {
		return
	}
	value, ok := bodyValue(c)
	if !ok {
		return
	}
	var isNew bool
	var err error
	if k.global {
		isNew, err = ps.PutGlobalParameter(c.r.Context(), definitions.GlobalParameter{Name: k.name, Value: value})
	} else {
		p := definitions.Parameter{Component: k.component, VHost: k.vhost, Name: k.name, Value: value}
		if err := ps.CheckParameter(p); err != nil {
			WriteError(c.w, http.StatusBadRequest, "bad_request", err.Error())
			return
		}
		isNew, err = ps.PutParameter(c.r.Context(), p)
	}
	if err != nil {
		writeAdminError(c.w, err)
		return
	}
	created(c.w, isNew)
}

// deleteParameter is DELETE of one parameter: 204, 404 when there is no
// such parameter (as RabbitMQ answers).
func deleteParameter(c *mgmtCall, ps Parameters, k paramKey) {
	if _, err := k.get(c.r.Context(), ps); err != nil {
		writeAdminError(c.w, err)
		return
	}
	if k.global {
		noContent(c.w, ps.DeleteGlobalParameter(c.r.Context(), k.name))
		return
	}
	noContent(c.w, ps.DeleteParameter(c.r.Context(), k.component, k.vhost, k.name))
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

// listGlobalParameters is GET /api/global-parameters.
func (m *mgmt) listGlobalParameters(c *mgmtCall) {
	ps, ok := m.parameterModel(c)
	if !ok {
		return
	}
	list, err := ps.ListGlobalParameters(c.r.Context())
	writeList(c.w, list, err)
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

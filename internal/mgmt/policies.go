package mgmt

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/warrenmq/broker/internal/policy"
)

// Policies is the model's side of /api/policies and /api/operator-policies
// and of the policy fields of queues and exchanges. It is optional: a
// Broker that does not implement it serves those routes as 404 and shows
// no policy on any object.
type Policies interface {
	// ListPolicies lists a vhost's policies (operator: operator
	// policies).
	ListPolicies(ctx context.Context, vhost string, operator bool) ([]policy.Policy, error)
	// PutPolicy stores and applies p; created reports that there was no
	// policy of that kind and name. A policy RabbitMQ would refuse is a
	// *policy.ValidationError.
	PutPolicy(ctx context.Context, p policy.Policy, operator bool) (created bool, err error)
	// DeletePolicy deletes one; ErrNotFound (or meta.ErrNotFound) when
	// there is none.
	DeletePolicy(ctx context.Context, vhost, name string, operator bool) error
	// ExchangePolicy is what applies to an exchange.
	ExchangePolicy(vhost, name string) policy.Match
}

// policyFields are the fields RabbitMQ adds to a queue or exchange object:
// the names of the policy and operator policy that apply (null for none)
// and their merged definition ({} for none).
type policyFields struct {
	Policy         *string        `json:"policy"`
	OperatorPolicy *string        `json:"operator_policy"`
	Effective      map[string]any `json:"effective_policy_definition"`
}

func policyFieldsOf(m policy.Match) policyFields {
	f := policyFields{Effective: m.Definition()}
	if f.Effective == nil {
		f.Effective = map[string]any{}
	}
	p, op := m.Names()
	if p != "" {
		f.Policy = &p
	}
	if op != "" {
		f.OperatorPolicy = &op
	}
	return f
}

// policyRoutes: policies and operator policies (RabbitMQ 4.x's
// rabbit_mgmt_wm_policy(ies) and _operator_policy(ies)).
func (m *mgmt) policyRoutes() {
	for _, kind := range []struct {
		path     string
		operator bool
		need     access
	}{
		// RabbitMQ: policies need policymaker (or administrator) and
		// access to the vhost; operator policies need administrator.
		{"policies", false, policymaker},
		{"operator-policies", true, administrator},
	} {
		m.handle("GET", "/api/"+kind.path, kind.need, m.listPolicies(kind.operator))
		m.handle("GET", "/api/"+kind.path+"/{vhost}", kind.need, m.listPolicies(kind.operator))
		m.handle("GET", "/api/"+kind.path+"/{vhost}/{name}", kind.need, m.getPolicy(kind.operator))
		m.handle("PUT", "/api/"+kind.path+"/{vhost}/{name}", kind.need, m.putPolicy(kind.operator))
		m.handle("DELETE", "/api/"+kind.path+"/{vhost}/{name}", kind.need, m.deletePolicy(kind.operator))
	}
}

// policyModel returns the model's Policies, or answers 404.
func (m *mgmt) policyModel(c *mgmtCall) (Policies, bool) {
	ps, ok := m.b.(Policies)
	if !ok {
		notFound(c.w)
	}
	return ps, ok
}

// listPolicies is GET /api/policies[/{vhost}]: sorted by priority,
// lowest first, as rabbit_policy:list_formatted sorts them.
func (m *mgmt) listPolicies(operator bool) func(*mgmtCall) {
	return func(c *mgmtCall) {
		ps, ok := m.policyModel(c)
		if !ok {
			return
		}
		vhs, ok := m.vhostsParam(c)
		if !ok {
			return
		}
		out := []policy.Policy{}
		for _, vh := range vhs {
			list, err := ps.ListPolicies(c.r.Context(), vh, operator)
			if err != nil {
				writeAMQPError(c.w, err)
				return
			}
			for _, p := range list {
				out = append(out, p)
			}
		}
		slices.SortStableFunc(out, func(a, b policy.Policy) int {
			return cmp.Or(cmp.Compare(a.Priority, b.Priority), cmp.Compare(a.VHost, b.VHost), cmp.Compare(a.Name, b.Name))
		})
		writeJSON(c.w, http.StatusOK, out)
	}
}

func (m *mgmt) findPolicy(c *mgmtCall, ps Policies, vh, name string, operator bool) (policy.Policy, bool, error) {
	list, err := ps.ListPolicies(c.r.Context(), vh, operator)
	if err != nil {
		return policy.Policy{}, false, err
	}
	for _, p := range list {
		if p.Name == name {
			return p, true, nil
		}
	}
	return policy.Policy{}, false, nil
}

func (m *mgmt) getPolicy(operator bool) func(*mgmtCall) {
	return func(c *mgmtCall) {
		ps, ok := m.policyModel(c)
		if !ok {
			return
		}
		vh, ok := m.vhostParam(c)
		if !ok {
			return
		}
		p, found, err := m.findPolicy(c, ps, vh, c.p("name"), operator)
		switch {
		case err != nil:
			writeAMQPError(c.w, err)
		case !found:
			notFound(c.w)
		default:
			writeJSON(c.w, http.StatusOK, p) // meta.Policy: RabbitMQ's shape
		}
	}
}

// putPolicy is PUT /api/policies/{vhost}/{name}: 201 for a new policy,
// 204 for a replaced one, 400 with RabbitMQ's validation text (its HTML
// tags escaped, as rabbit_mgmt_format:escape_html_tags does) for one
// RabbitMQ would refuse.
func (m *mgmt) putPolicy(operator bool) func(*mgmtCall) {
	return func(c *mgmtCall) {
		ps, ok := m.policyModel(c)
		if !ok {
			return
		}
		vh, ok := m.vhostParam(c)
		if !ok {
			return
		}
		name := c.p("name")
		if !validName(c, "policy", name) {
			return
		}
		var body map[string]any
		if !readBody(c, &body) {
			return
		}
		for _, key := range []string{"pattern", "definition"} {
			if _, ok := body[key]; !ok {
				WriteError(c.w, http.StatusBadRequest, "bad_request", "[{key_missing,"+key+"}]")
				return
			}
		}
		p, err := policy.Parse(vh, name, policy.Fields{
			Pattern: body["pattern"], ApplyTo: body["apply-to"], Priority: body["priority"], Definition: body["definition"],
		}, operator)
		if err == nil {
			var isNew bool
			isNew, err = ps.PutPolicy(c.r.Context(), p, operator)
			if err == nil {
				created(c.w, isNew)
				return
			}
		}
		if _, invalid := errors.AsType[*policy.ValidationError](err); invalid {
			WriteError(c.w, http.StatusBadRequest, "bad_request", escapeHTMLTags(err.Error()))
			return
		}
		writeAdminError(c.w, err)
	}
}

func (m *mgmt) deletePolicy(operator bool) func(*mgmtCall) {
	return func(c *mgmtCall) {
		ps, ok := m.policyModel(c)
		if !ok {
			return
		}
		vh, ok := m.vhostParam(c)
		if !ok {
			return
		}
		if err := ps.DeletePolicy(c.r.Context(), vh, c.p("name"), operator); err != nil {
			writeAdminError(c.w, err)
			return
		}
		c.w.WriteHeader(http.StatusNoContent)
	}
}

// escapeHTMLTags is rabbit_mgmt_format:escape_html_tags.
func escapeHTMLTags(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

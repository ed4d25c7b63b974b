package mgmt

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
)

// vhostLimitRoutes: vhost limits (RabbitMQ 3.13/4.x's
// rabbit_mgmt_wm_limits and _limit), set by administrators.
func (m *mgmt) vhostLimitRoutes() {
	m.handle("GET", "/api/vhost-limits", anyManagement, m.vhostLimits)
	m.handle("GET", "/api/vhost-limits/{vhost}", anyManagement, m.vhostLimits)
	m.handle("PUT", "/api/vhost-limits/{vhost}/{name}", administrator, m.putVHostLimit)
	m.handle("DELETE", "/api/vhost-limits/{vhost}/{name}", administrator, m.deleteVHostLimit)
}

// vhostLimitsJSON is one vhost's entry in /api/vhost-limits.
type vhostLimitsJSON struct {
	VHost string           `json:"vhost"`
	Value map[string]int64 `json:"value"`
}

// vhostLimits is GET /api/vhost-limits[/{vhost}]: the limits of every
// vhost the user may see (or of the one named, 404 when it does not
// exist), one entry per vhost that has any.
func (m *mgmt) vhostLimits(c *mgmtCall) {
	vhs, ok := m.vhostsParam(c)
	if !ok {
		return
	}
	all, err := m.b.ListVHostLimits(c.r.Context())
	if err != nil {
		writeAdminError(c.w, err)
		return
	}
	out := []vhostLimitsJSON{}
	for _, vh := range vhs {
		if l := all[vh]; len(l) > 0 {
			out = append(out, vhostLimitsJSON{VHost: vh, Value: l})
		}
	}
	writeJSON(c.w, http.StatusOK, out)
}

// vhostLimitNames are the limits rabbit_vhost_limit validates.
var vhostLimitNames = []string{"max-connections", "max-queues"}

// putVHostLimit is PUT /api/vhost-limits/{vhost}/{name} with {"value": N}:
// 204, 404 for a missing vhost, 400 for a missing value ("[{key_missing,
// value}]") and for what RabbitMQ's runtime parameter validation refuses
// (an unknown name, a value that is not an integer), with its "Validation
// failed" text.
func (m *mgmt) putVHostLimit(c *mgmtCall) {
	vh, ok := m.b.VHost(c.p("vhost"))
	if !ok || c.p("vhost") == "" {
		WriteError(c.w, http.StatusNotFound, "not_found", "vhost_not_found")
		return
	}
	var body map[string]json.RawMessage
	if !readBody(c, &body) {
		return
	}
	raw, ok := body["value"]
	if !ok {
		WriteError(c.w, http.StatusBadRequest, "bad_request", "[{key_missing,value}]")
		return
	}
	name := c.p("name")
	if !slices.Contains(vhostLimitNames, name) {
		WriteError(c.w, http.StatusBadRequest, "bad_request",
			fmt.Sprintf("Validation failed\n\nUnrecognised terms [{<<%q>>,%s}] in limits\n", name, erlangTerm(raw)))
		return
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		WriteError(c.w, http.StatusBadRequest, "bad_request",
			fmt.Sprintf("Validation failed\n\n%s should be a number, actually was %s\n", name, erlangTerm(raw)))
		return
	}
	if err := m.b.PutVHostLimit(c.r.Context(), vh, name, n); err != nil {
		writeAdminError(c.w, err)
		return
	}
	c.w.WriteHeader(http.StatusNoContent)
}

// erlangTerm writes a JSON value roughly as RabbitMQ's error texts print
// the Erlang term it decodes to (~p): strings as binaries.
func erlangTerm(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return "<<" + strconv.Quote(s) + ">>"
	}
	return string(raw)
}

// deleteVHostLimit is DELETE /api/vhost-limits/{vhost}/{name}: 204
// whether or not the vhost had that limit, 404 for a missing vhost.
func (m *mgmt) deleteVHostLimit(c *mgmtCall) {
	vh, ok := m.b.VHost(c.p("vhost"))
	if !ok || c.p("vhost") == "" {
		notFound(c.w)
		return
	}
	noContent(c.w, m.b.DeleteVHostLimit(c.r.Context(), vh, c.p("name")))
}

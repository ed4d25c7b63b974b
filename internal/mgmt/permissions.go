package mgmt

import (
	"net/http"
	"slices"

	"github.com/warrenmq/broker/definitions"
)

// permissionRoutes: users' permissions on vhosts, the administrator's
// (RabbitMQ 3.13/4.x's rabbit_mgmt_wm_permission, _permissions,
// _permissions_user and _permissions_vhost), with the status codes
// vhostRoutes describes.
func (m *mgmt) permissionRoutes() {
	m.handle("GET", "/api/vhosts/{vhost}/permissions", administrator, m.vhostPermissions)
	m.handle("GET", "/api/users/{user}/permissions", administrator, m.userPermissions)
	m.handle("GET", "/api/permissions", administrator, m.permissions)
	m.handle("GET", "/api/permissions/{vhost}/{user}", administrator, m.permission)
	m.handle("PUT", "/api/permissions/{vhost}/{user}", administrator, m.putPermission)
	m.handle("DELETE", "/api/permissions/{vhost}/{user}", administrator, m.deletePermission)
}

// permissions lists the stored permissions, as the AMQP side enforces them.
func (m *mgmt) permissions(c *mgmtCall) {
	ps, err := m.b.ListPermissions(c.r.Context())
	writeList(c.w, ps, err)
}

func (m *mgmt) permission(c *mgmtCall) {
	vh, ok := m.b.VHost(c.p("vhost"))
	if !ok {
		notFound(c.w)
		return
	}
	p, err := m.b.GetPermission(c.r.Context(), c.p("user"), vh)
	if err != nil {
		notFound(c.w)
		return
	}
	writeJSON(c.w, http.StatusOK, p)
}

// userPermissions is GET /api/users/{user}/permissions: the user's
// permissions on every vhost.
func (m *mgmt) userPermissions(c *mgmtCall) {
	name := c.p("user")
	if _, err := m.b.GetUser(c.r.Context(), name); err != nil {
		writeAdminError(c.w, err)
		return
	}
	m.permissionsWhere(c, func(p definitions.Permission) bool { return p.User == name })
}

// vhostPermissions is GET /api/vhosts/{vhost}/permissions: every user's
// permissions on the vhost.
func (m *mgmt) vhostPermissions(c *mgmtCall) {
	vh, ok := m.b.VHost(c.p("vhost"))
	if !ok || c.p("vhost") == "" {
		notFound(c.w)
		return
	}
	m.permissionsWhere(c, func(p definitions.Permission) bool { return p.VHost == vh })
}

// permissionsWhere answers the stored permissions keep selects.
func (m *mgmt) permissionsWhere(c *mgmtCall, keep func(definitions.Permission) bool) {
	ps, err := m.b.ListPermissions(c.r.Context())
	if err != nil {
		writeAMQPError(c.w, err)
		return
	}
	writeList(c.w, slices.DeleteFunc(ps, func(p definitions.Permission) bool { return !keep(p) }), nil)
}

// permissionBody is PUT /api/permissions/{vhost}/{user}'s body: all three
// keys are mandatory, as RabbitMQ's.
type permissionBody struct {
	Configure, Write, Read *string
}

// putPermission is PUT /api/permissions/{vhost}/{user}: grants (201) or
// replaces (204) the user's permissions on the vhost. As RabbitMQ's
// accept_content, a missing user or vhost is 400 vhost_or_user_not_found
// (GET and DELETE answer 404), missing keys are 400
// [{key_missing,...}], and each expression must compile (400).
func (m *mgmt) putPermission(c *mgmtCall) {
	vh, ok := m.b.VHost(c.p("vhost"))
	_, err := m.b.GetUser(c.r.Context(), c.p("user"))
	if !ok || c.p("vhost") == "" || isNotFound(err) {
		WriteError(c.w, http.StatusBadRequest, "bad_request", "vhost_or_user_not_found")
		return
	}
	if err != nil {
		writeAdminError(c.w, err)
		return
	}
	var body permissionBody
	if !readBody(c, &body) {
		return
	}
	if refuseMissing(c.w, bodyKey{"configure", body.Configure != nil}, bodyKey{"write", body.Write != nil},
		bodyKey{"read", body.Read != nil}) {
		return
	}
	p := definitions.Permission{User: c.p("user"), VHost: vh, Configure: *body.Configure, Write: *body.Write, Read: *body.Read}
	had, err := found(m.b.GetPermission(c.r.Context(), p.User, p.VHost))
	if err == nil {
		err = m.b.PutPermission(c.r.Context(), p)
	}
	switch {
	case isNotFound(err): // deleted meanwhile
		WriteError(c.w, http.StatusBadRequest, "bad_request", "vhost_or_user_not_found")
	case err != nil:
		writeAdminError(c.w, err)
	default:
		created(c.w, !had)
	}
}

// deletePermission is DELETE /api/permissions/{vhost}/{user}.
func (m *mgmt) deletePermission(c *mgmtCall) {
	vh, ok := m.b.VHost(c.p("vhost"))
	if !ok || c.p("vhost") == "" {
		notFound(c.w)
		return
	}
	if _, err := m.b.GetPermission(c.r.Context(), c.p("user"), vh); err != nil {
		writeAdminError(c.w, err)
		return
	}
	if err := m.b.DeletePermission(c.r.Context(), c.p("user"), vh); err != nil {
		writeAdminError(c.w, err)
		return
	}
	c.w.WriteHeader(http.StatusNoContent)
}

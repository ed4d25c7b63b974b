package mgmt

import (
	"errors"
	"net/http"
	"slices"
	"unicode/utf8"

	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/meta"
)

// The administrator's writes: vhosts, users and permissions, with the
// request bodies, status codes and tags of RabbitMQ 3.13/4.x's
// rabbit_mgmt_wm_vhost, rabbit_mgmt_wm_user, rabbit_mgmt_wm_permission,
// rabbit_mgmt_wm_permissions_user and rabbit_mgmt_wm_permissions_vhost
// (is_authorized_admin: a user without the administrator tag is 401
// "Not administrator user", as ServeHTTP answers every administrator
// route). A PUT is 201 when it created something and 204 when it replaced
// it; a DELETE is 204, or 404 when there was nothing to delete.

// isNotFound reports whether err says the object is missing, in either
// the API's or the meta store's words.
func isNotFound(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, meta.ErrNotFound)
}

// writeAdminError answers a failed account or vhost write: 400 for bad
// input, 404 for a missing object, as writeAMQPError otherwise.
func writeAdminError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrInvalid):
		WriteError(w, http.StatusBadRequest, "bad_request", err.Error())
	case isNotFound(err):
		notFound(w)
	default:
		writeAMQPError(w, err)
	}
}

// validName answers 400 unless name can travel in AMQP's
// connection.open or a PLAIN login: 1 to 255 bytes of UTF-8.
func validName(c *mgmtCall, kind, name string) bool {
	if name == "" || len(name) > 255 || !utf8.ValidString(name) {
		WriteError(c.w, http.StatusBadRequest, "bad_request", kind+" name must be 1 to 255 bytes of UTF-8")
		return false
	}
	return true
}

// vhostBody is PUT /api/vhosts/{vhost}'s body: the vhost's metadata.
// tracing is accepted and ignored (Warren has no firehose tracer).
type vhostBody struct {
	Description      string               `json:"description"`
	Tags             definitions.UserTags `json:"tags"`
	DefaultQueueType *string              `json:"default_queue_type"`
	Tracing          flexBool             `json:"tracing"`
}

// putVHost is PUT /api/vhosts/{vhost}: creates the vhost with the body's
// metadata (201), or replaces an existing one's metadata (204), as
// RabbitMQ 3.13/4.x's put_vhost does.
func (m *mgmt) putVHost(c *mgmtCall) {
	var body vhostBody
	if !readBody(c, &body) {
		return
	}
	dqt := ""
	if body.DefaultQueueType != nil {
		dqt = *body.DefaultQueueType
	}
	switch dqt {
	case "", "classic", "quorum", "stream":
	default:
		// RabbitMQ 4.x's rabbit_queue_type:discover refuses an unknown
		// type before creating anything.
		WriteError(c.w, http.StatusBadRequest, "bad_request", "unknown queue type '"+dqt+"'")
		return
	}
	name := c.p("vhost")
	if !validName(c, "vhost", name) {
		return
	}
	if body.DefaultQueueType == nil {
		// RabbitMQ merges the metadata given into the vhost's: a PUT
		// without default_queue_type (rabbitmqadmin's declare vhost)
		// keeps the one the vhost has.
		if old, err := m.b.VHostInfo(c.r.Context(), name); err == nil {
			dqt = old.DefaultQueueType
		}
	}
	isNew, err := m.b.PutVHost(c.r.Context(), definitions.VHost{Name: name, Description: body.Description,
		Tags: body.Tags, DefaultQueueType: dqt})
	if err != nil {
		writeAdminError(c.w, err)
		return
	}
	created(c.w, isNew)
}

// deleteVHost is DELETE /api/vhosts/{vhost}: the vhost, everything in it
// and its connections go.
func (m *mgmt) deleteVHost(c *mgmtCall) {
	vh, ok := m.b.VHost(c.p("vhost"))
	if !ok || c.p("vhost") == "" {
		notFound(c.w)
		return
	}
	err := m.b.DeleteVHost(c.r.Context(), vh)
	if err != nil {
		writeAdminError(c.w, err)
		return
	}
	c.w.WriteHeader(http.StatusNoContent)
}

// userBody is PUT /api/users/{user}'s body: password, or password_hash
// with hashing_algorithm (RabbitMQ's names, SHA-256 when left out); with
// neither the user cannot log in with a password. tags is a list or a
// comma-separated string, none when left out. A pointer tells a field
// that is absent from one that is empty.
type userBody struct {
	Password         *string              `json:"password"`
	PasswordHash     *string              `json:"password_hash"`
	HashingAlgorithm string               `json:"hashing_algorithm"`
	Tags             definitions.UserTags `json:"tags"`
}

// putUser is PUT /api/users/{user}: creates (201) or replaces (204) the
// user. Sending both password and password_hash is 400, as
// rabbit_auth_backend_internal:put_user refuses it (RabbitMQ 3.13/4.x).
func (m *mgmt) putUser(c *mgmtCall) {
	var body userBody
	if !readBody(c, &body) {
		return
	}
	if body.Password != nil && body.PasswordHash != nil {
		WriteError(c.w, http.StatusBadRequest, "bad_request", "both_password_and_password_hash_are_provided")
		return
	}
	if !validName(c, "user", c.p("user")) {
		return
	}
	u := definitions.User{Name: c.p("user"), HashingAlgorithm: body.HashingAlgorithm, Tags: body.Tags}
	switch {
	case body.Password != nil:
		u.Password = *body.Password
		u.HashingAlgorithm = ""
	case body.PasswordHash != nil:
		u.PasswordHash = *body.PasswordHash
	}
	isNew, err := m.b.PutUser(c.r.Context(), u)
	if err != nil {
		writeAdminError(c.w, err)
		return
	}
	created(c.w, isNew)
}

// userPermissions is GET /api/users/{user}/permissions: the user's
// permissions on every vhost.
func (m *mgmt) userPermissions(c *mgmtCall) {
	name := c.p("user")
	if _, err := m.b.User(c.r.Context(), name); err != nil {
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
	ps, err := m.b.Permissions(c.r.Context())
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
	_, err := m.b.User(c.r.Context(), c.p("user"))
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
	isNew, err := m.b.PutPermission(c.r.Context(), definitions.Permission{
		User: c.p("user"), VHost: vh, Configure: *body.Configure, Write: *body.Write, Read: *body.Read})
	switch {
	case isNotFound(err): // deleted meanwhile
		WriteError(c.w, http.StatusBadRequest, "bad_request", "vhost_or_user_not_found")
	case err != nil:
		writeAdminError(c.w, err)
	default:
		created(c.w, isNew)
	}
}

// deletePermission is DELETE /api/permissions/{vhost}/{user}.
func (m *mgmt) deletePermission(c *mgmtCall) {
	vh, ok := m.b.VHost(c.p("vhost"))
	if !ok || c.p("vhost") == "" {
		notFound(c.w)
		return
	}
	if _, err := m.b.Permission(c.r.Context(), c.p("user"), vh); err != nil {
		writeAdminError(c.w, err)
		return
	}
	if err := m.b.DeletePermission(c.r.Context(), c.p("user"), vh); err != nil {
		writeAdminError(c.w, err)
		return
	}
	c.w.WriteHeader(http.StatusNoContent)
}

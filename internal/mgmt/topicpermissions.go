package mgmt

import (
	"net/http"
	"slices"

	"github.com/warrenmq/broker/definitions"
)

// topicPermissionRoutes: topic permissions, the administrator's
// (RabbitMQ 3.13/4.x's rabbit_mgmt_wm_topic_permission(s)[_user|_vhost]).
func (m *mgmt) topicPermissionRoutes() {
	m.handle("GET", "/api/topic-permissions", administrator, m.topicPermissions)
	m.handle("GET", "/api/topic-permissions/{vhost}/{user}", administrator, m.topicPermission)
	m.handle("PUT", "/api/topic-permissions/{vhost}/{user}", administrator, m.putTopicPermission)
	m.handle("DELETE", "/api/topic-permissions/{vhost}/{user}", administrator, m.deleteTopicPermission)
	m.handle("GET", "/api/users/{user}/topic-permissions", administrator, m.userTopicPermissions)
	m.handle("GET", "/api/vhosts/{vhost}/topic-permissions", administrator, m.vhostTopicPermissions)
}

// topicPermissionsWhere answers the stored topic permissions keep selects.
func (m *mgmt) topicPermissionsWhere(c *mgmtCall, keep func(definitions.TopicPermission) bool) []definitions.TopicPermission {
	ps, err := m.b.ListTopicPermissions(c.r.Context())
	if err != nil {
		writeAMQPError(c.w, err)
		return nil
	}
	return slices.DeleteFunc(ps, func(p definitions.TopicPermission) bool { return !keep(p) })
}

func (m *mgmt) topicPermissions(c *mgmtCall) {
	if ps := m.topicPermissionsWhere(c, func(definitions.TopicPermission) bool { return true }); ps != nil {
		writeList(c.w, ps, nil)
	}
}

// userVHostTopics returns the vhost and user a topic permission path
// names and the user's topic permissions there; false (with 404 answered
// unless bad says otherwise) when the vhost or user does not exist.
func (m *mgmt) userVHostTopics(c *mgmtCall, missing func()) (string, []definitions.TopicPermission, bool) {
	vh, ok := m.b.VHost(c.p("vhost"))
	if ok && c.p("vhost") != "" {
		_, err := m.b.GetUser(c.r.Context(), c.p("user"))
		ok = err == nil
	}
	if !ok {
		missing()
		return "", nil, false
	}
	user := c.p("user")
	ps := m.topicPermissionsWhere(c, func(p definitions.TopicPermission) bool { return p.User == user && p.VHost == vh })
	if ps == nil {
		return "", nil, false
	}
	return vh, ps, true
}

// topicPermission is GET /api/topic-permissions/{vhost}/{user}: the
// user's topic permissions on the vhost, one per exchange; 404 when there
// are none (RabbitMQ's resource_exists).
func (m *mgmt) topicPermission(c *mgmtCall) {
	_, ps, ok := m.userVHostTopics(c, func() { notFound(c.w) })
	if !ok {
		return
	}
	if len(ps) == 0 {
		notFound(c.w)
		return
	}
	writeList(c.w, ps, nil)
}

// topicPermissionBody is PUT /api/topic-permissions/{vhost}/{user}'s body:
// all three keys are mandatory, as RabbitMQ's with_decode makes them.
type topicPermissionBody struct {
	Exchange, Write, Read *string
}

// putTopicPermission is PUT /api/topic-permissions/{vhost}/{user}: sets
// the user's topic permission on the body's exchange, 201 when the user
// had none on the vhost and 204 otherwise (RabbitMQ's resource_exists is
// per user and vhost); 400 vhost_or_user_not_found, 400 [{key_missing,
// ...}], 400 for a regexp that does not compile.
func (m *mgmt) putTopicPermission(c *mgmtCall) {
	vh, have, ok := m.userVHostTopics(c, func() {
		WriteError(c.w, http.StatusBadRequest, "bad_request", "vhost_or_user_not_found")
	})
	if !ok {
		return
	}
	var body topicPermissionBody
	if !readBody(c, &body) {
		return
	}
	if refuseMissing(c.w, bodyKey{"exchange", body.Exchange != nil}, bodyKey{"write", body.Write != nil},
		bodyKey{"read", body.Read != nil}) {
		return
	}
	_, err := m.b.PutTopicPermission(c.r.Context(), definitions.TopicPermission{
		User: c.p("user"), VHost: vh, Exchange: *body.Exchange, Write: *body.Write, Read: *body.Read})
	switch {
	case isNotFound(err): // deleted meanwhile
		WriteError(c.w, http.StatusBadRequest, "bad_request", "vhost_or_user_not_found")
	case err != nil:
		writeAdminError(c.w, err)
	default:
		created(c.w, len(have) == 0)
	}
}

// deleteTopicPermission is DELETE /api/topic-permissions/{vhost}/{user}:
// the user's topic permissions on every exchange of the vhost go; 404
// when there are none.
func (m *mgmt) deleteTopicPermission(c *mgmtCall) {
	vh, ps, ok := m.userVHostTopics(c, func() { notFound(c.w) })
	if !ok {
		return
	}
	if len(ps) == 0 {
		notFound(c.w)
		return
	}
	noContent(c.w, m.b.DeleteTopicPermission(c.r.Context(), c.p("user"), vh, ""))
}

// userTopicPermissions is GET /api/users/{user}/topic-permissions.
func (m *mgmt) userTopicPermissions(c *mgmtCall) {
	name := c.p("user")
	if _, err := m.b.GetUser(c.r.Context(), name); err != nil {
		writeAdminError(c.w, err)
		return
	}
	if ps := m.topicPermissionsWhere(c, func(p definitions.TopicPermission) bool { return p.User == name }); ps != nil {
		writeList(c.w, ps, nil)
	}
}

// vhostTopicPermissions is GET /api/vhosts/{vhost}/topic-permissions.
func (m *mgmt) vhostTopicPermissions(c *mgmtCall) {
	vh, ok := m.b.VHost(c.p("vhost"))
	if !ok || c.p("vhost") == "" {
		notFound(c.w)
		return
	}
	if ps := m.topicPermissionsWhere(c, func(p definitions.TopicPermission) bool { return p.VHost == vh }); ps != nil {
		writeList(c.w, ps, nil)
	}
}

package mgmt

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/warrenmq/broker/definitions"
)

// Settings are the vhosts' metadata and limits and the users' topic
// permissions: what RabbitMQ 3.13/4.x's rabbit_mgmt_wm_vhost (metadata),
// rabbit_mgmt_wm_limits, rabbit_mgmt_wm_limit and
// rabbit_mgmt_wm_topic_permission(s)[_user|_vhost] read and write.
type Settings interface {
	// VHostInfo returns a vhost's metadata and limits (an error wrapping
	// meta.ErrNotFound when there is no such vhost); PutVHost creates a
	// vhost with v's metadata or replaces an existing one's (created
	// reports which), a bad default queue type wrapping ErrInvalid.
	VHostInfo(ctx context.Context, vhost string) (definitions.VHost, error)
	PutVHost(ctx context.Context, v definitions.VHost) (created bool, err error)
	// VHostLimits returns every vhost's limits by vhost and name;
	// SetVHostLimit and ClearVHostLimit change one.
	VHostLimits() map[string]map[string]int64
	SetVHostLimit(ctx context.Context, vhost, name string, value int64) error
	ClearVHostLimit(ctx context.Context, vhost, name string) error
	// TopicPermissions lists the stored topic permissions;
	// PutTopicPermission replaces the user's on p's exchange (a regexp
	// that does not compile wraps ErrInvalid), DeleteTopicPermission
	// removes the user's on every exchange of the vhost.
	TopicPermissions(ctx context.Context) ([]definitions.TopicPermission, error)
	PutTopicPermission(ctx context.Context, p definitions.TopicPermission) error
	DeleteTopicPermission(ctx context.Context, user, vhost string) error
}

func (m *mgmt) registerSettings() {
	m.handle("GET", "/api/vhost-limits", anyManagement, m.vhostLimits)
	m.handle("GET", "/api/vhost-limits/{vhost}", anyManagement, m.vhostLimits)
	m.handle("PUT", "/api/vhost-limits/{vhost}/{name}", administrator, m.putVHostLimit)
	m.handle("DELETE", "/api/vhost-limits/{vhost}/{name}", administrator, m.deleteVHostLimit)
	m.handle("GET", "/api/topic-permissions", administrator, m.topicPermissions)
	m.handle("GET", "/api/topic-permissions/{vhost}/{user}", administrator, m.topicPermission)
	m.handle("PUT", "/api/topic-permissions/{vhost}/{user}", administrator, m.putTopicPermission)
	m.handle("DELETE", "/api/topic-permissions/{vhost}/{user}", administrator, m.deleteTopicPermission)
	m.handle("GET", "/api/users/{user}/topic-permissions", administrator, m.userTopicPermissions)
	m.handle("GET", "/api/vhosts/{vhost}/topic-permissions", administrator, m.vhostTopicPermissions)
}

// vhostMetadata adds a vhost's metadata to its JSON as RabbitMQ 4.x's
// rabbit_vhost:info shows it: description, tags and default_queue_type
// ("classic" when none was set, the fallback 4.x reports) at the top level
// and again under "metadata" (where default_queue_type appears only when
// set).
func (m *mgmt) vhostMetadata(ctx context.Context, out map[string]any, vh string) {
	v, err := m.b.VHostInfo(ctx, vh)
	if err != nil {
		return // deleted meanwhile: the empty metadata stays
	}
	tags := []string(v.Tags)
	if tags == nil {
		tags = []string{}
	}
	md := map[string]any{"description": v.Description, "tags": tags}
	dqt := "classic"
	if v.DefaultQueueType != "" {
		dqt = v.DefaultQueueType
		md["default_queue_type"] = dqt
	}
	out["description"], out["tags"], out["default_queue_type"], out["metadata"] = v.Description, tags, dqt, md
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
	all := m.b.VHostLimits()
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
	if err := m.b.SetVHostLimit(c.r.Context(), vh, name, n); err != nil {
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
	noContent(c.w, m.b.ClearVHostLimit(c.r.Context(), vh, c.p("name")))
}

// topicPermissionsWhere answers the stored topic permissions keep selects.
func (m *mgmt) topicPermissionsWhere(c *mgmtCall, keep func(definitions.TopicPermission) bool) []definitions.TopicPermission {
	ps, err := m.b.TopicPermissions(c.r.Context())
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
		_, err := m.b.User(c.r.Context(), c.p("user"))
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
	err := m.b.PutTopicPermission(c.r.Context(), definitions.TopicPermission{
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
	noContent(c.w, m.b.DeleteTopicPermission(c.r.Context(), c.p("user"), vh))
}

// userTopicPermissions is GET /api/users/{user}/topic-permissions.
func (m *mgmt) userTopicPermissions(c *mgmtCall) {
	name := c.p("user")
	if _, err := m.b.User(c.r.Context(), name); err != nil {
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

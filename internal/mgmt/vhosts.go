package mgmt

import (
	"context"
	"net/http"

	"github.com/warrenmq/broker/definitions"
	"github.com/warrenmq/broker/internal/rates"
)

// vhostRoutes: vhosts with their metadata (RabbitMQ 3.13/4.x's
// rabbit_mgmt_wm_vhost and _vhosts). Creating and deleting one is the
// administrator's: a user without the tag is 401 "Not administrator
// user", as serveRoute answers every administrator route. A PUT is 201
// when it created something and 204 when it replaced it; a DELETE is
// 204, or 404 when there was nothing to delete. The vhost's permissions
// and topic permissions are listed by permissions.go and
// topicpermissions.go.
func (m *mgmt) vhostRoutes() {
	m.handle("GET", "/api/vhosts", anyManagement, m.vhosts)
	m.handle("GET", "/api/vhosts/{vhost}", anyManagement, m.vhost)
	m.handle("PUT", "/api/vhosts/{vhost}", administrator, m.putVHost)
	m.handle("DELETE", "/api/vhosts/{vhost}", administrator, m.deleteVHost)
}

// vhostJSON is a vhost's object; its message_stats sum its queues'.
func (m *mgmt) vhostJSON(ctx context.Context, vh string, rq rateQueries) map[string]any {
	var ready, unacked uint64
	var sums [rates.MessageValues]uint64
	for _, q := range m.b.Queues(ctx, vh) {
		ready += q.Ready
		unacked += q.Unacked
		for i, v := range QueueValues(q.Counters) {
			sums[i] += v
		}
	}
	key := rates.VHostKey(vh)
	out := map[string]any{
		"name": vh, "description": "", "tags": []string{}, "tracing": false,
		"message_stats": messageStats(queueStats, sums, m.details(key, rq.msg)),
		"cluster_state": map[string]string{m.node(): "running"},
	}
	addLengths(out, lengthsOf(ready, unacked), m.details(key, rq.lengths))
	m.vhostMetadata(ctx, out, vh)
	return out
}

func (m *mgmt) vhosts(c *mgmtCall) {
	rq, ok := rateQueriesOf(c)
	if !ok {
		return
	}
	out := []map[string]any{}
	for _, vh := range m.visibleVHosts(c) {
		out = append(out, m.vhostJSON(c.r.Context(), vh, rq))
	}
	writeJSON(c.w, http.StatusOK, out)
}

func (m *mgmt) vhost(c *mgmtCall) {
	vh, ok := m.b.VHost(c.p("vhost"))
	if !ok {
		notFound(c.w)
		return
	}
	if !m.visible(c, vh) {
		WriteError(c.w, http.StatusUnauthorized, "not_authorised", "User not authorised to access virtual host")
		return
	}
	rq, ok := rateQueriesOf(c)
	if !ok {
		return
	}
	writeJSON(c.w, http.StatusOK, m.vhostJSON(c.r.Context(), vh, rq))
}

// vhostMetadata adds a vhost's metadata to its JSON as RabbitMQ 4.x's
// rabbit_vhost:info shows it: description, tags and default_queue_type
// ("classic" when none was set, the fallback 4.x reports) at the top level
// and again under "metadata" (where default_queue_type appears only when
// set).
func (m *mgmt) vhostMetadata(ctx context.Context, out map[string]any, vh string) {
	v, err := m.b.GetVHost(ctx, vh)
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
		if old, err := m.b.GetVHost(c.r.Context(), name); err == nil {
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

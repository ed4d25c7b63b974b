package mgmt_test

import (
	"encoding/json"
	"net/http"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
)

// TestManagementVHostMetadata: PUT /api/vhosts stores description, tags
// and default_queue_type, GET reports them as RabbitMQ 4.x does (at the
// top level and under metadata; default_queue_type "classic" when none was
// set), and a second PUT replaces them.
func TestManagementVHostMetadata(t *testing.T) {
	b := mgmtBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	runAPICases(t, h, []apiCase{
		{"guest", "PUT", "/api/vhosts/v1", `{"description": "orders", "tags": "eu,prod", "default_queue_type": "quorum"}`, 201, ""},
		{"guest", "PUT", "/api/vhosts/v2", map[string]any{"description": "plain"}, 201, ""},
		{"guest", "PUT", "/api/vhosts/v2", map[string]any{"default_queue_type": "stream"}, 204, ""},
		{"guest", "PUT", "/api/vhosts/v2", map[string]any{"tracing": false}, 204, ""}, // keeps stream
		{"guest", "PUT", "/api/vhosts/v2", map[string]any{"default_queue_type": "lazy"}, 400, "unknown queue type 'lazy'"},
	})
	for _, tc := range []struct{ path, want string }{
		{"/api/vhosts/v1", `{"name": "v1", "description": "orders", "tags": ["eu", "prod"], "default_queue_type": "quorum",
			"metadata": {"description": "orders", "tags": ["eu", "prod"], "default_queue_type": "quorum"}}`},
		{"/api/vhosts/v2", `{"name": "v2", "description": "", "tags": [], "default_queue_type": "stream",
			"metadata": {"description": "", "tags": [], "default_queue_type": "stream"}}`},
		{"/api/vhosts/%2F", `{"name": "/", "description": "", "tags": [], "default_queue_type": "classic",
			"metadata": {"description": "", "tags": []}}`},
	} {
		status, _, body := h.Do("GET", tc.path, "guest", nil)
		require.Equal(t, http.StatusOK, status, "%s", body)
		for _, key := range []string{"name", "description", "tags", "default_queue_type", "metadata"} {
			var want map[string]any
			require.NoError(t, jsonUnmarshal(tc.want, &want))
			require.JSONEq(t, mustJSON(t, want[key]), string(mustField(t, body, key)), "%s %s", tc.path, key)
		}
	}
	// The listing carries the same fields.
	var list []map[string]any
	status, _, body := h.Do("GET", "/api/vhosts", "guest", nil)
	require.Equal(t, http.StatusOK, status)
	require.NoError(t, jsonUnmarshal(string(body), &list))
	require.Len(t, list, 3)
	require.Equal(t, "quorum", list[1]["default_queue_type"])
}

// TestManagementVHostLimits: /api/vhost-limits with RabbitMQ's shapes and
// answers, and the limits enforced on AMQP connections and declares.
func TestManagementVHostLimits(t *testing.T) {
	b := mgmtBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	runAPICases(t, h, []apiCase{
		{"", "GET", "/api/vhost-limits", nil, 401, "Login failed"},
		{"app", "GET", "/api/vhost-limits", nil, 401, "Not management user"},
		{"mon", "PUT", "/api/vhost-limits/%2F/max-queues", map[string]any{"value": 1}, 401, "Not administrator user"},
		{"mgr", "DELETE", "/api/vhost-limits/%2F/max-queues", nil, 401, "Not administrator user"},
		{"guest", "GET", "/api/vhost-limits", nil, 200, ""},
		{"guest", "GET", "/api/vhost-limits/nope", nil, 404, "vhost_not_found"},
		{"guest", "PUT", "/api/vhost-limits/nope/max-queues", map[string]any{"value": 1}, 404, "vhost_not_found"},
		{"guest", "PUT", "/api/vhost-limits/%2F/max-queues", map[string]any{}, 400, "[{key_missing,value}]"},
		{"guest", "PUT", "/api/vhost-limits/%2F/max-queues", map[string]any{"value": "x"}, 400,
			"Validation failed\n\nmax-queues should be a number, actually was <<\"x\">>\n"},
		{"guest", "PUT", "/api/vhost-limits/%2F/max-fun", map[string]any{"value": 1}, 400,
			"Validation failed\n\nUnrecognised terms [{<<\"max-fun\">>,1}] in limits\n"},
		{"guest", "PUT", "/api/vhost-limits/%2F/max-queues", `{"value": 1`, 400, "not_json"},
		{"guest", "PUT", "/api/vhost-limits/%2F/max-queues", map[string]any{"value": 1}, 204, ""},
		{"guest", "PUT", "/api/vhost-limits/%2F/max-connections", map[string]any{"value": -1}, 204, ""},
		{"guest", "DELETE", "/api/vhost-limits/nope/max-queues", nil, 404, ""},
	})
	status, _, body := h.Do("GET", "/api/vhost-limits", "guest", nil)
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `[{"vhost": "/", "value": {"max-queues": 1, "max-connections": -1}}]`, string(body))
	status, _, body = h.Do("GET", "/api/vhost-limits/%2F", "mon", nil)
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `[{"vhost": "/", "value": {"max-queues": 1, "max-connections": -1}}]`, string(body))

	// Enforced: one queue, then 406 with RabbitMQ's text.
	conn := amqptest.DialVia(t, b.Dial, "guest", "limits")
	ch := amqptest.Channel(t, conn)
	_, err := ch.QueueDeclare("q1", false, false, false, false, nil)
	require.NoError(t, err)
	_, err = ch.QueueDeclare("q2", false, false, false, false, nil)
	var ae *amqp091.Error
	require.ErrorAs(t, err, &ae)
	require.Equal(t, amqp091.PreconditionFailed, ae.Code)
	require.Equal(t, "PRECONDITION_FAILED - cannot declare queue 'q2': queue limit in vhost '/' (1) is reached", ae.Reason)

	// max-connections 1: the open connection holds the only place.
	status, _, _ = h.Do("PUT", "/api/vhost-limits/%2F/max-connections", "guest", map[string]any{"value": 1})
	require.Equal(t, http.StatusNoContent, status)
	_, err = amqp091.DialConfig("amqp://guest:guest@localhost/", amqp091.Config{Dial: b.Dial})
	require.ErrorAs(t, err, &ae)
	require.Equal(t, amqp091.NotAllowed, ae.Code)
	require.Equal(t, "NOT_ALLOWED - access to vhost '/' refused for user 'guest': connection limit (1) is reached", ae.Reason)

	for _, name := range []string{"max-queues", "max-connections"} {
		status, _, _ = h.Do("DELETE", "/api/vhost-limits/%2F/"+name, "guest", nil)
		require.Equal(t, http.StatusNoContent, status)
	}
	status, _, body = h.Do("GET", "/api/vhost-limits", "guest", nil)
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `[]`, string(body))
	other, err := amqp091.DialConfig("amqp://guest:guest@localhost/", amqp091.Config{Dial: b.Dial})
	require.NoError(t, err, "no limit any more")
	require.NoError(t, other.Close())
	_, err = amqptest.Channel(t, conn).QueueDeclare("q2", false, false, false, false, nil)
	require.NoError(t, err)
}

// TestManagementTopicPermissions: /api/topic-permissions and the per-user
// and per-vhost listings, with RabbitMQ's shapes and answers.
func TestManagementTopicPermissions(t *testing.T) {
	b := mgmtBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	tp := map[string]any{"exchange": "amq.topic", "write": "^{username}\\.", "read": ".*"}
	runAPICases(t, h, []apiCase{
		{"", "GET", "/api/topic-permissions", nil, 401, "Login failed"},
		{"mon", "GET", "/api/topic-permissions", nil, 401, "Not administrator user"},
		{"mgr", "PUT", "/api/topic-permissions/%2F/app", tp, 401, "Not administrator user"},
		{"mon", "GET", "/api/users/app/topic-permissions", nil, 401, "Not administrator user"},
		{"mon", "GET", "/api/vhosts/%2F/topic-permissions", nil, 401, "Not administrator user"},
		{"guest", "GET", "/api/topic-permissions/%2F/app", nil, 404, ""},
		{"guest", "PUT", "/api/topic-permissions/%2F/app", tp, 201, ""},
		{"guest", "PUT", "/api/topic-permissions/%2F/app", tp, 204, ""},
		{"guest", "PUT", "/api/topic-permissions/%2F/app", map[string]any{"exchange": "x", "write": ".*", "read": ".*"}, 204, ""},
		{"guest", "PUT", "/api/topic-permissions/%2F/app", map[string]any{"write": ".*"}, 400, "[{key_missing,exchange},{key_missing,read}]"},
		{"guest", "PUT", "/api/topic-permissions/%2F/app", map[string]any{"exchange": "x", "write": "(", "read": ""}, 400, ""},
		{"guest", "PUT", "/api/topic-permissions/nope/app", tp, 400, "vhost_or_user_not_found"},
		{"guest", "PUT", "/api/topic-permissions/%2F/nobody", tp, 400, "vhost_or_user_not_found"},
		{"guest", "GET", "/api/topic-permissions/nope/app", nil, 404, ""},
		{"guest", "GET", "/api/users/nobody/topic-permissions", nil, 404, ""},
		{"guest", "GET", "/api/vhosts/nope/topic-permissions", nil, 404, ""},
		{"guest", "DELETE", "/api/topic-permissions/%2F/mgr", nil, 404, ""},
	})
	want := `[{"user": "app", "vhost": "/", "exchange": "amq.topic", "write": "^{username}\\.", "read": ".*"},
		{"user": "app", "vhost": "/", "exchange": "x", "write": ".*", "read": ".*"}]`
	for _, path := range []string{"/api/topic-permissions", "/api/topic-permissions/%2F/app",
		"/api/users/app/topic-permissions", "/api/vhosts/%2F/topic-permissions"} {
		status, _, body := h.Do("GET", path, "guest", nil)
		require.Equal(t, http.StatusOK, status, "%s: %s", path, body)
		require.JSONEq(t, want, string(body), path)
	}
	status, _, _ := h.Do("DELETE", "/api/topic-permissions/%2F/app", "guest", nil)
	require.Equal(t, http.StatusNoContent, status)
	status, _, body := h.Do("GET", "/api/topic-permissions", "guest", nil)
	require.Equal(t, http.StatusOK, status)
	require.JSONEq(t, `[]`, string(body))
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

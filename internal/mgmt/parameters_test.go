package mgmt_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
)

// TestParametersAPI: runtime parameters over /api/parameters and global
// ones over /api/global-parameters, as RabbitMQ answers: 201 then 204 for
// a put, the component's refusal and an unknown component 400 with the
// "Validation failed" text, a missing value 400, a missing vhost or
// parameter 404, writes refused to a user who is no policymaker, and
// %2F naming the default vhost.
func TestParametersAPI(t *testing.T) {
	b := mgmtBroker(t)
	require.NoError(t, b.Admin().RegisterComponent("test-link", func(vhost, name string, v json.RawMessage) error {
		var m map[string]any
		if json.Unmarshal(v, &m) != nil || m["uri"] == nil {
			return errors.New("Validation failed\n\nuri is required\n")
		}
		return nil
	}))
	h := amqptest.NewAPI(t, b.ManagementHandler())
	good := map[string]any{"value": map[string]any{"uri": "amqp://"}}
	runAPICases(t, h, []apiCase{
		{"guest", "PUT", "/api/parameters/test-link/%2F/one", good, 201, ""},
		{"guest", "PUT", "/api/parameters/test-link/%2F/one", good, 204, ""},
		{"guest", "PUT", "/api/parameters/test-link/%2F/bad", map[string]any{"value": map[string]any{}}, 400, "Validation failed\n\nuri is required\n"},
		{"guest", "PUT", "/api/parameters/nope/%2F/x", good, 400, "Validation failed\n\ncomponent nope not found\n"},
		{"guest", "PUT", "/api/parameters/test-link/%2F/novalue", map[string]any{}, 400, "[{key_missing,value}]"},
		{"guest", "PUT", "/api/parameters/test-link/missing/x", good, 404, ""},
		{"mgr", "PUT", "/api/parameters/test-link/%2F/one", good, 401, ""},
		{"mgr", "GET", "/api/parameters", nil, 401, ""},
		{"guest", "GET", "/api/parameters/test-link/%2F/nothere", nil, 404, ""},
		{"guest", "PUT", "/api/global-parameters/cluster_tag", map[string]any{"value": "blue"}, 201, ""},
		{"guest", "PUT", "/api/global-parameters/cluster_tag", map[string]any{"value": "green"}, 204, ""},
		{"mgr", "PUT", "/api/global-parameters/cluster_tag", map[string]any{"value": "red"}, 401, ""},
	})

	for _, path := range []string{"/api/parameters", "/api/parameters/test-link", "/api/parameters/test-link/%2F"} {
		require.Equal(t, []any{map[string]any{"component": "test-link", "vhost": "/", "name": "one", "value": map[string]any{"uri": "amqp://"}}}, h.Get(path), path)
	}
	require.Equal(t, "one", h.Get("/api/parameters/test-link/%2F/one").(map[string]any)["name"])
	require.Contains(t, h.Get("/api/global-parameters"), map[string]any{"name": "cluster_tag", "value": "green"})

	runAPICases(t, h, []apiCase{
		{"guest", "DELETE", "/api/parameters/test-link/%2F/one", nil, 204, ""},
		{"guest", "DELETE", "/api/parameters/test-link/%2F/one", nil, 404, ""},
		{"guest", "DELETE", "/api/global-parameters/cluster_tag", nil, 204, ""},
		{"guest", "GET", "/api/global-parameters/cluster_tag", nil, 404, ""},
	})
}

package mgmt_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/amqptest"
)

// TestManagementHealthChecks: RabbitMQ's health-check bodies and codes,
// 200 {"status":"ok"} while the check holds and 503 with the reason and
// details when it fails; any management user may ask, nobody else.
func TestManagementHealthChecks(t *testing.T) {
	b := mgmtBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	addr, err := b.Listen("127.0.0.1:0")
	require.NoError(t, err)
	port := addr.(*net.TCPAddr).Port
	ports := `[` + strconv.Itoa(port) + `]`

	check := func(t *testing.T, user, path string, status int, want string) {
		t.Helper()
		got, _, body := h.Do("GET", path, user, nil)
		require.Equal(t, status, got, "%s", body)
		if want != "" {
			require.JSONEq(t, want, string(body))
		}
	}
	for _, tc := range []struct {
		user, path string
		status     int
		want       string
	}{
		{"mgr", "/api/health/checks/alarms", 200, `{"status":"ok"}`},
		{"mon", "/api/health/checks/local-alarms", 200, `{"status":"ok"}`},
		{"guest", "/api/health/checks/virtual-hosts", 200, `{"status":"ok"}`},
		{"guest", "/api/health/checks/port-listener/" + strconv.Itoa(port), 200, `{"status":"ok","port":` + strconv.Itoa(port) + `}`},
		{"guest", "/api/health/checks/port-listener/1", 503, `{"status":"failed","reason":"No active listener","missing":1,"ports":` + ports + `}`},
		{"guest", "/api/health/checks/port-listener/amqp", 400, `{"error":"bad_request","reason":"Invalid port"}`},
		{"guest", "/api/health/checks/protocol-listener/amqp", 200, `{"status":"ok","protocol":"amqp"}`},
		{"guest", "/api/health/checks/protocol-listener/AMQP0-9-1", 200, `{"status":"ok","protocol":"amqp"}`},
		{"guest", "/api/health/checks/protocol-listener/mqtt", 503, `{"status":"failed","reason":"No active listener","missing":"mqtt","protocols":["amqp"]}`},
		{"app", "/api/health/checks/alarms", 401, ""},
		{"", "/api/health/checks/virtual-hosts", 401, ""},
	} {
		t.Run(tc.user+" "+tc.path, func(t *testing.T) { check(t, tc.user, tc.path, tc.status, tc.want) })
	}

	b.RaiseAlarm(broker.AlarmMemory)
	node := h.Get("/api/overview").(map[string]any)["node"].(string)
	check(t, "guest", "/api/health/checks/alarms", 503,
		`{"status":"failed","reason":"There are alarms in effect in the cluster","alarms":[{"resource":"memory","node":"`+node+`"}]}`)
	check(t, "guest", "/api/health/checks/local-alarms", 503,
		`{"status":"failed","reason":"There are alarms in effect on the node","alarms":[{"resource":"memory","node":"`+node+`"}]}`)
	b.ClearAlarm(broker.AlarmMemory)
	check(t, "guest", "/api/health/checks/alarms", 200, `{"status":"ok"}`)
}

// TestManagementAlivenessTest: the aliveness test declares its queue,
// publishes and gets a message back as the requesting user, leaving the
// queue empty; a missing vhost is 404, one the user may not see 401.
func TestManagementAlivenessTest(t *testing.T) {
	b := mgmtBroker(t)
	_, err := b.Admin().PutVHost(context.Background(), broker.VHost{Name: "other"})
	require.NoError(t, err)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	for range 2 { // the second finds the queue there
		status, _, body := h.Do("GET", "/api/aliveness-test/%2F", "mgr", nil)
		require.Equal(t, http.StatusOK, status, "%s", body)
		require.JSONEq(t, `{"status":"ok"}`, string(body))
	}
	status, _, body := h.Do("GET", "/api/queues/%2F/aliveness-test", "guest", nil)
	require.Equal(t, http.StatusOK, status, "%s", body)
	var q struct {
		Messages int `json:"messages"`
	}
	require.NoError(t, json.Unmarshal(body, &q))
	require.Zero(t, q.Messages, "the test message was taken back")

	status, _, _ = h.Do("GET", "/api/aliveness-test/nope", "guest", nil)
	require.Equal(t, http.StatusNotFound, status)
	status, _, _ = h.Do("GET", "/api/aliveness-test/other", "mgr", nil)
	require.Equal(t, http.StatusUnauthorized, status, "mgr has no permissions on other")
	status, _, body = h.Do("GET", "/api/aliveness-test/other", "guest", nil)
	require.Equal(t, http.StatusUnauthorized, status, "guest sees other but has no permissions there: %s", body)
	status, _, _ = h.Do("GET", "/api/aliveness-test/%2F", "app", nil)
	require.Equal(t, http.StatusUnauthorized, status, "not a management user")
}

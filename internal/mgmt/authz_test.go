package mgmt_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/amqptest"
)

// mgmtAuthzBroker is a broker with vhosts "/" and "secret": guest
// (administrator) has every permission on both; mon (monitoring) and mgr
// (management) only on "/"; lim (management) on "secret" only for names
// starting with "mine". secret holds queue victim with one confirmed
// message, exchange vx bound to it, and queue excl, exclusive to an AMQP
// connection of guest. It returns that connection's id.
func mgmtAuthzBroker(t *testing.T) (*broker.Broker, string) {
	t.Helper()
	ctx := context.Background()
	b, err := broker.New(broker.Options{VHosts: []string{"/", "secret"}, Users: []broker.User{
		{Name: "guest", Password: "guest", Tags: []string{"administrator"}},
		{Name: "mon", Password: "mon", Tags: []string{"monitoring"}},
		{Name: "mgr", Password: "mgr", Tags: []string{"management"}},
		{Name: "lim", Password: "lim", Tags: []string{"management"}},
	}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	for _, u := range []string{"mon", "mgr", "lim"} {
		require.NoError(t, b.Admin().DeletePermission(ctx, u, "secret"))
	}
	require.NoError(t, b.Admin().DeletePermission(ctx, "lim", "/"))
	require.NoError(t, b.Admin().PutPermission(ctx, broker.Permission{User: "lim", VHost: "secret", Configure: "^mine", Write: "^mine", Read: "^mine"}))

	conn, err := amqp091.DialConfig("amqp://guest:guest@127.0.0.1:5672/secret", amqp091.Config{Dial: b.Dial})
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	ch := amqptest.Channel(t, conn)
	_, err = ch.QueueDeclare("victim", true, false, false, false, nil)
	require.NoError(t, err)
	_, err = ch.QueueDeclare("excl", false, false, true, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.ExchangeDeclare("vx", "direct", true, false, false, false, nil))
	require.NoError(t, ch.QueueBind("victim", "k", "vx", false, nil))
	require.NoError(t, ch.Confirm(false))
	confirm, err := ch.PublishWithDeferredConfirm("", "victim", false, false, amqp091.Publishing{DeliveryMode: 2, Body: []byte("keep me")})
	require.NoError(t, err)
	require.True(t, confirm.Wait())
	amqptest.Idle(t, b.WaitIdle)
	var id string
	for _, c := range b.Connections() {
		if c.User == "guest" && c.VHost == "secret" {
			id = c.ID
		}
	}
	require.NotEmpty(t, id)
	return b, id
}

// TestManagementAuthorization runs users × endpoints × expected status
// over RabbitMQ's rules (access.go): no write without the AMQP
// permission it needs, no view of a vhost the user may not see, monitoring
// sees but does not act, and nobody touches another connection's
// exclusive queue. Refused requests change nothing.
func TestManagementAuthorization(t *testing.T) {
	b, guestConn := mgmtAuthzBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	get := map[string]any{"count": 1, "ackmode": "ack_requeue_false", "encoding": "auto"}
	putQ := map[string]any{"durable": true}
	putX := map[string]any{"type": "direct"}
	bind := map[string]any{"routing_key": "r"}
	conn := "/api/connections/" + url.PathEscape(guestConn)

	runAPICases(t, h, []apiCase{
		// management, no permissions on secret: the vhost does not exist
		// for it.
		{"mgr", "GET", "/api/vhosts/secret", nil, 401, "User not authorised to access virtual host"},
		{"mgr", "GET", "/api/queues/secret", nil, 401, "User not authorised to access virtual host"},
		{"mgr", "GET", "/api/queues/secret/victim", nil, 401, ""},
		{"mgr", "GET", "/api/exchanges/secret", nil, 401, ""},
		{"mgr", "GET", "/api/bindings/secret", nil, 401, ""},
		{"mgr", "GET", "/api/consumers/secret", nil, 401, ""},
		{"mgr", "PUT", "/api/queues/secret/new", putQ, 401, ""},
		{"mgr", "DELETE", "/api/queues/secret/victim", nil, 401, ""},
		{"mgr", "DELETE", "/api/queues/secret/victim/contents", nil, 401, ""},
		{"mgr", "POST", "/api/queues/secret/victim/get", get, 401, ""},
		{"mgr", "PUT", "/api/exchanges/secret/newx", putX, 401, ""},
		{"mgr", "DELETE", "/api/exchanges/secret/vx", nil, 401, ""},
		{"mgr", "POST", "/api/bindings/secret/e/vx/q/victim", bind, 401, ""},
		{"mgr", "DELETE", "/api/bindings/secret/e/vx/q/victim/k", nil, 401, ""},
		{"mgr", "DELETE", conn, nil, 404, ""},
		{"mgr", "PUT", "/api/queues/%2F/mgr.q", putQ, 201, ""},
		// monitoring, no permissions on secret: sees everything, writes
		// nothing there, closes no one else's connection.
		{"mon", "GET", "/api/vhosts/secret", nil, 200, ""},
		{"mon", "GET", "/api/queues/secret/victim", nil, 200, ""},
		{"mon", "GET", conn, nil, 200, ""},
		{"mon", "PUT", "/api/queues/secret/new", putQ, 401, "Access refused."},
		{"mon", "DELETE", "/api/queues/secret/victim", nil, 401, "Access refused."},
		{"mon", "DELETE", "/api/queues/secret/victim/contents", nil, 401, ""},
		{"mon", "POST", "/api/queues/secret/victim/get", get, 401, ""},
		{"mon", "PUT", "/api/exchanges/secret/newx", putX, 401, ""},
		{"mon", "DELETE", "/api/exchanges/secret/vx", nil, 401, ""},
		{"mon", "POST", "/api/bindings/secret/e/vx/q/victim", bind, 401, ""},
		{"mon", "DELETE", "/api/bindings/secret/e/vx/q/victim/k", nil, 401, ""},
		{"mon", "DELETE", conn, nil, 401, "User not authorised to access object"},
		// management with permissions on secret for ^mine only: AMQP's
		// checks, name by name.
		{"lim", "GET", "/api/queues/secret", nil, 200, ""},
		{"lim", "PUT", "/api/queues/secret/mine.q", putQ, 201, ""},
		{"lim", "PUT", "/api/queues/secret/other", putQ, 401, "access to queue 'other' in vhost 'secret' refused for user 'lim'"},
		{"lim", "DELETE", "/api/queues/secret/victim", nil, 401, "access to queue 'victim' in vhost 'secret' refused for user 'lim'"},
		{"lim", "DELETE", "/api/queues/secret/victim/contents", nil, 401, "access to queue 'victim' in vhost 'secret' refused for user 'lim'"},
		{"lim", "POST", "/api/queues/secret/victim/get", get, 401, ""},
		{"lim", "PUT", "/api/exchanges/secret/mine.x", putX, 201, ""},
		{"lim", "DELETE", "/api/exchanges/secret/vx", nil, 401, "access to exchange 'vx' in vhost 'secret' refused for user 'lim'"},
		{"lim", "POST", "/api/bindings/secret/e/vx/q/mine.q", bind, 401, "access to exchange 'vx' in vhost 'secret' refused for user 'lim'"},
		{"lim", "POST", "/api/bindings/secret/e/mine.x/q/victim", bind, 401, "access to queue 'victim' in vhost 'secret' refused for user 'lim'"},
		{"lim", "POST", "/api/bindings/secret/e/mine.x/q/mine.q", bind, 201, ""},
		{"lim", "GET", "/api/vhosts/%2F", nil, 401, ""},
		// administrator: another connection's exclusive queue stays its
		// own, as over AMQP (405 RESOURCE_LOCKED, answered 400).
		{"guest", "DELETE", "/api/queues/secret/excl", nil, 400, ""},
		{"guest", "DELETE", "/api/queues/secret/excl/contents", nil, 400, ""},
		{"guest", "POST", "/api/bindings/secret/e/vx/q/excl", bind, 400, ""},
		{"guest", "POST", "/api/queues/secret/excl/get", get, 400, ""},
	})

	// Nothing a refused request aimed at changed.
	msgs, err := b.PeekQueue(t.Context(), "secret", "victim", 10)
	require.NoError(t, err)
	require.Len(t, msgs, 1, "the confirmed message is still there")
	for _, q := range []string{"victim", "excl"} {
		status, _, _ := h.Do("GET", "/api/queues/secret/"+q, "guest", nil)
		require.Equal(t, 200, status, q)
	}
	status, _, _ := h.Do("GET", "/api/exchanges/secret/vx", "guest", nil)
	require.Equal(t, 200, status)
	for _, q := range []string{"new", "other"} {
		status, _, _ := h.Do("GET", "/api/queues/secret/"+q, "guest", nil)
		require.Equal(t, 404, status, q)
	}
	status, _, _ = h.Do("GET", conn, "guest", nil)
	require.Equal(t, 200, status, "the connection is open")
}

// TestManagementListingsFilterVHosts: listings show a user only the vhosts
// it may see (administrator and monitoring all of them).
func TestManagementListingsFilterVHosts(t *testing.T) {
	b, _ := mgmtAuthzBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	status, _, _ := h.Do("PUT", "/api/queues/%2F/pub", "guest", map[string]any{})
	require.Equal(t, http.StatusCreated, status)
	vhostsIn := func(user, path string) []string {
		status, _, body := h.Do("GET", path, user, nil)
		require.Equal(t, http.StatusOK, status, "%s", body)
		var items []struct {
			Name  string `json:"name"`
			VHost string `json:"vhost"`
		}
		require.NoError(t, json.Unmarshal(body, &items))
		var out []string
		for _, it := range items {
			v := it.VHost
			if path == "/api/vhosts" {
				v = it.Name
			}
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
		slices.Sort(out)
		return out
	}
	for _, path := range []string{"/api/vhosts", "/api/queues", "/api/exchanges", "/api/bindings"} {
		t.Run(path, func(t *testing.T) {
			require.Equal(t, []string{"/", "secret"}, vhostsIn("guest", path))
			require.Equal(t, []string{"/", "secret"}, vhostsIn("mon", path))
			require.Equal(t, []string{"/"}, vhostsIn("mgr", path))
		})
	}
	require.Equal(t, []string{"secret"}, vhostsIn("lim", "/api/vhosts"))
}

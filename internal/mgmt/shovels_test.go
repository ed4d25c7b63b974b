package mgmt_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
)

// TestShovelsAPI: a shovel stored over /api/parameters runs. One with
// src-delete-after queue-length moves what the source held (persistent,
// in order) and then deletes its own parameter, as "Move messages" does;
// one with never runs on, is listed by /api/shovels with RabbitMQ's
// fields (its URI without the password), restarts with 204, and stops
// when its parameter is deleted. A definition RabbitMQ refuses is 400.
func TestShovelsAPI(t *testing.T) {
	b := mgmtBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	conn := amqptest.DialVia(t, b.Dial, "guest", "test")
	ch := amqptest.ConfirmChannel(t, conn)
	amqptest.DeclareQueue(t, ch, "from", true)
	bodies := amqptest.Numbered("m", 200)
	amqptest.PublishConfirmed(t, ch, "from", true, bodies...)

	move := map[string]any{"value": map[string]any{
		"src-uri": "amqp://guest:guest@/", "src-queue": "from",
		"dest-uri": "amqp://guest:guest@/", "dest-queue": "to",
		"src-delete-after": "queue-length",
	}}
	runAPICases(t, h, []apiCase{
		{"guest", "PUT", "/api/parameters/shovel/%2F/move", move, 201, ""},
		{"guest", "PUT", "/api/parameters/shovel/%2F/bad", map[string]any{"value": map[string]any{"src-uri": "amqp://", "dest-uri": "amqp://", "dest-queue": "x"}}, 400, ""},
	})
	require.Eventually(t, func() bool {
		status, _, _ := h.Do("GET", "/api/parameters/shovel/%2F/move", "guest", nil)
		return status == 404
	}, 20*time.Second, 20*time.Millisecond, "the finished shovel's parameter is not deleted")
	amqptest.DeclareQueue(t, ch, "to", true)
	require.Equal(t, bodies, amqptest.GetAll(t, ch, "to"))
	amqptest.RequireEmpty(t, ch, "from")

	keep := map[string]any{"value": map[string]any{
		"src-uri": "amqp://guest:guest@/", "src-queue": "in",
		"dest-uri": "amqp://guest:guest@/", "dest-queue": "out",
	}}
	amqptest.DeclareQueue(t, ch, "in", true)
	runAPICases(t, h, []apiCase{{"guest", "PUT", "/api/parameters/shovel/%2F/keep", keep, 201, ""}})
	require.Eventually(t, func() bool {
		list, _ := h.Get("/api/shovels/%2F").([]any)
		return len(list) == 1 && list[0].(map[string]any)["state"] == "running"
	}, 20*time.Second, 20*time.Millisecond)
	l := h.Get("/api/shovels").([]any)[0].(map[string]any)
	require.Equal(t, "keep", l["name"])
	require.Equal(t, "/", l["vhost"])
	require.Equal(t, "dynamic", l["type"])
	require.Equal(t, "in", l["src_queue"])
	require.Equal(t, "out", l["dest_queue"])
	require.Equal(t, "amqp://guest@/", l["src_uri"])
	amqptest.PublishConfirmed(t, ch, "in", true, "a", "b")
	require.Eventually(t, func() bool {
		q, _ := h.Get("/api/queues/%2F/out").(map[string]any)
		return q["messages"] == float64(2)
	}, 20*time.Second, 20*time.Millisecond)

	runAPICases(t, h, []apiCase{
		{"guest", "DELETE", "/api/shovels/vhost/%2F/keep/restart", nil, 204, ""},
		{"guest", "DELETE", "/api/shovels/vhost/%2F/nothere/restart", nil, 404, ""},
		{"guest", "DELETE", "/api/parameters/shovel/%2F/keep", nil, 204, ""},
	})
	require.Eventually(t, func() bool { return len(h.Get("/api/shovels").([]any)) == 0 }, 20*time.Second, 20*time.Millisecond)
}

// TestRabbitMQShovelDefinitionsRun: a definitions file RabbitMQ 3.10.8
// exported (a local-URI shovel from orders-old to orders, a federation
// upstream, a policy federating ^fed\. exchanges from every upstream, and
// its internal_cluster_id global parameter) imports through POST
// /api/definitions, and its shovel runs: a message published to
// orders-old arrives in orders.
func TestRabbitMQShovelDefinitionsRun(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(rabbitShapes, "definitions-shovel-federation.json"))
	require.NoError(t, err)
	b := mgmtBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	status, _, out := h.Do("POST", "/api/definitions", "guest", string(raw))
	require.Equal(t, 204, status, "%s", out)

	up := h.Get("/api/parameters/federation-upstream/%2F/origin").(map[string]any)
	require.Equal(t, "amqp://guest:guest@127.0.0.1:5672", up["value"].(map[string]any)["uri"])
	require.Equal(t, map[string]any{"federation-upstream-set": "all"}, h.Get("/api/policies/%2F/federate-fed").(map[string]any)["definition"])
	require.Contains(t, h.Get("/api/global-parameters"), map[string]any{"name": "internal_cluster_id", "value": "rabbitmq-cluster-id-HXDwoH_teNzCt3cFVtSFqg"})

	require.Eventually(t, func() bool {
		list, _ := h.Get("/api/shovels").([]any)
		return len(list) == 1 && list[0].(map[string]any)["state"] == "running"
	}, 20*time.Second, 20*time.Millisecond)
	conn := amqptest.DialVia(t, b.Dial, "guest", "test")
	ch := amqptest.ConfirmChannel(t, conn)
	amqptest.PublishConfirmed(t, ch, "orders-old", true, "order 1")
	require.Eventually(t, func() bool {
		q, _ := h.Get("/api/queues/%2F/orders").(map[string]any)
		return q["messages"] == float64(1)
	}, 20*time.Second, 20*time.Millisecond)
	require.Equal(t, []string{"order 1"}, amqptest.GetAll(t, ch, "orders"))
}

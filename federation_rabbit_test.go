package broker_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/internal/amqptest"
	"github.com/warrenmq/broker/internal/rabbitnode"
)

// rabbitGet fetches path from node's management API as guest and decodes
// the JSON.
func rabbitGet(t *testing.T, node *rabbitnode.Node, path string) any {
	t.Helper()
	req, err := http.NewRequest("GET", node.MgmtURL()+path, nil)
	require.NoError(t, err)
	req.SetBasicAuth(rabbitnode.User, rabbitnode.Password)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, 200, resp.StatusCode, "%s", body)
	var v any
	require.NoError(t, json.Unmarshal(body, &v))
	return v
}

// getEventually takes one message from queue, waiting for it.
func getEventually(t *testing.T, ch *amqp091.Channel, queue string) amqp091.Delivery {
	t.Helper()
	var m amqp091.Delivery
	require.Eventually(t, func() bool {
		var ok bool
		m, ok, _ = ch.Get(queue, true)
		return ok
	}, 30*time.Second, 10*time.Millisecond, "nothing arrived in %s", queue)
	return m
}

// TestFederationWithRabbitMQ federates across a real RabbitMQ 3.10.8
// node with its federation plugin: a Warren exchange from a RabbitMQ
// exchange (and the link reconnecting after the node restarts), and a
// RabbitMQ exchange from Warren, RabbitMQ's own plugin as the downstream
// and Warren serving it over TCP on loopback.
func TestFederationWithRabbitMQ(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a RabbitMQ node")
	}
	node := rabbitnode.Start(t, rabbitnode.Options{Plugins: []string{"rabbitmq_federation", "rabbitmq_federation_management"}})
	rconn, err := amqp091.Dial(node.URL())
	require.NoError(t, err)
	defer rconn.Close()
	rabbitCluster, _ := rconn.Properties["cluster_name"].(string)
	require.NotEmpty(t, rabbitCluster)

	t.Run("WarrenFromRabbitMQ", func(t *testing.T) {
		w := newFederated(t, "warren-down")
		api := amqptest.NewAPI(t, w.ManagementHandler())
		putUpstream(t, w, "rabbit", map[string]any{"uri": node.URL(), "reconnect-delay": 1})
		putFederationPolicy(t, w, "fed", `^fromrabbit$`, "exchanges", "rabbit")
		wch := amqptest.Channel(t, brokertest.Dial(t, w))
		require.NoError(t, wch.ExchangeDeclare("fromrabbit", "direct", true, false, false, false, nil))
		amqptest.DeclareQueue(t, wch, "wq", false)
		require.NoError(t, wch.QueueBind("wq", "k", "fromrabbit", false, nil))
		waitLink(t, api, "running")

		// RabbitMQ's side: the exchange declared like Warren's, the
		// queue, and the binding from the exchange to the internal
		// x-federation-upstream exchange.
		qname := "federation: fromrabbit -> warren-down"
		require.Eventually(t, func() bool {
			for _, b := range rabbitGet(t, node, "/api/exchanges/%2F/fromrabbit/bindings/source").([]any) {
				if b.(map[string]any)["routing_key"] == "k" {
					return true
				}
			}
			return false
		}, 20*time.Second, 50*time.Millisecond)
		rq := rabbitGet(t, node, "/api/queues/%2F/"+url.PathEscape(qname)).(map[string]any)
		require.Equal(t, true, rq["durable"])
		xs := rabbitGet(t, node, "/api/exchanges/%2F/"+url.PathEscape(qname+" B")).(map[string]any)
		require.Equal(t, "x-federation-upstream", xs["type"])

		rch := amqptest.ConfirmChannel(t, rconn)
		amqptest.Publish(t, rch, "fromrabbit", "k", "hello from rabbit")
		amqptest.Publish(t, rch, "fromrabbit", "other", "not bound")
		m := getEventually(t, wch, "wq")
		require.Equal(t, "hello from rabbit", string(m.Body))
		h := m.Headers["x-received-from"].([]any)[0].(amqp091.Table)
		require.Equal(t, rabbitCluster, h["cluster-name"])
		require.Equal(t, "fromrabbit", h["exchange"])
		amqptest.RequireEmpty(t, wch, "wq")

		// The node restarts: the link fails, reconnects with backoff, and
		// messages published meanwhile wait in the durable upstream queue.
		node.Restart(t)
		r2, err := amqp091.Dial(node.URL())
		require.NoError(t, err)
		defer r2.Close()
		amqptest.Publish(t, amqptest.ConfirmChannel(t, r2), "fromrabbit", "k", "after restart")
		require.Equal(t, "after restart", string(getEventually(t, wch, "wq").Body))
		waitLink(t, api, "running")
	})

	t.Run("RabbitMQFromWarren", func(t *testing.T) {
		w := newFederated(t, "warren-up")
		wapi := amqptest.NewAPI(t, w.ManagementHandler())
		r, err := amqp091.Dial(node.URL())
		require.NoError(t, err)
		defer r.Close()
		rch := amqptest.Channel(t, r)
		require.NoError(t, rch.ExchangeDeclare("fromwarren", "topic", true, false, false, false, nil))
		amqptest.DeclareQueue(t, rch, "rq", false)
		require.NoError(t, rch.QueueBind("rq", "a.#", "fromwarren", false, nil))
		// %2F: RabbitMQ's amqp_uri reads "host/" as the empty vhost.
		uri := fmt.Sprintf("amqp://guest:guest@%s/%%2F", w.Addr())
		node.Ctl(t, "set_parameter", "federation-upstream", "warren", `{"uri":"`+uri+`","reconnect-delay":1}`)
		node.Ctl(t, "set_policy", "--apply-to", "exchanges", "fedw", "^fromwarren$", `{"federation-upstream":"warren"}`)

		var links []any
		require.Eventually(t, func() bool {
			links = rabbitGet(t, node, "/api/federation-links").([]any)
			for _, l := range links {
				if l := l.(map[string]any); l["exchange"] == "fromwarren" && l["status"] == "running" {
					return true
				}
			}
			return false
		}, 60*time.Second, 200*time.Millisecond, "RabbitMQ's links: %v", links)
		// Warren holds the upstream queue and the binding RabbitMQ made.
		qname := "federation: fromwarren -> " + rabbitCluster
		require.Eventually(t, func() bool { return sourceBindings(wapi, "fromwarren")["a.#"] }, 20*time.Second, 50*time.Millisecond)
		require.True(t, amqptest.QueueExists(t, brokertest.Dial(t, w), qname))

		wch := amqptest.ConfirmChannel(t, brokertest.Dial(t, w))
		amqptest.Publish(t, wch, "fromwarren", "a.b.c", "hello from warren")
		m := getEventually(t, rch, "rq")
		require.Equal(t, "hello from warren", string(m.Body))
		h := m.Headers["x-received-from"].([]any)[0].(amqp091.Table)
		require.Equal(t, "fromwarren", h["exchange"])
	})
}

package mgmt_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/internal/amqptest"
)

// rabbitShapes are responses of a RabbitMQ 3.10.8 management plugin,
// captured from the same topology mgmtShapeSetup builds.
const rabbitShapes = "testdata/mgmt/rabbitmq-3.10.8"

// freeForm are objects whose keys are data, not schema.
// warrenExtensions are keys Warren adds where RabbitMQ has none
// (docs/management.md lists them): the dead-lettered count beside the
// other message counters, so a console can chart it.
var warrenExtensions = map[string]bool{"dead_lettered": true, "dead_lettered_details": true}

var freeForm = map[string]bool{
	"arguments": true, "client_properties": true, "headers": true, "cluster_state": true,
	"limits": true, "properties": true,
}

// requireShape checks Warren's JSON against RabbitMQ's: every key Warren
// sends exists in RabbitMQ's object with the same JSON kind (recursively;
// null on either side matches anything), and every required key is
// present. Keys RabbitMQ has and Warren lacks are allowed: Warren leaves
// out what it has no value for (rates, Erlang process details, policies)
// rather than invent it.
func requireShape(t *testing.T, where string, rabbit, warren any, required ...string) {
	t.Helper()
	if ra, ok := rabbit.([]any); ok {
		wa, ok := warren.([]any)
		require.True(t, ok, "%s: RabbitMQ has a list, Warren %T", where, warren)
		if len(ra) == 0 {
			return
		}
		for i, w := range wa {
			requireShape(t, fmt.Sprintf("%s[%d]", where, i), ra[0], w, required...)
		}
		return
	}
	ro, ok := rabbit.(map[string]any)
	if !ok {
		if rabbit != nil && warren != nil {
			require.Equal(t, jsonKind(rabbit), jsonKind(warren), "%s: kind", where)
		}
		return
	}
	wo, ok := warren.(map[string]any)
	require.True(t, ok, "%s: RabbitMQ has an object, Warren %T", where, warren)
	for _, k := range required {
		require.Contains(t, wo, k, "%s: required key", where)
	}
	for k, w := range wo {
		if warrenExtensions[k] {
			continue
		}
		r, ok := ro[k]
		require.True(t, ok, "%s: Warren sends %q, which RabbitMQ does not have", where, k)
		if freeForm[k] {
			if r != nil && w != nil {
				require.Equal(t, jsonKind(r), jsonKind(w), "%s.%s: kind", where, k)
			}
			continue
		}
		requireShape(t, where+"."+k, r, w)
	}
}

func jsonKind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case float64, json.Number:
		return "number"
	case bool:
		return "bool"
	}
	return "null"
}

func loadShape(t *testing.T, name string) any {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(rabbitShapes, name+".json"))
	require.NoError(t, err)
	var v any
	require.NoError(t, json.Unmarshal(raw, &v))
	return v
}

// mgmtShapeSetup builds what the RabbitMQ capture had: a topic exchange
// with an alternate exchange, a durable queue with x-max-length bound to it
// with arguments, three persistent messages published with confirms, and a
// consumer with prefetch 1 on a second channel holding one of them.
func mgmtShapeSetup(t *testing.T, b *broker.Broker) *amqp091.Connection {
	t.Helper()
	conn := amqptest.DialVia(t, b.Dial, "guest", "shape-client")
	ch := amqptest.Channel(t, conn)
	require.NoError(t, ch.ExchangeDeclare("shape.x", "topic", true, false, false, false, amqp091.Table{"alternate-exchange": "amq.fanout"}))
	_, err := ch.QueueDeclare("shape.q", true, false, false, false, amqp091.Table{"x-max-length": int32(10)})
	require.NoError(t, err)
	require.NoError(t, ch.QueueBind("shape.q", "a.#", "shape.x", false, amqp091.Table{"k": "v"}))
	require.NoError(t, ch.Confirm(false))
	confirms := ch.NotifyPublish(make(chan amqp091.Confirmation, 3))
	for i := range 3 {
		require.NoError(t, ch.PublishWithContext(context.Background(), "shape.x", "a.b", false, false, amqp091.Publishing{
			Body: []byte(fmt.Sprint("m", i)), Headers: amqp091.Table{"h": int32(i)}, ContentType: "text/plain", DeliveryMode: 2,
		}))
	}
	for range 3 {
		require.True(t, (<-confirms).Ack)
	}
	c2 := amqptest.Channel(t, conn)
	require.NoError(t, c2.Qos(1, 0, false))
	msgs, err := c2.Consume("shape.q", "shape-ctag", false, false, false, false, nil)
	require.NoError(t, err)
	<-msgs
	amqptest.Idle(t, b.WaitIdle)
	return conn
}

func TestManagementShapes(t *testing.T) {
	b := mgmtBroker(t)
	mgmtShapeSetup(t, b)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	conns := b.Connections()
	require.Len(t, conns, 1)
	connID := url.PathEscape(conns[0].ID)

	for _, tc := range []struct {
		shape, path string
		required    []string
	}{
		{"overview", "/api/overview", []string{"management_version", "rabbitmq_version", "product_name", "product_version", "cluster_name", "node", "object_totals", "queue_totals", "message_stats", "listeners", "exchange_types", "churn_rates"}},
		{"whoami", "/api/whoami", []string{"name", "tags"}},
		{"vhosts", "/api/vhosts", []string{"name", "messages", "messages_ready", "messages_unacknowledged", "tracing"}},
		{"vhost", "/api/vhosts/%2F", []string{"name", "messages"}},
		{"users", "/api/users", []string{"name", "password_hash", "hashing_algorithm", "tags", "limits"}},
		{"user", "/api/users/guest", []string{"name", "password_hash", "hashing_algorithm", "tags"}},
		{"permissions", "/api/permissions", []string{"user", "vhost", "configure", "write", "read"}},
		{"exchanges", "/api/exchanges", []string{"name", "vhost", "type", "durable", "auto_delete", "internal", "arguments"}},
		{"exchanges", "/api/exchanges/%2F", []string{"name", "vhost", "type"}},
		{"exchange", "/api/exchanges/%2F/shape.x", []string{"name", "vhost", "type", "durable", "auto_delete", "internal", "arguments"}},
		{"queues", "/api/queues", []string{"name", "vhost", "durable", "auto_delete", "exclusive", "arguments", "node", "state", "type", "messages", "messages_ready", "messages_unacknowledged", "consumers", "memory", "message_stats"}},
		{"queues", "/api/queues/%2F", []string{"name", "messages"}},
		{"queue", "/api/queues/%2F/shape.q", []string{"name", "messages", "messages_ready", "messages_unacknowledged", "consumers", "memory", "state", "consumer_details"}},
		{"queue_bindings", "/api/queues/%2F/shape.q/bindings", []string{"source", "vhost", "destination", "destination_type", "routing_key", "arguments", "properties_key"}},
		{"bindings", "/api/bindings", []string{"source", "vhost", "destination", "destination_type", "routing_key", "arguments", "properties_key"}},
		{"bindings", "/api/bindings/%2F", []string{"source"}},
		{"eq_bindings", "/api/bindings/%2F/e/shape.x/q/shape.q", []string{"source", "properties_key"}},
		{"connections", "/api/connections", []string{"name", "node", "vhost", "user", "state", "channels", "channel_max", "frame_max", "timeout", "client_properties", "connected_at", "peer_host", "peer_port", "protocol", "recv_oct", "send_oct", "user_provided_name"}},
		{"channels", "/api/channels", []string{"name", "number", "connection_details", "vhost", "user", "state", "consumer_count", "messages_unacknowledged", "messages_unconfirmed", "prefetch_count", "global_prefetch_count", "confirm", "transactional"}},
		{"channels", "/api/connections/" + connID + "/channels", []string{"name"}},
		{"consumers", "/api/consumers", []string{"consumer_tag", "queue", "channel_details", "ack_required", "exclusive", "prefetch_count", "arguments", "active"}},
		{"consumers", "/api/consumers/%2F", []string{"consumer_tag"}},
		{"definitions", "/api/definitions", []string{"rabbit_version", "users", "vhosts", "permissions", "topic_permissions", "parameters", "global_parameters", "policies", "queues", "exchanges", "bindings"}},
	} {
		t.Run(strings.ReplaceAll(tc.path, "/", "_"), func(t *testing.T) {
			requireShape(t, tc.path, loadShape(t, tc.shape), h.Get(tc.path), tc.required...)
		})
	}
	// One connection and channel, looked up by name.
	requireShape(t, "connection", loadShape(t, "connections").([]any)[0], h.Get("/api/connections/"+connID), "name")
	chName := url.PathEscape(conns[0].ID + " (2)")
	requireShape(t, "channel", loadShape(t, "channels").([]any)[0], h.Get("/api/channels/"+chName), "name")

	// The values, where the capture's topology fixes them.
	q := h.Get("/api/queues/%2F/shape.q").(map[string]any)
	require.EqualValues(t, 3, q["messages"])
	require.EqualValues(t, 2, q["messages_ready"])
	require.EqualValues(t, 1, q["messages_unacknowledged"])
	require.EqualValues(t, 1, q["consumers"])
	require.Equal(t, map[string]any{"x-max-length": float64(10)}, q["arguments"])
	require.Equal(t, "running", q["state"])
	details := q["consumer_details"].([]any)
	require.Len(t, details, 1)
	require.Equal(t, "shape-ctag", details[0].(map[string]any)["consumer_tag"])
	require.EqualValues(t, 1, details[0].(map[string]any)["prefetch_count"])
	stats := q["message_stats"].(map[string]any)
	require.EqualValues(t, 3, stats["publish"])
	require.EqualValues(t, 1, stats["deliver"])

	ov := h.Get("/api/overview").(map[string]any)
	require.Equal(t, map[string]any{"channels": 2.0, "connections": 1.0, "consumers": 1.0, "exchanges": 7.0, "queues": 1.0}, ov["object_totals"])
	totals := ov["queue_totals"].(map[string]any)
	for k, v := range map[string]float64{"messages": 3, "messages_ready": 2, "messages_unacknowledged": 1} {
		require.Equal(t, v, totals[k], k)
		require.Contains(t, totals, k+"_details", "a rate beside each length")
	}
	ms := ov["message_stats"].(map[string]any)
	require.EqualValues(t, 3, ms["publish"])
	require.EqualValues(t, 3, ms["confirm"])

	bindings := h.Get("/api/bindings/%2F/e/shape.x/q/shape.q").([]any)
	require.Len(t, bindings, 1)
	bd := bindings[0].(map[string]any)
	require.Equal(t, "a.#", bd["routing_key"])
	require.Equal(t, map[string]any{"k": "v"}, bd["arguments"])
	require.True(t, strings.HasPrefix(bd["properties_key"].(string), "a.%23~"), "RabbitMQ's quoting: %v", bd["properties_key"])
	all := h.Get("/api/bindings/%2F").([]any)
	require.Len(t, all, 2, "the default exchange's binding is listed too")
	require.Equal(t, "", all[0].(map[string]any)["source"])
	require.Equal(t, "shape.q", all[0].(map[string]any)["properties_key"])

	chans := h.Get("/api/channels").([]any)
	require.Len(t, chans, 2)
	c1, c2 := chans[0].(map[string]any), chans[1].(map[string]any)
	require.Equal(t, true, c1["confirm"])
	require.EqualValues(t, 0, c1["messages_unconfirmed"])
	require.EqualValues(t, 1, c2["consumer_count"])
	require.EqualValues(t, 1, c2["messages_unacknowledged"])
	require.EqualValues(t, 1, c2["prefetch_count"])

	cs := h.Get("/api/connections").([]any)
	c := cs[0].(map[string]any)
	require.Equal(t, "shape-client", c["user_provided_name"])
	require.Equal(t, "running", c["state"])
	require.EqualValues(t, 2, c["channels"])
	require.Positive(t, c["recv_oct"])
	require.Positive(t, c["send_oct"])

	x := h.Get("/api/exchanges/%2F/amq.default").(map[string]any)
	require.Equal(t, "", x["name"])
	require.Equal(t, "direct", x["type"])
}

func TestManagementAccess(t *testing.T) {
	b := mgmtBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	amqptest.DialVia(t, b.Dial, "guest", "admin-conn")
	amqptest.DialVia(t, b.Dial, "mgr", "mgr-conn")
	amqptest.Idle(t, b.WaitIdle)

	status, hdr, body := h.Do("GET", "/api/overview", "", nil)
	require.Equal(t, http.StatusUnauthorized, status)
	require.Equal(t, `Basic realm="RabbitMQ Management"`, hdr.Get("WWW-Authenticate"))
	e, reason := amqptest.ErrorBody(t, body)
	require.Equal(t, "not_authorized", e)
	require.Equal(t, "Login failed", reason)

	status, _, _ = h.Do("GET", "/api/overview", "nobody", nil)
	require.Equal(t, http.StatusUnauthorized, status)

	for _, tc := range []struct {
		user, method, path string
		status             int
		reason             string
	}{
		{"app", "GET", "/api/overview", 401, "Not management user"},
		{"mgr", "GET", "/api/overview", 200, ""},
		{"mgr", "GET", "/api/queues", 200, ""},
		{"mgr", "GET", "/api/users", 401, "Not administrator user"},
		{"mgr", "GET", "/api/permissions", 401, "Not administrator user"},
		{"mgr", "GET", "/api/definitions", 401, "Not administrator user"},
		{"mgr", "POST", "/api/definitions", 401, "Not administrator user"},
		{"mon", "GET", "/api/users", 401, "Not administrator user"},
		{"mon", "GET", "/api/connections", 200, ""},
		{"guest", "GET", "/api/users", 200, ""},
		{"guest", "GET", "/api/nothing", 404, "Not Found"},
		{"guest", "PATCH", "/api/queues", 405, "Method Not Allowed"},
	} {
		t.Run(tc.user+tc.method+tc.path, func(t *testing.T) {
			status, _, body := h.Do(tc.method, tc.path, tc.user, nil)
			require.Equal(t, tc.status, status, "%s", body)
			if tc.reason != "" {
				_, reason := amqptest.ErrorBody(t, body)
				require.Equal(t, tc.reason, reason)
			}
		})
	}

	names := func(user string) []string {
		status, _, body := h.Do("GET", "/api/connections", user, nil)
		require.Equal(t, http.StatusOK, status)
		var cs []struct {
			User string `json:"user"`
		}
		require.NoError(t, json.Unmarshal(body, &cs))
		var out []string
		for _, c := range cs {
			out = append(out, c.User)
		}
		slices.Sort(out)
		return out
	}
	require.Equal(t, []string{"guest", "mgr"}, names("mon"), "monitoring sees every connection")
	require.Equal(t, []string{"guest", "mgr"}, names("guest"))
	require.Equal(t, []string{"mgr"}, names("mgr"), "management sees its own")
}

func TestManagementTopology(t *testing.T) {
	b := mgmtBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	type call struct {
		method, path string
		body         any
		status       int
		errReason    string // when set, the reason must contain it
	}
	for _, c := range []call{
		{"PUT", "/api/exchanges/%2F/ex", map[string]any{"type": "direct", "durable": true, "arguments": map[string]any{"alternate-exchange": "ae"}}, 201, ""},
		{"PUT", "/api/exchanges/%2F/ex", map[string]any{"type": "direct", "durable": true, "arguments": map[string]any{"alternate-exchange": "ae"}}, 204, ""},
		{"PUT", "/api/exchanges/%2F/ex", map[string]any{"type": "fanout", "durable": true}, 400, "inequivalent arg 'type'"},
		{"PUT", "/api/exchanges/%2F/bad", map[string]any{"type": "bogus"}, 400, "unknown exchange type 'bogus'"},
		{"PUT", "/api/exchanges/%2F/nokind", map[string]any{}, 400, "key_missing"},
		{"PUT", "/api/exchanges/%2F/amq.mine", map[string]any{"type": "direct"}, 401, "reserved"},
		{"PUT", "/api/exchanges/nosuch/x", map[string]any{"type": "direct"}, 404, "vhost_not_found"},
		{"PUT", "/api/queues/%2F/work", map[string]any{"durable": true, "arguments": map[string]any{"x-max-length": 5}}, 201, ""},
		{"PUT", "/api/queues/%2F/work", map[string]any{"durable": true, "arguments": map[string]any{"x-max-length": 5}}, 204, ""},
		{"PUT", "/api/queues/%2F/work", map[string]any{"durable": false}, 400, "inequivalent arg 'durable' for queue 'work' in vhost '/': received 'false' but current is 'true'"},
		{"PUT", "/api/queues/%2F/tmp", "", 201, ""},
		{"PUT", "/api/queues/%2F/junk", "{not json", 400, "not_json"},
		{"POST", "/api/bindings/%2F/e/ex/q/work", map[string]any{"routing_key": "k", "arguments": map[string]any{"a": 1}}, 201, ""},
		{"POST", "/api/bindings/%2F/e/nosuch/q/work", map[string]any{}, 404, ""},
		{"POST", "/api/bindings/%2F/e/amq.fanout/e/ex", map[string]any{}, 201, ""},
		{"GET", "/api/exchanges/%2F/missing", nil, 404, "Not Found"},
		{"DELETE", "/api/exchanges/%2F/missing", nil, 404, ""},
		{"DELETE", "/api/exchanges/%2F/amq.direct", nil, 401, "system exchange"},
		{"DELETE", "/api/queues/%2F/missing", nil, 404, ""},
		{"DELETE", "/api/exchanges/%2F/ex?if-unused=true", nil, 400, "in use"},
	} {
		status, _, body := h.Do(c.method, c.path, "guest", c.body)
		require.Equal(t, c.status, status, "%s %s: %s", c.method, c.path, body)
		if c.errReason != "" {
			_, reason := amqptest.ErrorBody(t, body)
			require.Contains(t, reason, c.errReason, "%s %s", c.method, c.path)
		}
	}

	// The declarations are real: AMQP sees them.
	ch := amqptest.Channel(t, amqptest.DialVia(t, b.Dial, "guest", "check"))
	_, err := ch.QueueDeclarePassive("work", true, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.PublishWithContext(context.Background(), "ex", "k", false, false, amqp091.Publishing{Body: []byte("via binding")}))
	// fanout passes the key on to ex, which routes it with its binding
	require.NoError(t, ch.PublishWithContext(context.Background(), "amq.fanout", "k", false, false, amqp091.Publishing{Body: []byte("via e2e")}))
	amqptest.Idle(t, b.WaitIdle)
	q := h.Get("/api/queues/%2F/work").(map[string]any)
	require.EqualValues(t, 2, q["messages_ready"])
	require.Equal(t, map[string]any{"x-max-length": 5.0}, q["arguments"])

	// A binding is deleted by the properties_key its listing gives.
	list := h.Get("/api/bindings/%2F/e/ex/q/work").([]any)
	require.Len(t, list, 1)
	props := list[0].(map[string]any)["properties_key"].(string)
	status, _, _ := h.Do("GET", "/api/bindings/%2F/e/ex/q/work/"+url.PathEscape(props), "guest", nil)
	require.Equal(t, 200, status)
	status, _, _ = h.Do("DELETE", "/api/bindings/%2F/e/ex/q/work/"+url.PathEscape(props), "guest", nil)
	require.Equal(t, 204, status)
	status, _, _ = h.Do("DELETE", "/api/bindings/%2F/e/ex/q/work/"+url.PathEscape(props), "guest", nil)
	require.Equal(t, 404, status)
	require.Empty(t, h.Get("/api/bindings/%2F/e/ex/q/work"))
	e2e := h.Get("/api/bindings/%2F/e/amq.fanout/e/ex").([]any)
	require.Len(t, e2e, 1)
	require.Equal(t, "~", e2e[0].(map[string]any)["properties_key"])

	// Purge, delete with conditions, delete.
	status, _, body := h.Do("DELETE", "/api/queues/%2F/work?if-empty=true", "guest", nil)
	require.Equal(t, 400, status, "%s", body)
	status, _, _ = h.Do("DELETE", "/api/queues/%2F/work/contents", "guest", nil)
	require.Equal(t, 204, status)
	amqptest.Idle(t, b.WaitIdle)
	require.EqualValues(t, 0, h.Get("/api/queues/%2F/work").(map[string]any)["messages"])
	status, _, _ = h.Do("DELETE", "/api/queues/%2F/work?if-empty=true", "guest", nil)
	require.Equal(t, 204, status)
	status, _, _ = h.Do("DELETE", "/api/exchanges/%2F/ex", "guest", nil)
	require.Equal(t, 204, status)
	status, _, _ = h.Do("GET", "/api/queues/%2F/work", "guest", nil)
	require.Equal(t, 404, status)
}

func TestManagementBindingLocation(t *testing.T) {
	b := mgmtBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	status, _, _ := h.Do("PUT", "/api/queues/%2F/q", "guest", map[string]any{})
	require.Equal(t, 201, status)
	status, hdr, _ := h.Do("POST", "/api/bindings/%2F/e/amq.topic/q/q", "guest", map[string]any{"routing_key": "a b/c"})
	require.Equal(t, 201, status)
	require.Equal(t, "q/a+b%2Fc", hdr.Get("Location"), "RabbitMQ's relative Location with quote_plus")
	status, _, _ = h.Do("GET", "/api/bindings/%2F/e/amq.topic/q/q/a+b%252Fc", "guest", nil)
	require.Equal(t, 200, status)
	// The default exchange's binding is listed and readable, not deletable.
	status, _, _ = h.Do("GET", "/api/bindings/%2F/e/amq.default/q/q/q", "guest", nil)
	require.Equal(t, 200, status)
}

func TestManagementDeleteConnection(t *testing.T) {
	b := mgmtBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	conn := amqptest.DialVia(t, b.Dial, "guest", "doomed")
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	id := b.Connections()[0].ID

	status, _, _ := h.Do("DELETE", "/api/connections/"+url.PathEscape("nope"), "guest", nil)
	require.Equal(t, 404, status)
	status, _, _ = h.Do("DELETE", "/api/connections/"+url.PathEscape(id), "mgr", nil)
	require.Equal(t, 404, status, "a management user cannot see, so cannot close, another user's connection")
	status, _, _ = h.Do("DELETE", "/api/connections/"+url.PathEscape(id), "guest", nil)
	require.Equal(t, 204, status)
	e := amqptest.AwaitClose(t, closed)
	require.Equal(t, 320, e.Code)
	require.Equal(t, "CONNECTION_FORCED - Closed via management plugin", e.Reason)

	conn2 := amqptest.DialVia(t, b.Dial, "guest", "doomed2")
	closed2 := conn2.NotifyClose(make(chan *amqp091.Error, 1))
	amqptest.Idle(t, b.WaitIdle)
	var id2 string
	for _, c := range b.Connections() {
		if c.ClientProperties["connection_name"] == "doomed2" {
			id2 = c.ID
		}
	}
	status, _, _ = h.Do("DELETE", "/api/connections/"+url.PathEscape(id2), "guest", nil, "X-Reason", "maintenance")
	require.Equal(t, 204, status)
	require.Equal(t, "CONNECTION_FORCED - maintenance", amqptest.AwaitClose(t, closed2).Reason)
}

func TestManagementGetShapes(t *testing.T) {
	b := mgmtBroker(t)
	mgmtShapeSetup(t, b)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	req := map[string]any{"count": 2, "ackmode": "ack_requeue_true", "encoding": "auto"}
	for i := range 2 {
		status, _, body := h.Do("POST", "/api/queues/%2F/shape.q/get", "guest", req)
		require.Equal(t, 200, status, "%s", body)
		var got any
		require.NoError(t, json.Unmarshal(body, &got))
		requireShape(t, "get", loadShape(t, "get"), got, "payload_bytes", "redelivered", "exchange", "routing_key", "message_count", "properties", "payload", "payload_encoding")
		msgs := got.([]any)
		require.Len(t, msgs, 2)
		m0 := msgs[0].(map[string]any)
		require.Equal(t, "m1", m0["payload"], "m0 is out with the consumer")
		require.Equal(t, "string", m0["payload_encoding"])
		require.Equal(t, i == 1, m0["redelivered"], "the first get requeued it")
		require.EqualValues(t, 1, m0["message_count"], "what is left after this get")
		require.EqualValues(t, 0, msgs[1].(map[string]any)["message_count"])
		require.Equal(t, map[string]any{"delivery_mode": 2.0, "headers": map[string]any{"h": 1.0}, "content_type": "text/plain"}, m0["properties"])
	}
	require.EqualValues(t, 2, h.Get("/api/queues/%2F/shape.q").(map[string]any)["messages_ready"])

	for _, tc := range []struct {
		path   string
		body   any
		status int
		reason string
	}{
		{"shape.q", map[string]any{"count": 1}, 400, "[{key_missing,ackmode},{key_missing,encoding}]"},
		{"shape.q", map[string]any{"count": 1, "ackmode": "bogus", "encoding": "auto"}, 400, "unknown ackmode"},
		{"shape.q", map[string]any{"count": 1, "ackmode": "ack_requeue_true", "encoding": "utf16"}, 400, "Unsupported encoding"},
		{"shape.q", "nojson", 400, "not_json"},
		{"nosuch", map[string]any{"count": 1, "ackmode": "ack_requeue_true", "encoding": "auto"}, 404, "Not Found"},
	} {
		status, _, body := h.Do("POST", "/api/queues/%2F/"+tc.path+"/get", "guest", tc.body)
		require.Equal(t, tc.status, status, "%s", body)
		_, reason := amqptest.ErrorBody(t, body)
		require.Contains(t, reason, tc.reason)
	}
	status, _, body := h.Do("POST", "/api/queues/%2F/shape.q/get", "guest", map[string]any{"count": 1, "ackmode": "reject_requeue_true", "encoding": "base64", "truncate": 1})
	require.Equal(t, 200, status)
	var got []map[string]any
	require.NoError(t, json.Unmarshal(body, &got))
	require.Equal(t, "bQ==", got[0]["payload"], "base64 of the truncated m")
	require.EqualValues(t, 2, got[0]["payload_bytes"])
}

// TestManagementGetAckModes checks that get delivers, as RabbitMQ's does:
// the requeue modes put messages back marked redelivered (a later
// basic.get sees it), the others remove them, reject_requeue_false by
// dead-lettering.
func TestManagementGetAckModes(t *testing.T) {
	b := mgmtBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	conn := amqptest.DialVia(t, b.Dial, "guest", "getter")
	ch := amqptest.Channel(t, conn)
	ctx := context.Background()
	_, err := ch.QueueDeclare("g.dlq", false, false, false, false, nil)
	require.NoError(t, err)
	_, err = ch.QueueDeclare("g.q", false, false, false, false, amqp091.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "g.dlq"})
	require.NoError(t, err)
	for _, body := range []string{"a", "b", "c", "d"} {
		require.NoError(t, ch.PublishWithContext(ctx, "", "g.q", false, false, amqp091.Publishing{Body: []byte(body)}))
	}
	amqptest.Idle(t, b.WaitIdle)

	get := func(mode string, count int) []getAnswer {
		t.Helper()
		status, _, body := h.Do("POST", "/api/queues/%2F/g.q/get", "guest", map[string]any{"count": count, "ackmode": mode, "encoding": "auto"})
		require.Equal(t, http.StatusOK, status, "%s", body)
		var got []getAnswer
		require.NoError(t, json.Unmarshal(body, &got))
		return got
	}
	ready := func(name string) uint64 {
		t.Helper()
		amqptest.Idle(t, b.WaitIdle)
		for _, q := range b.Stats().QueueDetails {
			if q.Name == name {
				return q.Ready
			}
		}
		require.FailNow(t, "no queue "+name)
		return 0
	}
	payloads := func(rs []getAnswer) (out []string) {
		for _, r := range rs {
			out = append(out, r.Payload)
		}
		return out
	}

	// ack_requeue_true: delivered, then requeued by the channel's close.
	got := get("ack_requeue_true", 1)
	require.Equal(t, []string{"a"}, payloads(got))
	require.False(t, got[0].Redelivered)
	require.EqualValues(t, 3, got[0].MessageCount)
	require.EqualValues(t, 4, ready("g.q"))
	d, ok, err := ch.Get("g.q", false)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "a", string(d.Body))
	require.True(t, d.Redelivered, "the management get delivered it once")
	require.NoError(t, d.Reject(true))
	// basic.reject has no reply: wait until it is handled, or the next get
	// (another connection) may overtake it and find "b" first.
	require.EqualValues(t, 4, ready("g.q"))

	// ack_requeue_false: got with no-ack, gone.
	got = get("ack_requeue_false", 1)
	require.Equal(t, []string{"a"}, payloads(got))
	require.True(t, got[0].Redelivered)
	require.EqualValues(t, 3, ready("g.q"))

	// reject_requeue_false: rejected without requeue, so dead-lettered.
	got = get("reject_requeue_false", 1)
	require.Equal(t, []string{"b"}, payloads(got))
	require.EqualValues(t, 2, ready("g.q"))
	require.EqualValues(t, 1, ready("g.dlq"))

	// reject_requeue_true: all got first (so two distinct messages), then
	// rejected back in order.
	got = get("reject_requeue_true", 5)
	require.Equal(t, []string{"c", "d"}, payloads(got))
	require.EqualValues(t, 2, ready("g.q"))
	d, ok, err = ch.Get("g.q", true)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "c", string(d.Body))
	require.True(t, d.Redelivered)

	// Nothing left unacked behind, and the internal channels are gone.
	require.EqualValues(t, 0, b.Stats().Unacked)
	require.Len(t, b.Connections(), 1)
}

// TestManagementGetPermissions: the internal channel runs as the
// requesting user, so get needs read permission on the queue.
func TestManagementGetPermissions(t *testing.T) {
	b := mgmtBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	ctx := context.Background()
	ch := brokertest.Channel(t, b)
	_, err := ch.QueueDeclare("perm.q", false, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.Publish("", "perm.q", false, false, amqp091.Publishing{Body: []byte("x")}))
	req := map[string]any{"count": 1, "ackmode": "ack_requeue_true", "encoding": "auto"}

	require.NoError(t, b.Admin().PutPermission(ctx, broker.Permission{User: "mgr", VHost: "/", Configure: ".*", Write: ".*", Read: "^other$"}))
	status, _, body := h.Do("POST", "/api/queues/%2F/perm.q/get", "mgr", req)
	require.Equal(t, http.StatusUnauthorized, status, "%s", body)
	_, reason := amqptest.ErrorBody(t, body)
	require.Equal(t, "access to queue 'perm.q' in vhost '/' refused for user 'mgr'", reason)

	require.NoError(t, b.Admin().DeletePermission(ctx, "mgr", "/"))
	status, _, body = h.Do("POST", "/api/queues/%2F/perm.q/get", "mgr", req)
	require.Equal(t, http.StatusUnauthorized, status, "%s", body)

	require.NoError(t, b.Admin().PutPermission(ctx, broker.Permission{User: "mgr", VHost: "/", Configure: "", Write: "", Read: "^perm\\..*"}))
	status, _, body = h.Do("POST", "/api/queues/%2F/perm.q/get", "mgr", req)
	require.Equal(t, http.StatusOK, status, "%s", body)
}

// TestRabbitmqadmin drives the API with RabbitMQ's own CLI when it is
// installed (Debian's rabbitmq-server package ships it).
func TestRabbitmqadmin(t *testing.T) {
	tool, err := exec.LookPath("rabbitmqadmin")
	if err != nil {
		t.Skip("rabbitmqadmin not installed (apt-get install rabbitmq-server)")
	}
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("rabbitmqadmin needs python3")
	}
	b := mgmtBroker(t)
	conn := mgmtShapeSetup(t, b)
	closed := conn.NotifyClose(make(chan *amqp091.Error, 1))
	h := amqptest.NewAPI(t, b.ManagementHandler())
	u, err := url.Parse(h.URL())
	require.NoError(t, err)
	home := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		base := []string{"-H", u.Hostname(), "-P", u.Port(), "-u", "guest", "-p", "guest"}
		cmd := exec.CommandContext(ctx, tool, append(base, args...)...)
		cmd.Env = append(os.Environ(), "HOME="+home)
		cmd.Dir = home
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "rabbitmqadmin %v: %s", args, out)
		return string(out)
	}
	var queues []map[string]any
	require.NoError(t, json.Unmarshal([]byte(run("-f", "raw_json", "list", "queues")), &queues))
	require.Len(t, queues, 1)
	require.Equal(t, "shape.q", queues[0]["name"])
	require.EqualValues(t, 3, queues[0]["messages"])

	run("declare", "queue", "name=from-admin", "durable=true")
	run("declare", "exchange", "name=admin-x", "type=fanout")
	run("declare", "binding", "source=admin-x", "destination=from-admin", "routing_key=rk")
	out := run("list", "bindings")
	require.Contains(t, out, "admin-x")
	out = run("list", "exchanges", "name", "type")
	require.Contains(t, out, "admin-x")
	out = run("show", "overview")
	require.Contains(t, out, "3.13", "the default profile's version")
	out = run("list", "connections", "name", "user")
	require.Contains(t, out, "guest")
	out = run("list", "channels")
	require.Contains(t, out, "guest")
	out = run("list", "consumers")
	require.Contains(t, out, "shape-ctag")
	out = run("list", "users")
	require.Contains(t, out, "administrator")
	run("declare", "policy", "name=cap", "pattern=^shape", `definition={"max-length":5}`, "priority=3", "apply-to=queues")
	run("declare", "operator_policy", "name=guard", "pattern=.", `definition={"message-ttl":60000}`, "apply-to=queues")
	out = run("list", "policies")
	require.Contains(t, out, `{"max-length": 5}`)
	require.Contains(t, run("list", "operator_policies"), "guard")
	run("delete", "policy", "name=cap")
	run("delete", "operator_policy", "name=guard")
	require.NotContains(t, run("list", "policies"), "cap")
	out = run("get", "queue=shape.q", "count=1", "ackmode=ack_requeue_true")
	require.Contains(t, out, "m1")
	run("purge", "queue", "name=from-admin")
	run("delete", "queue", "name=from-admin")
	run("export", filepath.Join(home, "defs.json"))
	raw, err := os.ReadFile(filepath.Join(home, "defs.json"))
	require.NoError(t, err)
	require.Contains(t, string(raw), "shape.x")
	// import into a fresh broker through its own API
	b2 := mgmtBroker(t)
	h2 := amqptest.NewAPI(t, b2.ManagementHandler())
	u2, err := url.Parse(h2.URL())
	require.NoError(t, err)
	u = u2
	run("import", filepath.Join(home, "defs.json"))
	q := h2.Get("/api/queues/%2F/shape.q").(map[string]any)
	require.Equal(t, map[string]any{"x-max-length": 10.0}, q["arguments"])
	require.Len(t, h2.Get("/api/bindings/%2F/e/shape.x/q/shape.q").([]any), 1)

	// The connection close the operator asks for reaches the client.
	u, err = url.Parse(h.URL())
	require.NoError(t, err)
	run("close", "connection", "name="+b.Connections()[0].ID)
	e := amqptest.AwaitClose(t, closed)
	require.Equal(t, 320, e.Code)
}

func TestDefinitionsHTTP(t *testing.T) {
	b := mgmtBroker(t)
	mgmtShapeSetup(t, b)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	status, _, body := h.Do("GET", "/api/definitions", "guest", nil)
	require.Equal(t, http.StatusOK, status)

	b2 := mgmtBroker(t)
	h2 := amqptest.NewAPI(t, b2.ManagementHandler())
	status, _, out := h2.Do("POST", "/api/definitions", "guest", string(body))
	require.Equal(t, http.StatusNoContent, status, "%s", out)
	require.Equal(t, amqptest.Topology(t, b.Admin().Export), amqptest.Topology(t, b2.Admin().Export))

	status, _, out = h2.Do("POST", "/api/definitions", "guest", `{"queues":[{"name":"q","vhost":"nope","durable":true,"auto_delete":false,"arguments":{}}]}`)
	require.Equal(t, http.StatusBadRequest, status)
	_, reason := amqptest.ErrorBody(t, out)
	require.Contains(t, reason, `vhost "nope" neither exists nor is in the file`)
}

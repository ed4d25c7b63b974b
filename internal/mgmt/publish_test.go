package mgmt_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/internal/amqptest"
)

// pub is a publish request's body: rabbitmqadmin's, with every key.
func pub(key, payload, enc string, props map[string]any) map[string]any {
	if props == nil {
		props = map[string]any{}
	}
	return map[string]any{"routing_key": key, "payload": payload, "payload_encoding": enc, "properties": props}
}

// TestManagementPublish: POST /api/exchanges/{vhost}/{name}/publish
// publishes as an AMQP client would, through the default exchange
// (amq.default) or a named one, and answers whether a queue got the
// message. The message is then got over AMQP with its body and
// properties as the request set them.
func TestManagementPublish(t *testing.T) {
	b := mgmtBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	ch := amqptest.Channel(t, brokertest.Dial(t, b))
	_, err := ch.QueueDeclare("pq", false, false, false, false, nil)
	require.NoError(t, err)
	require.NoError(t, ch.ExchangeDeclare("px", "direct", false, false, false, false, nil))
	require.NoError(t, ch.QueueBind("pq", "k", "px", false, nil))

	allProps := map[string]any{
		"content_type": "text/plain", "content_encoding": "gzip", "correlation_id": "c1",
		"reply_to": "r", "expiration": "60000", "message_id": "m1", "type": "t", "user_id": "guest",
		"app_id": "a", "delivery_mode": 2, "priority": 3, "timestamp": 1700000000,
		"headers": map[string]any{"s": "v", "n": 7, "f": 1.5, "b": true, "l": []any{1, "x"}, "t": map[string]any{"in": "y"}},
		"unknown": "ignored, as RabbitMQ ignores it",
	}
	for _, tc := range []struct {
		name, exchange string
		body           map[string]any
		routed         bool
		want           amqp091.Delivery // body and properties got from pq; nil Body: nothing
	}{
		{"default exchange, every property", "amq.default", pub("pq", "hi", "string", allProps), true, amqp091.Delivery{
			Body: []byte("hi"), ContentType: "text/plain", ContentEncoding: "gzip", CorrelationId: "c1",
			ReplyTo: "r", Expiration: "60000", MessageId: "m1", Type: "t", UserId: "guest", AppId: "a",
			DeliveryMode: 2, Priority: 3, Timestamp: time.Unix(1700000000, 0),
			Headers: amqp091.Table{"s": "v", "n": int64(7), "f": 1.5, "b": true, "l": []any{int64(1), "x"}, "t": amqp091.Table{"in": "y"}},
		}},
		{"named exchange", "px", pub("k", "via px", "string", nil), true, amqp091.Delivery{Body: []byte("via px")}},
		{"base64", "px", pub("k", "AP8BZ2k=", "base64", map[string]any{"delivery_mode": 1}), true, amqp091.Delivery{Body: []byte{0, 0xff, 1, 'g', 'i'}, DeliveryMode: 1}},
		{"empty payload", "amq.default", pub("pq", "", "string", nil), true, amqp091.Delivery{Body: []byte{}}},
		{"unroutable via px", "px", pub("nobody", "lost", "string", nil), false, amqp091.Delivery{}},
		{"unroutable via default", "amq.default", pub("noqueue", "lost", "string", nil), false, amqp091.Delivery{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := h.Do("POST", "/api/exchanges/%2F/"+tc.exchange+"/publish", "guest", tc.body)
			require.Equal(t, http.StatusOK, status, "%s", body)
			var res map[string]any
			require.NoError(t, json.Unmarshal(body, &res), "%s", body)
			require.Equal(t, map[string]any{"routed": tc.routed}, res)
			d, ok, err := ch.Get("pq", true)
			require.NoError(t, err)
			if tc.want.Body == nil {
				require.False(t, ok, "nothing reached pq: %+v", d)
				return
			}
			require.True(t, ok)
			require.Equal(t, tc.want.Body, d.Body)
			require.Equal(t, tc.want.ContentType, d.ContentType)
			require.Equal(t, tc.want.ContentEncoding, d.ContentEncoding)
			require.Equal(t, tc.want.CorrelationId, d.CorrelationId)
			require.Equal(t, tc.want.ReplyTo, d.ReplyTo)
			require.Equal(t, tc.want.Expiration, d.Expiration)
			require.Equal(t, tc.want.MessageId, d.MessageId)
			require.Equal(t, tc.want.Type, d.Type)
			require.Equal(t, tc.want.UserId, d.UserId)
			require.Equal(t, tc.want.AppId, d.AppId)
			require.Equal(t, tc.want.DeliveryMode, d.DeliveryMode)
			require.Equal(t, tc.want.Priority, d.Priority)
			require.True(t, tc.want.Timestamp.Equal(d.Timestamp), "timestamp %v", d.Timestamp)
			require.Equal(t, tc.want.Headers, d.Headers)
		})
	}
}

// TestManagementPublishErrors: a bad request body is 400 with RabbitMQ's
// reason, a publish the broker refuses as it would over AMQP is answered
// with that refusal, a missing vhost or exchange is 404; nothing reaches
// the queue.
func TestManagementPublishErrors(t *testing.T) {
	b := mgmtBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	ch := amqptest.Channel(t, brokertest.Dial(t, b))
	_, err := ch.QueueDeclare("pq", false, false, false, false, nil)
	require.NoError(t, err)
	const path = "/api/exchanges/%2F/amq.default/publish"
	withProps := func(p map[string]any) map[string]any { return pub("pq", "x", "string", p) }
	runAPICases(t, h, []apiCase{
		{"guest", "POST", path, map[string]any{}, 400, "[{key_missing,routing_key},{key_missing,properties},{key_missing,payload},{key_missing,payload_encoding}]"},
		{"guest", "POST", path, map[string]any{"routing_key": "pq", "properties": map[string]any{}}, 400, "[{key_missing,payload},{key_missing,payload_encoding}]"},
		{"guest", "POST", path, map[string]any{"routing_key": "pq", "properties": map[string]any{}, "payload": 5, "payload_encoding": "string"}, 400, "payload_not_string"},
		{"guest", "POST", path, map[string]any{"routing_key": 5, "properties": map[string]any{}, "payload": "x", "payload_encoding": "string"}, 400, "routing_key must be a string"},
		{"guest", "POST", path, pub("pq", "x", "utf16", nil), 400, `{unsupported_encoding,"utf16"}`},
		{"guest", "POST", path, pub("pq", "not base64!", "base64", nil), 400, "not_base64"},
		{"guest", "POST", path, map[string]any{"routing_key": "pq", "properties": "x", "payload": "x", "payload_encoding": "string"}, 400, `properties must be an object, not "x"`},
		{"guest", "POST", path, withProps(map[string]any{"delivery_mode": "2"}), 400, `property delivery_mode must be an integer from 0 to 255, not "2"`},
		{"guest", "POST", path, withProps(map[string]any{"priority": 256}), 400, "property priority must be an integer from 0 to 255, not 256"},
		{"guest", "POST", path, withProps(map[string]any{"content_type": 1}), 400, "property content_type must be a string, not 1"},
		{"guest", "POST", path, withProps(map[string]any{"timestamp": "now"}), 400, `property timestamp must be an integer (seconds), not "now"`},
		{"guest", "POST", path, withProps(map[string]any{"headers": []any{1}}), 400, "property headers must be an object, not [1]"},
		// Refused by the publish path itself, as over AMQP (406).
		{"guest", "POST", path, withProps(map[string]any{"expiration": "soon"}), 400, "invalid expiration 'soon': not an integer"},
		{"guest", "POST", path, withProps(map[string]any{"user_id": "someone-else"}), 400, "user_id property set to 'someone-else' but authenticated user was 'guest'"},
		{"guest", "POST", "/api/exchanges/%2F/amq.default/publish", "not json", 400, "not_json"},
		{"guest", "POST", "/api/exchanges/nope/amq.default/publish", pub("pq", "x", "string", nil), 404, "vhost_not_found"},
		{"guest", "POST", "/api/exchanges/%2F/nope/publish", pub("pq", "x", "string", nil), 404, ""},
		{"", "POST", path, pub("pq", "x", "string", nil), 401, ""},
		{"app", "POST", path, pub("pq", "x", "string", nil), 401, ""},
	})
	q, err := ch.QueueDeclarePassive("pq", false, false, false, false, nil)
	require.NoError(t, err)
	require.Zero(t, q.Messages, "a refused publish reaches no queue")
}

// TestManagementPublishPermissions: publishing needs write permission on
// the exchange, as an AMQP publish does: lim may write only to names
// starting with "mine" on secret, mgr may not see secret; both are 401
// not_authorised, as the other routes answer a refused permission. As in
// RabbitMQ (is_authorized_vhost), a monitoring user with write permission
// may publish. A refused publish changes nothing.
func TestManagementPublishPermissions(t *testing.T) {
	b, _ := mgmtAuthzBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	ch := amqptest.Channel(t, brokertest.Dial(t, b))
	require.NoError(t, ch.ExchangeDeclare("mine.x", "fanout", false, false, false, false, nil))
	body := pub("k", "x", "string", nil)
	runAPICases(t, h, []apiCase{
		{"lim", "POST", "/api/exchanges/secret/vx/publish", body, 401, "access to exchange 'vx' in vhost 'secret' refused for user 'lim'"},
		{"lim", "POST", "/api/exchanges/secret/amq.default/publish", pub("victim", "x", "string", nil), 401, "access to exchange 'amq.default' in vhost 'secret' refused for user 'lim'"},
		{"mgr", "POST", "/api/exchanges/secret/vx/publish", body, 401, "User not authorised to access virtual host"},
		{"mon", "POST", "/api/exchanges/%2F/amq.default/publish", body, 200, ""},
		{"lim", "POST", "/api/exchanges/secret/mine.x/publish", body, 404, ""}, // mine.x is on "/", not secret
		{"guest", "PUT", "/api/exchanges/secret/mine.x", map[string]any{"type": "fanout"}, 201, ""},
		{"lim", "POST", "/api/exchanges/secret/mine.x/publish", body, 200, ""}, // write ^mine
	})
	status, _, res := h.Do("GET", "/api/queues/secret/victim", "guest", nil)
	require.Equal(t, http.StatusOK, status, "%s", res)
	var q struct{ Messages int }
	require.NoError(t, json.Unmarshal(res, &q))
	require.Equal(t, 1, q.Messages, "only the message the setup published")

	// Allowed: guest on the default exchange of secret reaches victim.
	status, _, res = h.Do("POST", "/api/exchanges/secret/amq.default/publish", "guest", pub("victim", "more", "string", nil))
	require.Equal(t, http.StatusOK, status, "%s", res)
	require.JSONEq(t, `{"routed":true}`, string(res))
}

// TestManagementPublishAlarm: while a resource alarm is raised a publish
// is refused at once with 503 (RabbitMQ lets it through; Warren's direct
// channel would hold the request until the alarm cleared) and nothing is
// published; once it clears the publish goes through.
func TestManagementPublishAlarm(t *testing.T) {
	b := mgmtBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	ch := amqptest.Channel(t, brokertest.Dial(t, b))
	_, err := ch.QueueDeclare("pq", false, false, false, false, nil)
	require.NoError(t, err)
	const path = "/api/exchanges/%2F/amq.default/publish"
	brokertest.RaiseAlarm(b, broker.AlarmMemory)
	runAPICases(t, h, []apiCase{{"guest", "POST", path, pub("pq", "x", "string", nil), 503, "a resource alarm is in effect: publishing is blocked until it clears"}})
	brokertest.ClearAlarm(b, broker.AlarmMemory)
	runAPICases(t, h, []apiCase{{"guest", "POST", path, pub("pq", "y", "string", nil), 200, ""}})
	d, ok, err := ch.Get("pq", true)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "y", string(d.Body), "only the publish after the alarm")
}

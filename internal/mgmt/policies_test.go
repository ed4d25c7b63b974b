package mgmt_test

import (
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/brokertest"
	"github.com/warrenmq/broker/internal/amqptest"
)

// TestPolicyRoutes: /api/policies and /api/operator-policies with
// RabbitMQ's status codes, validation texts and access rules
// (policies: policymaker or administrator; operator policies:
// administrator), and the policy fields of queue and exchange objects.
func TestPolicyRoutes(t *testing.T) {
	b, err := broker.New(broker.Options{Users: []broker.User{
		{Name: "guest", Password: "guest", Tags: []string{"administrator"}},
		{Name: "pm", Password: "pm", Tags: []string{"policymaker"}},
		{Name: "mgr", Password: "mgr", Tags: []string{"management"}},
	}})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, b.Close()) })
	brokertest.Start(t, b)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	cap5 := map[string]any{"pattern": "^cap", "definition": map[string]any{"max-length": 5}, "priority": 1, "apply-to": "queues"}
	runAPICases(t, h, []apiCase{
		{"pm", "PUT", "/api/policies/%2F/cap", cap5, 201, ""},
		{"pm", "PUT", "/api/policies/%2F/cap", cap5, 204, ""},
		{"guest", "PUT", "/api/policies/%2F/ae", map[string]any{"pattern": "^x", "definition": map[string]any{"alternate-exchange": "ae"}, "apply-to": "exchanges"}, 201, ""},
		{"pm", "PUT", "/api/policies/%2F/bad", map[string]any{"pattern": ".", "definition": map[string]any{"message-ttl": "abc"}}, 400,
			"Validation failed\n\n&lt;&lt;\"abc\"&gt;&gt; is not a valid message TTL\n"},
		{"pm", "PUT", "/api/policies/%2F/bad", map[string]any{"pattern": ".", "definition": map[string]any{"max-priority": 10}}, 400,
			"Validation failed\n\n[{&lt;&lt;\"max-priority\"&gt;&gt;,10}] are not recognised policy settings\n"},
		{"pm", "PUT", "/api/policies/%2F/bad", map[string]any{"pattern": ".", "definition": map[string]any{"max-length": 1}, "apply-to": "topics"}, 400,
			"Validation failed\n\napply-to 'topics' unrecognised; should be one of: 'queues', 'classic_queues',  'quorum_queues', 'streams', 'exchanges', or 'all'\n"},
		{"pm", "PUT", "/api/policies/%2F/bad", map[string]any{"definition": map[string]any{"max-length": 1}}, 400, "[{key_missing,pattern}]"},
		{"pm", "PUT", "/api/policies/nosuch/p", cap5, 404, "vhost_not_found"},
		{"mgr", "PUT", "/api/policies/%2F/p", cap5, 401, "User not authorised to access object"},
		{"mgr", "GET", "/api/policies", nil, 401, ""},
		{"pm", "GET", "/api/policies/%2F/missing", nil, 404, "Not Found"},
		{"pm", "DELETE", "/api/policies/%2F/missing", nil, 404, ""},
		{"pm", "PUT", "/api/operator-policies/%2F/op", map[string]any{"pattern": ".", "definition": map[string]any{"max-length": 3}}, 401, "Not administrator user"},
		{"guest", "PUT", "/api/operator-policies/%2F/op", map[string]any{"pattern": "^cap", "definition": map[string]any{"max-length": 3, "expires": 60000}, "apply-to": "queues"}, 201, ""},
		{"guest", "PUT", "/api/operator-policies/%2F/bad", map[string]any{"pattern": ".", "definition": map[string]any{"dead-letter-exchange": "x"}}, 400,
			"Validation failed\n\n[{&lt;&lt;\"dead-letter-exchange\"&gt;&gt;,&lt;&lt;\"x\"&gt;&gt;}] are not recognised policy settings\n"},
	})

	require.Equal(t, map[string]any{
		"vhost": "/", "name": "cap", "pattern": "^cap", "apply-to": "queues", "priority": float64(1),
		"definition": map[string]any{"max-length": float64(5)},
	}, h.Get("/api/policies/%2F/cap"))
	list := h.Get("/api/policies").([]any)
	require.Len(t, list, 2)
	require.Equal(t, "ae", list[0].(map[string]any)["name"], "sorted by priority, lowest first")
	require.Len(t, h.Get("/api/policies/%2F").([]any), 2)
	require.Len(t, h.Get("/api/operator-policies").([]any), 1)

	conn := amqptest.Dial(t, b.URL(), amqp091.Config{})
	ch := amqptest.Channel(t, conn)
	amqptest.DeclareQueue(t, ch, "cap.q", false)
	amqptest.DeclareQueue(t, ch, "plain", false)
	require.NoError(t, ch.ExchangeDeclare("x1", "direct", false, false, false, false, nil))
	q := h.Get("/api/queues/%2F/cap.q").(map[string]any)
	require.Equal(t, "cap", q["policy"])
	require.Equal(t, "op", q["operator_policy"])
	require.Equal(t, map[string]any{"max-length": float64(3), "expires": float64(60000)}, q["effective_policy_definition"])
	q = h.Get("/api/queues/%2F/plain").(map[string]any)
	require.Nil(t, q["policy"])
	require.Nil(t, q["operator_policy"])
	require.Equal(t, map[string]any{}, q["effective_policy_definition"])
	x := h.Get("/api/exchanges/%2F/x1").(map[string]any)
	require.Equal(t, "ae", x["policy"])

	runAPICases(t, h, []apiCase{
		{"pm", "DELETE", "/api/policies/%2F/cap", nil, 204, ""},
		{"guest", "DELETE", "/api/operator-policies/%2F/op", nil, 204, ""},
	})
	q = h.Get("/api/queues/%2F/cap.q").(map[string]any)
	require.Nil(t, q["policy"])
	require.Equal(t, map[string]any{}, q["effective_policy_definition"])
}

package mgmt_test

import (
	"runtime/metrics"
	"strings"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/amqptest"
)

// TestDefinitionsVersionIsTheProfiles: an export names the RabbitMQ
// release the broker behaves as, the one /api/overview reports, for every
// version profile. It said 3.10.0 whatever the profile (3.13.7 by
// default).
func TestDefinitionsVersionIsTheProfiles(t *testing.T) {
	for _, profile := range []string{"", "3.13", "4.1"} {
		t.Run("profile "+profile, func(t *testing.T) {
			b := mgmtBrokerWith(t, broker.Options{RabbitMQVersion: profile})
			h := amqptest.NewAPI(t, b.ManagementHandler())
			want := h.Get("/api/overview").(map[string]any)["rabbitmq_version"]
			require.NotEmpty(t, want)
			defs := h.Get("/api/definitions").(map[string]any)
			require.Equal(t, want, defs["rabbit_version"])
			require.Equal(t, want, defs["rabbitmq_version"])
			require.Equal(t, "Warren", defs["product_name"])
			if profile != "" {
				require.True(t, strings.HasPrefix(want.(string), profile+"."), "%s for profile %s", want, profile)
			}
		})
	}
}

// TestNodesMemory: /api/nodes's mem_used is the process's memory, as
// RabbitMQ's is (it was the memory alarm's message bytes, 0 on a broker
// holding no message), and mem_message_bytes the bytes the alarm compares
// with mem_limit.
func TestNodesMemory(t *testing.T) {
	b := mgmtBroker(t)
	h := amqptest.NewAPI(t, b.ManagementHandler())
	ch := amqptest.Channel(t, amqptest.DialVia(t, b.Dial, "guest", "mem"))
	amqptest.DeclareQueue(t, ch, "held", false)
	body := make([]byte, 1<<20)
	require.NoError(t, ch.Publish("", "held", false, false, amqp091.Publishing{Body: body}))
	amqptest.Idle(t, b.WaitIdle)

	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/total:bytes"}}
	metrics.Read(sample[:1])
	node := h.Get("/api/nodes").([]any)[0].(map[string]any)
	metrics.Read(sample[1:])
	used := int64(node["mem_used"].(float64))
	require.Greater(t, used, int64(sample[0].Value.Uint64())/2, "mem_used is not the process's memory")
	require.LessOrEqual(t, used, int64(sample[1].Value.Uint64()))
	require.GreaterOrEqual(t, int64(node["mem_message_bytes"].(float64)), int64(len(body)))
	require.Greater(t, used, int64(node["mem_message_bytes"].(float64)))
	require.Contains(t, node, "mem_limit")
}

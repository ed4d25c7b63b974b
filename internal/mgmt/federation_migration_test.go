package mgmt_test

import (
	"testing"
	"time"

	amqp091 "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"

	"github.com/warrenmq/broker/internal/amqptest"
)

// TestMigrationGuideFederation runs docs/migration.md's federation
// variant against a real RabbitMQ 3.10.8 node, one subtest per step:
// Warren's orders.process is federated from RabbitMQ's (RabbitMQ's
// blue-green recipe), consumers move to Warren while producers still
// publish to RabbitMQ, and the federated queue pulls the backlog and
// what keeps arriving there whenever Warren's consumers have room. Every
// message is processed exactly once; RabbitMQ's queue ends empty and,
// with the federation policy gone, the link stops.
func TestMigrationGuideFederation(t *testing.T) {
	s := startService(t)
	during, after, b, warren := s.during, s.after, s.warren, s.api
	var warrenConn *amqp091.Connection
	var newConsumer *consumer
	top := t
	link := func() map[string]any {
		list, _ := warren.Get("/api/federation-links/shop").([]any)
		if len(list) != 1 {
			return nil
		}
		return list[0].(map[string]any)
	}
	runSteps(t, append(s.importSteps(top, b, warren, &warrenConn), []step{
		{"federate Warren's queue from RabbitMQ's", func(t *testing.T) {
			status, _, body := warren.Do("PUT", "/api/parameters/federation-upstream/shop/rabbitmq", "guest",
				map[string]any{"value": map[string]any{"uri": s.rabbitAt(), "ack-mode": "on-confirm"}})
			require.Equal(t, 201, status, "%s", body)
			// One policy applies to a queue: this one keeps orders-limit's
			// key and outranks it.
			status, _, body = warren.Do("PUT", "/api/policies/shop/orders-federation", "guest", map[string]any{
				"pattern": `^orders\.`, "apply-to": "queues", "priority": 1,
				"definition": map[string]any{"max-length": 100000, "federation-upstream": "rabbitmq"}})
			require.Equal(t, 201, status, "%s", body)
			require.Eventually(t, func() bool {
				l := link()
				return l != nil && l["status"] == "running" && l["queue"] == "orders.process" && l["upstream_queue"] == "orders.process"
			}, 30*time.Second, 20*time.Millisecond, "link: %v", link())
			require.Equal(t, "orders-federation", warren.Get("/api/queues/shop/orders.process").(map[string]any)["policy"])
			// Producers still publish to RabbitMQ.
			s.publish(t, s.rabbitConn, during)
		}},
		{"move consumers", func(t *testing.T) {
			// The new instance starts before the old one stops: for a
			// while both consume, each message going to one of them.
			newConsumer = startConsumer(top, "on Warren", warrenConn, "orders.process", 0, s.got)
			s.old.Stop(t)
			amqptest.Poll(t, func() bool { return s.got.len() >= len(s.backlog)+len(during) }, "consumers processed %d", s.got.len())
		}},
		s.moveProducers(&warrenConn),
		{"drain RabbitMQ and remove federation", func(t *testing.T) {
			s.drained(t)
			require.Positive(t, link()["messages_forwarded"], "the link moved nothing")
			for _, path := range []string{"/api/policies/shop/orders-federation", "/api/parameters/federation-upstream/shop/rabbitmq"} {
				status, _, body := warren.Do("DELETE", path, "guest", nil)
				require.Equal(t, 204, status, "DELETE %s: %s", path, body)
			}
			require.Eventually(t, func() bool { return len(warren.Get("/api/federation-links").([]any)) == 0 }, 20*time.Second, 20*time.Millisecond)
			require.Equal(t, "orders-limit", warren.Get("/api/queues/shop/orders.process").(map[string]any)["policy"])
			newConsumer.Stop(t)
		}},
	}...))
	s.requireOnce(t, append(append(append([]string{}, s.backlog...), during...), after...), 0)
}

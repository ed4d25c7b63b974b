package broker_test

import (
	"context"
	"io"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker"
	"github.com/warrenmq/broker/internal/amqptest"
)

// BenchmarkPolicyPublishConsume is BenchmarkEngine's pipe/autoack path on
// a vhost with no policy, with policies that match other queues only, and
// with a policy (and operator policy) that applies to the queue (limits
// it never reaches): a queue pays for policies only in the settings it
// runs with, never per message.
func BenchmarkPolicyPublishConsume(b *testing.B) {
	other := []broker.Policy{
		{Name: "a", Pattern: "^orders\\.", Definition: map[string]any{"max-length": 10}},
		{Name: "b", Pattern: "^(?!amq\\.).*audit$", Priority: 3, Definition: map[string]any{"message-ttl": 1000}},
	}
	matching := append(other, broker.Policy{Name: "c", Pattern: "^bench$", Priority: 9,
		Definition: map[string]any{"max-length": 1 << 40, "message-ttl": 3_600_000, "dead-letter-exchange": "dlx"}})
	for _, tc := range []struct {
		name      string
		policies  []broker.Policy
		operators []broker.Policy
	}{
		{"none", nil, nil},
		{"other-queues", other, nil},
		{"matching", matching, []broker.Policy{{Name: "op", Pattern: ".", Definition: map[string]any{"max-length-bytes": 1 << 40}}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			br := startBroker(b, broker.Options{Policies: tc.policies, OperatorPolicies: tc.operators})
			pubConn := amqptest.Dial(b, br.URL(), amqp091.Config{Dial: br.Dial})
			subConn := amqptest.Dial(b, br.URL(), amqp091.Config{Dial: br.Dial})
			pub, sub := amqptest.Channel(b, pubConn), amqptest.Channel(b, subConn)
			if _, err := pub.QueueDeclare("bench", false, false, false, false, nil); err != nil {
				b.Fatal(err)
			}
			if err := sub.Qos(256, 0, false); err != nil {
				b.Fatal(err)
			}
			msgs, err := sub.Consume("bench", "", true, false, false, false, nil)
			if err != nil {
				b.Fatal(err)
			}
			msg := amqp091.Publishing{Body: make([]byte, 128)}
			b.ReportAllocs()
			b.ResetTimer()
			n := b.N
			consumed := make(chan error, 1)
			go func() {
				for range n {
					if _, ok := <-msgs; !ok {
						consumed <- io.ErrUnexpectedEOF
						return
					}
				}
				consumed <- nil
			}()
			ctx := context.Background()
			for range n {
				if err := pub.PublishWithContext(ctx, "", "bench", false, false, msg); err != nil {
					b.Fatal(err)
				}
			}
			if err := <-consumed; err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

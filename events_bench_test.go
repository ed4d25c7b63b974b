package broker_test

import (
	"context"
	"testing"

	amqp091 "github.com/rabbitmq/amqp091-go"

	"github.com/warrenmq/broker"
)

// BenchmarkEventsPublishConsume is what events cost the message path:
// direct publish and consume (prefetch 256), each delivery acked, or
// rejected without requeue, which makes it a MessageDeadLettered event
// (the queue has no dead-letter exchange). "none" has no subscriber (the
// sources' guard is one atomic load), "reading" one that keeps up,
// "full" one that never reads, so every event is counted and dropped.
func BenchmarkEventsPublishConsume(b *testing.B) {
	for _, settle := range []string{"ack", "reject"} {
		for _, sub := range []string{"none", "reading", "full"} {
			b.Run(settle+"/subscriber="+sub, func(b *testing.B) {
				br, err := broker.New(broker.Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = br.Close() })
				ctx, cancel := context.WithCancel(context.Background())
				b.Cleanup(cancel)
				switch sub {
				case "reading":
					evs := br.Events(ctx, 0)
					go func() {
						for range evs {
						}
					}()
				case "full":
					_ = br.Events(ctx, 1)
				}
				settleFn := func(d amqp091.Delivery) error { return d.Ack(false) }
				if settle == "reject" {
					settleFn = func(d amqp091.Delivery) error { return d.Reject(false) }
				}
				benchPublishConsume(b, br, amqp091.Publishing{Body: []byte("hello world!"), MessageId: "m"}, settleFn)
			})
		}
	}
}
